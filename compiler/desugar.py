"""Written forms of several rules, as the plain rules they stand for.

A rule with several heads, or with ``;`` in its body, is a :class:`~.ast.Compound` as
parsed. It means one plain rule per head and per alternative of its body (the body in
disjunctive normal form), as in Soufflé:

>>> from .source import SourceFile
>>> from .parser import parse
>>> module, _ = parse(SourceFile("p.dl", "A(x), B(x) :- (c(x) ; d(x)), e(x)."), surface=True)
>>> [(r.head.name, [lit.name for lit in r.body]) for r in expand(module.statements[0])]
[('A', ['c', 'e']), ('B', ['c', 'e']), ('A', ['d', 'e']), ('B', ['d', 'e'])]

Every rule keeps the spans of its literals and has the compound's span, so that a diagnostic
about one of them points at the text that was written; every rule has the compound's
annotations (one ``@id`` names the rules of one statement, and a deny reason gives it
whichever alternative denied).
"""

from __future__ import annotations

from . import ast

MAX_RULES = 256  # the plain rules one written rule may stand for


def alternatives(
    body: tuple[tuple[ast.Literal | ast.Disjunction, ...], ...],
) -> list[tuple[ast.Literal, ...]]:
    """The conjunctions of plain literals a written body holds (its disjunctive normal form),
    in the order written; stops growing past :data:`MAX_RULES`."""
    found: list[tuple[ast.Literal, ...]] = []
    for conjunction in body:
        partial: list[tuple[ast.Literal, ...]] = [()]
        for item in conjunction:
            if isinstance(item, ast.Disjunction):
                options = alternatives(item.alternatives)
                partial = [p + o for p in partial for o in options][: MAX_RULES + 1]
            else:
                partial = [(*p, item) for p in partial]
        found.extend(partial)
        if len(found) > MAX_RULES:
            break
    return found[: MAX_RULES + 1]


def expand(compound: ast.Compound) -> list[ast.Rule]:
    """The plain rules of a compound: for each alternative of the body, one rule per head."""
    return [
        ast.Rule(head, body, compound.annotations, span=compound.span)
        for body in alternatives(compound.body)
        for head in compound.heads
    ]
