"""The reference monitor: sessions that record events and decide actions incrementally.

A :class:`Monitor` prepares a policy for sessions once; a :class:`Session` holds the facts of
one execution and decides each candidate action against everything recorded so far.

**What is maintained and what is computed per decision.** A relation is *incremental* when its
rules only join relations that are themselves incremental (inputs, recursion among them,
comparisons, functors): as facts only ever get added to a session, such a relation only gains
facts, so it is maintained as events arrive, by semi-naive evaluation of each new batch of
facts through the rules (every rule has a variant reading one atom's new facts). Everything
else — relations using negation, aggregates or inline relations over facts that may still
grow, and anything depending on the action being decided (``Candidate``) — is *volatile*:
recomputing it after each event would not scale, so a decision asks about it only as far as it
needs. ``Deny(a)`` and ``Allow(a)`` are evaluated with ``a`` given: each rule's body runs with
the action bound, reading the maintained relations through their indexes and asking about
other volatile relations with their arguments bound (on demand, remembered for the decision).
Only a volatile relation that some rule needs *in full* (scanned with unbound arguments,
aggregated over, recursive) is recomputed for the decision, from the maintained relations.
An input relation that also has volatile rules is recomputed the same way, starting from the
facts given for it (kept aside as they arrive).

For a policy whose decisions only look at the action and what it depends on, a decision then
costs the same whatever the length of the session.

**Where the time goes.** Maintenance is one generated function per plan
(:mod:`~policyc.runtime.maintain`): a stratum runs only when a relation its insertion variants
read has new facts. A session stores only the input relations some rule reads: an event becomes
facts of those relations alone (the events themselves are kept, for the event functors and for
explanations, which rebuild every fact from them). When ``Deny`` (and ``Allow`` under
``.default deny``) are maintained and nothing is recomputed per decision, a verdict is a lookup
in the maintained relations; deny reasons are then found as for any other verdict.

**Failing closed.** A malformed event, a failing functor while facts are being maintained or a
limit poisons the session: every later decision is a denial that says why (the maintained facts
may be incomplete). A failure while deciding denies that decision.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from operator import itemgetter
from typing import Any

from policyc.compiler import plan as p
from policyc.stdlib.events import SESSION_FUNCTORS, EventError, check_event, event_facts, session_functors

from . import maintain, session_unknown, trust
from .approvals import DEFAULT_TIMEOUT, DEFAULT_TTL, Approval, Approvals, EscalationRequest
from .evaluator import EvalError, Evaluation, LimitExceeded, Limits
from .extensions import Attachment, Extension, claim, resolve
from .facts import FactsError, FactsInput, validate
from .faults import Fault
from .functors import is_session_placeholder, wrap
from .keys import SessionKeys
from .prefix import Prefix
from .relations import Relation
from .session_plan import SessionPlan
from .shadow import watching
from .verdict import Decision, EventRefused, Reason, decide, refused_call

_NOTHING = object()
_NO_JOURNAL: list = []  # (never added to)

# the host's own mistake, the one failure that fails a whole session
_HOST_FACTS = "the host gave malformed facts, so the session's facts are incomplete and no call is decided"


class _Refused(Exception):
    """Recording an event stopped: what the session holds of it is taken back."""


UNKNOWN_ACTION = Reason(
    "policyc:unknown-action",
    "the action was never recorded in this session, so it cannot be decided and is refused",
    "Record the call (`session.authorize(event)`) before deciding it.",
    "high",
)


class Monitor:
    """Decides the actions of agent sessions against a policy.

    >>> import policyc
    >>> policy = policyc.load('''
    ... .import events
    ... Tainted(e) :- Label(e, "untrusted").
    ... Tainted(e) :- DependsOn(e, d), Tainted(d).
    ... @id("no-tainted-mail") @message("{a} depends on untrusted input")
    ... Deny(a) :- Action(a), is_tool(a, "send_email"), Tainted(a).
    ... ''')
    >>> session = policyc.Monitor(policy).session("s1")
    >>> session.record({"id": "u1", "kind": "user_message", "text": "Summarize the doc"})
    >>> session.record({"id": "r1", "kind": "tool_result", "text": "...", "labels": ["untrusted"]})
    >>> decision = session.authorize({"id": "a1", "kind": "tool_call", "tool": "send_email"})
    >>> decision.allowed, decision.reasons[0].message
    (False, 'send_email() depends on untrusted input')
    """

    # escalated calls are put to this monitor's approver (a monitor whose calls a service
    # approves, the service's client, says True)
    approves_elsewhere = False

    def __init__(
        self,
        policy: Any,
        *,
        limits: Limits | None = None,
        approver: Callable[[EscalationRequest], Any] | None = None,
        approval_timeout: float | None = DEFAULT_TIMEOUT,
        approval_ttl: float = DEFAULT_TTL,
        approval_clock: Callable[[], float] = time.monotonic,
        shadow: Any = None,
        mode: str = "enforce",
        audit: Any = None,
        **options: Any,
    ) -> None:
        """``approver`` answers escalated calls (a callable taking an
        :class:`~.approvals.EscalationRequest`, sync or async, true for yes), within
        ``approval_timeout`` seconds (None: no limit); an approval stays valid for
        ``approval_ttl`` seconds of ``approval_clock`` (monotonic). ``shadow`` (a policy or a
        monitor) decides every call too, without being enforced; ``mode="shadow"`` enforces
        nothing and says so; ``audit`` (an :class:`~.audit.AuditLog` or a path) logs every
        event and decision (:mod:`.shadow`, docs/verdicts.md). ``options`` go to the
        extensions of the policy that claim them (``thresholds=`` and ``detector=`` of risk
        budgets, ``forecast=`` of forecasts); one that none claims is a ``TypeError`` naming it."""
        self.policy = policy
        self.limits = limits or policy.limits
        self.approver = approver
        self.approval_timeout = approval_timeout
        self.approval_ttl = approval_ttl
        self.approval_clock = approval_clock
        self.prepared = SessionPlan(policy.plan, policy.compiled)
        extensions = getattr(policy, "extensions", None)
        self.extensions: tuple[Extension, ...] = resolve(extensions)
        claimed = claim(options, self.extensions, "options", "Monitor")
        sections = getattr(policy, "sections", {})
        # what each extension's sessions run, in the extensions' order (see runtime/extensions.py)
        self.attached: dict[str, Attachment] = {}
        for extension in self.extensions:
            attachment = extension.attach(self, sections.get(extension.name), **claimed[extension.name])
            if attachment is not None:
                self.attached[extension.name] = attachment
        self.hooks = tuple(self.attached.items())
        # a shadow policy, the monitor's mode and its audit log (runtime/shadow.py): None for none
        self.closed = False
        self.owned: tuple[Monitor, ...] = ()  # the monitors this one made, closed with it
        if shadow is not None and not isinstance(shadow, Monitor):
            shadow = Monitor(shadow)  # a shadow policy decides in a monitor of its own
            self.owned = (shadow,)
        self.watch = watching(self, shadow, mode, audit)

    def close(self) -> None:
        """Close the monitor: the audit log it opened from a path gets its closing checkpoint
        and is closed (a log given as an :class:`~.audit.AuditLog` is its caller's to close:
        several monitors may share it). Its sessions' later decisions that would be logged are
        denied (``audit-failed``), and it opens no new session. Closing again does nothing;
        ``with Monitor(...) as monitor:`` closes it at the end of the block."""
        if self.closed:
            return
        self.closed = True
        for monitor in self.owned:
            monitor.close()
        if self.watch is not None:
            self.watch.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        """An extension's attachment by the monitor attribute it names (``monitor.risk``,
        ``monitor.forecaster``): None when it attached nothing."""
        for extension in self.__dict__.get("extensions", ()):
            if extension.attribute == name:
                return self.__dict__["attached"].get(extension.name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def session(
        self,
        session_id: str,
        *positional: Any,
        principal: str | None = None,
        roles: Iterable[str] | None = None,
    ) -> Session:
        """A new session ``session_id`` acting for ``principal`` with ``roles`` (its
        ``Principal`` and ``HasRole`` facts; None: no roles), both by keyword, as every monitor
        takes them (:class:`~.protocols.MonitorLike`). Giving them by position still works, with a
        ``DeprecationWarning``, for one release."""
        if positional:
            if len(positional) > 2:
                raise TypeError(
                    f"session() takes a session id and keywords, not {len(positional) + 1} values"
                )
            warnings.warn(
                "Monitor.session(id, principal, roles): give principal= and roles= by keyword",
                DeprecationWarning,
                stacklevel=2,
            )
            principal = positional[0]
            if len(positional) == 2:
                roles = positional[1]
        if self.closed:
            raise RuntimeError(f"the monitor is closed: session {session_id!r} cannot be opened")
        return Session(self, session_id, principal, tuple(roles or ()))


class Session:
    def __init__(
        self, monitor: Monitor, session_id: str, principal: str | None, roles: tuple[str, ...]
    ) -> None:
        self.monitor = monitor
        self.id = session_id
        self.principal = principal
        self.roles = roles
        prepared = monitor.prepared
        self.prepared = prepared
        self.plan = prepared.plan
        self.events: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.sticky: list[EvalError] = []  # problems that make every later decision a denial
        self.approvals = Approvals(session_id, monitor.approval_clock)  # unused approvals of calls
        self.errors: list[EvalError] = []  # what the current question found (the verdict reads it)
        # calls refused for their arguments (runtime/arguments.py): recorded, but no rule sees them
        self.refused: dict[str, tuple[Reason, ...]] = {}
        functors = list(monitor.policy.functors)
        checks = prepared.arguments  # the declared arguments (runtime/arguments.py), or None
        answers = session_functors(self.events, None if checks is None else checks.conversions)
        for i, spec in enumerate(self.plan.functors):
            if spec.name in SESSION_FUNCTORS and is_session_placeholder(functors[i]):
                functors[i] = answers[spec.name]
        self.functors = functors
        self.state = Evaluation(prepared.compiled, functors, monitor.limits)
        self._sink: list[EvalError] = []
        self.state.errors = self._sink
        self.state.F = [
            wrap(spec, fn, self._sink) for spec, fn in zip(self.plan.functors, functors, strict=True)
        ]
        self.V: dict[int, Callable[..., Any]] = {r: self._demand(r) for r in prepared.demanded}
        self.memo: dict[tuple[int, tuple], Any] = {}
        # facts whose derivation met an error, by relation (full tuples, possibly holding ANY),
        # each with why (runtime/session_unknown.py); `faulty`: a maintained rule reads one, so
        # events are maintained by the interpreter; `unsure`: a verdict may read one
        self.unknown: dict[int, dict[tuple, Fault]] = {}
        self.residues: dict[int, dict[tuple, Any]] = {}  # what unknown facts holding ANY stand for
        self.faulty = False
        self.unsure = False
        self.journal: list[Any] = []  # what the last update of the maintained facts added
        self.refusals: list[EvalError] = []  # why each event the session refused was refused
        # facts given other than by events, in order, as relations store them (see _give)
        self.given: list[tuple[int, set[Any]]] = []
        self.named: set[Any] = set()  # the values given facts hold (actions that can be decided)
        self.key_checks = SessionKeys(self.plan, self) if prepared.keyed else None  # runtime/keys.py
        self.seeds: dict[int, set[tuple]] = {r: set() for r in prepared.seeded}  # see SessionPlan
        self.candidate: Any = _NOTHING  # the action decided last
        self.dirty = True  # facts arrived since the volatile relations were last recomputed
        self.index = self.plan.relation_index()
        state = self.state
        self.position: dict[str, int] = {}  # each event's place in the order
        self.depends: Prefix | None = None
        if prepared.prefix is not None:
            self.depends = Prefix(self.order, self.position)
            state.relations[prepared.prefix] = self.depends
        self._maintain = prepared.bind(
            state.relations, state.F, state.I, state.E, self._rule_failed, self.journal.append
        )
        relations = state.relations
        self._verdict = (
            (
                relations[prepared.deny].tuples,
                None if prepared.allow is None else relations[prepared.allow].tuples,
                None if prepared.escalate is None else relations[prepared.escalate].tuples,
            )
            if prepared.direct and prepared.deny is not None
            else None
        )
        identity: dict[str, set[tuple]] = {}
        if principal is not None:
            identity["Principal"] = {(principal,)}
        if roles:
            identity["HasRole"] = {(role,) for role in roles}
        self._start(identity)
        self.watched = None if monitor.watch is None else monitor.watch.session(self)
        self.hooks = monitor.hooks  # what the monitor's extensions add (runtime/extensions.py)
        for name, attachment in self.hooks:
            try:
                start = attachment.start_facts(self)
            except Exception as error:
                self.sticky.append(_failed(name, "starting the session", error))
                continue
            if start:
                self.add_facts(start)

    # -------------------------------------------------------------------------- recording

    def record(self, event: Mapping[str, Any]) -> None:
        """Add an event to the session. A malformed event, or one the session cannot take (its
        facts would pass the limit on facts, an extension failed on it), is refused: it raises
        :class:`EventRefused` saying why, and the session is as it was before. An error while
        deriving what the event implies makes only the facts it touches unknown (docs/runtime.md)."""
        if self.watched is not None:  # to the shadow policy's session and the audit log
            self.watched.recorded(event)
        try:
            copy = dict(event) if type(event) is dict or isinstance(event, Mapping) else event
            checked = check_event(copy, self.events)
        except EventError as error:
            raise self._refuse(f"malformed event: {error}") from None
        except Exception as error:  # a mapping that fails to copy, a key that fails to hash, ...
            raise self._refuse(f"malformed event: {type(error).__name__}: {error}") from None
        e = checked["id"]
        order = self.order
        if self.prepared.arguments is not None:  # a call whose arguments break their declarations
            refused = self.prepared.arguments.refusals(checked)
            if refused:
                self.events[e] = checked  # its id is taken: deciding it again refuses it again
                self.refused[e] = refused
                return
        try:
            # relation -> its new rows (and "open" -> the events it opens, below)
            facts: dict[Any, Any] = event_facts(
                checked, len(order), order, self.prepared.wanted, self.depends is not None
            )
        except Exception as error:  # nothing of the event is kept
            raise self._refuse(f"recording event {e!r} failed: {type(error).__name__}: {error}") from None
        keys = self.key_checks
        try:  # the facts the host gave may say otherwise (runtime/keys.py)
            keyed = keys.event(checked, len(order)) if keys is not None and keys.index else None
        except FactsError as error:
            raise self._refuse(str(error), "conflicting-facts") from None
        self.events[e] = checked
        position = self.position[e] = len(order)
        order.append(e)
        opened = self.depends is not None and checked.get("deps") is None
        journal: list[Any] = _NO_JOURNAL
        seeded: list[tuple[int, set]] = _NO_JOURNAL
        try:
            if opened:
                self.depends.open_events((e,))  # type: ignore[union-attr]
                facts["open"] = [e]
            if facts:
                if self.seeds:
                    seeded = self._seed(facts)
                journal = self._insert(facts)
            if self.hooks:
                self._hooked(e, checked, position, opened, journal, seeded)
        except _Refused as refused:
            self._unrecord(e, opened, journal, seeded)
            raise self._refuse(f"event {e!r} was not recorded: {refused}", "limit-exceeded") from None
        if keyed:
            SessionKeys.note(keyed)

    def _hooked(
        self, e: str, checked: dict[str, Any], position: int, opened: bool, journal: list, seeded: list
    ) -> None:
        """What the monitor's extensions add of an event; the event refused if one fails."""
        journal = list(journal)  # (facts they add go through the session's journal again)
        for name, attachment in self.hooks:
            try:
                added = attachment.recorded(self, checked, position)
            except Exception as error:
                self._unrecord(e, opened, journal, seeded)
                raise self._refuse(
                    f"extension `{name}` failed while recording event {e!r}: {type(error).__name__}: {error}",
                    "extension-failed",
                ) from None
            if added:
                self.add_facts(added)

    def _refuse(self, message: str, code: str = "malformed-event") -> EventRefused:
        """The refusal of an event, noted (``refusals``: what a replay reports)."""
        self.refusals.append(EvalError("limit" if code == "limit-exceeded" else "event", message))
        if self.watched is not None:  # the audit log says the event it holds was refused
            self.watched.refused(code, message)
        return EventRefused(message, code)

    def _unrecord(self, e: str, opened: bool, journal: list[Any], seeded: list[tuple[int, set]]) -> None:
        """Take an event back: what it added, its place in the order."""
        self.state.facts -= session_unknown.rollback(self, journal)
        for r, rows in seeded:
            self.seeds[r].difference_update(rows)
        if opened:
            self.depends.close_last(e)  # type: ignore[union-attr]
        del self.events[e]
        del self.position[e]
        self.order.pop()
        self.dirty = True

    def add_facts(self, facts: FactsInput) -> None:
        """Add domain facts (rows per input relation), checked like evaluation facts. Malformed
        facts poison the session."""
        if self.watched is not None:  # rows read once (a generator) are read here, once
            facts = self.watched.given(facts)
        try:
            # the checks generated per relation take the common case; the general check the rest
            checked = self.prepared.fact_checks(facts)
            if checked is None:
                checked = self._stored(validate(self.plan, facts, f"session {self.id}"))
            if self.key_checks is not None:
                self.key_checks.give(checked)
        except FactsError as error:
            self.sticky.append(EvalError("facts", f"{_HOST_FACTS}: {error}"))
            return
        except Exception as error:  # rows that fail to iterate or to hash
            self.sticky.append(
                EvalError("facts", f"{_HOST_FACTS}: session {self.id}: {type(error).__name__}: {error}")
            )
            return
        try:
            self._give(checked)
        except _Refused as refused:  # the host's facts pass the session's limit
            self.sticky.append(EvalError("limit", f"the facts the host gave were not added: {refused}"))
        except Exception as error:
            self.sticky.append(EvalError("facts", f"adding facts failed: {type(error).__name__}: {error}"))

    def decide(self, action: Any) -> Decision:
        """The verdict on an action, given everything recorded so far. An action that was
        never recorded (no event has its id and no given fact names it) is denied: deciding it
        is a mistake of the host, which must not fail open."""
        started = time.monotonic()
        if self.refused and type(action) is str and action in self.refused:  # no rule runs on it
            return self._timed(action, Decision(action, False, self.refused[action], False, self), started)
        if not self._known(action) and not self.sticky:  # a poisoned session says why it is
            return self._timed(action, Decision(action, False, (UNKNOWN_ACTION,), True, self), started)
        verdict = self._verdict
        if verdict is None or self.sticky or self.unsure:
            return self._decide(action, started, prepare=True)
        deny, allow, escalate = verdict  # the verdict reads maintained relations only: nothing to prepare
        try:
            allowed = (
                action not in deny
                and (allow is None or action in allow)
                and (escalate is None or action not in escalate)
            )
        except TypeError:  # an action that cannot be a value of the policy
            return self._decide(action, started, prepare=True)
        self.candidate = action
        if not allowed:
            return self._decide(action, started, prepare=False)
        if self.errors:
            self.errors = []
        return self._timed(action, Decision(action, True, (), False, self.view(action)), started)

    def authorize(self, event: Mapping[str, Any]) -> Decision:
        """Record a candidate action and decide it. A candidate the session refuses to record
        (:meth:`record`) is denied, saying why (``policyc:refused-event``)."""
        action = event.get("id") if type(event) is dict or isinstance(event, Mapping) else None
        try:
            self.record(event)
        except EventRefused as refused:
            return self._timed(action, refused_call(action, refused), time.monotonic())
        return self.decide(action)

    def approve(
        self, request: EscalationRequest, ttl: float | None = None, approver: str | None = None
    ) -> Approval:
        """Approve the escalated call of ``request`` (``decision.escalation``): the approval is
        recorded as an approval event (:meth:`record_approval`: kind and label ``approval``,
        depending on the call) and lets the next decision of exactly this call in this session
        allow it once, within ``ttl`` seconds (default: the monitor's ``approval_ttl``). It
        never overrides a ``Deny``."""
        if request.session != self.id:
            raise ValueError(f"the request is for session {request.session!r}, not {self.id!r}")
        ttl = self.monitor.approval_ttl if ttl is None else ttl
        approval = self.approvals.grant(request, ttl, approver, taken=self.events)
        self.record_approval(approval.event([request.call] if request.call in self.events else []))
        return approval

    def record_approval(self, event: Mapping[str, Any]) -> None:
        """Record ``event`` as a person's approval the host vouches for: recorded as by
        :meth:`record`, and stated in the host-only ``HostApproval(e)`` and, for each label
        ``approved-by:BY``, ``HostApprovalBy(e, BY)``, which the approvals library reads (an
        event :meth:`record` takes is never an approval, whatever its kind and labels)."""
        self.record(event)
        given = {
            name: rows for name, rows in trust.approval_facts(event).items() if rows and name in self.index
        }
        if given:
            self.add_facts(given)

    # ------------------------------------------------------------------------- internals

    def _known(self, action: Any) -> bool:
        """Whether the action is a recorded event or a value some given fact names."""
        try:
            return action is not None and (action in self.events or action in self.named)
        except TypeError:  # unhashable: no event or fact can name it
            return False

    def _decide(self, action: Any, started: float, prepare: bool) -> Decision:
        self.errors = list(self.sticky)
        state = self.state
        limit = self.monitor.limits.max_seconds
        # the limits hold for the decision as a whole, checked as its rules run
        opened = state.E.start(None if limit is None else started + limit, what="decision")
        held = state.facts  # what is recomputed for a decision counts while it is decided
        try:
            if self.errors:  # a poisoned session: every decision says why
                decision = decide(self, action)
            elif self.unsure:  # the verdict may read an unknown fact
                decision = self._three_valued(action, ())
            else:
                decision = self._generated(action, prepare)
        finally:
            state.facts = held
            if opened:
                state.E.stop()
        return self._timed(action, decision, started)

    def _generated(self, action: Any, prepare: bool) -> Decision:
        """The decision by the generated code; when that meets an error, by the interpreter,
        so that only what the error touches is unknown."""
        try:
            if prepare:
                self._prepare(action)
            decision = decide(self, action)
        except LimitExceeded as error:  # a limit refuses this decision
            self._drain()
            self.dirty = True
            self.errors = [EvalError("limit", str(error))]
            return decide(self, action)
        except Exception as error:
            self._drain()
            self.dirty = True
            self.errors = [EvalError("rule", f"deciding failed: {type(error).__name__}: {error}")]
            return self._three_valued(action, self.errors)
        met = self._drain()
        if met:  # what was recomputed for the decision may lack what followed the error
            self.dirty = True
        limits = [e for e in met if e.kind == "limit"]
        if limits:
            self.errors = limits
            return decide(self, action)
        if met or self.errors:
            met = [*self.errors, *met]
            self.errors = []
            return self._three_valued(action, met)
        return decision

    def _three_valued(self, action: Any, met: Collection[EvalError]) -> Decision:
        """The decision by the three-valued interpreter (runtime/session_unknown.py): a verdict
        that holds decides as usual; one that is unknown refuses the call, saying why."""
        self.errors = []
        self.candidate = action

        solver = session_unknown.DecisionSolver(self, action)

        def opaque(stratum: p.Stratum) -> None:
            """A stratum keeping a choice of facts, or dropping dominated ones: the facts the
            generated code computes for this decision, unknown if it meets an error."""
            if met:
                raise RuntimeError("the decision's evaluation met an error")
            self._prepare(action)
            if self._drain():
                raise RuntimeError("the decision's evaluation met an error")
            for r in stratum.relations:
                solver.facts.known[r] = self.state.relations[r]

        try:
            solver.prepare(opaque)
            return session_unknown.verdict(solver, action, self)
        except LimitExceeded as error:
            self.errors = [EvalError("limit", str(error))]
            return decide(self, action)

    def _escalated(self, action: Any, decision: Decision) -> Decision:
        """An escalated decision with what a person must see; or, when an unused, unexpired
        approval of exactly this call is at hand, the call allowed by it (the approval used up)."""
        event = self.events.get(action) if isinstance(action, str) else None
        reasons = decision.reasons
        request = EscalationRequest(
            self.id,
            action,
            None if event is None else event.get("tool"),
            dict((event or {}).get("args") or {}),
            frozenset(reason.rule for reason in reasons),
            tuple(dict.fromkeys(reason.shown(True)[0] for reason in reasons)),
            decision.feedback,
        )
        approval = self.approvals.take(request)
        if approval is None:
            return replace(decision, escalation=request)
        return Decision(action, True, (), False, decision.evaluation, escalation=request, approval=approval)

    def _timed(self, action: Any, decision: Decision, started: float) -> Decision:
        """The decision, or a denial when it took longer than the limit."""
        if decision.verdict == "escalate":
            try:
                decision = self._escalated(action, decision)
            except Exception as error:
                self.errors.append(EvalError("rule", f"escalating failed: {type(error).__name__}: {error}"))
                decision = decide(self, action)
        limit = self.monitor.limits.max_seconds
        if limit is not None and decision.allowed and time.monotonic() - started > limit:
            self.errors.append(
                EvalError("limit", f"the decision took longer than {limit:g} s, the time limit")
            )
            decision = decide(self, action)
        for name, attachment in self.hooks:  # an extension may turn the decision into a denial
            try:
                decision = attachment.intervene(self, decision)
            except Exception as error:
                self.errors.append(_failed(name, "deciding", error))
                decision = decide(self, action)
        if decision.evaluation is self:
            decision = replace(decision, evaluation=self.view(action))
        if self.watched is not None:  # shadow results, the monitor's mode, the audit log
            decision = self.watched.decided(decision)
        return decision

    def __getattr__(self, name: str) -> Any:
        """A query an extension adds to sessions, asked as ``session.NAME()`` (for instance
        ``session.forecast()``, see docs/forecasting.md)."""
        monitor = self.__dict__.get("monitor")
        if isinstance(monitor, Monitor):
            for extension in monitor.extensions:
                if name in extension.queries:
                    attachment = monitor.attached.get(extension.name)
                    return functools.partial(extension.query, name, self, attachment)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def view(self, action: Any) -> SessionView:
        """The session as it is now, deciding ``action`` (what a decision's ``explain`` explains)."""
        return SessionView(self, len(self.order), len(self.given), action)

    def _drain(self) -> list[EvalError]:
        found = list(self._sink)
        self._sink.clear()
        return found

    def _start(self, identity: dict[str, set[tuple]]) -> None:
        """What the policy derives before any event (its facts, rules needing no input)."""
        incremental = self.prepared.incremental
        try:
            for stratum, base, deltas in self.prepared.compiled.strata:
                if base and all(r in incremental for r in stratum.relations):
                    self.state.run_stratum(stratum, base, deltas, None)
        except Exception as error:  # a limit, or code failing on the policy's own facts
            self.sticky.append(EvalError("rule", f"starting the session failed: {error}"))
        self._settle()
        self._give(
            self._stored({self.index[name]: rows for name, rows in identity.items() if name in self.index})
        )

    def _stored(self, facts: Mapping[int, Collection[tuple]]) -> dict[int, set[Any]]:
        """Facts as tuples in the form relations store them (values for a unary relation, a
        set of tuples otherwise)."""
        unary = self.prepared.unary
        return {
            r: set(map(itemgetter(0), rows)) if r in unary else rows if type(rows) is set else set(rows)
            for r, rows in facts.items()
        }

    def _give(self, facts: dict[int, set[Any]]) -> None:
        """Facts given other than by events, in the form relations store them: kept for
        explanations as they are (nothing changes the sets), and maintained."""
        unary = self.prepared.unary
        named = self.named
        given = self.given
        for r, rows in facts.items():
            given.append((r, rows))
            if r in unary:
                named.update(rows)
            else:
                named.update(*rows)
        if self.seeds:
            self._seed(facts, stored=True)
        # the relations no rule reads are not stored: maintenance reads only the ones it stores
        self._insert(facts, stored=True)

    def _seed(self, facts: dict[int, set[Any]], stored: bool = False) -> list[tuple[int, set]]:
        """Keep the given facts of relations recomputed per decision (taken out of ``facts``),
        as tuples; what was not kept before, per relation."""
        unary = self.prepared.unary
        kept = []
        for r in [r for r in facts if r in self.seeds]:
            rows = facts.pop(r)
            tuples = {(v,) for v in rows} if stored and r in unary else set(rows)
            fresh = tuples - self.seeds[r]
            self.seeds[r].update(fresh)
            kept.append((r, fresh))
            self.dirty = True
        return kept

    def _insert(self, facts: dict[Any, Any], stored: bool = False) -> list[Any]:
        """Add new facts of stored input relations and everything they derive; the journal of
        what was added (the session's own list, good until the next update). The generated pass maintains them; when it meets an error, what it added
        is taken back and the interpreter maintains them instead, keeping the facts the error
        touches unknown (and it goes on doing so while a maintained rule reads an unknown fact).
        :class:`_Refused` when the facts would pass the limit (nothing is added then)."""
        state = self.state
        room = state.limits.max_facts - state.facts
        journal = self.journal
        journal.clear()
        opened = state.E.start(None, "update of the session's facts")  # checked as the rules run
        try:
            if self.faulty:
                added = session_unknown.maintain(self, facts, stored, room, journal)
            else:
                added = self._maintain(facts, room, stored)
                if self._sink:  # the pass skipped what followed an error: maintained again
                    self._sink.clear()
                    session_unknown.rollback(self, list(journal))
                    journal.clear()
                    added = session_unknown.maintain(self, facts, stored, room, journal)
        except (maintain.Overflow, LimitExceeded) as limit:
            self._sink.clear()
            session_unknown.rollback(self, list(journal))
            journal.clear()
            if isinstance(limit, maintain.Overflow):
                raise _Refused(
                    f"the session would hold more than {state.limits.max_facts:,} facts, its limit"
                ) from None
            raise _Refused(str(limit)) from None
        finally:
            if opened:
                state.E.stop()
        if added:
            state.facts += added
            self.dirty = True
        return journal

    def noted_unknown(self) -> None:
        """Say again whether maintained rules, and verdicts, read unknown facts."""
        held = [r for r, facts in self.unknown.items() if facts]
        prepared = self.prepared
        self.faulty = any(r in prepared.maintained_reads for r in held)
        self.unsure = any(r in prepared.cone for r in held)

    def _rule_failed(self, rule: int, error: Exception) -> None:
        info = self.plan.rules[rule]
        self._sink.append(EvalError("rule", f"rule `{info.id}` failed: {type(error).__name__}: {error}"))

    def _settle(self) -> None:
        """Problems found while maintaining facts stay: the maintained state may be incomplete."""
        self.sticky.extend(self._drain())

    def _prepare(self, action: Any) -> None:
        state = self.state
        prepared = self.prepared
        relations = state.relations
        candidate = prepared.candidate
        if candidate is not None:
            relations[candidate] = Relation(relations[candidate].arity, {action})
        self.candidate = action
        self.memo.clear()
        state.forget()
        if prepared.recompute and (self.dirty or candidate in prepared.materialized):
            for r in prepared.materialized:
                if r != candidate:
                    relations[r] = self.seeded(r)
            for stratum, base, deltas in prepared.recompute:
                state.run_stratum(stratum, base, deltas, None)
        self.dirty = False

    def seeded(self, relation: int) -> Relation:
        """A fresh relation holding the facts given for a relation recomputed per decision
        (where computing it starts)."""
        arity = self.plan.relations[relation].arity
        given = self.seeds.get(relation, ())
        return Relation(arity, (f[0] for f in given) if arity == 1 else given)

    def _demand(self, relation: int) -> Callable[..., Any]:
        def holds(*values: Any) -> Any:
            key = (relation, values)
            found = self.memo.get(key)
            if found is not None:
                return found
            found = False
            state = self.state
            for _, match in self.prepared.demand_rules[relation]:
                for _ in match(state.relations, state.F, state.I, state.E, self.V, *values):
                    found = True
                    break
                if found:
                    break
            self.memo[key] = found
            return found

        return holds

    # ------------------------------------------------------------- the questions verdicts ask

    def holds(self, relation: int, values: tuple) -> bool:
        prepared = self.prepared
        if relation in prepared.demanded:
            return self.V[relation](*values) is True
        if self.plan.relations[relation].inline:
            return self.state.I[relation](*values) is True
        return self.state.relations[relation].contains(values)

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[p.BoundRule, tuple, tuple]]:
        state = self.state
        if relation in self.prepared.demanded:
            for bound, match in self.prepared.demand_rules[relation]:
                for slots, matched in match(state.relations, state.F, state.I, state.E, self.V, *values):
                    yield bound, slots, matched
        else:
            yield from state.matches(relation, values)

    def explanation(
        self, events: int | None = None, given: int | None = None, action: Any = _NOTHING
    ) -> Evaluation:
        """The session's facts evaluated from scratch (explanations walk whole relations): the
        first ``events`` events and ``given`` batches of given facts, deciding ``action`` (by
        default, everything so far and the action decided last)."""
        evaluation = Evaluation(self.prepared.compiled, self.functors, self.monitor.limits)
        facts: dict[Any, set[tuple]] = {}  # by relation (the indices of `inputs`)
        unary = self.prepared.unary
        for r, rows in self.given[:given]:
            facts.setdefault(r, set()).update(((v,) for v in rows) if r in unary else rows)
        inputs = {spec.name: r for r, spec in enumerate(self.plan.relations) if spec.input}
        order = self.order[:events]
        implicit = self.depends is not None
        for position, e in enumerate(order):
            event = self.events[e]
            earlier = order[:position] if event.get("deps") is None and not implicit else ()
            for relation, rows in event_facts(event, position, earlier, inputs, implicit).items():
                facts.setdefault(relation, set()).update(rows)
        prefix = self.prepared.prefix
        if implicit and prefix is not None:
            recorded = self.events
            positions = self.position

            def depends() -> Prefix:
                made = Prefix(order, positions)
                made.open_events(e for e in order if recorded[e].get("deps") is None)
                return made

            evaluation.keep(prefix, depends)
        candidate = self.prepared.candidate
        if action is _NOTHING:
            action = self.candidate
        if candidate is not None and action is not _NOTHING:
            facts[candidate] = {(action,)}
        evaluation.load(facts)
        evaluation.run()
        return evaluation


def _failed(extension: str, what: str, error: Exception) -> EvalError:
    """The error of an extension's hook that raised (it fails closed)."""
    return EvalError("rule", f"extension `{extension}` failed while {what}: {type(error).__name__}: {error}")


class SessionView:
    """A session as it was when it decided an action: what ``Decision.explain`` explains."""

    __slots__ = ("action", "events", "given", "session")

    def __init__(self, session: Session, events: int, given: int, action: Any) -> None:
        self.session = session
        self.events = events
        self.given = given
        self.action = action

    @property
    def plan(self) -> p.Plan:
        return self.session.plan

    def explanation(self) -> Evaluation:
        return self.session.explanation(self.events, self.given, self.action)
