"""``unused-relation``: a relation of this file that no verdict or output depends on.

The entry points of a policy are ``Allow``, ``Deny`` (and a unary ``Escalate``) and the
``.output`` relations; a relation that none of them reaches in the dependency graph cannot
change a decision. A file
with no entry point at all (a library of helpers meant to be included) is not checked, and
relations of included files and library modules are reported only where they are checked
as files of their own.
"""

from __future__ import annotations

from .. import codes
from ..diagnostics import Diagnostic
from ..symbols import VERDICTS, is_verdict
from . import Context


def check(context: Context) -> list[Diagnostic]:
    symbols, program = context.symbols, context.program
    graph = context.graph
    defined_entries = [
        name for name, r in symbols.relations.items() if is_verdict(name, r.arity) and name in symbols.defined
    ]
    declared_outputs = [name for name in symbols.outputs if name not in VERDICTS]
    if not defined_entries and not declared_outputs:
        return []
    reachable = graph.reachable_from(set(defined_entries) | set(declared_outputs))
    diagnostics: list[Diagnostic] = []
    for name, relation in symbols.relations.items():
        if name in reachable or is_verdict(name, relation.arity) or relation.home not in program.roots:
            continue
        what = "input relation" if relation.is_input else "relation"
        diagnostics.append(
            codes.UNUSED_RELATION(
                relation.span,
                f"{what} `{name}` is never used to decide `Allow`, `Deny` or an output",
                help=f"use it in a rule that leads to a verdict, mark it `.output {name}`, or remove it",
            )
        )
    return diagnostics
