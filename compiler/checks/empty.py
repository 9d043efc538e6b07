"""``empty-relation``: a relation that nothing can ever put a fact into.

A relation can hold facts when it is an ``.input``, has a fact, or has a rule whose positive
body atoms can all hold facts (``count`` and ``sum`` have a value even over nothing, so what
is inside their braces does not matter; ``min``, ``max`` and ``mean`` need at least one).
Everything else is empty in every run: rules that use it positively never fire and ``not``
of it always holds. Undefined relations are reported as ``undefined-relation`` instead.
"""

from __future__ import annotations

from .. import ast, codes
from ..diagnostics import Diagnostic
from ..symbols import VERDICTS
from . import Context


def check(context: Context) -> list[Diagnostic]:
    symbols, program = context.symbols, context.program
    # Undefined relations are errors of their own; assume they can hold facts so that what
    # depends on them is not reported a second time.
    undefined = {
        name
        for name, r in symbols.relations.items()
        if not (name in symbols.defined or r.declared or r.is_input)
    }
    can_hold = set(symbols.inputs) | undefined
    pending: list[tuple[str, list[str]]] = []
    for _, rule in program.rules():
        needs = [atom.name for atom in _required_atoms(rule.body) if atom.name not in symbols.functors]
        if not needs:
            can_hold.add(rule.head.name)
        else:
            pending.append((rule.head.name, needs))
    changed = True
    while changed:
        changed = False
        remaining = []
        for head, needs in pending:
            if head in can_hold:
                continue
            if all(n in can_hold for n in needs):
                can_hold.add(head)
                changed = True
            else:
                remaining.append((head, needs))
        pending = remaining
    diagnostics: list[Diagnostic] = []
    for name, relation in symbols.relations.items():
        if name in can_hold or name in VERDICTS or program.is_library(relation.home):
            continue
        if not (name in symbols.defined or relation.declared or relation.is_input):
            continue  # undefined-relation
        if name in symbols.defined:
            message = (
                f"relation `{name}` can never hold a fact: every rule for it needs a relation that is empty"
            )
            help_text = "check the rule bodies for a relation that has no rules, facts or `.input`"
        else:
            message = f"relation `{name}` is declared but nothing puts facts into it"
            help_text = (
                f"add rules or facts for it, or mark it `.input {name}` if its facts come from outside"
            )
        diagnostics.append(codes.EMPTY_RELATION(relation.span, message, help=help_text))
    return diagnostics


def _required_atoms(literals: tuple[ast.Literal, ...]) -> list[ast.Atom]:
    """Positive atoms that must hold for the body to hold."""
    atoms: list[ast.Atom] = []
    for literal in literals:
        if isinstance(literal, ast.Atom):
            atoms.append(literal)
        for term in ast.literal_terms(literal):
            for t in ast.walk_term(term, into_aggregates=False):
                if isinstance(t, ast.Aggregate) and t.op in ("min", "max", "mean"):
                    atoms.extend(_required_atoms(t.body))
    return atoms
