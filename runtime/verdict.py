"""Decisions: may this action run, and why not.

The verdict is deny-overrides: an action is allowed when ``Allow(action)`` is derived or the
policy's default is ``allow``, and no ``Deny(action)`` is derived. A denied action carries a
:class:`Reason` for every way a deny rule fired for it: the rule id, its ``@message`` and
``@suggest`` with ``{var}`` filled in, and the ground facts its body matched. A result that
errored (a failing functor, a limit, malformed facts) gives a denial whose reason names the
cause: the monitor fails closed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .evaluator import causes

if TYPE_CHECKING:
    from .evaluator import Evaluation

ERROR_RULE = "policyc:error"
DEFAULT_RULE = "policyc:default-deny"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


@dataclass(frozen=True)
class Reason:
    rule: str  # the rule id
    message: str | None
    suggestion: str | None
    severity: str | None = None
    facts: tuple[str, ...] = ()  # the ground facts the rule's body matched, as `Rel("a", 1)`
    bindings: dict[str, Any] = field(default_factory=dict, compare=False)

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
class Decision:
    action: Any
    allowed: bool
    reasons: tuple[Reason, ...] = ()
    errored: bool = False
    evaluation: Facts | None = field(default=None, compare=False, repr=False)

    @property
    def feedback(self) -> str:
        """Text for the agent: what was blocked, why, and what it can do instead."""
        if self.allowed:
            return ""
        lines = ["Authorization issues encountered:"]
        for reason in self.reasons:
            text = reason.message or f"denied by rule {reason.rule}"
            lines.append(f"- Blocked: {text}")
            if reason.suggestion:
                lines.append(f"  Suggestion: {reason.suggestion}")
        return "\n".join(lines)

    def explain(self) -> Any:
        """Why the verdict is what it is: derivation trees of ``Deny`` (or ``Allow``), or why
        ``Allow`` does not hold when the default denied."""
        from .explain import explain_decision

        return explain_decision(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "allowed": self.allowed,
            "errored": self.errored,
            "reasons": [r.to_json() for r in self.reasons],
        }


def render_value(value: Any) -> str:
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'  # what JSON makes of it, sooner
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def render_fact(name: str, values: tuple) -> str:
    return f"{name}({', '.join([render_value(v) for v in values])})"


def interpolate(template: str | None, bindings: dict[str, Any]) -> str | None:
    """``{var}`` replaced by the variable's value (strings as they are); ``{{ }}`` escape."""
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
        return value if isinstance(value, str) else repr(value)

    return _PLACEHOLDER.sub(replace, template)


class Facts(Protocol):
    """What a verdict needs to know: a batch evaluation and a monitor session both answer."""

    plan: Any
    index: Mapping[str, int]  # the plan's relations by name
    errors: list

    def holds(self, relation: int, values: tuple) -> bool: ...

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[Any, tuple, tuple]]: ...

    def explanation(self) -> Evaluation: ...


def decide(facts: Facts, action: Any) -> Decision:
    plan = facts.plan
    index = facts.index
    if facts.errors:
        reason = Reason(
            ERROR_RULE,
            f"the policy could not be evaluated, so the action is denied: {causes(facts.errors)}",
            "Retry later, or ask an operator to check the policy's functors and facts.",
            "high",
        )
        return Decision(action, False, (reason,), True, facts)
    denied = facts.holds(index["Deny"], (action,))
    if denied:
        reasons = tuple(deny_reasons(facts, action))
        if facts.errors:  # asking for the reasons failed: still a denial, and it says why
            return decide(facts, action)
        return Decision(action, False, reasons, False, facts)
    if plan.default == "allow" or facts.holds(index["Allow"], (action,)):
        if facts.errors:
            return decide(facts, action)
        return Decision(action, True, (), False, facts)
    if facts.errors:
        return decide(facts, action)
    reason = Reason(
        DEFAULT_RULE,
        "no rule allows this action, and the policy denies by default",
        "Only actions an Allow rule of the policy permits can run.",
    )
    return Decision(action, False, (reason,), False, facts)


def deny_reasons(facts: Facts, action: Any) -> list[Reason]:
    plan = facts.plan
    deny = facts.index["Deny"]
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
            )
        )
    return [reason for _, reason in sorted(zip(order, reasons, strict=True), key=lambda pair: pair[0])]
