"""Decisions: may this action run, and why not.

The verdict is deny-overrides: an action is allowed when ``Allow(action)`` is derived or the
policy's default is ``allow``, and no ``Deny(action)`` is derived. A policy that has
``Escalate`` rules has a third verdict between them (deny > escalate > allow/default): an
action for which ``Escalate(action)`` is derived and ``Deny(action)`` is not may run only if a
person approves it (:mod:`.approvals`); its decision has ``verdict == "escalate"``, is not
``allowed``, and holds the reasons of the escalating rules (and, in a session, the
:class:`~.approvals.EscalationRequest` a person must see). A denied action carries a
:class:`Reason` for every way a deny rule fired for it: the rule id, its ``@message`` and
``@suggest`` with ``{var}`` filled in, and the ground facts its body matched. A result that
errored (a failing functor, a limit, malformed facts) gives a denial whose reason names the
cause: the monitor fails closed.

**Feedback** (:attr:`Decision.feedback`) is the text the agent's model reads, so it holds no
value verbatim: every ``{var}`` of a message or suggestion is shown quoted (a string as a JSON
string, with every character that is not printable escaped; a number as a number), cut to
:data:`FEEDBACK_VALUE_LIMIT` characters with ``…`` after the closing quote; identical lines are
shown once and at most :data:`FEEDBACK_REASONS_LIMIT` reasons are shown. An errored decision's
feedback says only that the decision failed, with a short stable code (:data:`ERROR_CODES`); the
cause stays in ``Reason.message`` for the host. ``Reason.message`` and ``Reason.suggestion``
keep the values as they are (for logs, replays and explanations), and ``Reason.bindings``
holds them whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .errors import causes
from .values import quote_value, render_fact

if TYPE_CHECKING:
    from policyc.compiler.plan import Plan

    from .approvals import Approval, EscalationRequest
    from .evaluator import Evaluation

ERROR_RULE = "policyc:error"
DEFAULT_RULE = "policyc:default-deny"
VERDICTS = ("allow", "deny", "escalate")  # what Decision.verdict says
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")

FEEDBACK_REASONS_LIMIT = 20  # reasons the feedback shows (the rest are counted)
# what failed, by the kind of evaluation error: the code an errored decision's feedback shows
ERROR_CODES = {
    "event": "malformed-event",
    "facts": "malformed-facts",
    "functor": "functor-failed",
    "arithmetic": "arithmetic-failed",
    "rule": "rule-failed",
    "limit": "limit-exceeded",
    "audit": "audit-failed",  # the decision could not be written to the audit log (runtime/audit.py)
}
ERROR_FEEDBACK = "the policy could not decide this action, so it was refused"
ERROR_SUGGESTION = "Retry later, or ask an operator to check the policy's functors and facts."


@dataclass(frozen=True)
class Reason:
    rule: str  # the rule id
    message: str | None
    suggestion: str | None
    severity: str | None = None
    facts: tuple[str, ...] = ()  # the ground facts the rule's body matched, as `Rel("a", 1)`
    bindings: dict[str, Any] = field(default_factory=dict, compare=False)
    # the rule's @message and @suggest before interpolation (the feedback fills them in quoted)
    templates: tuple[str | None, str | None] | None = field(default=None, compare=False, repr=False)
    code: str | None = None  # for an errored decision: what failed (see ERROR_CODES)
    # for a decision refused by an error of the policy's evaluation: what failed, in the
    # policy's terms with every value quoted (the feedback shows it; see runtime/faults.py)
    detail: str | None = field(default=None, compare=False)

    def shown(self, escalated: bool = False) -> tuple[str, str | None]:
        """The message and suggestion as the agent's model reads them (see the module); a rule
        without a message is named (``escalated``: as one that escalated the action)."""
        if self.rule == ERROR_RULE:
            text = f"{ERROR_FEEDBACK} ({self.code or 'evaluation-failed'})"
            return (f"{text}: {self.detail}" if self.detail else text), self.suggestion or ERROR_SUGGESTION
        message, suggestion = self.message, self.suggestion
        if self.templates is not None:
            message = interpolate(self.templates[0], self.bindings, quote_value)
            suggestion = interpolate(self.templates[1], self.bindings, quote_value)
        return message or f"{'escalated' if escalated else 'denied'} by rule {self.rule}", suggestion

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "message": self.message,
            "suggestion": self.suggestion,
            "severity": self.severity,
            "facts": list(self.facts),
            "bindings": self.bindings,
        }


@dataclass(frozen=True)
class ShadowResult:
    """What the shadow policy would have decided: its verdict, whether it would have allowed
    the action, its reasons, whether it failed to decide (``error`` says why), and whether it
    differs from the enforced decision (in verdict or in the rules that fired)."""

    verdict: str
    allowed: bool
    reasons: tuple[Reason, ...] = ()
    errored: bool = False
    differs: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "allowed": self.allowed,
            "errored": self.errored,
            "differs": self.differs,
            "error": self.error,
            "reasons": [
                {"rule": r.rule, "message": r.message, "severity": r.severity, "code": r.code}
                for r in self.reasons
            ],
        }


@dataclass(frozen=True)
class Decision:
    """A verdict on an action: ``allowed`` says whether it may run now; ``verdict`` is
    ``"allow"``, ``"deny"`` or ``"escalate"`` (by default what ``allowed`` says); ``reasons``
    are the denying (or escalating) rules' reasons. An escalated decision carries what a
    person must see (``escalation``); an action allowed after escalation carries the
    approval it used (``approval``) and still the escalation it answered."""

    action: Any
    allowed: bool
    reasons: tuple[Reason, ...] = ()
    errored: bool = False
    evaluation: Explains | None = field(default=None, compare=False, repr=False)
    verdict: str = field(default="", kw_only=True)
    escalation: EscalationRequest | None = field(default=None, kw_only=True)
    approval: Approval | None = field(default=None, kw_only=True)
    # shadow rollout (runtime/shadow.py): the monitor's mode ("shadow": nothing enforced, allowed
    # is true and the verdict is what would have been), the would-deny reasons of the rules in
    # shadow mode, and what a shadow policy would have decided
    mode: str = field(default="enforce", kw_only=True)
    would_deny: tuple[Reason, ...] = field(default=(), kw_only=True)
    shadow: ShadowResult | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        if self.verdict not in ("", *VERDICTS):
            raise ValueError(f"a verdict is one of {', '.join(VERDICTS)}, not {self.verdict!r}")
        if self.allowed and self.verdict not in ("", "allow") and self.mode != "shadow":
            raise ValueError(f"an allowed decision cannot have verdict {self.verdict!r}")
        if not self.verdict or (self.verdict == "allow" and not self.allowed):  # a refusal denies
            object.__setattr__(self, "verdict", "allow" if self.allowed else "deny")

    @property
    def escalated(self) -> bool:
        """Whether the verdict is ``escalate``: the action waits for a person's approval."""
        return self.verdict == "escalate"

    @property
    def feedback(self) -> str:
        """Text for the agent: what was blocked, why, and what it can do instead (in shadow
        mode, what would have been blocked, said to be not enforced): :func:`feedback`."""
        return feedback(self)

    def explain(self) -> Any:
        """Why the verdict is what it is: derivation trees of ``Deny`` (or ``Allow``), or why
        ``Allow`` does not hold when the default denied."""
        from .explain import explain_decision

        return explain_decision(self)

    def to_json(self) -> dict[str, Any]:
        data = {
            "action": self.action,
            "verdict": self.verdict,
            "allowed": self.allowed,
            "errored": self.errored,
            "reasons": [r.to_json() for r in self.reasons],
        }
        if self.escalation is not None:
            data["escalation"] = self.escalation.to_json()
        if self.approval is not None:
            data["approval"] = self.approval.to_json()
        if self.mode != "enforce":
            data["mode"] = self.mode
        if self.would_deny:
            data["would_deny"] = [r.to_json() for r in self.would_deny]
        if self.shadow is not None:
            data["shadow"] = self.shadow.to_json()
        return data


def feedback(decision: Decision) -> str:
    """A decision's feedback, the text the agent's model reads: what was blocked (or needs a
    person's approval), why, and what to do instead; nothing for an allowed action. In shadow
    mode, what would have been blocked, said to be not enforced (or, for an action refused
    even so, why)."""
    escalated = decision.escalated
    if decision.mode == "shadow":
        if decision.allowed:
            verb = {"deny": "deny", "escalate": "escalate"}.get(decision.verdict, "allow")
            lines = [f"Shadow mode (nothing is enforced): the policy would {verb} this action."]
            label = "Would need approval" if escalated else "Would be blocked"
        else:  # refused even in shadow mode: the decision could not be logged
            lines = ["Shadow mode, but this action was refused:"]
            label = "Blocked"
        shown = list(dict.fromkeys(reason.shown() for reason in decision.reasons))
    else:
        if decision.allowed:
            return ""
        lines = ["Authorization issues encountered:"]
        label = "Needs approval" if escalated else "Blocked"
        shown = list(dict.fromkeys(reason.shown(escalated) for reason in decision.reasons))
    for text, suggestion in shown[:FEEDBACK_REASONS_LIMIT]:
        lines.append(f"- {label}: {text}")
        if suggestion:
            lines.append(f"  Suggestion: {suggestion}")
    if len(shown) > FEEDBACK_REASONS_LIMIT:
        lines.append(f"- … and {len(shown) - FEEDBACK_REASONS_LIMIT} more reasons")
    return "\n".join(lines)


def interpolate(
    template: str | None, bindings: dict[str, Any], render: Callable[[Any], str] | None = None
) -> str | None:
    """``{var}`` replaced by the variable's value (by default strings as they are, other values
    by ``repr``; else by ``render``); ``{{ }}`` escape."""
    if template is None:
        return None

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        value = bindings.get(match.group(1).strip())
        if value is None:
            return token
        if render is not None:
            return render(value)
        return value if isinstance(value, str) else repr(value)

    return _PLACEHOLDER.sub(replace, template)


class Explains(Protocol):
    """What a decision keeps to explain itself: the plan, and the evaluation it was made on
    (a batch evaluation, a monitor session, a session as it was at the decision)."""

    @property
    def plan(self) -> Plan: ...

    def explanation(self) -> Evaluation: ...


class Facts(Explains, Protocol):
    """What a verdict needs to know: a batch evaluation and a monitor session both answer."""

    @property
    def index(self) -> Mapping[str, int]:  # the plan's relations by name
        ...

    @property
    def errors(self) -> list[Any]: ...

    def holds(self, relation: int, values: tuple) -> bool: ...

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[Any, tuple, tuple]]: ...


def decide(facts: Facts, action: Any) -> Decision:
    plan = facts.plan
    index = facts.index
    if facts.errors:
        reason = Reason(
            ERROR_RULE,
            f"the policy could not be evaluated, so the action is denied: {causes(facts.errors)}",
            ERROR_SUGGESTION,
            "high",
            code=error_code(facts.errors),
        )
        return Decision(action, False, (reason,), True, facts)
    denied = facts.holds(index["Deny"], (action,))
    if denied:
        reasons = tuple(deny_reasons(facts, action))
        if facts.errors:  # asking for the reasons failed: still a denial, and it says why
            return decide(facts, action)
        return Decision(action, False, reasons, False, facts)
    escalate = escalate_relation(plan)
    if escalate is not None and facts.holds(escalate, (action,)):
        reasons = tuple(deny_reasons(facts, action, "Escalate"))
        if facts.errors:
            return decide(facts, action)
        return Decision(action, False, reasons, False, facts, verdict="escalate")
    if plan.default == "allow" or facts.holds(index["Allow"], (action,)):
        if facts.errors:
            return decide(facts, action)
        return Decision(action, True, (), False, facts)
    if facts.errors:
        return decide(facts, action)
    return default_denial(action, facts)


DEFAULT_DENIAL = Reason(
    DEFAULT_RULE,
    "no rule allows this action, and the policy denies by default",
    "Only actions an Allow rule of the policy permits can run.",
)


def default_denial(action: Any, facts: Explains | None) -> Decision:
    """The denial of an action no ``Allow`` rule allows, under ``.default deny``."""
    return Decision(action, False, (DEFAULT_DENIAL,), False, facts)


class EventRefused(ValueError):
    """An event the session did not record: malformed, or one it could not take (its facts would
    pass the session's limit, an extension failed on it). Nothing of it was kept, and the
    session decides on as before; the host must not hand what the event holds to the model.
    ``code``: ``malformed-event``, ``limit-exceeded``, ``extension-failed`` or
    ``conflicting-facts`` (its facts break a key, ``.key``, with facts the host gave)."""

    def __init__(self, message: str, code: str = "malformed-event") -> None:
        super().__init__(message)
        self.code = code


# what a call whose event was refused can do about it, by the refusal's code
_REFUSED_ADVICE = {
    "malformed-event": "Send the call again as a well-formed event (an object with an `id`, a `kind` and JSON arguments).",
    "limit-exceeded": "The session holds as many facts as its limit allows: start a new session, or ask an operator to raise `max_facts`.",
    "extension-failed": "An extension of the monitor failed on this call: ask an operator to check it.",
    "conflicting-facts": "The facts the host gave about this call say otherwise than the call: ask an operator to check them.",
}


def refused_call(action: Any, refused: EventRefused) -> Decision:
    """The denial of a call whose event was refused before any rule ran (``policyc:refused-event``):
    the host reads why; the model reads what kind of refusal it is, not the event's names and
    values, and what to do."""
    advice = _REFUSED_ADVICE.get(refused.code)
    reason = Reason(
        "policyc:refused-event",
        f"the call was refused before any rule ran: {refused}",
        advice,
        "high",
        templates=(f"the call was refused before any rule ran ({refused.code})", advice),
        code=refused.code,
    )
    return Decision(action, False, (reason,), True)


def escalate_relation(plan: Plan) -> int | None:
    """The relation ``Escalate`` of a plan when it is the third verdict (unary), else None (a
    binary ``Escalate(a, why)``, as the risk library has, is an ordinary relation)."""
    for r, spec in enumerate(plan.relations):
        if spec.name == "Escalate":
            return r if spec.arity == 1 else None
    return None


def error_code(errors: Iterable[Any]) -> str:
    """The codes of what failed (:data:`ERROR_CODES`), each once, joined by commas."""
    kinds = dict.fromkeys(ERROR_CODES.get(getattr(e, "kind", ""), "evaluation-failed") for e in errors)
    return ",".join(kinds) or "evaluation-failed"


class Derivations(Protocol):
    """What deny reasons are read from: the plan, its relations by name, and the bindings of
    the rules of a relation whose head takes given values."""

    @property
    def plan(self) -> Plan: ...

    @property
    def index(self) -> Mapping[str, int]: ...

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[Any, tuple, tuple]]: ...


def deny_reasons(facts: Derivations, action: Any, verdict: str = "Deny") -> list[Reason]:
    """A reason for every way a rule of ``verdict`` (``Deny`` or ``Escalate``) fired for the
    action, in the rules' order."""
    plan = facts.plan
    deny = facts.index[verdict]
    reasons = []
    order: list[tuple[int, tuple[str, ...]]] = []  # the rule's place and the facts: a stable order
    seen = set()
    for bound, slots, matched in facts.matches(deny, (action,)):
        info = plan.rules[bound.rule]
        bindings = {
            name: value
            for name, value in zip(info.variables, slots, strict=False)
            if name and value is not None
        }
        rendered = tuple([render_fact(plan.relations[r].name, t) for r, t in matched])
        # the names are distinct, so sorting never compares values
        key = (info.id, rendered, tuple(sorted(bindings.items())))
        if key in seen:
            continue
        seen.add(key)
        order.append((bound.rule, rendered))
        reasons.append(
            Reason(
                info.id,
                interpolate(info.message, bindings),
                interpolate(info.suggest, bindings),
                info.severity,
                rendered,
                bindings,
                (info.message, info.suggest),
            )
        )
    return [reason for _, reason in sorted(zip(order, reasons, strict=True), key=lambda pair: pair[0])]
