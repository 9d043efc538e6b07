"""``lenient-conversion`` (PC311): agent text read by a lenient conversion where a `Deny` or
`Escalate` decides.

``leading_number`` and ``leading_float`` (:data:`~policyc.stdlib.builtins.LENIENT_CONVERSIONS`)
read the number at the start of a text, as Soufflé's conversions do: ``"1e9"`` reads as 1,
``"1_000_000_000"`` as 1, while the tool that receives the text reads a billion. Reported for
a conversion of agent-controlled text (a tool argument: ``tool_arg``, ``ToolArg``; an event's
text: ``text_of``, ``Text``) in a `Deny` or `Escalate` rule or a relation it reads positively,
when the monitor allows a call with such a text although it refuses the call with the number
the text means (both replayed). The fix reads the whole text (``to_number``, ``to_float``),
which refuses a call whose text is not one number.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.diagnostics import Diagnostic, Edit, Fix
from policyc.compiler.stages import Stratified
from policyc.stdlib.builtins import LENIENT_CONVERSIONS

from .argument_uses import TOOL_ARG_RELATION, Body, Lit, verdict_bodies
from .calls import Replayer, call, show, witness
from .deadline import Deadline
from .firing import fires, firing_args, required_values

STRICT = {"leading_number": "to_number", "leading_float": "to_float"}
TEXT_RELATIONS = {TOOL_ARG_RELATION: 2, "Text": 1, "ToolArgItem": 3}  # the position holding text
TEXT_CALLS = ("tool_arg", "text_of")
SPELLINGS = ("1e9", "1_000_000_000", "1,000,000,000", "9e9", "-1e9")  # texts leading digits misread
ANY_TOOL = "tool"

# where a text comes from: ("arg", key) an argument of the action; ("text", "action") the
# action's own text; ("text", "earlier") an earlier event's
Source = tuple[str, str]


def lenient_conversions(compilation: Stratified, replayer: Replayer, deadline: Deadline) -> list[Diagnostic]:
    """The ``lenient-conversion`` findings, each with a replayed call."""
    found: list[Diagnostic] = []
    seen: set[int] = set()
    for body in verdict_bodies(compilation):
        if deadline.passed():
            break
        tools = body.tools
        if len(tools) > 1:
            continue
        for lit, conversion, source in _conversions(body):
            if id(conversion) in seen or compilation.program.is_library(lit.origin.module.path):
                continue
            finding = _finding(
                compilation, replayer, body, lit, conversion, source, next(iter(tools), ANY_TOOL)
            )
            if finding is not None:
                seen.add(id(conversion))
                found.append(finding)
    return found


def _conversions(body: Body) -> Iterator[tuple[Lit, ast.Call, Source]]:
    """Each lenient conversion of agent text in the body, with where its text comes from."""
    sources: dict[str, Source] = {}
    for lit in body.literals:
        literal = lit.literal
        if isinstance(literal, ast.Atom) and literal.name in TEXT_RELATIONS:
            position = TEXT_RELATIONS[literal.name]
            held = literal.args[position] if len(literal.args) > position else None
            if isinstance(held, ast.Var):
                sources[held.name] = _source(body, literal.name, literal.args)
    changed = True
    while changed:  # `t = tool_arg(a, "k")`, `u = lower(t)`
        changed = False
        for lit in body.literals:
            literal = lit.literal
            if isinstance(literal, ast.Comparison) and literal.op == "=":
                for target, term in ((literal.left, literal.right), (literal.right, literal.left)):
                    if isinstance(target, ast.Var) and target.name not in sources:
                        source = _term_source(body, term, sources)
                        if source is not None:
                            sources[target.name] = source
                            changed = True
    for lit in body.literals:
        for term in ast.literal_terms(lit.literal):
            for t in ast.walk_term(term, into_aggregates=False):
                if isinstance(t, ast.Call) and t.name in LENIENT_CONVERSIONS and t.args:
                    source = _term_source(body, t.args[0], sources)
                    if source is not None:
                        yield lit, t, source


def _source(body: Body, relation: str, args: tuple[ast.Term, ...]) -> Source:
    event = args[0]
    of_action = isinstance(event, ast.Var) and event.name == body.action
    if relation == "Text":
        return ("text", "action" if of_action else "earlier")
    key = args[1]
    if of_action and isinstance(key, ast.String) and relation == TOOL_ARG_RELATION:
        return ("arg", key.value)
    return ("other", "")


def _term_source(body: Body, term: ast.Term, sources: dict[str, Source]) -> Source | None:
    for t in ast.walk_term(term, into_aggregates=False):
        if isinstance(t, ast.Var) and t.name in sources:
            return sources[t.name]
        if isinstance(t, ast.Call) and t.name in TEXT_CALLS and t.args:
            of_action = isinstance(t.args[0], ast.Var) and t.args[0].name == body.action
            if t.name == "text_of":
                return ("text", "action" if of_action else "earlier")
            key = t.args[1] if len(t.args) == 2 else None
            if of_action and isinstance(key, ast.String):
                return ("arg", key.value)
            return ("other", "")
    return None


def _finding(
    compilation: Stratified,
    replayer: Replayer,
    body: Body,
    lit: Lit,
    conversion: ast.Call,
    source: Source,
    tool: str,
) -> Diagnostic | None:
    firing = firing_args(compilation, replayer, body, tool)
    given = firing if firing is not None else required_values(compilation, tool)
    for text, meant in _spellings(lit):
        slipped = _events(given, source, tool, text)
        if slipped is None:
            return None  # a text the search cannot place in a call
        decided = replayer.decide(slipped[-1], slipped[:-1])
        if not decided.allowed:
            continue
        stopped = next(
            (
                form
                for form in _forms(source, meant)
                if (events := _events(given, source, tool, form)) is not None
                and fires(replayer, body, replayer.decide(events[-1], events[:-1]))
            ),
            None,
        )
        if stopped is None:
            continue
        strict = STRICT.get(conversion.name, "to_number")
        where = f'`"{source[1]}": {show(stopped)}`' if source[0] == "arg" else f"the text {show(stopped)}"
        return codes.LENIENT_CONVERSION(
            conversion.span,
            f"`{conversion.name}` reads only the number at the start of agent text: "
            f"{show(text)} reads as {_leading(conversion.name, text)}",
            help=f"the tool reads the whole text ({show(text)} is {meant}): read it whole with "
            f"`{strict}`, which refuses a call whose text is not one number",
            fix=Fix(
                f"read the whole text with `{strict}`", (Edit(conversion.name_span, strict),), safe=False
            ),
            strength="witnessed",
            uninterpreted=replayer.hosts,
            witness=witness(
                slipped,
                decided,
                f"replayed, the monitor allows this call; with {where} this rule "
                f"{'denies' if body.verdict.rule.head.name == 'Deny' else 'escalates'} it",
            ),
        )
    return None


def _forms(source: Source, meant: int) -> tuple[Any, ...]:
    """The number a text means, as an agent would write it: a JSON number or its text."""
    return (meant, str(meant)) if source[0] == "arg" else (str(meant),)


def _spellings(lit: Lit) -> Iterator[tuple[str, int]]:
    """Texts whose leading digits say less than the whole text, and the number each means."""
    numbers: list[int] = []
    for term in ast.literal_terms(lit.literal):
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Integer) and t.value not in numbers:
                numbers.append(t.value)
    for text in SPELLINGS:
        yield text, int(float(text.replace("_", "").replace(",", "")))
    for n in numbers:
        if n > 0:
            yield f"{n}e9", n * 10**9


def _leading(name: str, text: str) -> Any:
    from policyc.stdlib.builtins import leading_float, leading_number

    try:
        return (leading_float if name == "leading_float" else leading_number)(text)
    except ValueError:
        return "a smaller number"


def _events(given: dict[str, Any], source: Source, tool: str, value: Any) -> list[dict[str, Any]] | None:
    """The events of a call whose text (argument, own text or an earlier message's) is ``value``."""
    kind, where = source
    if kind == "arg":
        return [call(tool, {**given, where: value})]
    if kind == "text" and where == "action":
        return [call(tool, given, text=str(value))]
    if kind == "text":
        return [{"id": "m1", "kind": "user_message", "text": str(value)}, call(tool, given)]
    return None
