"""``untyped-argument-comparison`` (PC310): a tool argument compared or computed with although
its type is not declared, so that the JSON type an agent happened to write decides the call.

Two cases, each reported only with a call the monitor decides otherwise than the comparison
reads (replayed, :mod:`.calls`):

* ``tool_arg(a, "amount") > 1000`` (or ``n = tool_arg(a, "amount"), n > 1000``, or arithmetic
  on it) where no `.arg` declares ``amount`` of the call's tool: ``tool_arg`` gives the value
  with its own JSON type, and a text compared with a number is an error, so every call that
  writes the amount as text (``"5"``, as models often do) is refused, whatever its amount. Fail
  closed, but the policy then decides by how the agent wrote the number, not by the number,
  and the refusal comes from an error rather than from a rule. Declaring the argument
  (``.arg pay.amount: number``) makes the comparison typed and the refusal of a text the
  monitor's own, named one; ``to_number(...)`` reads both ways.
* ``ToolArg(a, "amount", v), v > "1000"``: ``ToolArg`` holds every value as text, so this is an
  order of texts (``"999" > "1000"``, ``"10000" < "2000"``), whatever any declaration says.
  Reported when the monitor, given the amount as a JSON number, decides as the texts compare
  and not as the numbers do; the fix compares numbers (``to_number(v) > 1000``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.arguments import TOOL_ARG
from policyc.compiler.diagnostics import Diagnostic, Edit, Fix
from policyc.compiler.stages import Stratified

from .absent import declaration_fix
from .argument_uses import TOOL_ARG_RELATION, Body, Lit, Read, reads, verdict_bodies
from .calls import Decided, Replayer, call, show, witness
from .deadline import Deadline
from .firing import firing_args, required_values

VERDICTS = ("Allow", "Deny", "Escalate")
ORDER = ("<", "<=", ">", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%", "^")
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
ANY_TOOL = "tool"  # the tool of a witness for a rule that names none
COMPARE = {
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def untyped_comparisons(compilation: Stratified, replayer: Replayer, deadline: Deadline) -> list[Diagnostic]:
    """The ``untyped-argument-comparison`` findings, each with a replayed call."""
    found: list[Diagnostic] = []
    seen: set[tuple[int, str]] = set()
    for body in verdict_bodies(compilation, VERDICTS):
        tools = body.tools
        if len(tools) > 1:
            continue
        tool = next(iter(tools), ANY_TOOL)
        for read in reads(body):
            if deadline.passed():
                return found
            for lit in _typed_uses(compilation, read, tools):
                marker = (id(lit.literal), read.key)
                if marker not in seen:
                    finding = _untyped(compilation, replayer, body, read, lit, tool, bool(tools))
                    if finding is not None:
                        seen.add(marker)
                        found.append(finding)
            for lit, value, op, constant in _text_orders(read):
                marker = (id(lit.literal), read.key)
                if marker not in seen:
                    finding = _text_order(compilation, replayer, body, read, lit, tool, value, op, constant)
                    if finding is not None:
                        seen.add(marker)
                        found.append(finding)
    return found


# ------------------------------------------------------------------ tool_arg, undeclared


def _typed_uses(compilation: Stratified, read: Read, tools: frozenset[str]) -> Iterator[Lit]:
    """The literals comparing (``<``...) or computing with the value of ``tool_arg`` itself,
    where no declaration gives it a type."""
    declared = [compilation.symbols.arguments.get((tool, read.key)) for tool in tools]
    if tools and all(a is not None and a.value_type is not None for a in declared):
        return
    aliases = set()
    for lit in read.body.literals:
        literal = lit.literal
        if isinstance(literal, ast.Comparison) and literal.op == "=":
            for target, source in ((literal.left, literal.right), (literal.right, literal.left)):
                if isinstance(target, ast.Var) and _is_read(source, read):
                    aliases.add(target.name)

    def direct(term: ast.Term) -> bool:
        return _is_read(term, read) or (isinstance(term, ast.Var) and term.name in aliases)

    for test in read.tests:
        literal = test.lit.literal
        if (
            isinstance(literal, ast.Comparison)
            and literal.op in ORDER
            and (direct(literal.left) or direct(literal.right))
        ):
            yield test.lit
        elif any(
            isinstance(t, ast.BinOp) and t.op in ARITHMETIC and (direct(t.left) or direct(t.right))
            for term in ast.literal_terms(literal)
            for t in ast.walk_term(term, into_aggregates=False)
        ):
            yield test.lit
    for lit in read.readers:  # an assignment computing with it: `n = tool_arg(a, "k") - 2`
        literal = lit.literal
        if (
            isinstance(literal, ast.Comparison)
            and literal.op == "="
            and any(
                isinstance(t, ast.BinOp) and t.op in ARITHMETIC and (direct(t.left) or direct(t.right))
                for term in (literal.left, literal.right)
                for t in ast.walk_term(term, into_aggregates=False)
            )
        ):
            yield lit


def _is_read(term: ast.Term, read: Read) -> bool:
    if not (isinstance(term, ast.Call) and term.name == TOOL_ARG and len(term.args) == 2):
        return False
    call_var, key = term.args
    return (
        isinstance(call_var, ast.Var)
        and call_var.name == read.body.action
        and isinstance(key, ast.String)
        and key.value == read.key
    )


def _untyped(
    compilation: Stratified,
    replayer: Replayer,
    body: Body,
    read: Read,
    lit: Lit,
    tool: str,
    named: bool,
) -> Diagnostic | None:
    given = _others(compilation, replayer, body, tool, read.key)
    best: tuple[Any, Decided, Decided] | None = None
    for n in _numbers(lit.literal):
        as_number = replayer.decide(call(tool, {**given, read.key: n}))
        if as_number.verdict not in ("allow", "escalate"):
            continue  # refused either way: only the reason would differ
        as_text = replayer.decide(call(tool, {**given, read.key: str(n)}))
        if as_text.verdict == "refuse" and (best is None or (as_number.allowed and not best[1].allowed)):
            best = (n, as_number, as_text)
    if best is None:
        return None
    n, as_number, as_text = best
    kind = "float" if isinstance(n, float) else "number"
    declaration = f".arg {tool}.{read.key}: {kind}"
    argument = compilation.symbols.arguments.get((tool, read.key))
    fix = declaration_fix(compilation, lit.origin.module, argument, declaration) if named else None
    if named and argument is None:
        help = (
            f"`tool_arg` gives `{read.key}` with the JSON type the agent wrote, and a text compared "
            f"with a number is an error that refuses the call: declare its type (`{declaration}`), "
            f"so that the comparison is typed and the monitor refuses a text saying why, or read "
            f'both ways with `to_number(tool_arg(a, "{read.key}"))`'
        )
    else:
        help = (
            f"`tool_arg` gives `{read.key}` with the JSON type the agent wrote, and a text compared "
            f"with a number is an error that refuses the call: write "
            f'`to_number(tool_arg(a, "{read.key}"))`, or fix the call\'s tool in the rule and declare '
            f"the argument's type (`.arg TOOL.{read.key}: {kind}`)"
        )
    event = call(tool, {**given, read.key: str(n)})
    return codes.UNTYPED_ARGUMENT_COMPARISON(
        lit.literal.span,
        f"`{read.key}` has no declared type: a call that writes it as text is refused, whatever its value",
        help=help,
        fix=fix,
        strength="witnessed",
        uninterpreted=replayer.hosts,
        witness=witness(
            [event],
            as_text,
            f"replayed, the monitor refuses this call (an error: the text {show(str(n))} where the "
            f'rule needs a number); with `"{read.key}": {show(n)}` its verdict is {as_number.verdict}',
        ),
    )


def _others(compilation: Stratified, replayer: Replayer, body: Body, tool: str, key: str) -> dict[str, Any]:
    """The other arguments of a call the rule fires for (or only the required ones)."""
    firing = firing_args(compilation, replayer, body, tool)
    if firing is None:
        return required_values(compilation, tool, key)
    return {k: v for k, v in firing.items() if k != key}


def _numbers(literal: ast.Literal) -> Iterator[int | float]:
    seen: set[int | float] = set()
    for term in ast.literal_terms(literal):
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Integer | ast.Float):
                for n in (t.value - 1, t.value, t.value + 1):
                    if n not in seen:
                        seen.add(n)
                        yield n
    for n in (0, 1):
        if n not in seen:
            yield n


# ------------------------------------------------------------------ ToolArg, as texts


def _text_orders(read: Read) -> Iterator[tuple[Lit, ast.Var, str, ast.String]]:
    """The comparisons ``v OP "number"`` of a value ``ToolArg`` gives (its text), written
    value first (``"1000" < v`` is ``v > "1000"``)."""
    texts = {
        lit.literal.args[2].name
        for lit in read.readers
        if isinstance(lit.literal, ast.Atom)
        and lit.literal.name == TOOL_ARG_RELATION
        and isinstance(lit.literal.args[2], ast.Var)
    }
    for test in read.tests:
        literal = test.lit.literal
        if not isinstance(literal, ast.Comparison) or literal.op not in ORDER:
            continue
        for value, constant, op in (
            (literal.left, literal.right, literal.op),
            (literal.right, literal.left, FLIP[literal.op]),
        ):
            if (
                isinstance(value, ast.Var)
                and value.name in texts
                and isinstance(constant, ast.String)
                and NUMBER.fullmatch(constant.value)
            ):
                yield test.lit, value, op, constant


def _text_order(
    compilation: Stratified,
    replayer: Replayer,
    body: Body,
    read: Read,
    lit: Lit,
    tool: str,
    value: ast.Var,
    op: str,
    constant: ast.String,
) -> Diagnostic | None:
    bound = float(constant.value) if "." in constant.value else int(constant.value)
    given = _others(compilation, replayer, body, tool, read.key)
    rule_id = replayer.rule_id(body.verdict.rule)
    allow = body.verdict.rule.head.name == "Allow"
    found: list[tuple[bool, int | float, Decided]] = []
    for n in _disagreeing(bound, constant.value, op):
        as_text = COMPARE[op](str(n), constant.value)
        decided = replayer.decide(call(tool, {**given, read.key: n}))
        fired = decided.allowed if allow else rule_id in decided.rules
        if decided.verdict != "refuse" and fired == as_text:
            escape = as_text == allow  # `Allow` fires, or `Deny` does not, against the numbers
            found.append((escape, n, decided))
    if not found:
        return None
    found.sort(key=lambda item: not item[0])
    escape, n, decided = found[0]
    numeric = COMPARE[op](n, bound)
    fix = Fix(
        f"compare numbers: `to_number({value.name}) {op} {constant.value}`",
        (Edit(value.span, f"to_number({value.name})"), Edit(constant.span, constant.value)),
        safe=False,
    )
    relation = op if numeric else _negated(op)
    return codes.UNTYPED_ARGUMENT_COMPARISON(
        lit.literal.span,
        f"`{value.name}` is the text of `{read.key}`, so this compares texts, not numbers "
        f'(`"{n}" {op} "{constant.value}"` is {str(not numeric).lower()})',
        help=f"`ToolArg` holds every argument as text, and texts compare character by character: "
        f"compare numbers (`to_number({value.name}) {op} {constant.value}`), or use "
        f'`tool_arg(a, "{read.key}")` with a declared type (`.arg {tool}.{read.key}: number`)',
        fix=fix,
        strength="witnessed",
        uninterpreted=replayer.hosts,
        witness=witness(
            [call(tool, {**given, read.key: n})],
            decided,
            f"replayed, the monitor's verdict on this call is {decided.verdict}, although "
            f"{n} {relation} {constant.value} as numbers",
        ),
    )


def _negated(op: str) -> str:
    return {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[op]


def _disagreeing(bound: int | float, text: str, op: str) -> Iterator[int | float]:
    """Numbers whose decimal text compares with ``text`` otherwise than they compare with
    ``bound``: those nearby with fewer or more digits."""
    base = int(bound)
    digits = len(str(abs(base)))
    tried: list[int | float] = [
        base + 1,
        base - 1,
        base * 10,
        base * 10 + 1,
        base // 10,
        10**digits,
        10**digits + 1,
        10 ** (digits - 1) - 1 if digits > 1 else 0,
        10 ** (digits - 1) + 1,
        9 * 10 ** (digits - 1) if digits > 1 else 9,
        2 * 10**digits,
        10 ** (digits + 1),
    ]
    seen: set[int | float] = set()
    for n in tried:
        if n in seen or n < 0:
            continue
        seen.add(n)
        if COMPARE[op](str(n), text) != COMPARE[op](n, bound):
            yield n
