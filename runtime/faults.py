"""What an error met while deriving a fact says, in the policy's terms.

A derivation that meets an error (a comparison of a text with a number, a conversion of text
that is no number, a functor that raises, a division by zero) does not derive its fact, nor is
the fact known not to hold: it is *unknown* (:mod:`.unknown`), and a :class:`Fault` says why.
A decision that needs an unknown fact refuses its call with the fault's message, which names
the rule, the argument and its value, and how to fix the policy or the call:

    rule `big-payment`: argument `amount` of `pay` is the text `5000`, compared with the number
    1000

with the fix ``write to_number(tool_arg(a, "amount")), or declare the argument a number
(`.arg pay.amount: number`)``. Values an agent wrote are shown delimited and cut as every
message shows values (:func:`~policyc.runtime.render.value`), so that no text of theirs reads
as the monitor's own words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyc.compiler import plan as p

from .values import Adt, is_record


class _Unknown:
    """The value of an expression whose computation failed: any value (see :mod:`.unknown`)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "?"

    def __reduce__(self) -> str:
        return "ANY"


ANY: Any = _Unknown()


@dataclass(frozen=True)
class Fault:
    """Why a fact is unknown: the ``kind`` of error (``rule``: a comparison or an operation on
    values of the wrong type; ``functor``; ``arithmetic``), the id of the rule whose derivation
    met it, what happened (naming the argument and its value) and how to fix it."""

    kind: str
    rule: str
    message: str
    fix: str | None = None  # for the policy's author
    shown: str | None = None  # the message as the agent's model may read it (values quoted)
    advice: str | None = None  # for the caller: what to send instead

    def __post_init__(self) -> None:
        if self.shown is None:
            object.__setattr__(self, "shown", self.message)


def describe_value(value: Any) -> str:
    """``the text `5000```, ``the number 1000``, ``the record `[1, "a"]```."""
    from .render import value as shown

    if isinstance(value, str):
        return f"the text {shown(value)}"
    if isinstance(value, bool):
        return f"the value {value}"
    if isinstance(value, int | float):
        return f"the number {shown(value)}"
    if type(value) is Adt or is_record(value):
        return f"the record {shown(value)}"
    return f"a {type(value).__name__}"


_KINDS = {"symbol": "text", "number": "number", "float": "number", "record": "record"}


def _type_name(value: Any) -> str:
    if isinstance(value, str):
        return "symbol"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "float"
    return "record"


class Describer:
    """Names the values of one rule's slots for messages: an argument of a call (``argument
    `amount` of `pay```) where the slot holds a ``tool_arg`` or a ``ToolArg`` value, else the
    variable (```n```)."""

    def __init__(
        self,
        plan: p.Plan,
        rule: int,
        steps: tuple[p.Step, ...],
        tool_of: Callable[[Any], str | None] = lambda action: None,
    ) -> None:
        self.plan = plan
        self.info = plan.rules[rule]
        self.tool_of = tool_of
        # how each slot got its value: an assignment's expression, or the ToolArg atom binding it
        self.origins: dict[int, p.Expr | tuple[p.Pattern, p.Pattern]] = {}
        self.tool_arg = next((i for i, f in enumerate(plan.functors) if f.name == "tool_arg"), None)
        tool_arg_relation = plan.relation_index().get("ToolArg")
        for step in _flat(steps):
            if isinstance(step, p.Assign):
                self.origins.setdefault(step.slot, step.expr)
            elif isinstance(step, p.Scan) and step.relation == tool_arg_relation and len(step.args) == 3:
                value = step.args[2]
                if isinstance(value, p.Bind):
                    self.origins.setdefault(value.slot, (step.args[0], step.args[1]))

    def argument(self, expr: p.Expr, v: list) -> tuple[str, str] | None:
        """The call and argument name an expression reads (``tool_arg(a, "k")`` or a slot bound
        to one), as ``(call, name)``."""
        seen = 0
        while isinstance(expr, p.Slot) and expr.index in self.origins and seen < 8:
            origin = self.origins[expr.index]
            if isinstance(origin, tuple):
                call, key = (self._known(pattern, v) for pattern in origin)
                return (call, key) if isinstance(call, str) and isinstance(key, str) else None
            expr = origin
            seen += 1
        if isinstance(expr, p.CallExpr) and expr.functor == self.tool_arg and len(expr.args) == 2:
            call, key = (self._value(arg, v) for arg in expr.args)
            if isinstance(call, str) and isinstance(key, str):
                return call, key
        return None

    def name(self, expr: p.Expr, v: list) -> str:
        """How a message names what an expression computes."""
        found = self.argument(expr, v)
        if found is not None:
            return self.said_argument(found)
        if isinstance(expr, p.Slot) and expr.index < len(self.info.variables):
            variable = self.info.variables[expr.index]
            if variable:
                return f"`{variable}`"
        return "a value"

    def said_argument(self, found: tuple[str, str]) -> str:
        """``argument `amount` of `pay```: the argument, and the call's tool (its id when the
        tool is not known), as people read them (runtime/render.py)."""
        from . import render

        call, key = found
        tool = self.tool_of(call)
        return f"argument {render.value(key)} of {render.value(call if tool is None else tool)}"

    def source(self, expr: p.Expr, v: list) -> str:
        """The expression as the policy would write it, for a fix (``tool_arg(a, "amount")``)."""
        found = self.argument(expr, v)
        if found is not None:
            call_variable = self._variable_of_call(expr)
            return f'tool_arg({call_variable or "a"}, "{found[1]}")'
        if isinstance(expr, p.Slot) and expr.index < len(self.info.variables):
            return self.info.variables[expr.index] or "x"
        return "x"

    def comparison(self, op: str, left: p.Expr, right: p.Expr, x: Any, y: Any, v: list) -> Fault:
        """The fault of a comparison of values that do not compare (a text with a number)."""
        message, shown = (
            f"rule `{self.info.id}`: {self._said(left, x, v, whole)} is {self._told(left, x, v, whole)}, "
            f"compared ({op}) with {self._other(right, y, v, whole)}"
            for whole in (True, False)
        )
        fix, advice = self._fix(left, right, x, y, v)
        return Fault("rule", self.info.id, message, fix, shown, advice)

    def operation(self, op: str, operands: tuple[p.Expr, ...], values: tuple, v: list) -> Fault:
        """The fault of an operation on values it does not take (``"a" - 1``)."""
        message, shown = (
            f"rule `{self.info.id}`: `{op}` cannot take "
            + " and ".join(
                f"{self._said(e, x, v, whole)}, {self._told(e, x, v, whole)}"
                for e, x in zip(operands, values, strict=True)
            )
            for whole in (True, False)
        )
        fix, advice = (
            self._fix(operands[0], operands[1], values[0], values[1], v)
            if len(operands) == 2
            else (None, None)
        )
        return Fault("rule", self.info.id, message, fix, shown, advice)

    def functor(self, call: p.CallExpr | p.Test, what: str, args: tuple, v: list) -> Fault:
        """The fault of a functor that failed on ``args`` (``what``: its error as the wrapper
        reports it, which only the host reads)."""
        name = self.plan.functors[call.functor].name
        read = [self.argument(arg, v) for arg in call.args]
        about = next((f"{self.said_argument(a)}: " for a in read if a is not None), "")
        message = f"rule `{self.info.id}`: {about}{what}"
        values = ", ".join(self._told(e, a, v, False) for e, a in zip(call.args, args, strict=True))
        shown = f"rule `{self.info.id}`: {about}`{name}` has no value for {values or 'no arguments'}"
        fix = advice = None
        argument = next((a for a in read if a is not None), None)
        if name in ("to_number", "to_unsigned", "to_float") and argument is not None:
            fix = "Declare the argument's type (`.arg`) so that calls sending anything else are refused before any rule runs."
            advice = f'Send "{argument[1]}" as a JSON number, written in digits.'
        return Fault("functor", self.info.id, message, fix, shown, advice)

    def _said(self, expr: p.Expr, value: Any, v: list, whole: bool) -> str:
        return self.name(expr, v)

    def _told(self, expr: p.Expr, value: Any, v: list, whole: bool) -> str:
        """A value as a message says it: whole for the host; for the agent's model only when the
        call's arguments hold it (what the agent wrote), else its kind (a text of the session
        may be what the agent never saw)."""
        if whole or isinstance(expr, p.Const) or self.argument(expr, v) is not None:
            return describe_value(value)
        return f"a {_KINDS.get(_type_name(value), 'value')}"

    def _other(self, expr: p.Expr, value: Any, v: list, whole: bool) -> str:
        if isinstance(expr, p.Const):
            return describe_value(value)
        return f"{self.name(expr, v)}, {self._told(expr, value, v, whole)}"

    def aggregate(self, op: str, values: list) -> Fault:
        """The fault of an aggregate over values that do not combine (a text among numbers)."""
        kinds = sorted({_KINDS.get(_type_name(x), "value") for x in values})
        text = next((x for x in values if isinstance(x, str)), None)
        other = next((x for x in values if not isinstance(x, str)), None)
        told = (
            f"{describe_value(text)} with {describe_value(other)}"
            if text is not None and other is not None
            else ""
        )
        shown = f"rule `{self.info.id}`: `{op}` cannot combine {' with '.join(f'a {k}' for k in kinds)}"
        message = f"rule `{self.info.id}`: `{op}` cannot combine {told or ' with '.join(kinds)}"
        fix = "Convert the values the aggregate reads to one type (to_number), or declare the arguments they come from (`.arg`)."
        return Fault("rule", self.info.id, message, fix, shown, "Send numbers as JSON numbers, not as text.")

    def arithmetic(self, what: str) -> Fault:
        return Fault("arithmetic", self.info.id, f"rule `{self.info.id}`: {what}", None)

    # --------------------------------------------------------------------------------- fixes

    def _fix(self, left: p.Expr, right: p.Expr, x: Any, y: Any, v: list) -> tuple[str | None, str | None]:
        """How the policy's author makes the comparison of ``x`` and ``y`` mean what it says,
        and what the caller sends instead."""
        for expr, value, other in ((left, x, y), (right, y, x)):
            argument = self.argument(expr, v)
            if argument is None or isinstance(value, type(other)) or isinstance(other, type(value)):
                continue
            wanted = _type_name(other)
            tool = self.tool_of(argument[0])
            declared = f"`.arg {tool}.{argument[1]}: {wanted}`" if tool and tool.isidentifier() else "`.arg`"
            convert = {"number": "to_number", "float": "to_float", "symbol": "to_string"}.get(wanted)
            written = f"write {convert}({self.source(expr, v)}) in the rule, or " if convert else ""
            fix = f"{written}declare the argument a {wanted} ({declared}) so that calls sending anything else are refused"
            kind = {"number": "a JSON number", "float": "a JSON number", "symbol": "text"}.get(wanted, wanted)
            return fix[0].upper() + fix[1:] + ".", f'Send "{argument[1]}" as {kind}.'
        if isinstance(x, str) != isinstance(y, str):
            return (
                "Compare values of one type: convert the text with to_number(...) or the number with to_string(...).",
                None,
            )
        return None, None

    def _variable_of_call(self, expr: p.Expr) -> str | None:
        seen = 0
        while isinstance(expr, p.Slot) and expr.index in self.origins and seen < 8:
            origin = self.origins[expr.index]
            if isinstance(origin, tuple):
                first = origin[0]
                return self._variable(first.expr if isinstance(first, p.Match) else first)
            expr = origin
            seen += 1
        if isinstance(expr, p.CallExpr) and expr.args:
            return self._variable(expr.args[0])
        return None

    def _variable(self, what: Any) -> str | None:
        slot = what.slot if isinstance(what, p.Bind) else what.index if isinstance(what, p.Slot) else None
        if slot is not None and slot < len(self.info.variables):
            return self.info.variables[slot] or None
        return None

    def _known(self, pattern: p.Pattern, v: list) -> Any:
        if isinstance(pattern, p.Bind):
            return v[pattern.slot] if pattern.slot < len(v) else None
        if isinstance(pattern, p.Match):
            return self._value(pattern.expr, v)
        return None

    @staticmethod
    def _value(expr: p.Expr, v: list) -> Any:
        if isinstance(expr, p.Const):
            return expr.value
        if isinstance(expr, p.Slot) and expr.index < len(v):
            return v[expr.index]
        return None


def _flat(steps: tuple[p.Step, ...]) -> list[p.Step]:
    found: list[p.Step] = []
    for step in steps:
        found.append(step)
        if isinstance(step, p.Aggregate):
            found.extend(_flat(step.body))
    return found
