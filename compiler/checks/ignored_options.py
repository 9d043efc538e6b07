"""``ignored-option``: what a Soufflé program tells Soufflé, read and set aside.

``.input edge(IO=file, filename="edge.csv")`` tells Soufflé where to read a relation's facts;
policyc takes facts from the session (events, given facts) or from ``policyc eval --facts``,
and prints relations with ``eval``. ``.plan 1:(2,1)`` orders a rule's atoms; policyc's planner
orders them itself. ``.pragma "key" "value"`` sets one of Soufflé's command-line options. Each
is parsed and kept for ``policyc fmt``, and reported once, with a fix that removes it; so are
the planner's hints ``magic``, ``no_magic`` and ``no_inline`` of a ``.decl``, and ``stateful``
after a ``.functor``.

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source('.decl e(x: number)\\n.input e(IO=file, filename="e.csv")')
...  if d.name == "ignored-option"]
['the I/O options of `e` are ignored: policyc reads facts from the session or `eval --facts`']
"""

from __future__ import annotations

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix, removal
from ..source import SourceFile
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    for module, statement in context.program.statements():
        source = context.program.source(module.path)
        if source is None or context.program.is_library(module.path):
            continue
        for word, why, hint in _ignored_words(statement):
            diagnostics.append(
                codes.IGNORED_OPTION(
                    word.span, f"`{word.name}` is ignored: {why}", help=hint, fix=_word_removal(source, word)
                )
            )
        if isinstance(statement, ast.Input | ast.Output):
            diagnostics.extend(_io_options(statement, source))
        elif isinstance(statement, ast.QueryPlan):
            diagnostics.append(
                codes.IGNORED_OPTION(
                    statement.span,
                    "`.plan` is ignored: policyc's planner orders a rule's atoms itself",
                    help="`policyc check --show plan` shows the order it chose for each rule",
                    fix=removal(source, statement.span, "remove the `.plan`"),
                )
            )
        elif isinstance(statement, ast.Pragma):
            diagnostics.append(
                codes.IGNORED_OPTION(
                    statement.span,
                    f"`.pragma {source.text[statement.key.span.start : statement.key.span.end]}` is "
                    "ignored: it sets one of Soufflé's command-line options",
                    help="policyc's options are given to its commands (`policyc eval --help`)",
                    fix=removal(source, statement.span, "remove the `.pragma`"),
                )
            )
    return diagnostics


def _ignored_words(statement: ast.Statement) -> list[tuple[ast.Ident, str, str]]:
    """The qualifiers of a statement that policyc reads and sets aside: each, why, and what to do."""
    if isinstance(statement, ast.Decl):
        found = []
        if statement.storage is not None:
            found.append(
                (
                    statement.storage,
                    "policyc keeps every relation in hash tables and indexes of its own choosing",
                    "Soufflé's data structure qualifiers tune Soufflé's C++ code; remove it",
                )
            )
        planned = "policyc's planner chooses which relations are computed on demand and which are inlined"
        found += [
            (hint, planned, "`policyc check --show plan` shows what it chose") for hint in statement.hints
        ]
        return found
    if isinstance(statement, ast.Functor) and statement.stateful is not None:
        return [
            (
                statement.stateful,
                "a policyc functor is a Python function given the values themselves, with no symbol "
                "or record table to look them up in",
                "implement the functor in Python (docs/extensions.md); remove `stateful`",
            )
        ]
    return []


def _word_removal(source: SourceFile, word: ast.Ident) -> Fix | None:
    """The fix removing a qualifier and the space before it (None when no space precedes it)."""
    if source.text[word.span.start - 1] != " ":
        return None
    return Fix(f"remove `{word.name}`", (Edit(source.span(word.span.start - 1, word.span.end), ""),))


def _io_options(statement: ast.Input | ast.Output, source: SourceFile) -> list[Diagnostic]:
    if isinstance(statement, ast.Input):
        what = "reads facts from the session or `eval --facts`"
        hint = (
            "a session's facts come from its events and given facts; `policyc eval --facts` reads "
            "a JSON file or a folder of `Rel.facts` files"
        )
    else:
        what = "prints relations with `eval`"
        hint = "`policyc eval --query REL` prints one relation, `--format json` as JSON"
    found = []
    for name, options in zip(statement.names, statement.options, strict=False):
        if not options:
            continue
        # the span from the end of the name through the closing parenthesis
        close = source.text.find(")", options[-1].span.end)
        if close < 0:
            continue
        span = source.span(name.span.end, close + 1)
        found.append(
            codes.IGNORED_OPTION(
                span,
                f"the I/O options of `{name.name}` are ignored: policyc {what}",
                help=hint,
                fix=Fix("remove the I/O options", (Edit(span, ""),)),
            )
        )
    return found
