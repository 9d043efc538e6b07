"""A compiled policy, planned, or the reason it cannot be: the step every way of opening a
policy (source, bundle) takes before the runtime holds it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from policyc.compiler.plan import Plan
from policyc.compiler.stages import Parsed, Planned, Stratified

from .errors import PolicyError

if TYPE_CHECKING:
    from policyc.compiler.magic import Options


def plan_of(compilation: Parsed) -> Plan:
    """The plan of a compiled policy, or :class:`PolicyError` with its error diagnostics."""
    return planned(compilation).plan


def planned(compilation: Parsed, magic: Options | None = None) -> Planned:
    """A compiled policy, planned (the pipeline's ``plan`` stage, run if the compilation
    stopped before it or ``magic`` asks for other demand-driven relations), or
    :class:`PolicyError` with its error diagnostics."""
    from policyc.compiler.pipeline import plan
    from policyc.compiler.planner import PlanningError

    errors = tuple(d for d in compilation.diagnostics if d.is_error)
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        where = f"{first.span.file}:{first.span.line}:{first.span.column}"
        raise PolicyError(f"{where}: {first.message} [{first.name}]{more}", errors)
    if not isinstance(compilation, Stratified):
        raise PolicyError(f"the policy was compiled only up to its {compilation.completed} stage")
    try:
        return plan(compilation, magic)
    except PlanningError as error:
        raise PolicyError(str(error)) from None
