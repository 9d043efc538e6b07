"""``missing-argument`` (PC309): a `Deny` or `Escalate` rule an agent slips past by leaving an
argument out.

A rule whose test of an argument holds for all but some values (``!contains("@corp.example",
to)``, ``to != "x"``, ``!Trusted(to)``, ``n > 1000``: see :mod:`.argument_uses`) is meant to
stop every call but those that pass it; a call without the argument has no value to test, so
the rule does not fire for it. Reported when the monitor, replaying it, allows a call of the
rule's tool without the argument although it refuses the same call with a value that fails the
test: no declaration makes the argument required, no other rule refuses the call without it,
and no `.default deny` keeps it out for want of an `Allow`. A positive test (``tool_arg(a,
"force") = "true"``, ``Blocked(to)``, ``contains("evil", url)``) is not reported: a call
without the argument is rightly not stopped by it.

Where leaving the argument out is refused, a call giving it as a list may still slip past an
exclusive test of its text (``!contains("@corp.example", to)`` holds of ``["x@evil.example",
"y@corp.example"]``'s JSON text): reported when the monitor allows such a call and the
argument is not declared of a type that excludes lists.
"""

from __future__ import annotations

import re
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.arguments import Argument
from policyc.compiler.diagnostics import Diagnostic, Edit, Fix, Related
from policyc.compiler.stages import Stratified

from .argument_uses import Body, Read, reads, verdict_bodies
from .calls import Replayer, call, rule_span, show, witness
from .deadline import Deadline
from .firing import firing_args, values_to_try


def missing_arguments(compilation: Stratified, replayer: Replayer, deadline: Deadline) -> list[Diagnostic]:
    """The ``missing-argument`` findings of a policy, each with a replayed call."""
    declared = compilation.symbols.arguments
    found: list[Diagnostic] = []
    seen: set[tuple[int, str, str]] = set()
    for body in verdict_bodies(compilation):
        tools = body.tools
        if len(tools) != 1:
            continue
        (tool,) = tools
        for read in reads(body):
            if not read.escapes_by_absence or deadline.passed():
                continue
            origin = read.origin(compilation)
            key = (id(origin.rule), tool, read.key)
            if key in seen:
                continue
            argument = declared.get((tool, read.key))
            if argument is not None and argument.required and argument.type != "any":
                continue  # the monitor refuses a call without it, or with a value of another type
            finding = _finding(compilation, replayer, body, read, tool, argument)
            if finding is not None:
                seen.add(key)
                found.append(finding)
    return found


def _finding(
    compilation: Stratified,
    replayer: Replayer,
    body: Body,
    read: Read,
    tool: str,
    argument: Argument | None,
) -> Diagnostic | None:
    firing = firing_args(compilation, replayer, body, tool)
    if firing is None:
        return None  # no call the rule stops was found: nothing to compare with
    value = firing[read.key]
    others = {k: v for k, v in firing.items() if k != read.key}
    origin = read.origin(compilation)
    verdict = body.verdict.rule
    related = (
        (Related(rule_span(verdict), f"the `{verdict.head.name}` rule it decides through"),)
        if origin.rule is not verdict
        else ()
    )
    what = "denies" if verdict.head.name == "Deny" else "escalates"
    stopped = f'with `"{read.key}": {show(value)}` this rule {what} it'
    declaration = f".arg {tool}.{read.key}: {_type_of(read, value)} required"
    refusing = f'{verdict.head.name}(a) :- ToolCall(a, "{tool}"), !ToolArg(a, "{read.key}", _).'
    fix = declaration_fix(compilation, origin.module, argument, declaration)
    if argument is None or not argument.required:
        event = call(tool, others)
        decided = replayer.decide(event)
        if decided.allowed:
            return codes.MISSING_ARGUMENT(
                rule_span(origin.rule),
                f"a `{tool}` call without `{read.key}` escapes this rule: the monitor allows it",
                related=related,
                help=f"the rule's test of `{read.key}` holds for every value but some, and a call that "
                f"leaves `{read.key}` out (or names it otherwise) has no value to test: declare it "
                f"required (`{declaration}`), so that the monitor refuses a call without it, or "
                f"refuse such a call in a rule of its own (`{refusing}`)",
                fix=fix,
                strength="witnessed",
                uninterpreted=replayer.hosts,
                witness=witness([event], decided, f"replayed, the monitor allows this call; {stopped}"),
            )
    if argument is not None and argument.type != "any":
        return None
    for passing in values_to_try(read):
        if not isinstance(passing, str) or passing == value:
            continue
        if not replayer.decide(call(tool, {**others, read.key: passing})).allowed:
            continue
        event = call(tool, {**others, read.key: [str(value), passing]})
        decided = replayer.decide(event)
        if decided.allowed:
            return codes.MISSING_ARGUMENT(
                rule_span(origin.rule),
                f"a `{tool}` call giving `{read.key}` as a list escapes this rule: the monitor allows it",
                related=related,
                help=f"a list is tested as its JSON text, which passes the rule's test of `{read.key}` "
                f"when one element does: declare the argument's type (`{declaration}`), so that the "
                "monitor refuses a list",
                fix=fix,
                strength="witnessed",
                uninterpreted=replayer.hosts,
                witness=witness([event], decided, f"replayed, the monitor allows this call; {stopped}"),
            )
        break
    return None


def _type_of(read: Read, value: Any) -> str:
    """The type to declare: a number where the tests compare with numbers (or with the text of
    one, in order), else the type of the value the rule was stopped for."""
    for test in read.tests:
        literal = test.lit.literal
        if isinstance(literal, ast.Comparison) and literal.op not in ("=", "!="):
            for t in (literal.left, literal.right):
                if isinstance(t, ast.Float):
                    return "float"
                if isinstance(t, ast.Integer) or (isinstance(t, ast.String) and NUMBER.fullmatch(t.value)):
                    return "number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "symbol"
    return "number" if isinstance(value, int) else "float"


NUMBER = re.compile(r"-?(0|[1-9][0-9]*)")


def declaration_fix(
    compilation: Stratified, module: ast.Module, argument: Argument | None, declaration: str
) -> Fix | None:
    """Declare the argument: ``declaration`` inserted after the file's imports and argument
    declarations, or, for an argument declared but not required, ``required`` added to its
    declaration. Unsafe: the monitor refuses the calls that do not match it."""
    source = compilation.program.source(module.path)
    if source is None:
        return None
    if argument is not None:
        if argument.required or not declaration.endswith(" required"):
            return None
        if argument.span.file != module.path:
            return None
        end = argument.span.end
        return Fix(
            f"declare `{argument.name}` required",
            (Edit(source.span(end, end), " required"),),
            safe=False,
        )
    imports = [s.span.end for s in module.statements if isinstance(s, ast.Import | ast.ArgDecl)]
    if imports:
        at = max(imports)
        line_end = source.text.find("\n", at)
        at = len(source.text) if line_end < 0 else line_end
        text = "\n" + declaration
    else:
        at, text = 0, declaration + "\n"
    return Fix(f"insert `{declaration}`", (Edit(source.span(at, at), text),), safe=False)
