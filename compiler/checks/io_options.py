"""``ignored-option``: Soufflé's I/O options, read and set aside.

``.input edge(IO=file, filename="edge.csv")`` tells Soufflé where to read a relation's facts;
policyc takes facts from the session (events, given facts) or from ``policyc eval --facts``,
and prints relations with ``eval``, so it parses the options, keeps them for ``policyc fmt``
and reports each list of them once, with a fix that removes it.

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source('.decl e(x: number)\\n.input e(IO=file, filename="e.csv")')
...  if d.name == "ignored-option"]
['the I/O options of `e` are ignored: policyc reads facts from the session or `eval --facts`']
"""

from __future__ import annotations

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    for module, statement in context.program.statements():
        if not isinstance(statement, ast.Input | ast.Output) or context.program.is_library(module.path):
            continue
        source = context.program.source(module.path)
        if source is None:
            continue
        if isinstance(statement, ast.Input):
            what = "reads facts from the session or `eval --facts`"
            hint = "a session's facts come from its events and given facts; `policyc eval --facts` reads a JSON file or a folder of `Rel.facts` files"
        else:
            what = "prints relations with `eval`"
            hint = "`policyc eval --query REL` prints one relation, `--format json` as JSON"
        for name, options in zip(statement.names, statement.options, strict=False):
            if not options:
                continue
            # the span from the end of the name through the closing parenthesis
            close = source.text.find(")", options[-1].span.end)
            if close < 0:
                continue
            span = source.span(name.span.end, close + 1)
            diagnostics.append(
                codes.IGNORED_OPTION(
                    span,
                    f"the I/O options of `{name.name}` are ignored: policyc {what}",
                    help=hint,
                    fix=Fix("remove the I/O options", (Edit(span, ""),)),
                )
            )
    return diagnostics
