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

The session travels in :mod:`contextvars` (:func:`use_session`), so code between the agent
loop and a tool need not pass it along. A scope may name the event that initiated its work
(``parent``, say the model's message): a call inside then depends on that event and on every
event recorded in the session since the scope began. Without a session, guarded code is
refused (complete mediation) unless the guard was told otherwise.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import json
import os
import threading
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from policyc.stdlib.events import EventError, check_event

from . import jsonio
from .session import Session
from .verdict import Decision, Reason, quote_value

current_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "policyc_session", default=None
)
# the parent of the innermost scope (what a call depends on is worked out from every scope)
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


def _refusal(rule: str, message: str, suggestion: str | None = None) -> Decision:
    """A denial made before the policy is asked (the action is not recorded)."""
    return Decision(None, False, (Reason(rule, message, suggestion, "high"),))


# ----------------------------------------------------------------------------- scopes


@dataclass(frozen=True)
class _Scope:
    session: Session
    parent: str | None
    start: int  # how many events the session held when the scope began
    outer: _Scope | None


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("policyc_scope", default=None)


@contextmanager
def use_session(session: Session, parent: str | None = None) -> Iterator[Session]:
    """Make ``session`` ambient for the code inside.

    With ``parent`` (an event id), a call inside depends on that event and on every event
    recorded in the session since the scope began; scopes of the same session nest by union
    (see :func:`dependencies`). Without it, a call depends on the whole history.
    """
    scope = _Scope(session, parent, len(session.order), _scope.get())
    tokens = current_session.set(session), current_parent.set(parent), _scope.set(scope)
    try:
        yield session
    finally:
        _scope.reset(tokens[2])
        current_parent.reset(tokens[1])
        current_session.reset(tokens[0])


def dependencies(session: Session) -> list[str] | None:
    """What a call recorded now in ``session`` depends on: ``None`` for the whole history, else
    the parent of every enclosing scope of this session and every event recorded since the
    outermost of them began. An enclosing scope of this session without a parent, or with a
    parent the session has not recorded, means the whole history; so does no scope at all."""
    parents: list[str] = []
    start = None
    scope = _scope.get()
    while scope is not None:
        if scope.session is session:
            if scope.parent is None or scope.parent not in session.events:
                return None
            parents.append(scope.parent)
            start = scope.start
        scope = scope.outer
    if start is None:
        return None
    return list(dict.fromkeys([*reversed(parents), *session.order[start:]]))


def new_id(prefix: str, session: Session | None = None) -> str:
    """A fresh event id (one ``session`` has not recorded, when given)."""
    while True:
        identifier = f"{prefix}{next(_ids)}"
        if session is None or identifier not in session.events:
            return identifier


def authorize_call(
    tool: str, args: Mapping[str, Any], session: Session | None = None, allow_outside: bool = False
) -> tuple[Decision, str | None]:
    """Record a call of ``tool`` in the ambient (or given) session and decide it."""
    session = session or current_session.get()
    if session is None:
        return Decision(None, allow_outside, () if allow_outside else (NO_SESSION,)), None
    identifier = new_id("call", session)
    event: dict[str, Any] = {"id": identifier, "kind": "tool_call", "tool": tool, "args": dict(args)}
    deps = dependencies(session)
    if deps is not None:
        event["deps"] = deps
    return session.authorize(event), identifier


def _text(value: Any) -> str:
    """A result as the text of its event: a string as it is, anything else as JSON if it can be."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            return str(value)
        except Exception:
            return f"<{type(value).__name__}>"


def error_text(error: BaseException) -> str:
    """What a tool that raised gives as its result: ``error: ExceptionType: message``."""
    try:
        message = str(error)
    except Exception:
        message = "<the message cannot be shown>"
    return f"error: {type(error).__name__}: {message}" if message else f"error: {type(error).__name__}"


def record_result(
    session: Session | None, call: str | None, tool: str, result: Any, labels: tuple[str, ...]
) -> None:
    session = session or current_session.get()
    if session is None or call is None:
        return
    event: dict[str, Any] = {
        "id": new_id("result", session),
        "kind": "tool_result",
        "of": call,
        "tool": tool,
        "text": _text(result),
    }
    if labels:
        event["labels"] = list(labels)
    session.record(event)


# ------------------------------------------------------------------------------ guard

AMBIGUOUS = "policyc:ambiguous-arguments"


def call_arguments(
    signature: inspect.Signature, args: tuple, kwargs: dict
) -> tuple[dict[str, Any], str | None]:
    """The arguments of a call as recorded: each parameter by name (defaults applied), a
    ``*args`` parameter under its own name as a list, and the keys of a ``**kwargs`` parameter
    among the others; a method's ``self`` or ``cls`` is not an argument. Values Python gives
    that JSON spells otherwise become JSON values: a path its text, bytes their UTF-8 text, a
    tuple or a set a list (a set in a fixed order); anything else that is no JSON value makes
    the event malformed, which the session refuses. The second value is a key given both ways
    (``None`` if none)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    out: dict[str, Any] = {}
    extra: Mapping[str, Any] = {}
    first = next(iter(signature.parameters), None)
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if name == first and name in ("self", "cls") and kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            continue
        if kind is inspect.Parameter.VAR_KEYWORD:
            extra = value
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = [_as_json(v) for v in value]
        else:
            out[name] = _as_json(value)
    for key, value in extra.items():
        if key in out:
            return out, key
        out[key] = _as_json(value)
    return out, None


def _as_json(value: Any, depth: int = 0) -> Any:
    """A Python value as the JSON value it stands for (see :func:`call_arguments`)."""
    if depth > 64:  # deeper than an event allows: left for the event check to refuse
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value) if isinstance(os.fspath(value), str) else value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, tuple | list):
        return [_as_json(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return [_as_json(v, depth + 1) for v in sorted(value, key=repr)]
    if isinstance(value, dict):
        return {k: _as_json(v, depth + 1) for k, v in value.items()}
    return value


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
    ``result_labels`` label what the tool returns, or the exception it raises
    (``["untrusted"]`` for a web fetch).
    """
    if on_deny not in ("raise", "return"):
        raise ValueError("on_deny is 'raise' or 'return'")

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        name = tool or function.__name__
        signature = inspect.signature(function)
        labels = tuple(result_labels)

        def decide(args: tuple, kwargs: dict) -> tuple[Decision, str | None]:
            arguments, twice = call_arguments(signature, args, kwargs)
            if twice is not None:
                return _refusal(
                    AMBIGUOUS,
                    f"argument {quote_value(twice)} of {name} is given twice, as a parameter and "
                    "as a keyword argument, so the call is refused",
                    "Pass each argument once.",
                ), None
            return authorize_call(name, arguments, session, allow_outside_session)

        def refused(decision: Decision) -> Any:
            if on_deny == "return":
                return decision.feedback
            raise PolicyDenied(decision)

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                decision, call = decide(args, kwargs)
                if not decision.allowed:
                    return refused(decision)
                try:
                    result = await function(*args, **kwargs)
                except BaseException as error:
                    record_result(session, call, name, error_text(error), labels)
                    raise
                record_result(session, call, name, result, labels)
                return result

            return run_async

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            decision, call = decide(args, kwargs)
            if not decision.allowed:
                return refused(decision)
            try:
                result = function(*args, **kwargs)
            except BaseException as error:
                record_result(session, call, name, error_text(error), labels)
                raise
            record_result(session, call, name, result, labels)
            return result

        return run

    return wrap(fn) if fn is not None else wrap


# ------------------------------------------------------------------------------- HTTP

MAX_BODY_BYTES = 1024 * 1024  # the most of a request body read to decide it (default)
REDACTED = "[redacted]"
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
BODY_TOO_LARGE = "policyc:body-too-large"
BODY_UNREADABLE = "policyc:body-unreadable"

# the request a layer decided, so that the layers below it pass it through
_decided: contextvars.ContextVar[Any] = contextvars.ContextVar("policyc_http_decided", default=None)


class _Hooks:
    """The patches of one HTTP library: installed while at least one instrumentation of it is
    active, whatever the order in which instrumentations begin and end."""

    def __init__(self, targets: Callable[[], list[tuple[type, str, Callable[[Any], Any]]]]) -> None:
        self.targets = targets  # (class, attribute, wrapper of the original)
        self.lock = threading.Lock()
        self.active: dict[int, tuple[bool, int]] = {}  # handle -> (allow_outside_session, max_body_bytes)
        self.installed: list[tuple[type, str, Any, Any, bool]] = []
        self.handles = itertools.count(1)
        # read without the lock by the patches: on, requests outside a session allowed, body cap
        self.state: tuple[bool, bool, int] = (False, False, MAX_BODY_BYTES)

    def acquire(self, allow_outside: bool, max_body: int) -> int:
        with self.lock:
            if not self.installed:
                for owner, attribute, make in self.targets():
                    own = attribute in owner.__dict__
                    original = getattr(owner, attribute)
                    wrapper = make(original)
                    setattr(owner, attribute, wrapper)
                    self.installed.append((owner, attribute, original, wrapper, own))
            handle = next(self.handles)
            self.active[handle] = (allow_outside, max_body)
            self._settle()
            return handle

    def release(self, handle: int) -> None:
        with self.lock:
            if self.active.pop(handle, None) is None or self.active:
                self._settle()
                return
            self._settle()
            while self.installed:
                owner, attribute, original, wrapper, own = self.installed.pop()
                if owner.__dict__.get(attribute) is not wrapper:
                    continue  # patched again on top of ours: ours stays there, passing requests through
                if own:
                    setattr(owner, attribute, original)
                else:
                    delattr(owner, attribute)

    def _settle(self) -> None:
        options = list(self.active.values())
        self.state = (
            bool(options),
            bool(options) and all(allow for allow, _ in options),
            min((cap for _, cap in options), default=MAX_BODY_BYTES),
        )


class Instrumentation:
    """One instrumentation of an HTTP library: ``uninstall()`` (or leaving the ``with`` block)
    ends it; the library is restored when the last one ends."""

    def __init__(self, hooks: _Hooks, handle: int) -> None:
        self._hooks: _Hooks | None = hooks
        self._handle = handle

    def uninstall(self) -> None:
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            hooks.release(self._handle)

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


def _header_values(items: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Request headers as an argument: names lower-cased, repeated ones joined by ``, ``,
    credentials (:data:`REDACTED_HEADERS`) as ``[redacted]``."""
    out: dict[str, str] = {}
    for name, value in items:
        key = (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        if key in REDACTED_HEADERS:
            text = REDACTED
        out[key] = f"{out[key]}, {text}" if key in out and key not in REDACTED_HEADERS else text
    return out


def _decide_request(hooks: _Hooks, method: Any, url: str, headers: dict[str, str], body: bytes | str) -> None:
    from urllib.parse import urlsplit

    if isinstance(method, bytes):
        method = method.decode("latin-1")
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    args = {
        "method": str(method).upper(),
        "url": url,
        "host": host,
        "body": body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body,
        "headers": headers,
    }
    decision, _ = authorize_call("http_request", args, None, hooks.state[1])
    if not decision.allowed:
        raise PolicyDenied(decision)


def _too_large(limit: int) -> PolicyDenied:
    return PolicyDenied(
        _refusal(
            BODY_TOO_LARGE,
            f"the request body is larger than {limit} bytes, the most the monitor reads to decide "
            "a request, so the request is refused",
            "Send less data in one request.",
        )
    )


def _unreadable(error: BaseException | None = None) -> PolicyDenied:
    why = f" ({type(error).__name__})" if error is not None else ""
    return PolicyDenied(
        _refusal(
            BODY_UNREADABLE,
            f"the request body cannot be read to decide the request{why}, so the request is refused",
            "Send the body as bytes or text.",
        )
    )


class _Body:
    """The chunks of a streamed body as they are read, refused past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, chunk: Any) -> None:
        part = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        self.size += len(part)
        if self.size > self.limit:
            raise _too_large(self.limit)
        self.parts.append(part)


def _gather(chunks: Iterable[Any], limit: int) -> bytes:
    """The chunks of a streamed body joined, refused when they exceed ``limit`` bytes."""
    body = _Body(limit)
    try:
        for chunk in chunks:
            body.add(chunk)
    except PolicyDenied:
        raise
    except Exception as error:
        raise _unreadable(error) from None
    return b"".join(body.parts)


async def _agather(chunks: AsyncIterable[Any], limit: int) -> bytes:
    body = _Body(limit)
    try:
        async for chunk in chunks:
            body.add(chunk)
    except PolicyDenied:
        raise
    except Exception as error:
        raise _unreadable(error) from None
    return b"".join(body.parts)


# httpx: every request a client hands to its transport (each hop of a redirect, each retry of
# an authentication flow), and every request handed to httpx's own network transports directly


def _httpx_content(request: Any, limit: int) -> bytes | None:
    """The body if it was read already (None if it is still a stream)."""
    import httpx

    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    if len(content) > limit:
        raise _too_large(limit)
    return content


def _httpx_buffered(request: Any, content: bytes) -> bytes:
    """Replace a streamed body by the bytes read from it (what is then sent)."""
    import httpx

    request.stream = httpx.ByteStream(content)
    request.read()
    return content


def _httpx_decide(request: Any, body: bytes) -> None:
    _decide_request(
        _HTTPX, request.method, str(request.url), _header_values(request.headers.multi_items()), body
    )


def _httpx_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def hop(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _HTTPX.state[0] or _decided.get() is request:
            return original(self, request, *args, **kwargs)
        limit = _HTTPX.state[2]
        body = _httpx_content(request, limit)
        if body is None:
            if not isinstance(request.stream, Iterable):
                raise _unreadable()
            body = _httpx_buffered(request, _gather(request.stream, limit))
        _httpx_decide(request, body)
        token = _decided.set(request)
        try:
            return original(self, request, *args, **kwargs)
        finally:
            _decided.reset(token)

    return hop


def _httpx_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def hop(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _HTTPX.state[0] or _decided.get() is request:
            return await original(self, request, *args, **kwargs)
        limit = _HTTPX.state[2]
        body = _httpx_content(request, limit)
        if body is None:
            stream = request.stream
            if isinstance(stream, AsyncIterable):
                body = await _agather(stream, limit)
            elif isinstance(stream, Iterable):
                body = _gather(stream, limit)
            else:
                raise _unreadable()
            body = _httpx_buffered(request, body)
        _httpx_decide(request, body)
        token = _decided.set(request)
        try:
            return await original(self, request, *args, **kwargs)
        finally:
            _decided.reset(token)

    return hop


def _httpx_targets() -> list[tuple[type, str, Callable[[Any], Any]]]:
    import httpx

    targets: list[tuple[type, str, Callable[[Any], Any]]] = [
        (httpx.HTTPTransport, "handle_request", _httpx_sync),
        (httpx.AsyncHTTPTransport, "handle_async_request", _httpx_async),
    ]
    if hasattr(httpx.Client, "_send_single_request"):  # per hop, whatever the transport
        targets.append((httpx.Client, "_send_single_request", _httpx_sync))
    if hasattr(httpx.AsyncClient, "_send_single_request"):
        targets.append((httpx.AsyncClient, "_send_single_request", _httpx_async))
    return targets


# requests: every request a session sends (each hop of a redirect) and every request an
# adapter sends (what authentication handlers re-send)


def _requests_body(request: Any, limit: int) -> bytes | str:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
    elif isinstance(body, str):
        if len(body) > limit or len(body.encode("utf-8")) > limit:
            raise _too_large(limit)
        return body
    elif hasattr(body, "read"):
        try:
            data = body.read(limit + 1)
        except Exception as error:
            raise _unreadable(error) from None
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(data) > limit:
            raise _too_large(limit)
        _requests_buffered(request, data)
    elif isinstance(body, Iterable):
        data = _requests_buffered(request, _gather(body, limit))
    else:
        raise _unreadable()
    if len(data) > limit:
        raise _too_large(limit)
    return data


def _requests_buffered(request: Any, data: bytes) -> bytes:
    request.body = data
    request.headers.pop("Transfer-Encoding", None)
    request.headers["Content-Length"] = str(len(data))
    return data


def _requests_hop(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _REQUESTS.state[0] or _decided.get() is request:
            return original(self, request, *args, **kwargs)
        body = _requests_body(request, _REQUESTS.state[2])
        _decide_request(
            _REQUESTS, request.method, str(request.url), _header_values(request.headers.items()), body
        )
        token = _decided.set(request)
        try:
            return original(self, request, *args, **kwargs)
        finally:
            _decided.reset(token)

    return send


def _requests_targets() -> list[tuple[type, str, Callable[[Any], Any]]]:
    import requests
    import requests.adapters

    return [(requests.Session, "send", _requests_hop), (requests.adapters.HTTPAdapter, "send", _requests_hop)]


_HTTPX = _Hooks(_httpx_targets)
_REQUESTS = _Hooks(_requests_targets)


def _instrument(hooks: _Hooks, allow_outside_session: bool, max_body_bytes: int) -> Instrumentation:
    if not isinstance(max_body_bytes, int) or isinstance(max_body_bytes, bool) or max_body_bytes < 0:
        raise ValueError("max_body_bytes is a number of bytes (an int, 0 or more)")
    return Instrumentation(hooks, hooks.acquire(bool(allow_outside_session), max_body_bytes))


def instrument_httpx(
    allow_outside_session: bool = False, max_body_bytes: int = MAX_BODY_BYTES
) -> Instrumentation:
    """Decide every request httpx sends (sync and async clients, every hop) before it is sent.

    Instrumentations may overlap in any order (threads, asyncio tasks, nested blocks): the
    library is patched once, each request is decided by the session ambient where it is sent,
    and the patches go when the last instrumentation ends. A request sent outside any session
    is refused unless every active instrumentation says ``allow_outside_session=True``. A body
    is read (streams and uploads too) up to the smallest ``max_body_bytes`` of the active
    instrumentations; a larger one, or one that cannot be read, is refused.
    """
    return _instrument(_HTTPX, allow_outside_session, max_body_bytes)


def instrument_requests(
    allow_outside_session: bool = False, max_body_bytes: int = MAX_BODY_BYTES
) -> Instrumentation:
    """Decide every request sent with requests (every hop) before it is sent; as
    :func:`instrument_httpx`."""
    return _instrument(_REQUESTS, allow_outside_session, max_body_bytes)


# ---------------------------------------------------------------------------- chat tool loop

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
    return _text(content)


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
    or malformed call, the text the model should read instead.
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
    if not isinstance(name, str) or not name:
        return "Invalid tool call: it names no function"
    args, problem = parse_arguments(function.get("arguments"))
    if args is None:
        return f"Invalid arguments for {quote_value(name)}: {_short(problem or '')}"
    event = {"id": event_id, "kind": "tool_call", "tool": name, "args": args, "deps": [message_id]}
    try:
        check_event(dict(event), session.events)  # what would poison the session is refused here
    except EventError as error:
        return f"Invalid arguments for {quote_value(name)}: {_short(str(error))}"
    decision = session.authorize(event)
    if not decision.allowed:
        return decision.feedback
    implementation = tools.get(name)
    if implementation is None:
        return f"Unknown tool: {quote_value(name)}"
    labels = tuple(result_labels.get(name, ()))
    with use_session(session, parent=event_id):
        try:
            result = implementation(**args)
        except Exception as error:
            text = error_text(error)
            record_result(session, event_id, name, text, labels)
            return text
        except BaseException as error:
            record_result(session, event_id, name, error_text(error), labels)
            raise
        record_result(session, event_id, name, result, labels)
    return _text(result)
