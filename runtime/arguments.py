"""Refusing a call whose arguments do not match their declarations, before any rule runs.

A policy declares what a tool's arguments hold (``.arg pay.amount: number required``; the plan
carries the declarations, :class:`~policyc.compiler.plan.ArgumentSpec`). A call of the tool
whose argument holds another kind of JSON value, or that leaves out (or gives ``null`` for) a
required one, is the agent's mistake: the monitor refuses it with one :class:`~.verdict.Reason`
per argument at fault (rule ``policyc:invalid-argument``), saying what was given and what to send
instead, and no rule ever sees the call. Arguments the policy does not declare are not checked.

>>> from policyc.compiler.plan import ArgumentSpec
>>> check = Arguments([ArgumentSpec("pay", "amount", "number", True)])
>>> check.refusals({"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": 5000}})
()
>>> (reason,) = check.refusals({"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": "5000"}})
>>> reason.rule, reason.message
('policyc:invalid-argument', 'argument `amount` of `pay` is the text `5000`, but the policy declares it an integer')
>>> reason.suggestion
'Send `amount` as the number 5000, without quotes.'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from policyc.compiler.plan import ArgumentSpec, Plan

from . import render
from .errors import INVALID_ARGUMENT
from .values import render_value
from .verdict import Reason

# what each declared type holds, as the messages say it
_DECLARED = {
    "symbol": "a text (a JSON string)",
    "number": "an integer",
    "unsigned": "an integer of at least 0",
    "float": "a number",
    "bool": "`true` or `false`",
    "list": "a list",
    "object": "an object",
    "any": "a value",
}
# how to send a value of each declared type
_SEND = {
    "symbol": "a JSON string, in quotes",
    "number": "an integer, without quotes",
    "unsigned": "an integer of at least 0, without quotes",
    "float": "a number, without quotes",
    "bool": "`true` or `false`, without quotes",
    "list": "a JSON list (`[...]`)",
    "object": "a JSON object (`{...}`)",
    "any": "any JSON value but null",
}
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SHORT = 40  # the longest text read as a number to suggest it


class Arguments:
    """The declared arguments of a plan, by tool, ready to check calls; and the conversions
    ``tool_arg`` applies to the values of declared numbers (:attr:`conversions`: an integral
    float of an integer argument is the integer, an integer of a float argument the float)."""

    def __init__(self, declared: Iterable[ArgumentSpec]) -> None:
        by_tool: dict[str, list[ArgumentSpec]] = {}
        for spec in declared:
            by_tool.setdefault(spec.tool, []).append(spec)
        self.by_tool = {tool: tuple(specs) for tool, specs in by_tool.items()}
        self.conversions: dict[tuple[str, str], str] = {
            (s.tool, s.argument): s.type
            for specs in self.by_tool.values()
            for s in specs
            if s.type in ("number", "unsigned", "float")
        }

    def refusals(self, event: Mapping[str, Any]) -> tuple[Reason, ...]:
        """A reason per declared argument of a (checked) tool call that does not match its
        declaration; none for a call that matches, and for any other event. Checking never
        raises: a call that cannot be checked is refused, saying so (fail closed)."""
        if event.get("kind") != "tool_call":
            return ()
        specs = self.by_tool.get(event.get("tool"))  # type: ignore[arg-type]
        if specs is None:
            return ()
        try:
            return self._refusals(specs, event.get("args") or {})
        except Exception as error:
            tool = specs[0].tool
            problem = f"the arguments of `{tool}` could not be checked"
            fix = "Send each argument as the JSON value the tool takes."
            return (
                Reason(
                    INVALID_ARGUMENT,
                    f"{problem}: {type(error).__name__}: {error}",  # the cause, for the host
                    fix,
                    "high",
                    templates=(f"the arguments of `{_escaped(tool)}` could not be checked", fix),
                ),
            )

    def _refusals(self, specs: tuple[ArgumentSpec, ...], args: Mapping[str, Any]) -> tuple[Reason, ...]:
        found = []
        for spec in specs:
            value = args.get(spec.argument)
            if value is None:
                if spec.required:
                    found.append(_missing(spec, spec.argument in args))
            elif not fits(spec.type, value):
                found.append(_mismatch(spec, value))
        return tuple(found)


def prepare(plan: Plan) -> Arguments | None:
    """The checks of a plan's declared arguments; None when it declares none."""
    return Arguments(plan.arguments) if plan.arguments else None


def fits(declared: str, value: Any) -> bool:
    """Whether a JSON value (not null) is one of the declared type.

    >>> fits("number", 3), fits("number", 3.0), fits("number", True), fits("float", 3), fits("unsigned", -1)
    (True, True, False, True, False)
    """
    kind = type(value)
    if declared == "any":
        return True
    if declared == "symbol":
        return kind is str
    if declared == "bool":
        return kind is bool
    if declared == "list":
        return kind is list
    if declared == "object":
        return kind is dict
    if kind is float:
        if declared == "float":
            return True
        return value.is_integer() and (declared == "number" or value >= 0)
    if kind is int:
        if declared == "float":
            return _float(value) is not None
        return declared == "number" or (declared == "unsigned" and value >= 0)
    return False


def _float(value: int) -> float | None:
    try:
        return float(value)
    except OverflowError:
        return None


def _escaped(name: str) -> str:
    """A name of the policy's put into a template (its braces are no placeholders)."""
    return name.replace("{", "{{").replace("}", "}}")


def _reason(spec: ArgumentSpec, message: str, suggestion: str, bindings: dict[str, Any]) -> Reason:
    bindings = {"tool": spec.tool, "argument": spec.argument, "declared": spec.type, **bindings}
    return Reason(
        INVALID_ARGUMENT,
        render.interpolate(message, bindings),
        render.interpolate(suggestion, bindings),
        "high",
        bindings=bindings,
    )


def _missing(spec: ArgumentSpec, null: bool) -> Reason:
    name, tool = _escaped(spec.argument), _escaped(spec.tool)
    what = "null" if null else "missing"
    message = f"argument `{name}` of `{tool}` is {what}, but the policy requires it ({_DECLARED[spec.type]})"
    suggestion = f"Call `{tool}` with `{name}`: {_SEND[spec.type]}."
    return _reason(spec, message, suggestion, {})


def _mismatch(spec: ArgumentSpec, value: Any) -> Reason:
    name, tool = _escaped(spec.argument), _escaped(spec.tool)
    kind = type(value)
    if kind is str:
        given = "the text {value}"
    elif kind is bool:
        given = f"the boolean `{json.dumps(value)}`"
    elif kind is int or kind is float:
        given = "the number {value}"
    elif kind is list:
        given = "a list"
    else:
        given = "an object"
    message = f"argument `{name}` of `{tool}` is {given}, but the policy declares it {_DECLARED[spec.type]}"
    bindings: dict[str, Any] = {"value": value}
    fixed = _as_declared(spec.type, value)
    if fixed is None:
        suggestion = f"Send `{name}` as {_SEND[spec.type]}."
    elif spec.type == "bool":
        suggestion = f"Send `{name}` as `{json.dumps(fixed)}`, without quotes."
    elif spec.type == "symbol":
        suggestion = f"Send `{name}` as the text {{fixed}}, in quotes."
        bindings["fixed"] = fixed
    else:
        suggestion = f"Send `{name}` as the number {{fixed}}, without quotes."
        bindings["fixed"] = fixed
    return _reason(spec, message, suggestion, bindings)


def _as_declared(declared: str, value: Any) -> Any:
    """The value of the declared type ``value`` stands for, when it is plain (a number or a
    boolean written as text, a number or a boolean where a text is declared); else None."""
    kind = type(value)
    if declared == "symbol":
        if kind is bool:
            return json.dumps(value)
        if kind is int or kind is float:
            return render_value(value)
        return None
    if kind is not str:
        return None
    text = value.strip()
    if declared == "bool":
        return {"true": True, "false": False}.get(text)
    if declared not in ("number", "unsigned", "float") or len(text) > _SHORT or not _NUMBER.fullmatch(text):
        return None
    try:
        number = Decimal(text)
    except InvalidOperation:  # (the pattern is JSON's number grammar: not reached)
        return None
    if declared == "float":
        read = float(number)
        return read if math.isfinite(read) else None
    if number != number.to_integral_value() or abs(number.adjusted()) > _SHORT:
        return None
    integer = int(number)
    return integer if declared == "number" or integer >= 0 else None
