"""The rules an agent can slip past, found by `policyc check --deep`: each finding is shown with
a call that a real monitor of the policy decides as the finding says (:mod:`.calls`).

* ``missing-argument`` (PC309, :mod:`.absent`) — a `Deny` or `Escalate` rule whose test of an
  argument a call can leave out;
* ``untyped-argument-comparison`` (PC310, :mod:`.text_compare`) — a comparison or arithmetic on
  an argument of undeclared type, decided by the JSON type the agent chose;
* ``lenient-conversion`` (PC311, :mod:`.lenient`) — agent text read by a lenient conversion in
  a `Deny` or `Escalate` condition.

A policy the monitor cannot open here (an extension it needs is not installed) gets none of
them: without a replayed call there is no finding.
"""

from __future__ import annotations

from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.stages import Stratified

from .deadline import Deadline


def slip_findings(compilation: Stratified, deadline: Deadline) -> list[Diagnostic]:
    """The findings of the three checks, for the user's files."""
    from .absent import missing_arguments
    from .calls import Replayer
    from .lenient import lenient_conversions
    from .text_compare import untyped_comparisons

    if not compilation.symbols.has_verdict_rules:
        return []
    try:
        replayer = Replayer.of(compilation)
    except Exception:  # a policy the monitor cannot open here has no witness, so no finding
        return []
    found = missing_arguments(compilation, replayer, deadline)
    found += untyped_comparisons(compilation, replayer, deadline)
    found += lenient_conversions(compilation, replayer, deadline)
    return found
