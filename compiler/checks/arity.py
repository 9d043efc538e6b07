"""``arity-mismatch``: a relation or functor is always used with the same number of arguments.

The arity of a relation is that of its ``.decl``, or else of its first occurrence in the
program; a functor's is that of its ``.functor`` declaration.
"""

from __future__ import annotations

from .. import codes
from ..diagnostics import Diagnostic, Related
from ..symbols import VERDICTS
from . import Context


def _arguments(n: int) -> str:
    return "no arguments" if n == 0 else "1 argument" if n == 1 else f"{n} arguments"


def check(context: Context) -> list[Diagnostic]:
    symbols = context.symbols
    diagnostics: list[Diagnostic] = []
    for _, rule in context.user_rules():
        summary = context.program.summary(rule)
        atoms = [rule.head] + [atom for atom, _, _ in summary.atoms]
        for atom in atoms:
            sig = symbols.functors.get(atom.name)
            if sig is not None:
                if len(atom.args) != len(sig.params):
                    diagnostics.append(_functor_mismatch(atom.name, atom.span, len(atom.args), sig))
                continue
            relation = symbols.relations.get(atom.name)
            if relation is None or relation.arity is None or relation.arity == len(atom.args):
                continue
            if atom.name in VERDICTS and not relation.declared:
                diagnostics.append(
                    codes.ARITY_MISMATCH(
                        atom.span,
                        f"`{atom.name}` takes exactly one argument, the action; it is given "
                        f"{_arguments(len(atom.args))}",
                    )
                )
                continue
            origin = "declared" if relation.declared else "first used"
            diagnostics.append(
                codes.ARITY_MISMATCH(
                    atom.span,
                    f"`{atom.name}` has {_arguments(relation.arity)} but is given {len(atom.args)} here",
                    related=[Related(relation.span, f"{origin} with {_arguments(relation.arity)} here")],
                )
            )
        for call in summary.calls:
            sig = symbols.functors.get(call.name)
            if sig is not None and len(call.args) != len(sig.params):
                diagnostics.append(_functor_mismatch(call.name, call.span, len(call.args), sig))
    return diagnostics


def _functor_mismatch(name: str, span, given: int, sig) -> Diagnostic:
    shown = ", ".join(f"{n}: {t}" if n else str(t) for n, t in zip(sig.param_names, sig.params, strict=True))
    return codes.ARITY_MISMATCH(
        span,
        f"`{name}` takes {_arguments(len(sig.params))} but is given {given} here",
        related=[Related(sig.span, f"declared as `{name}({shown})`")],
    )
