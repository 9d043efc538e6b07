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

from collections.abc import Callable
from dataclasses import dataclass

from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.stages import Stratified

from .calls import Replayer
from .deadline import Deadline

VERDICTS = ("Allow", "Deny", "Escalate")


@dataclass(frozen=True)
class Slips:
    """The findings, and how many verdict rules the time allowed ran out before."""

    findings: list[Diagnostic]
    unchecked: int = 0


def slip_findings(
    compilation: Stratified, deadline: Deadline, replayer: Callable[[], Replayer | None]
) -> Slips:
    """The findings of the three checks, for the user's files; a rule the time runs out
    before is counted, not checked. ``replayer()`` gives the monitor of the policy the calls
    are replayed through (None when it cannot open the policy: no witness, so no finding)."""
    from .absent import missing_arguments
    from .argument_uses import denying_rules
    from .lenient import lenient_conversions
    from .text_compare import untyped_comparisons

    if not compilation.symbols.has_verdict_rules:
        return Slips([])
    if deadline.passed():
        return Slips([], len(denying_rules(compilation, VERDICTS)))
    monitor = replayer()
    if monitor is None:
        return Slips([])
    found = missing_arguments(compilation, monitor, deadline)
    found += untyped_comparisons(compilation, monitor, deadline)
    found += lenient_conversions(compilation, monitor, deadline)
    return Slips(found, len(denying_rules(compilation, VERDICTS)) if deadline.passed() else 0)
