"""What every framework adapter does with a session, in one place: making the events of
docs/events.md (messages, tool calls, tool results) with fresh ids, and deciding a tool call so
that the decision is final (an escalation settled by the monitor's approver, any failure a
denial). The adapters of docs/integrations.md map their framework's concepts onto these; any
adapter of this package may use them.

>>> from policyc.runtime import Monitor, load_source
>>> session = Monitor(load_source('.import events\\nDeny(a) :- ToolCall(a, "rm").')).session("s")
>>> user = record_message(session, "user_message", "tidy up")
>>> decide_call(session, "rm", {"path": "/"}, [user])[0].allowed
False
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyc.runtime import context
from policyc.runtime.approvers import settle, settle_async
from policyc.runtime.context import new_id, refusal
from policyc.runtime.values import quote_value
from policyc.runtime.verdict import Decision
from policyc.stdlib.events import EventError, check_event

INVALID_CALL = "policyc:invalid-call"
ADAPTER_FAILED = "policyc:adapter-failed"
DETAIL_LIMIT = 200  # characters of a malformed call's problem the denial shows

__all__ = [
    "ADAPTER_FAILED",
    "INVALID_CALL",
    "authorize_call",
    "decide_call",
    "decide_call_async",
    "record_message",
    "record_result",
    "settled",
    "settled_async",
]


def record_message(
    session: Any,
    kind: str,
    text: str,
    deps: Sequence[str] | None = None,
    labels: Sequence[str] = (),
    prefix: str | None = None,
) -> str:
    """Record a message (``user_message``, ``assistant_message``, ``system_message``, ...) and
    return its event id; without ``deps`` it depends on the whole history."""
    identifier = new_id(prefix or kind.split("_", 1)[0], session)
    event: dict[str, Any] = {"id": identifier, "kind": kind, "text": text}
    if deps is not None:
        event["deps"] = [d for d in dict.fromkeys(deps) if d in session.events]
    if labels:
        event["labels"] = list(labels)
    session.record(event)
    return identifier


def record_result(
    session: Any, call: str | None, tool: str, result: Any, labels: Sequence[str] = ()
) -> str | None:
    """Record ``result`` (its text: a string as it is, anything else as JSON) as the result of
    the recorded call ``call`` of ``tool``; the result event's id (``None`` without a call)."""
    if call is None or call not in session.events:
        return None
    return context.record_result(session, call, tool, result, labels)


def _call_event(
    session: Any, tool: str, args: Mapping[str, Any], deps: Sequence[str] | None
) -> tuple[dict[str, Any] | None, Decision | None]:
    """The call's event, or (for arguments no event can hold) the denial that refuses it
    without recording it, so that one bad call does not poison the session."""
    event: dict[str, Any] = {"id": new_id("call", session), "kind": "tool_call", "tool": tool}
    try:
        event["args"] = dict(args)
    except Exception as error:
        return None, _invalid(tool, f"the arguments are not an object ({type(error).__name__})")
    if deps is not None:
        event["deps"] = [d for d in dict.fromkeys(deps) if d in session.events]
    try:
        check_event(dict(event), session.events)
    except EventError as error:
        return None, _invalid(tool, str(error))
    except Exception as error:
        return None, _invalid(tool, f"{type(error).__name__}: {error}")
    return event, None


def _invalid(tool: str, problem: str) -> Decision:
    short = problem if len(problem) <= DETAIL_LIMIT else problem[:DETAIL_LIMIT] + "…"
    return refusal(
        INVALID_CALL,
        f"the call of {quote_value(tool)} cannot be decided ({short}), so it is refused",
        "Call the tool with JSON arguments.",
    )


def _failed(tool: str, error: BaseException) -> Decision:
    return refusal(
        ADAPTER_FAILED,
        f"deciding the call of {quote_value(tool)} failed ({type(error).__name__}), so it is refused",
    )


def authorize_call(
    session: Any, tool: str, args: Mapping[str, Any], deps: Sequence[str] | None = None
) -> tuple[Decision, str | None]:
    """Record a call of ``tool`` with ``args`` (depending on ``deps``, or on the whole history
    when ``None``) and decide it, an escalation left as it is (see :func:`settled`). The second
    value is the call's event id (``None`` when the call could not be recorded, and is
    refused). Any failure is a denial."""
    event, refused = _call_event(session, tool, args, deps)
    if event is None:
        return refused or _invalid(tool, "no event"), None
    try:
        return session.authorize(event), event["id"]
    except Exception as error:  # fail closed: nothing undecided reaches the tool
        return _failed(tool, error), event["id"] if event["id"] in session.events else None


def settled(session: Any, tool: str, decision: Decision) -> Decision:
    """The final decision: an escalated one put to the monitor's approver, any other as it is."""
    if not decision.escalated:
        return decision
    try:
        return settle(session, decision)
    except Exception as error:
        return _failed(tool, error)


async def settled_async(session: Any, tool: str, decision: Decision) -> Decision:
    """:func:`settled` for async code: an async approver is awaited, a sync one runs in a
    thread of its own."""
    if not decision.escalated:
        return decision
    try:
        return await settle_async(session, decision)
    except Exception as error:
        return _failed(tool, error)


def decide_call(
    session: Any, tool: str, args: Mapping[str, Any], deps: Sequence[str] | None = None
) -> tuple[Decision, str | None]:
    """:func:`authorize_call`, then :func:`settled`: the decision is final."""
    decision, call = authorize_call(session, tool, args, deps)
    return settled(session, tool, decision), call


async def decide_call_async(
    session: Any, tool: str, args: Mapping[str, Any], deps: Sequence[str] | None = None
) -> tuple[Decision, str | None]:
    """:func:`decide_call` for async code."""
    decision, call = authorize_call(session, tool, args, deps)
    return await settled_async(session, tool, decision), call
