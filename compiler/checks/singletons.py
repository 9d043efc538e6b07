"""``singleton-variable``: a named variable that occurs once in its rule is usually a typo.

Only occurrences as an argument of a positive relation atom are reported (elsewhere a lone
variable is unbound, which ``unsafe-variable`` reports). Write ``_`` for "any value", or
start the name with an underscore (``_old``) to keep a name for the reader. A variable that
``@message`` or ``@suggest`` names (``{k}``) is used there, so it is not a singleton.
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
    for _, rule in context.user_rules():
        if rule.is_fact:
            continue
        summary = context.program.summary(rule)
        counts = Counter(v.name for v in summary.variables)
        counts.update(placeholder_names(rule))
        for atom, negated, _ in summary.atoms:
            if negated or atom.name in functors:
                continue
            for arg in atom.args:
                if isinstance(arg, ast.Var) and counts[arg.name] == 1 and not arg.name.startswith("_"):
                    diagnostics.append(
                        codes.SINGLETON_VARIABLE(
                            arg.span,
                            f"variable `{arg.name}` occurs only once in this rule",
                            help=f"write `_` if any value will do, or `_{arg.name}` to keep the name",
                            fix=Fix("replace it with `_`", (Edit(arg.span, "_"),), safe=True),
                        )
                    )
    return diagnostics
