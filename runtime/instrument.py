"""Putting a monitor session in front of the code an agent runs.

* :func:`guard` wraps a Python tool function: each call is recorded as a tool-call event,
  decided, and either run (its result recorded as a tool-result event) or refused with the
  decision's feedback (raised as :class:`PolicyDenied`, or returned as text).
* :func:`instrument_httpx` and :func:`instrument_requests` make every outgoing HTTP request a
  candidate action (tool ``http_request``, arguments ``method``, ``url``, ``host``, ``body``),
  refused before it leaves the process when the policy denies it.
* :func:`tool_messages` runs the tool calls of an OpenAI-style chat-completions message and
  turns each denial into the tool message the model sees.

The session and the event that initiated the current work (say, the model's message) travel in
:mod:`contextvars` (:func:`use_session`), so code between the agent loop and a tool need not
pass them along. Without a session, guarded code is refused (complete mediation) unless the
guard was told otherwise.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .session import Session
from .verdict import Decision, Reason

current_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "policyc_session", default=None
)
current_parent: contextvars.ContextVar[str | None] = contextvars.ContextVar("policyc_parent", default=None)
_ids = itertools.count(1)

NO_SESSION = Reason(
    "policyc:no-session",
    "no monitor session is active, so the action cannot be decided and is refused",
    "Run the agent's work inside `policyc.use_session(session)`.",
    "high",
)


class PolicyDenied(PermissionError):
    """The policy refused an action; ``decision`` holds the reasons, ``feedback`` the text."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.feedback = decision.feedback or "the action was refused by the policy"
        super().__init__(self.feedback)


@contextmanager
def use_session(session: Session, parent: str | None = None) -> Iterator[Session]:
    """Make ``session`` (and the initiating event ``parent``) ambient for the code inside."""
    token = current_session.set(session)
    parent_token = current_parent.set(parent)
    try:
        yield session
    finally:
        current_parent.reset(parent_token)
        current_session.reset(token)


def new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


def _deps(session: Session) -> list[str] | None:
    """An action depends on the initiating event when one is known, else on the whole history."""
    parent = current_parent.get()
    return [parent] if parent is not None and parent in session.events else None


def authorize_call(
    tool: str, args: Mapping[str, Any], session: Session | None = None, allow_outside: bool = False
) -> tuple[Decision, str | None]:
    """Record a call of ``tool`` in the ambient (or given) session and decide it."""
    session = session or current_session.get()
    if session is None:
        return Decision(None, allow_outside, () if allow_outside else (NO_SESSION,)), None
    identifier = new_id("call")
    event: dict[str, Any] = {"id": identifier, "kind": "tool_call", "tool": tool, "args": dict(args)}
    deps = _deps(session)
    if deps is not None:
        event["deps"] = deps
    return session.authorize(event), identifier


def record_result(
    session: Session | None, call: str | None, tool: str, result: Any, labels: tuple[str, ...]
) -> None:
    session = session or current_session.get()
    if session is None or call is None:
        return
    text = result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
    event: dict[str, Any] = {
        "id": new_id("result"),
        "kind": "tool_result",
        "of": call,
        "tool": tool,
        "text": text,
    }
    if labels:
        event["labels"] = list(labels)
    session.record(event)


def guard(
    fn: Callable[..., Any] | None = None,
    *,
    tool: str | None = None,
    session: Session | None = None,
    on_deny: str = "raise",
    result_labels: tuple[str, ...] | list[str] = (),
    allow_outside_session: bool = False,
) -> Any:
    """Decorate a tool function so that the policy decides every call before it runs.

    ``tool`` names the tool (default: the function's name); ``on_deny="raise"`` raises
    :class:`PolicyDenied`, ``on_deny="return"`` returns the feedback text instead of running;
    ``result_labels`` label what the tool returns (``["untrusted"]`` for a web fetch).
    """
    if on_deny not in ("raise", "return"):
        raise ValueError("on_deny is 'raise' or 'return'")

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        name = tool or function.__name__
        signature = inspect.signature(function)

        def arguments(args: tuple, kwargs: dict) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return dict(bound.arguments)

        def refused(decision: Decision) -> Any:
            if on_deny == "return":
                return decision.feedback
            raise PolicyDenied(decision)

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                decision, call = authorize_call(name, arguments(args, kwargs), session, allow_outside_session)
                if not decision.allowed:
                    return refused(decision)
                result = await function(*args, **kwargs)
                record_result(session, call, name, result, tuple(result_labels))
                return result

            return run_async

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            decision, call = authorize_call(name, arguments(args, kwargs), session, allow_outside_session)
            if not decision.allowed:
                return refused(decision)
            result = function(*args, **kwargs)
            record_result(session, call, name, result, tuple(result_labels))
            return result

        return run

    return wrap(fn) if fn is not None else wrap


# ------------------------------------------------------------------------------------ HTTP


def _request_args(method: str, url: str, body: bytes | str | None) -> dict[str, Any]:
    from urllib.parse import urlsplit

    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    return {"method": method.upper(), "url": url, "host": (urlsplit(url).hostname or ""), "body": body or ""}


class Instrumentation:
    """What ``instrument_*`` patched; ``uninstall()`` (or leaving the ``with`` block) restores it."""

    def __init__(self, restore: list[Callable[[], None]]) -> None:
        self._restore = restore

    def uninstall(self) -> None:
        while self._restore:
            self._restore.pop()()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


def _check_request(method: str, url: str, body: Any, allow_outside: bool) -> None:
    decision, _ = authorize_call("http_request", _request_args(method, url, body), None, allow_outside)
    if not decision.allowed:
        raise PolicyDenied(decision)


def instrument_httpx(allow_outside_session: bool = False) -> Instrumentation:
    """Decide every request sent with httpx (sync and async clients) before it is sent."""
    import httpx

    restore = []
    original = httpx.Client.send
    original_async = httpx.AsyncClient.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _check_request(request.method, str(request.url), request.content, allow_outside_session)
        return original(self, request, *args, **kwargs)

    async def send_async(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _check_request(request.method, str(request.url), request.content, allow_outside_session)
        return await original_async(self, request, *args, **kwargs)

    httpx.Client.send = send  # type: ignore[method-assign]
    httpx.AsyncClient.send = send_async  # type: ignore[method-assign]
    restore.append(lambda: setattr(httpx.Client, "send", original))
    restore.append(lambda: setattr(httpx.AsyncClient, "send", original_async))
    return Instrumentation(restore)


def instrument_requests(allow_outside_session: bool = False) -> Instrumentation:
    """Decide every request sent with requests before it is sent."""
    import requests

    original = requests.Session.send

    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        _check_request(request.method, request.url, request.body, allow_outside_session)
        return original(self, request, **kwargs)

    requests.Session.send = send  # type: ignore[method-assign]
    return Instrumentation([lambda: setattr(requests.Session, "send", original)])


# ---------------------------------------------------------------------------- chat tool loop


def tool_messages(
    session: Session,
    assistant_message: Mapping[str, Any],
    tools: Mapping[str, Callable[..., Any]],
    result_labels: Mapping[str, tuple[str, ...]] | None = None,
) -> list[dict[str, Any]]:
    """Run the tool calls of a chat-completions assistant message under the session.

    The message is recorded as an assistant message; each tool call is decided, and run when
    allowed; the returned ``{"role": "tool", ...}`` messages hold each result, or, for a denied
    or malformed call, the feedback the model should read instead.
    """
    message_id = new_id("assistant")
    session.record(
        {"id": message_id, "kind": "assistant_message", "text": assistant_message.get("content") or ""}
    )
    replies = []
    for call in assistant_message.get("tool_calls") or []:
        call_id = call.get("id") or new_id("call")
        function = call.get("function") or {}
        name = function.get("name") or ""
        try:
            args = json.loads(function.get("arguments") or "{}")
            if not isinstance(args, dict):
                raise ValueError("the arguments are not an object")
        except ValueError as error:
            replies.append(
                {"role": "tool", "tool_call_id": call_id, "content": f"Invalid arguments for {name}: {error}"}
            )
            continue
        event_id = call_id if call_id not in session.events else new_id("call")
        decision = session.authorize(
            {"id": event_id, "kind": "tool_call", "tool": name, "args": args, "deps": [message_id]}
        )
        if not decision.allowed:
            replies.append({"role": "tool", "tool_call_id": call_id, "content": decision.feedback})
            continue
        implementation = tools.get(name)
        if implementation is None:
            replies.append({"role": "tool", "tool_call_id": call_id, "content": f"Unknown tool: {name}"})
            continue
        with use_session(session, parent=event_id):
            result = implementation(**args)
        labels = tuple((result_labels or {}).get(name, ()))
        record_result(session, event_id, name, result, labels)
        text = result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
        replies.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return replies
