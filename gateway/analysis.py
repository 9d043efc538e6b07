"""The tools the analyzer proves always denied, which ``tools/list`` leaves out.

The analysis is ``policyc check --deep``'s (:func:`policyc.analyzer.deep_findings`): an
``always-deny`` finding (PC305) of strength ``proved`` names a tool every call of which the
policy denies, whatever the session holds. Showing such a tool to a client only invites calls
that are refused, so the gateway hides it and logs why. A finding that is only ``bounded`` (no
allowed call on the small databases searched) is not a proof, and its tool stays listed; so does
every tool when the analysis cannot run (its time ran out, or the policy cannot be analysed),
since a listed tool is still decided call by call. Only `Deny` rules count as denying here (the
analysis runs with ``escalations_deny=False``): a tool whose calls are escalated stays listed,
since each can run once the user approves it. A tool one rule denies whatever the call
(``Deny(a) :- ToolCall(a, "t").``) is hidden too, although ``check --deep`` does not warn of it
(the rule says so on purpose).

>>> from policyc.compiler import compile_source
>>> hidden = always_denied_of(compile_source('''
... .import events
... .default deny
... Allow(a) :- ToolCall(a, "git.git_reset"), Label(a, "reviewed").
... Deny(a) :- ToolCall(a, "git.git_reset"), not Label(a, "approved").
... Deny(a) :- ToolCall(a, "git.git_reset"), Label(a, "approved").
... '''))
>>> sorted(hidden)
['git.git_reset']
>>> sorted(always_denied_of(compile_source('''
... .import events
... .default allow
... Deny(a) :- ToolCall(a, "fs.delete").
... ''')))
['fs.delete']
"""

from __future__ import annotations

from typing import Any

ANALYSIS_TIMEOUT = 6.0  # seconds the deep analysis may take at start-up


def always_denied(
    path: str, timeout: float = ANALYSIS_TIMEOUT, *, escalations_deny: bool = False
) -> tuple[dict[str, str], str | None]:
    """The tools the policy or bundle at ``path`` proves always denied, each with the
    analyzer's message; and why nothing could be proved, when the analysis did not run. With
    ``escalations_deny``, an escalated call counts as denied (no call runs without approval)."""
    from policyc.analyzer.query import AnalysisError, compile_loaded, load

    try:
        compilation = compile_loaded(load(path))
    except AnalysisError as error:
        return {}, f"the policy cannot be analysed: {error}"
    return always_denied_of(compilation, timeout, escalations_deny=escalations_deny), None


def always_denied_of(
    compilation: Any, timeout: float = ANALYSIS_TIMEOUT, *, escalations_deny: bool = False
) -> dict[str, str]:
    """:func:`always_denied` of a compiled policy (nothing for one with errors or not
    stratified)."""
    from policyc.analyzer.deep import deep_findings
    from policyc.compiler.stages import Stratified

    if not isinstance(compilation, Stratified) or any(d.is_error for d in compilation.diagnostics):
        return {}
    found: dict[str, str] = {}
    # an escalated call runs once a person approves it: only `Deny` rules count as denying
    # (unless asked otherwise); a tool one unconditional `Deny` rule denies counts too (`deliberate`)
    found_all = deep_findings(
        compilation, timeout=timeout, escalations_deny=escalations_deny, deliberate=True
    )
    for finding in found_all:
        if finding.code == "PC305" and finding.strength == "proved" and finding.tool is not None:
            found.setdefault(finding.tool, f"{finding.message} [{finding.code} {finding.name}]")
    return found
