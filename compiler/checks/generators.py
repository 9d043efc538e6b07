"""``range`` where it can be evaluated: one side of ``=`` in a body, with 2 or 3 arguments.

A generator gives several values, so it cannot be an argument of an atom or a function, a
side of another comparison, or in a head: ``misplaced-generator`` says so, and tells to
assign it (``i = range(0, 10)``) and use the variable.
"""

from __future__ import annotations

from .. import ast, codes
from ..diagnostics import Diagnostic
from ..generators import generator, is_range
from . import Context


def check(context: Context) -> list[Diagnostic]:
    functors = context.symbols.functors
    diagnostics: list[Diagnostic] = []
    for _, rule in context.user_rules():
        if not any(c.name == "range" for c in context.program.summary(rule).calls):
            continue
        allowed: set[int] = set()
        _allowed(rule.body, functors, allowed)
        for call in context.program.summary(rule).calls:
            if not is_range(call, functors):
                continue
            if id(call) not in allowed:
                diagnostics.append(
                    codes.MISPLACED_GENERATOR(
                        call.span,
                        "`range` gives several values, so it can only be one side of `=` in a rule body",
                        help="assign it to a variable, `i = range(a, b)`, and use the variable here",
                    )
                )
            elif len(call.args) not in (2, 3):
                diagnostics.append(
                    codes.ARITY_MISMATCH(
                        call.span,
                        f"`range` takes 2 or 3 arguments (from, to[, step]) but is given {len(call.args)} here",
                    )
                )
    return diagnostics


def _allowed(literals: tuple[ast.Literal, ...], functors: dict, allowed: set[int]) -> None:
    """The range calls in place (by ``id``), in a body and the bodies of its aggregates."""
    for literal in literals:
        found = generator(literal, functors)
        if found is not None:
            allowed.add(id(found[1]))
        for term in ast.literal_terms(literal):
            for t in ast.walk_term(term, into_aggregates=False):
                if isinstance(t, ast.Aggregate):
                    _allowed(t.body, functors, allowed)
