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

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Self

from . import render
from .errors import causes
from .values import render_fact

if TYPE_CHECKING:
    from policyc.compiler.plan import Plan

    from .approvals import Approval, EscalationRequest
    from .evaluator import Evaluation

ERROR_RULE = "policyc:error"
MODES = ("enforce", "shadow")  # what Decision.mode says (runtime/shadow.py)
DEFAULT_RULE = "policyc:default-deny"
VERDICTS = ("allow", "deny", "escalate")  # what Decision.verdict says

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

# The views of the one JSON form of a decision (Decision.to_json): ``full`` in process and in
# replays; ``log`` in the audit log (no ``bindings``: the values are in the messages and facts,
# which the log redacts); ``service`` in the service's answers to a session's key (no ``facts``
# or ``bindings``: what the rules matched stays with the host).
VIEWS = ("full", "log", "service")
_ALL = VIEWS
_TEXT = {"type": ["string", "null"]}
_REASONS = {"type": "array", "items": {"$ref": "#/components/schemas/Reason"}}

# every field of a reason: its JSON schema (the service's OpenAPI document), the views that
# show it, and whether a reader needs it
REASON_FIELDS: dict[str, tuple[dict[str, Any], tuple[str, ...], bool]] = {
    "rule": ({"type": "string"}, _ALL, True),
    "message": (_TEXT, _ALL, True),
    "suggestion": (_TEXT, _ALL, True),
    "severity": (_TEXT, _ALL, False),
    "code": (_TEXT, _ALL, False),
    "detail": (_TEXT, _ALL, False),
    "facts": ({"type": "array", "items": {"type": "string"}}, ("full", "log"), False),
    "bindings": ({"type": "object"}, ("full",), False),
}
SHADOW_FIELDS: dict[str, tuple[dict[str, Any], tuple[str, ...], bool]] = {
    "verdict": ({"enum": list(VERDICTS)}, _ALL, True),
    "allowed": ({"type": "boolean"}, _ALL, True),
    "errored": ({"type": "boolean"}, _ALL, True),
    "differs": ({"type": "boolean"}, _ALL, True),
    "error": (_TEXT, _ALL, True),
    "reasons": (_REASONS, _ALL, True),
}
DECISION_FIELDS: dict[str, tuple[dict[str, Any], tuple[str, ...], bool]] = {
    "action": ({}, _ALL, True),
    "verdict": ({"enum": list(VERDICTS)}, _ALL, True),
    "allowed": ({"type": "boolean"}, _ALL, True),
    "errored": ({"type": "boolean"}, _ALL, True),
    "mode": ({"enum": list(MODES)}, _ALL, True),
    "reasons": (_REASONS, _ALL, True),
    "feedback": ({"type": "string", "description": "What the agent's model reads."}, _ALL, True),
    "escalation": (
        {"type": ["object", "null"], "description": "What a person must see to approve the call."},
        _ALL,
        False,
    ),
    "approval": (
        {"type": ["object", "null"], "description": "The approval an allow after escalation used."},
        _ALL,
        False,
    ),
    "would_deny": (_REASONS, _ALL, False),
    "shadow": ({"type": ["object", "null"], "description": "What a shadow policy decided."}, _ALL, False),
}


def json_schema(
    fields: Mapping[str, tuple[dict[str, Any], tuple[str, ...], bool]], view: str
) -> dict[str, Any]:
    """The JSON schema of a form (:data:`DECISION_FIELDS`, :data:`REASON_FIELDS`) in ``view``."""
    shown = _shown_in(fields, view)
    return {
        "type": "object",
        "required": [name for name in shown if fields[name][2]],
        "properties": {name: fields[name][0] for name in shown},
    }


def _shown_in(fields: Mapping[str, tuple[Any, tuple[str, ...], bool]], view: str) -> list[str]:
    if view not in VIEWS:
        raise ValueError(f"a view of a decision is one of {', '.join(VIEWS)}, not {view!r}")
    return [name for name, (_, views, _) in fields.items() if view in views]


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def _checked(
    data: Any, fields: Mapping[str, tuple[dict[str, Any], tuple[str, ...], bool]], what: str
) -> dict:
    """``data`` if it is an object whose fields have the types their schemas say, with the
    required ones present (``ValueError`` naming the first that is not)."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not an object")
    for name, (schema, _, required) in fields.items():
        if name not in data:
            if required:
                raise ValueError(f"{what} has no `{name}`")
            continue
        value = data[name]
        if "enum" in schema and value not in schema["enum"]:
            raise ValueError(f"{what}'s `{name}` is not one of {', '.join(map(str, schema['enum']))}")
        kinds = schema.get("type")
        if kinds is not None:
            allowed = tuple(
                t for kind in ([kinds] if isinstance(kinds, str) else kinds) for t in _TYPES[kind]
            )
            if not isinstance(value, allowed):
                raise ValueError(f"{what}'s `{name}` is not what it holds ({kinds})")
    return data


@dataclass(frozen=True)
class Reason:
    rule: str  # the rule id
    message: str | None
    suggestion: str | None
    severity: str | None = None
    facts: tuple[str, ...] = ()  # the ground facts the rule's body matched, as `Rel("a", 1)`
    bindings: dict[str, Any] = field(default_factory=dict, compare=False)
    # the texts the agent's model reads, before interpolation, when they differ from
    # ``message`` and ``suggestion`` (which hold a cause only the host reads)
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
        if self.templates is not None:  # what the agent's model reads differs from the host's text
            message = render.interpolate(self.templates[0], self.bindings)
            suggestion = render.interpolate(self.templates[1], self.bindings)
        rule = self.rule if render.is_name(self.rule) else render.value(self.rule)
        return message or f"{'escalated' if escalated else 'denied'} by rule {rule}", suggestion

    def to_json(self, view: str = "full") -> dict[str, Any]:
        """The reason in the decision's JSON form, as ``view`` shows it (:data:`VIEWS`)."""
        values = {
            "rule": self.rule,
            "message": self.message,
            "suggestion": self.suggestion,
            "severity": self.severity,
            "code": self.code,
            "detail": self.detail,
            "facts": list(self.facts),
            "bindings": self.bindings,
        }
        return {name: values[name] for name in _shown_in(REASON_FIELDS, view)}

    @classmethod
    def from_json(cls, data: Any) -> Reason:
        """A reason from its JSON form, any view (``ValueError`` if it is not one)."""
        checked = _checked(data, REASON_FIELDS, "a reason")
        facts = checked.get("facts") or []
        if not all(isinstance(fact, str) for fact in facts):
            raise ValueError("a reason's `facts` are not texts")
        return cls(
            checked["rule"],
            checked["message"],
            checked["suggestion"],
            checked.get("severity"),
            tuple(facts),
            dict(checked.get("bindings") or {}),
            code=checked.get("code"),
            detail=checked.get("detail"),
        )


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

    def to_json(self, view: str = "full") -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "allowed": self.allowed,
            "errored": self.errored,
            "differs": self.differs,
            "error": self.error,
            "reasons": [r.to_json(view) for r in self.reasons],
        }

    @classmethod
    def from_json(cls, data: Any) -> ShadowResult:
        """A shadow result from its JSON form (``ValueError`` if it is not one)."""
        checked = _checked(data, SHADOW_FIELDS, "a shadow result")
        return cls(
            checked["verdict"],
            checked["allowed"],
            tuple(Reason.from_json(r) for r in checked["reasons"]),
            checked["errored"],
            checked["differs"],
            checked["error"],
        )


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
    # the feedback as it was given, for a decision read back from its JSON form (whose reasons
    # no longer hold the values the feedback quotes): the feedback it reads the same with
    told: str | None = field(default=None, kw_only=True, compare=False, repr=False)

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
        return feedback(self) if self.told is None else self.told

    def explain(self) -> Any:
        """Why the verdict is what it is: derivation trees of ``Deny`` (or ``Allow``), or why
        ``Allow`` does not hold when the default denied."""
        from .explain import explain_decision

        return explain_decision(self)

    def to_json(self, view: str = "full") -> dict[str, Any]:
        """The decision's one JSON form, as ``view`` shows it (:data:`VIEWS`): the same fields
        in process, in the service's answers, in the audit log and in replays."""
        escalation, approval, shadow = self.escalation, self.approval, self.shadow
        values = {
            "action": self.action,
            "verdict": self.verdict,
            "allowed": self.allowed,
            "errored": self.errored,
            "mode": self.mode,
            "reasons": [r.to_json(view) for r in self.reasons],
            "feedback": self.feedback,
            "escalation": None if escalation is None else escalation.to_json(),
            "approval": None if approval is None else approval.to_json(),
            "would_deny": [r.to_json(view) for r in self.would_deny],
            "shadow": None if shadow is None else shadow.to_json(view),
        }
        return {name: values[name] for name in _shown_in(DECISION_FIELDS, view)}

    @classmethod
    def from_json(cls, data: Any, **extra: Any) -> Self:
        """A decision from its JSON form, any view (``ValueError`` if it is not one, lacks a
        field or contradicts itself); ``extra`` goes to the constructor (a subclass's fields).
        It reads the same: the same verdict, reasons and feedback."""
        from .approvals import Approval, EscalationRequest

        checked = _checked(data, DECISION_FIELDS, "a decision")
        reasons = tuple(Reason.from_json(r) for r in checked["reasons"])
        verdict, allowed, errored, mode = (checked[k] for k in ("verdict", "allowed", "errored", "mode"))
        if mode not in MODES:
            raise ValueError(f"a decision's `mode` is one of {', '.join(MODES)}, not {mode!r}")
        if allowed != (verdict == "allow") and mode != "shadow":
            raise ValueError(f"`allowed` {allowed} contradicts `verdict` {verdict!r}")
        failed = errored or any(r.rule == ERROR_RULE for r in reasons)
        if failed and allowed and mode != "shadow":
            raise ValueError("an allowed decision says the policy could not be evaluated")
        escalation, approval, shadow = (
            checked.get("escalation"),
            checked.get("approval"),
            checked.get("shadow"),
        )
        return cls(
            checked["action"],
            allowed,
            reasons,
            errored,
            verdict=verdict,
            escalation=None if escalation is None else EscalationRequest.from_json(escalation),
            approval=None if approval is None else Approval.from_json(approval),
            mode=mode,
            would_deny=tuple(Reason.from_json(r) for r in checked.get("would_deny") or ()),
            shadow=None if shadow is None else ShadowResult.from_json(shadow),
            told=checked["feedback"],
            **extra,
        )


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


class _EventCalls(Mapping[Any, tuple[Any, Mapping[str, Any] | None]]):
    """A session's tool calls by event id, as :func:`render.interpolate` shows them."""

    def __init__(self, events: Mapping[Any, Any]) -> None:
        self.events = events

    def __getitem__(self, key: Any) -> tuple[Any, Mapping[str, Any] | None]:
        event = self.events[key]
        if not isinstance(event, Mapping) or event.get("tool") is None:
            raise KeyError(key)
        arguments = event.get("args")
        return event["tool"], arguments if isinstance(arguments, Mapping) else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)


def session_calls(explains: Any) -> render.Calls | None:
    """The tool calls of what a decision was made on (a session's events), if it has any."""
    events = getattr(explains, "events", None)
    return _EventCalls(events) if isinstance(events, Mapping) else None


def deny_reasons(
    facts: Derivations, action: Any, verdict: str = "Deny", calls: render.Calls | None = None
) -> list[Reason]:
    """A reason for every way a rule of ``verdict`` (``Deny`` or ``Escalate``) fired for the
    action, in the rules' order; ``{var}`` in its message and suggestion shown as people read
    it (runtime/render.py), a variable bound to one of ``calls`` (by default the session's)
    as that call."""
    plan = facts.plan
    calls = session_calls(facts) if calls is None else calls
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
                render.interpolate(info.message, bindings, calls),
                render.interpolate(info.suggest, bindings, calls),
                info.severity,
                rendered,
                bindings,
            )
        )
    return [reason for _, reason in sorted(zip(order, reasons, strict=True), key=lambda pair: pair[0])]
