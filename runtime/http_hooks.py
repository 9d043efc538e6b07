"""What the HTTP instrumentations share: the patches of a library, installed while an
instrumentation of it is active (:class:`Hooks`, :class:`Instrumentation`); a request made the
candidate action ``http_request`` (arguments ``method``, ``url``, ``host``, ``body``,
``headers``) and decided in the ambient session (:func:`decide_request`); and a request's body
read up to the cap, refused past it or when it cannot be read (:func:`gather`).

A layer that decided a request marks it (:data:`decided`) so that the layers below it pass it
through: a request is decided once per hop, however many patched layers it goes through.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any

from .context import PolicyDenied, authorize_call, authorize_call_async, refusal

MAX_BODY_BYTES = 1024 * 1024  # the most of a request body read to decide it (default)
REDACTED = "[redacted]"
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
BODY_TOO_LARGE = "policyc:body-too-large"
BODY_UNREADABLE = "policyc:body-unreadable"

# the request a layer decided, so that the layers below it pass it through
decided: contextvars.ContextVar[Any] = contextvars.ContextVar("policyc_http_decided", default=None)


class Hooks:
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

    def __init__(self, hooks: Hooks, handle: int) -> None:
        self._hooks: Hooks | None = hooks
        self._handle = handle

    def uninstall(self) -> None:
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            hooks.release(self._handle)

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


def header_values(items: Iterable[tuple[Any, Any]]) -> dict[str, str]:
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


def decide_request(hooks: Hooks, method: Any, url: str, headers: dict[str, str], body: bytes | str) -> None:
    """Decide a request as the action ``http_request`` in the ambient session (outside one, as
    the active instrumentations of ``hooks`` say): :class:`~.context.PolicyDenied` if refused
    (an escalated request is put to the monitor's approver first)."""
    decision, _ = authorize_call(
        "http_request", request_arguments(method, url, headers, body), None, hooks.state[1]
    )
    if not decision.allowed:
        raise PolicyDenied(decision)


async def decide_request_async(
    hooks: Hooks, method: Any, url: str, headers: dict[str, str], body: bytes | str
) -> None:
    """:func:`decide_request` for async clients: an approver is awaited, not waited for."""
    arguments = request_arguments(method, url, headers, body)
    decision, _ = await authorize_call_async("http_request", arguments, None, hooks.state[1])
    if not decision.allowed:
        raise PolicyDenied(decision)


def request_arguments(method: Any, url: str, headers: dict[str, str], body: bytes | str) -> dict[str, Any]:
    """The arguments of the action ``http_request``: method, URL, host, body and headers."""
    from urllib.parse import urlsplit

    if isinstance(method, bytes):
        method = method.decode("latin-1")
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    return {
        "method": str(method).upper(),
        "url": url,
        "host": host,
        "body": body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body,
        "headers": headers,
    }


def too_large(limit: int) -> PolicyDenied:
    """The refusal of a body larger than ``limit`` bytes."""
    return PolicyDenied(
        refusal(
            BODY_TOO_LARGE,
            f"the request body is larger than {limit} bytes, the most the monitor reads to decide "
            "a request, so the request is refused",
            "Send less data in one request.",
        )
    )


def unreadable(error: BaseException | None = None) -> PolicyDenied:
    """The refusal of a body that cannot be read (``error``: what reading it raised)."""
    why = f" ({type(error).__name__})" if error is not None else ""
    return PolicyDenied(
        refusal(
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
            raise too_large(self.limit)
        self.parts.append(part)


def gather(chunks: Iterable[Any], limit: int) -> bytes:
    """The chunks of a streamed body joined, refused when they exceed ``limit`` bytes."""
    body = _Body(limit)
    try:
        for chunk in chunks:
            body.add(chunk)
    except PolicyDenied:
        raise
    except Exception as error:
        raise unreadable(error) from None
    return b"".join(body.parts)


async def agather(chunks: AsyncIterable[Any], limit: int) -> bytes:
    """:func:`gather` for the chunks of an asynchronous stream."""
    body = _Body(limit)
    try:
        async for chunk in chunks:
            body.add(chunk)
    except PolicyDenied:
        raise
    except Exception as error:
        raise unreadable(error) from None
    return b"".join(body.parts)


def instrumentation(hooks: Hooks, allow_outside_session: bool, max_body_bytes: int) -> Instrumentation:
    """Begin an instrumentation of the library that ``hooks`` patch (see
    :func:`~.httpx_hooks.instrument_httpx` for the options)."""
    if not isinstance(max_body_bytes, int) or isinstance(max_body_bytes, bool) or max_body_bytes < 0:
        raise ValueError("max_body_bytes is a number of bytes (an int, 0 or more)")
    return Instrumentation(hooks, hooks.acquire(bool(allow_outside_session), max_body_bytes))
