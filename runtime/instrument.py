"""Putting a monitor session in front of the code an agent runs.

* :func:`guard` wraps a Python tool function: each call is recorded as a tool-call event,
  decided, and either run (its result, or the exception it raised, recorded as a tool-result
  event) or refused with the decision's feedback (raised as :class:`PolicyDenied`, or returned
  as text).
* :func:`instrument_httpx` and :func:`instrument_requests` make every outgoing HTTP request a
  candidate action (tool ``http_request``, arguments ``method``, ``url``, ``host``, ``body``,
  ``headers``), decided hop by hop (every redirect and authentication retry) and refused
  before it leaves the process when the policy denies it.
* :func:`tool_messages` runs the tool calls of an OpenAI-style chat-completions message and
  turns each denial into the tool message the model sees.

A call the policy escalates (``Escalate``) is put to the monitor's approver by each of them
(:mod:`.approvers`) and runs only if it approves.

The session travels in :mod:`contextvars` (:func:`use_session`), so code between the agent
loop and a tool need not pass it along. A scope may name the event that initiated its work
(``parent``, say the model's message): a call inside then depends on that event and on every
event recorded in the session since the scope began. Without a session, guarded code is
refused (complete mediation) unless the guard was told otherwise.

Each part is a module of its own, and this one gives all their public names:

* :mod:`.context`: the ambient session and its scopes, recording a call and its result;
* :mod:`.tool_guard`: guarded tool functions;
* :mod:`.http_hooks`: what the HTTP instrumentations share (the patches of a library, reading
  a request's body, deciding a request); :mod:`.httpx_hooks` and :mod:`.requests_hooks`: the
  patches of httpx and of requests;
* :mod:`.chat`: the tool calls of a chat-completions message;
* :mod:`.approvers`: asking the approver about an escalated call (:mod:`.approvals`: the
  approvals a session keeps).
"""

from __future__ import annotations

from .chat import ARGUMENTS_DETAIL_LIMIT, parse_arguments, tool_messages
from .context import (
    NO_SESSION,
    PolicyDenied,
    authorize_call,
    authorize_call_async,
    current_parent,
    current_session,
    dependencies,
    error_text,
    new_id,
    record_result,
    use_session,
)
from .http_hooks import (
    BODY_TOO_LARGE,
    BODY_UNREADABLE,
    MAX_BODY_BYTES,
    REDACTED,
    REDACTED_HEADERS,
    Instrumentation,
)
from .httpx_hooks import instrument_httpx
from .requests_hooks import instrument_requests
from .tool_guard import AMBIGUOUS, call_arguments, guard

__all__ = [
    "AMBIGUOUS",
    "ARGUMENTS_DETAIL_LIMIT",
    "BODY_TOO_LARGE",
    "BODY_UNREADABLE",
    "MAX_BODY_BYTES",
    "NO_SESSION",
    "REDACTED",
    "REDACTED_HEADERS",
    "Instrumentation",
    "PolicyDenied",
    "authorize_call",
    "authorize_call_async",
    "call_arguments",
    "current_parent",
    "current_session",
    "dependencies",
    "error_text",
    "guard",
    "instrument_httpx",
    "instrument_requests",
    "new_id",
    "parse_arguments",
    "record_result",
    "tool_messages",
    "use_session",
]
