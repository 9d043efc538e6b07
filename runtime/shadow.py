"""Shadow rollout and the audit log, as a monitor's sessions run them.

A monitor may be given, explicitly and only so:

* ``shadow=other_policy``: a second policy evaluated on the same sessions (each session has a
  session of the shadow policy, fed the same events and the facts it knows relations for). Each
  decision carries the shadow policy's would-be result (:class:`ShadowResult`); where it differs
  from the enforced one it goes to the audit log and to the ``logging`` logger
  ``policyc.shadow`` (:data:`LOGGER`). Whatever happens to the shadow policy (errors, limits,
  functors that raise) never changes the enforced decision: its failure is logged.
* rules in shadow mode (``@mode("shadow")`` on a ``Deny`` rule): the planner gives them a
  relation of their own (``Deny@shadow``) that the enforced verdict never reads; each decision
  lists their denials in ``decision.would_deny`` (and the audit log and the logger), while
  the action is decided without them.
* ``mode="shadow"``: the whole monitor only reports. Every decision says so
  (``decision.mode == "shadow"``, its feedback and ``to_json``), is allowed, and keeps the
  verdict and reasons it would have had; every log record says so, and the monitor warns at
  start-up (through ``logging`` and ``warnings``). There is no other way to run a policy
  without enforcing it.
* ``audit=AuditLog(...)`` or ``audit="path"`` (:mod:`.audit`): every event, every batch of
  facts and every decision is appended to a hash-chained log. A decision that cannot be
  written is denied (fail closed), in shadow mode too; an event or facts that cannot be written
  poison the session.

:class:`Watch` is what a monitor keeps for these, :class:`Watched` what each of its sessions
runs: after an event or facts arrive and once a decision is final (after every extension's
intervention).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .audit import (
    FORMAT,
    AuditError,
    AuditLog,
    Redactor,
    decision_record,
    jsonable,
    outcome_record,
    refusal_record,
    scrub,
)
from .evaluator import EvalError, LimitExceeded
from .verdict import ERROR_RULE, MODES, Decision, Reason, ShadowResult, deny_reasons

if TYPE_CHECKING:
    from .session import Monitor, Session

LOGGER = logging.getLogger("policyc.shadow")

SHADOW_DENY = "Deny@shadow"  # the relation of the Deny rules in shadow mode (compiler/planner.py)
AUDIT_FAILED = "policyc:audit-failed"


def policy_hash(policy: Any) -> str:
    """The hash a log names a policy by: ``sha256:`` and the SHA-256 of its plan's canonical
    JSON (a bundle's ``plan_sha256``: a policy and its bundle have the same hash)."""
    manifest = getattr(policy, "manifest", None)
    if isinstance(manifest, Mapping) and isinstance(manifest.get("plan_sha256"), str):
        return "sha256:" + manifest["plan_sha256"]
    from policyc.compiler.plan_write import to_data

    from .audit import canonical
    from .bundle import sha256

    return "sha256:" + sha256(canonical(to_data(policy.plan)))


def watching(
    monitor: Monitor, shadow: Monitor | None = None, mode: str = "enforce", audit: Any = None
) -> Watch | None:
    """What a monitor runs for shadow rollout and auditing (None when it runs none of it)."""
    if mode not in MODES:
        raise ValueError(f"a monitor's mode is `enforce` or `shadow`, not {mode!r}")
    rules = SHADOW_DENY in monitor.policy.plan.relation_index()
    if shadow is None and mode == "enforce" and audit is None and not rules:
        return None
    return Watch(monitor, shadow, mode, audit)


class Watch:
    """A monitor's shadow policy, mode and audit log (see the module)."""

    def __init__(self, monitor: Monitor, shadow: Monitor | None, mode: str, audit: Any) -> None:
        self.mode = mode
        self.rules = SHADOW_DENY in monitor.policy.plan.relation_index()
        self.shadow = shadow
        self.owns_log = isinstance(audit, str | os.PathLike)  # opened here: closed with the monitor
        if isinstance(audit, str | os.PathLike):
            audit = AuditLog(audit)
        if audit is not None and not isinstance(audit, AuditLog):
            raise TypeError(f"audit= takes an AuditLog or a path, not {type(audit).__name__}")
        self.audit: AuditLog | None = audit
        self.policy = policy_hash(monitor.policy)
        self.redactor = Redactor(getattr(monitor.policy, "fields", {}), audit.redact if audit else ())
        if mode == "shadow":
            text = (
                "policyc monitor in shadow mode: decisions are reported, never enforced "
                "(every action is allowed)"
            )
            LOGGER.warning(text, extra={"policyc_mode": mode})
            warnings.warn(text, RuntimeWarning, stacklevel=4)  # at Monitor(...)
        if audit is not None:  # a log that cannot be opened refuses the monitor
            audit.append(
                {
                    "type": "header",
                    "format": FORMAT,
                    "policy": self.policy,
                    "mode": mode,
                    "shadow_policy": None if self.shadow is None else policy_hash(self.shadow.policy),
                }
            )

    def session(self, session: Session) -> Watched:
        return Watched(self, session)

    def close(self) -> None:
        """Close the audit log if the monitor opened it (from a path)."""
        if self.audit is not None and self.owns_log:
            self.audit.close()

    def log(self, level: int, message: str, *args: Any) -> None:
        """A record of the ``policyc.shadow`` logger, saying the monitor's mode."""
        if self.mode == "shadow":
            message = "[shadow mode] " + message
        LOGGER.log(level, message, *args, extra={"policyc_mode": self.mode})


class Watched:
    """What one session runs for its monitor's :class:`Watch`."""

    def __init__(self, watch: Watch, session: Session) -> None:
        self.watch = watch
        self.session = session
        self.secrets: set[str] = set()  # the text of redacted values seen (hashed wherever shown)
        self.last: Any = None  # the id of the last event given (what a refusal refuses)
        self.shadow: Any = None
        self.failed: str | None = None  # why the shadow session could not be started
        if watch.shadow is not None:
            try:
                self.shadow = watch.shadow.session(
                    session.id, principal=session.principal, roles=session.roles
                )
            except Exception as error:
                self.failed = f"{type(error).__name__}: {error}"
                watch.log(
                    logging.WARNING,
                    "session %s: the shadow policy failed to start: %s",
                    session.id,
                    self.failed,
                )
        self.write(
            {
                "type": "session",
                "session": session.id,
                "principal": session.principal,
                "roles": list(session.roles),
            },
            "starting the session",
        )

    def write(self, record: dict[str, Any], what: str) -> bool:
        """Append a record to the audit log (with the monitor's mode); a failure poisons the
        session. Whether it was written (or there is no log)."""
        audit = self.watch.audit
        if audit is None:
            return True
        try:
            audit.append({**record, "mode": self.watch.mode})
        except Exception as error:
            self.session.sticky.append(EvalError("audit", f"the audit log failed while {what}: {error}"))
            return False
        return True

    def recorded(self, event: Any) -> None:
        """An event as it arrives (before the session records it): to the shadow session and
        the log."""
        if self.shadow is not None:
            try:
                self.shadow.record(event)
            except Exception as error:  # pragma: no cover - record catches what it meets
                self.watch.log(logging.WARNING, "the shadow policy failed to record an event: %s", error)
        if self.watch.audit is not None:
            try:
                self.last = event.get("id") if isinstance(event, Mapping) else None
                logged = self.watch.redactor.event(event, self.secrets)
            except Exception as error:
                logged = f"<unreadable event: {type(error).__name__}>"
            self.write({"type": "event", "session": self.session.id, "event": logged}, "recording an event")

    def refused(self, code: str, message: str) -> None:
        """The event just given was refused (it follows its ``event`` record in the log)."""
        if self.watch.audit is not None:
            record = refusal_record(self.session.id, "event", self.last, code, scrub(message, self.secrets))
            self.write(record, "refusing an event")

    def outcome(self, request: Any, outcome: str, approver: str | None = None) -> None:
        """What became of an escalated call (``request``: its escalation): approved, refused,
        timed out, failed, or no approver to ask."""
        if self.watch.audit is not None:
            record = outcome_record(self.session.id, request.call, outcome, approver, request.rules)
            self.write(record, "logging an escalation's outcome")

    def given(self, facts: Any) -> Any:
        """Facts given to the session: to the shadow session (those of relations it has) and
        the log. The facts the session is to take: rows that are not a collection (a
        generator) are read into a list, so that each reader sees them all."""
        if isinstance(facts, Mapping):
            try:
                facts = {
                    name: rows if isinstance(rows, list | tuple | set | frozenset) else list(rows)
                    for name, rows in facts.items()
                }
            except Exception:  # the session's check says what is wrong with them
                pass
        if self.shadow is not None:
            try:
                known = self.shadow.index
                shared = (
                    {k: v for k, v in facts.items() if k in known} if isinstance(facts, Mapping) else facts
                )
                if shared:
                    self.shadow.add_facts(shared)
            except Exception as error:
                self.watch.log(logging.WARNING, "the shadow policy failed to take facts: %s", error)
        if self.watch.audit is not None:
            try:
                logged = scrub(jsonable(facts), self.secrets)
            except Exception as error:
                logged = f"<unreadable facts: {type(error).__name__}>"
            self.write({"type": "facts", "session": self.session.id, "facts": logged}, "adding facts")
        return facts

    def decided(self, decision: Decision) -> Decision:
        """The final decision, with what the rules in shadow mode and the shadow policy would
        have decided, in the monitor's mode, logged (denied if it cannot be logged)."""
        watch = self.watch
        changes: dict[str, Any] = {}
        if watch.rules and not decision.errored:
            would = self.would_deny(decision.action)
            if would:
                changes["would_deny"] = would
                watch.log(
                    logging.INFO,
                    "session %s: %s: would-deny (rules in shadow mode: %s)",
                    self.session.id,
                    decision.action,
                    ", ".join(dict.fromkeys(r.rule for r in would)),
                )
        if self.shadow is not None or self.failed is not None:
            result = self.shadow_result(decision)
            changes["shadow"] = result
            if result.errored:
                watch.log(
                    logging.WARNING,
                    "session %s: %s: the shadow policy failed to decide: %s",
                    self.session.id,
                    decision.action,
                    result.error,
                )
            elif result.differs:
                watch.log(
                    logging.INFO,
                    "session %s: %s: enforced %s, shadow policy %s (%s)",
                    self.session.id,
                    decision.action,
                    decision.verdict,
                    result.verdict,
                    ", ".join(dict.fromkeys(r.rule for r in result.reasons)) or "no rule",
                )
        if watch.mode == "shadow":
            changes["mode"] = "shadow"
            changes["allowed"] = True
        if changes:
            decision = replace(decision, **changes)
        if watch.audit is not None:
            try:
                record = decision_record(self.session.id, decision, watch.policy, self.secrets)
                watch.audit.append(record)
            except (AuditError, Exception) as error:
                reason = Reason(
                    ERROR_RULE,
                    f"the decision could not be written to the audit log, so the action is denied: {error}",
                    "Ask an operator to check the audit log's file.",
                    "high",
                    code="audit-failed",
                )
                decision = replace(decision, allowed=False, verdict="deny", reasons=(reason,), errored=True)
        return decision

    def would_deny(self, action: Any) -> tuple[Reason, ...]:
        """The denials of the rules in shadow mode for the action just decided (nothing if
        asking fails: they never change a decision; the failure is logged)."""
        session = self.session
        state = session.state
        relation = session.index[SHADOW_DENY]
        errors = state.errors  # the session's error sink: what asking finds is taken out again
        before = len(errors)
        held = state.facts
        limit = session.monitor.limits.max_seconds
        opened = False
        try:
            import time

            opened = state.E.start(None if limit is None else time.monotonic() + limit, what="decision")
            session.memo.clear()  # answers on demand hold for one question
            if not session.holds(relation, (action,)):
                found: tuple[Reason, ...] = ()
            else:
                found = tuple(deny_reasons(session, action, SHADOW_DENY))
        except (LimitExceeded, Exception) as error:
            self.watch.log(logging.WARNING, "the rules in shadow mode failed to decide: %s", error)
            found = ()
        finally:
            state.facts = held
            if opened:
                state.E.stop()
            session.memo.clear()
        if len(errors) > before:
            self.watch.log(
                logging.WARNING,
                "the rules in shadow mode failed to decide: %s",
                "; ".join(e.message for e in errors[before:]),
            )
            del errors[before:]
            found = ()
        return found

    def shadow_result(self, decision: Decision) -> ShadowResult:
        """The shadow policy's decision on the same action (an error is a result, never an
        exception)."""
        if self.shadow is None:
            return ShadowResult("deny", False, (), True, True, self.failed)
        try:
            shadow = self.shadow.decide(decision.action)
        except Exception as error:
            return ShadowResult("deny", False, (), True, True, f"{type(error).__name__}: {error}")
        rules = {r.rule for r in shadow.reasons}
        differs = shadow.verdict != decision.verdict or rules != {r.rule for r in decision.reasons}
        failure = None
        if shadow.errored:
            failure = "; ".join(r.message or r.rule for r in shadow.reasons) or "the shadow policy failed"
        return ShadowResult(shadow.verdict, shadow.allowed, shadow.reasons, shadow.errored, differs, failure)
