"""httpx instrumented: every request a client hands to its transport (each hop of a redirect,
each retry of an authentication flow), and every request handed to httpx's own network
transports directly, is decided before it is sent (:func:`instrument_httpx`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any

from .http_hooks import (
    MAX_BODY_BYTES,
    Hooks,
    Instrumentation,
    agather,
    decide_request,
    decide_request_async,
    decided,
    gather,
    header_values,
    instrumentation,
    too_large,
    unreadable,
)


def _httpx_content(request: Any, limit: int) -> bytes | None:
    """The body if it was read already (None if it is still a stream)."""
    import httpx

    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    if len(content) > limit:
        raise too_large(limit)
    return content


def _httpx_buffered(request: Any, content: bytes) -> bytes:
    """Replace a streamed body by the bytes read from it (what is then sent)."""
    import httpx

    request.stream = httpx.ByteStream(content)
    request.read()
    return content


def _httpx_decide(request: Any, body: bytes) -> None:
    decide_request(
        HOOKS, request.method, str(request.url), header_values(request.headers.multi_items()), body
    )


def _httpx_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def hop(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not HOOKS.state[0] or decided.get() is request:
            return original(self, request, *args, **kwargs)
        limit = HOOKS.state[2]
        body = _httpx_content(request, limit)
        if body is None:
            if not isinstance(request.stream, Iterable):
                raise unreadable()
            body = _httpx_buffered(request, gather(request.stream, limit))
        _httpx_decide(request, body)
        token = decided.set(request)
        try:
            return original(self, request, *args, **kwargs)
        finally:
            decided.reset(token)

    return hop


def _httpx_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def hop(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not HOOKS.state[0] or decided.get() is request:
            return await original(self, request, *args, **kwargs)
        limit = HOOKS.state[2]
        body = _httpx_content(request, limit)
        if body is None:
            stream = request.stream
            if isinstance(stream, AsyncIterable):
                body = await agather(stream, limit)
            elif isinstance(stream, Iterable):
                body = gather(stream, limit)
            else:
                raise unreadable()
            body = _httpx_buffered(request, body)
        await decide_request_async(
            HOOKS, request.method, str(request.url), header_values(request.headers.multi_items()), body
        )
        token = decided.set(request)
        try:
            return await original(self, request, *args, **kwargs)
        finally:
            decided.reset(token)

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


HOOKS = Hooks(_httpx_targets)


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
    return instrumentation(HOOKS, allow_outside_session, max_body_bytes)
