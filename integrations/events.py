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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from policyc.runtime import context
from policyc.runtime.context import (
    ADAPTER_FAILED,
    INVALID_CALL,
    new_id,
    settled,
    settled_async,
)
from policyc.runtime.context import authorize_tool_call as authorize_call
from policyc.runtime.context import decide_tool_call as decide_call
from policyc.runtime.context import decide_tool_call_async as decide_call_async

if TYPE_CHECKING:
    from policyc.runtime.protocols import SessionLike

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
    session: SessionLike,
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
    session: SessionLike,
    call: str | None,
    tool: str,
    result: Any,
    labels: Sequence[str] = (),
    failed: bool = False,
) -> str | None:
    """Record ``result`` (its text: a string as it is, anything else as JSON) as the result of
    the recorded call ``call`` of ``tool`` (labelled ``error`` besides ``labels`` when the tool
    ``failed``: the text is what it raised, which may carry what the model sent); the result
    event's id (``None`` without a call)."""
    if call is None or call not in session.events:
        return None
    return context.record_result(session, call, tool, result, labels, failed)
