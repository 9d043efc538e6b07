"""The tool loop of a chat-completions API: :func:`tool_messages` runs the tool calls of an
OpenAI-style assistant message under a monitor session and turns each denial, and each
malformed call, into the tool message the model reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from policyc.stdlib.events import EventError, check_event

from . import jsonio
from .context import decide_tool_call, error_text, new_id, record_result, result_text, use_session
from .render import value as shown_value
from .session import Session

ARGUMENTS_DETAIL_LIMIT = 200  # characters of the reason an invalid arguments reply gives


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The arguments of a tool call (a JSON object), or why they are invalid: never raises,
    whatever the text (nesting, numbers of any size, ``NaN`` and ``Infinity`` are refused)."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        args: Any = dict(raw)
    elif isinstance(raw, str | bytes | bytearray):
        try:
            text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
            args = jsonio.loads(text)
        except UnicodeDecodeError:
            return None, "the arguments are not UTF-8 text"
        except json.JSONDecodeError as error:
            return None, f"{jsonio.problem(error)} (at character {error.pos})"
    else:
        return None, "the arguments are not JSON text"
    if not isinstance(args, dict):
        return None, "the arguments are not an object"
    return args, None


def _short(text: str) -> str:
    return text if len(text) <= ARGUMENTS_DETAIL_LIMIT else text[:ARGUMENTS_DETAIL_LIMIT] + "…"


def _message_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(part, Mapping) and isinstance(part.get("text"), str) for part in content
    ):
        return "\n".join(part["text"] for part in content)
    return result_text(content)


def tool_messages(
    session: Session,
    assistant_message: Mapping[str, Any],
    tools: Mapping[str, Callable[..., Any]],
    result_labels: Mapping[str, tuple[str, ...]] | None = None,
) -> list[dict[str, Any]]:
    """Run the tool calls of a chat-completions assistant message under the session.

    The message is recorded as an assistant message; each tool call is decided, and run when
    allowed; the returned ``{"role": "tool", ...}`` messages hold each result (or, for a tool
    that raised, ``error: ExceptionType: message``, recorded as its result), or, for a denied
    or malformed call, the text the model should read instead. A call the policy escalates
    runs only once the monitor's approver approves it.
    """
    message_id = new_id("assistant", session)
    session.record(
        {
            "id": message_id,
            "kind": "assistant_message",
            "text": _message_text(assistant_message.get("content")),
        }
    )
    calls = assistant_message.get("tool_calls") or []
    replies = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        given = call.get("id")
        event_id = (
            given
            if isinstance(given, str) and given and given not in session.events
            else new_id("call", session)
        )
        content = _run_call(session, call, event_id, message_id, tools, result_labels or {})
        replies.append(
            {"role": "tool", "tool_call_id": event_id if given in (None, "") else given, "content": content}
        )
    return replies


def _run_call(
    session: Session,
    call: Mapping[str, Any],
    event_id: str,
    message_id: str,
    tools: Mapping[str, Callable[..., Any]],
    result_labels: Mapping[str, tuple[str, ...]],
) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(name, str) or not name:
        return "Invalid tool call: it names no function"
    args, problem = parse_arguments(function.get("arguments"))
    if args is None:
        return f"Invalid arguments for {shown_value(name)}: {_short(problem or '')}"
    event = {"id": event_id, "kind": "tool_call", "tool": name, "args": args, "deps": [message_id]}
    try:
        check_event(dict(event), session.events)  # what would poison the session is refused here
    except EventError as error:
        return f"Invalid arguments for {shown_value(name)}: {_short(str(error))}"
    # decided as every front decides a call (runtime/context.py); a person decides an escalation
    decision, _ = decide_tool_call(session, name, args, [message_id], event_id)
    if not decision.allowed:
        return decision.feedback
    implementation = tools.get(name)
    if implementation is None:
        return f"Unknown tool: {shown_value(name)}"
    labels = tuple(result_labels.get(name, ()))
    with use_session(session, parent=event_id):
        try:
            result = implementation(**args)
        except Exception as error:
            text = error_text(error)
            record_result(session, event_id, name, text, labels, failed=True)
            return text
        except BaseException as error:
            record_result(session, event_id, name, error_text(error), labels, failed=True)
            raise
        record_result(session, event_id, name, result, labels)
    return result_text(result)
