"""requests instrumented: every request a session sends (each hop of a redirect) and every
request an adapter sends (what authentication handlers re-send) is decided before it is sent
(:func:`instrument_requests`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from .http_hooks import (
    MAX_BODY_BYTES,
    Hooks,
    Instrumentation,
    decide_request,
    decided,
    gather,
    header_values,
    instrumentation,
    too_large,
    unreadable,
)


def _requests_body(request: Any, limit: int) -> bytes | str:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
    elif isinstance(body, str):
        if len(body) > limit or len(body.encode("utf-8")) > limit:
            raise too_large(limit)
        return body
    elif hasattr(body, "read"):
        try:
            data = body.read(limit + 1)
        except Exception as error:
            raise unreadable(error) from None
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(data) > limit:
            raise too_large(limit)
        _requests_buffered(request, data)
    elif isinstance(body, Iterable):
        data = _requests_buffered(request, gather(body, limit))
    else:
        raise unreadable()
    if len(data) > limit:
        raise too_large(limit)
    return data


def _requests_buffered(request: Any, data: bytes) -> bytes:
    request.body = data
    request.headers.pop("Transfer-Encoding", None)
    request.headers["Content-Length"] = str(len(data))
    return data


def _requests_hop(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not HOOKS.state[0] or decided.get() is request:
            return original(self, request, *args, **kwargs)
        body = _requests_body(request, HOOKS.state[2])
        decide_request(HOOKS, request.method, str(request.url), header_values(request.headers.items()), body)
        token = decided.set(request)
        try:
            return original(self, request, *args, **kwargs)
        finally:
            decided.reset(token)

    return send


def _requests_targets() -> list[tuple[type, str, Callable[[Any], Any]]]:
    import requests
    import requests.adapters

    return [(requests.Session, "send", _requests_hop), (requests.adapters.HTTPAdapter, "send", _requests_hop)]


HOOKS = Hooks(_requests_targets)


def instrument_requests(
    allow_outside_session: bool = False, max_body_bytes: int = MAX_BODY_BYTES
) -> Instrumentation:
    """Decide every request sent with requests (every hop) before it is sent; as
    :func:`~.httpx_hooks.instrument_httpx`."""
    return instrumentation(HOOKS, allow_outside_session, max_body_bytes)
