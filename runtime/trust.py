"""What only the host states, and how a front that serves agents tells it from what they send.

The host — its own code calling ``record``/``add_facts``, the policy, the monitor itself — is
trusted; the service's keys, the gateway's clients and the framework guards' event mapping are
not (docs/security.md). What only the host states:

* an approval: the approvals library reads ``HostApproval``/``HostApprovalBy``, which a session
  states only for an approval the monitor records (``session.approve``) or the host vouches for
  (``session.record_approval``); the event of an approval (kind ``approval``, labelled
  ``approval`` and ``approved-by:BY``) is the monitor's record of it;
* the result of an approval tool (``ApprovalTool(tool)``), whose text the approvals library
  reads as a person's answer;
* the facts of a relation the policy marks ``.host`` (the candidate, the identity, the
  approvals, the deployment's classifications of tools, data and people).

A front refuses them from those it serves (:func:`event_problem`, :func:`facts_problem`), and a
trusted recording (``policyc replay``, ``policyc test``) records an approval event as the host's
(:func:`is_approval`, :func:`approvers`).

>>> approvers({"id": "a1", "kind": "approval", "labels": ["approval", "approved-by:oncall"]})
['oncall']
>>> is_approval({"id": "u1", "kind": "user_message", "labels": ["approval"]})
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .approvals import APPROVAL_KIND, APPROVAL_LABEL

APPROVED_BY = "approved-by:"  # the label that names an approval's approver: approved-by:BY
# the relations a session states for an approval (stdlib/events.dl)
HOST_APPROVAL = "HostApproval"
HOST_APPROVAL_BY = "HostApprovalBy"
APPROVAL_TOOL = "ApprovalTool"  # stdlib/approvals.dl: tools whose results say a person's answer


def _labels(event: Mapping[str, Any]) -> list[str]:
    labels = event.get("labels")
    return [label for label in labels if isinstance(label, str)] if isinstance(labels, list) else []


def is_approval(event: Mapping[str, Any]) -> bool:
    """Whether an event is an approval as a trusted recording writes one: of kind ``approval``,
    or labelled ``approval``."""
    return event.get("kind") == APPROVAL_KIND or APPROVAL_LABEL in _labels(event)


def approvers(event: Mapping[str, Any]) -> list[str]:
    """Who gave an approval: the ``BY`` of each of its ``approved-by:BY`` labels."""
    found = (label[len(APPROVED_BY) :] for label in _labels(event) if label.startswith(APPROVED_BY))
    return list(dict.fromkeys(by for by in found if by))


def approval_facts(event: Mapping[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """The host-only facts of an approval event: ``HostApproval(e)`` and ``HostApprovalBy(e, by)``."""
    e = event["id"]
    return {HOST_APPROVAL: [(e,)], HOST_APPROVAL_BY: [(e, by) for by in approvers(event)]}


def approval_tool(session: Any) -> Callable[[Any], bool]:
    """Whether a tool is an approval tool of the session's policy (``ApprovalTool(tool)``)."""
    relation = session.index.get(APPROVAL_TOOL)
    if relation is None or session.plan.relations[relation].arity != 1:
        return lambda tool: False
    if relation in session.prepared.incremental:  # maintained: what the session holds now
        return lambda tool: isinstance(tool, str) and session.holds(relation, (tool,))
    held: list[Any] = []  # a policy that derives it per decision: from scratch, once, if asked

    def holds(tool: Any) -> bool:
        if not isinstance(tool, str):
            return False
        if not held:
            held.append(session.explanation())
        return bool(held[0].holds(relation, (tool,)))

    return holds


def event_problem(event: Mapping[str, Any], is_approval_tool: Callable[[Any], bool]) -> str | None:
    """What makes a (checked) event the host's to record, as ``event `ID` is …``; None when
    anyone may record it."""
    where = f"event `{event.get('id')}`"
    if event.get("kind") == APPROVAL_KIND:
        return f"{where} is of kind `{APPROVAL_KIND}`, an approval"
    for label in _labels(event):
        if label == APPROVAL_LABEL or label.startswith(APPROVED_BY):
            return f"{where} is labelled `{label}`, which says it is an approval"
    tool = event.get("tool")
    if event.get("kind") == "tool_result" and is_approval_tool(tool):
        return (
            f"{where} is a result of `{tool}`, an approval tool of the policy (its text is a person's answer)"
        )
    return None


def facts_problem(
    plan: Any, facts: Mapping[str, Any], is_approval_tool: Callable[[Any], bool]
) -> tuple[str, str] | None:
    """The first relation of (checked) given facts that holds what only the host states, and
    why: a relation marked ``.host``, or event facts saying what :func:`event_problem` refuses
    of an event (an ``approval`` kind or label, a result of an approval tool)."""
    index = plan.relation_index()
    for name, rows in facts.items():
        relation = index.get(name)
        if relation is None:
            continue
        if plan.relations[relation].host:
            return name, f"`{name}` is stated by the host only (`.host`)"
        for row in rows:
            values = list(row)
            if name == "Event" and values[1:2] == [APPROVAL_KIND]:
                return name, f"`{name}` facts of kind `{APPROVAL_KIND}` say an event is an approval"
            if name == "Label" and len(values) == 2 and isinstance(values[1], str):
                if values[1] == APPROVAL_LABEL or values[1].startswith(APPROVED_BY):
                    return name, f"the label `{values[1]}` says an event is an approval"
            if name == "ToolResult" and len(values) == 3 and is_approval_tool(values[2]):
                return (
                    name,
                    f"a result of `{values[2]}`, an approval tool of the policy, is a person's answer",
                )
    return None
