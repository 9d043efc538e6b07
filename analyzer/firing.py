"""Calls that make a rule fire, found by trying values of the arguments it reads.

The findings of :mod:`.slips` compare a call a rule stops with one that slips past it; the
first is found here, by the monitor itself: values around the constants the rule's tests
compare with (and fresh texts) are tried for each argument the rule reads, together, until a
call makes the rule deny (or escalate, or for an `Allow` rule, allow) it. Required arguments
the rule does not read get a value of their declared type, so that the monitor does not refuse
the call before any rule runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice, product
from typing import Any

from policyc.compiler import ast
from policyc.compiler.diagnostics import Scenario
from policyc.compiler.stages import Stratified

from .argument_uses import Body, Read, reads
from .calls import Decided, Replayer, call

FRESH = ("x", "policyc-unlisted@example.invalid", "", "0")
PER_ARGUMENT = 8  # values tried per argument
CALLS = 120  # calls tried per rule at most

SAMPLE: dict[str, Any] = {
    "symbol": "x",
    "number": 0,
    "unsigned": 0,
    "float": 0.0,
    "bool": True,
    "list": [],
    "object": {},
    "any": "x",
}
"""A value of each declared type, for the required arguments a rule does not read."""


def fires(replayer: Replayer, body: Body, decided: Decided) -> bool:
    """Whether the body's verdict rule decided the call: denied or escalated it (an `Allow`
    rule: the call is allowed)."""
    if body.verdict.rule.head.name == "Allow":
        return decided.allowed
    return not decided.allowed and replayer.rule_id(body.verdict.rule) in decided.rules


def firing_args(compilation: Stratified, replayer: Replayer, body: Body, tool: str) -> dict[str, Any] | None:
    """The arguments of a call of ``tool`` the body's rule fires for, or None when none of the
    values tried makes it fire."""
    found = reads(body)
    keys = [read.key for read in found]
    choices = [list(islice(values_to_try(read), PER_ARGUMENT)) for read in found]
    given = required_values(compilation, tool, *keys)
    for values in islice(product(*choices), CALLS):
        args = {**given, **dict(zip(keys, values, strict=True))}
        if fires(replayer, body, replayer.decide(call(tool, args))):
            return args
    return None


def values_to_try(read: Read) -> Iterator[Any]:
    """Values of the argument to try: around the numbers its tests compare with (as JSON
    numbers, then as texts), the texts they name changed and as they are, fresh texts."""
    numbers: list[int | float] = []
    texts: list[str] = []
    for test in read.tests:
        for term in ast.literal_terms(test.lit.literal):
            for t in ast.walk_term(term, into_aggregates=False):
                if isinstance(t, ast.Integer):
                    numbers.extend((t.value + 1, t.value - 1, t.value))
                elif isinstance(t, ast.Float):
                    numbers.extend((t.value + 0.5, t.value - 0.5, t.value))
                elif isinstance(t, ast.String):
                    texts.extend((t.value + "x", "x" + t.value, t.value))
    seen: set[Any] = set()
    for value in (*numbers, *(str(n) for n in numbers), *texts, *FRESH):
        marker = (type(value), value)
        if marker not in seen:
            seen.add(marker)
            yield value


def required_values(compilation: Stratified, tool: str, *but: str) -> dict[str, Any]:
    """A value of its declared type for each required argument of ``tool`` but ``but`` (a call
    without them is refused before any rule runs)."""
    values: dict[str, Any] = {}
    for (name, key), argument in compilation.symbols.arguments.items():
        if name == tool and key not in but and argument.required:
            values[key] = SAMPLE[argument.type]
    return values


def unfired_call(
    compilation: Stratified, rule: ast.Rule, replayer: Callable[[], Replayer | None]
) -> Scenario | None:
    """For a `Deny` or `Escalate` rule a key keeps from ever firing (one call, two tools), a
    call of a tool it names that a monitor of the policy allows, replayed: what the author
    meant it to stop. ``None`` when the rule names no tool, or every call of one is stopped
    (by another rule, or refused for its arguments). ``replayer()``: the monitor of the policy
    (None when it cannot open the policy)."""
    from policyc.compiler.symbols import is_verdict

    from .calls import witness

    head = rule.head
    if head.name not in ("Deny", "Escalate") or not is_verdict(head.name, len(head.args)):
        return None
    tools = [
        lit.args[1].value
        for lit in rule.body
        if isinstance(lit, ast.Atom)
        and lit.name == "ToolCall"
        and len(lit.args) == 2
        and isinstance(lit.args[1], ast.String)
    ]
    if not tools:
        return None
    monitor = replayer()
    if monitor is None:  # a policy the monitor cannot open here has no witness
        return None
    for tool in dict.fromkeys(tools):
        event = call(tool, required_values(compilation, tool))
        decided = monitor.decide(event)
        if decided.allowed:
            note = f"replayed, the monitor allows this `{tool}` call: the rule never stops one"
            return witness([event], decided, note)
    return None
