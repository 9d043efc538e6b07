"""``singleton-variable``: a named variable that occurs once in its rule is usually a typo.

Only occurrences as an argument of a positive relation atom are reported (elsewhere a lone
variable is unbound, which ``unsafe-variable`` reports). Write ``_`` for "any value", or
start the name with an underscore (``_old``) to keep a name for the reader. A variable that
``@message`` or ``@suggest`` names (``{k}``) is used there, so it is not a singleton. Nor is
one that occurs elsewhere in the statement it was written in: the rules a statement with
several heads or with ``;`` stands for share its text, and `_` in its place would change them.
"""

from __future__ import annotations

from collections import Counter

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix
from . import Context
from .rule_annotations import placeholder_names


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    functors = context.symbols.functors
    rules = [rule for _, rule in context.user_rules() if not rule.is_fact]
    written: dict[object, set[tuple[str, object]]] = {}  # statement -> (name, place) of its variables
    for rule in rules:
        places = written.setdefault(rule.span, set())
        places.update((v.name, v.span) for v in context.program.summary(rule).variables)
    for rule in rules:
        summary = context.program.summary(rule)
        counts = Counter(v.name for v in summary.variables)
        counts.update(placeholder_names(rule))
        statement = Counter(name for name, _ in written[rule.span])
        for atom, negated, _ in summary.atoms:
            if negated or atom.name in functors:
                continue
            for arg in atom.args:
                if (
                    isinstance(arg, ast.Var)
                    and counts[arg.name] == 1
                    and statement[arg.name] == 1
                    and not arg.name.startswith("_")
                ):
                    diagnostics.append(
                        codes.SINGLETON_VARIABLE(
                            arg.span,
                            f"variable `{arg.name}` occurs only once in this rule",
                            help=f"write `_` if any value will do, or `_{arg.name}` to keep the name",
                            fix=Fix("replace it with `_`", (Edit(arg.span, "_"),), safe=True),
                        )
                    )
    return diagnostics
