"""``tools/call`` requests to a stdio server sent as JSON-RPC frames, beside the SDK's session.

The SDK's client session (``ClientSession``) keeps a server's connection: the handshake, the
lists, prompts, resources, the server's own requests and notifications. A :class:`Relay` sits
between the transport and that session: the session reads the transport's messages through it,
except the answers to the calls the relay sent itself (:meth:`Relay.call`), which it takes out
of the stream on the way and hands to their callers, with none of the session's request
machinery in between. Its
request ids are strings (``policyc-N``), the session's are integers, so the two never meet.

A call given up (the caller cancelled, or its timeout passed) is followed by a
``notifications/cancelled`` to the server, as the SDK's session does. When the server's stream
ends, every call still waiting fails with ``CONNECTION_CLOSED``. (The gateway runs on asyncio:
a call waits on an asyncio future, under ``asyncio.timeout``, which cost less than anyio's
events and cancel scopes on a path taken by every call.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

import anyio
from mcp import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

CANCEL_WRITE_TIMEOUT = 2.0  # seconds a courtesy cancellation may take to write


class Relay:
    """The frames of one server's connection: ``source`` and ``sink`` are the transport's streams
    (``SessionMessage``); the SDK's session reads :attr:`read` instead of ``source``: the same
    messages, read in the session's own reading task, less the answers to :meth:`call`, which
    are handed to the calls waiting for them on the way."""

    def __init__(self, source: Any, sink: Any) -> None:
        self.source = source
        self.sink = sink
        self.read = _Reading(self)
        self.waiting: dict[str, asyncio.Future[Any]] = {}  # each call's answer (None: closed)
        self.ids = itertools.count(1)
        self.closed = False

    def claimed(self, message: Any) -> bool:
        """Whether ``message`` answers a call of the relay (then the call has it)."""
        inner = getattr(message, "message", None)
        if isinstance(inner, JSONRPCResponse | JSONRPCError) and isinstance(inner.id, str):
            waiting = self.waiting.pop(inner.id, None)
            if waiting is not None:
                if not waiting.done():
                    waiting.set_result(inner)
                return True
        return False

    def close(self) -> None:
        """The server's stream ended: every call still waiting has no answer."""
        self.closed = True
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_result(None)
        self.waiting.clear()

    async def call(self, params: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send a ``tools/call`` with ``params`` and wait (``timeout`` seconds, None for ever) for
        its answer: the result as the server sent it. :class:`~mcp.MCPError` for an error
        answer, a timeout (``REQUEST_TIMEOUT``) or a closed connection (``CONNECTION_CLOSED``),
        as the SDK's session raises them."""
        if self.closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        ident = f"policyc-{next(self.ids)}"
        waiting = asyncio.get_running_loop().create_future()
        self.waiting[ident] = waiting
        request = JSONRPCRequest(jsonrpc="2.0", id=ident, method="tools/call", params=params)
        try:
            try:
                await self.sink.send(SessionMessage(request))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            try:
                async with asyncio.timeout(timeout):
                    answer = await waiting
            except TimeoutError:
                await self._cancel(ident, f"timed out after {timeout}s", shield=False)
                raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out") from None
            except anyio.get_cancelled_exc_class():
                await self._cancel(ident, "caller cancelled", shield=True)
                raise
        finally:
            self.waiting.pop(ident, None)
        if answer is None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        if isinstance(answer, JSONRPCError):
            raise MCPError(code=answer.error.code, message=answer.error.message)
        return answer.result

    async def _cancel(self, ident: str, reason: str, shield: bool) -> None:
        """Tell the server a call is given up (best effort, bounded)."""
        note = JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": ident, "reason": reason}
        )
        with anyio.CancelScope(shield=shield), anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self.sink.send(SessionMessage(note))


class _Reading:
    """What the SDK's session reads: the transport's stream, less the relay's answers."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def __getattr__(self, name: str) -> Any:  # ``last_context`` and the like: the stream's own
        return getattr(self.relay.source, name)

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def receive(self) -> Any:
        try:
            while True:
                message = await self.relay.source.receive()
                if not self.relay.claimed(message):
                    return message
        except BaseException:
            self.relay.close()
            raise

    def close(self) -> None:
        self.relay.close()
        self.relay.source.close()

    async def aclose(self) -> None:
        self.relay.close()
        await self.relay.source.aclose()

    async def __aenter__(self) -> _Reading:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
