"""``range(a, b[, step])``, Soufflé's generator: ``x = range(0, 10)`` binds ``x`` to 0, 1, ...,
9 in turn. It is intrinsic — no declaration — unless a policy declares a functor ``range`` of
its own; it is used only as one side of ``=`` in a body (it binds the other side like an
assignment, or filters when that side is known).

>>> from policyc.compiler.parser import parse
>>> from policyc.compiler.source import SourceFile
>>> module, _ = parse(SourceFile("p.dl", "S(i) :- i = range(0, 20, 2)."))
>>> target, call = generator(module.statements[0].body[0], {})
>>> target.name, call.name, len(call.args)
('i', 'range', 3)
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ast

RANGE = "range"
RANGE_SIGNATURE = "range(from, to[, step])"


def is_range(term: ast.Term, functors: Mapping[str, object]) -> bool:
    """Whether a term is a call of the intrinsic ``range`` (``functors``: the declared ones)."""
    return isinstance(term, ast.Call) and term.name == RANGE and RANGE not in functors


def generator(literal: ast.Literal, functors: Mapping[str, object]) -> tuple[ast.Term, ast.Call] | None:
    """``(other side, range call)`` of a literal ``x = range(...)`` (either way round)."""
    if not isinstance(literal, ast.Comparison) or literal.op != "=":
        return None
    for side, other in ((literal.right, literal.left), (literal.left, literal.right)):
        if is_range(side, functors) and not is_range(other, functors):
            return other, side  # type: ignore[return-value]
    return None
