"""The fast path of ``tools/call`` on stdio: a call decided and forwarded as JSON-RPC frames.

The SDK's server and client give every request models, dispatch and a worker thread; a
``tools/call`` needs none of it. :class:`FastCalls` takes a client's ``tools/call`` frame from
the :class:`~.wire.Wire` (once the connection is initialized), and the gateway
(:meth:`~.server.Gateway.fast_call`) checks its arguments against the tool's listed (and pinned)
``inputSchema``, decides it on the event loop, sends the allowed call to its server through the
server's :class:`~.pipes.Pipes`, records the result and writes the answer: the same checks,
decisions, events and answers as the SDK path, in fewer steps.

What it leaves to the SDK path, frame as it came: a call with a progress token (the server's
progress reports go back through the SDK), a retry of an escalated call (``requestState``),
params it does not know, a request id already in flight, and any other method. An escalated call
is decided here and handed over, its verdict with it, for the SDK path to put to the person
(:attr:`~.server.Gateway.predecided`). A client's cancellation of a call in flight here cancels
it (the server is told, and no answer is written), as the SDK does for its own requests.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mcp_types import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from policyc.runtime.approvals import call_digest

from .decide import Handover, Verdict
from .upstreams import error_result

if TYPE_CHECKING:
    from .server import Gateway
    from .wire import Wire

KNOWN = frozenset({"name", "arguments", "_meta"})  # the params of a call the fast path takes


class FastCalls:
    """The ``tools/call`` frames of one stdio client taken on the fast path; ``server`` is the
    SDK's server the other frames go to (its name is stamped on 2026-07-28 answers). Each call
    runs in an asyncio task of its own (the gateway runs on asyncio; its tasks cost less than a
    task group's); :meth:`close` cancels those still running when the connection ends."""

    def __init__(self, gateway: Gateway, wire: Wire, server: Any) -> None:
        self.gateway = gateway
        self.wire = wire
        self.server = server
        self.flying: dict[Any, asyncio.Task[None]] = {}
        self.cancelled: set[Any] = set()  # ids the client cancelled: their calls get no answer

    async def close(self) -> None:
        """Cancel the calls still running, and wait for them to end."""
        tasks = list(self.flying.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def take(self, frame: dict[str, Any], line: str) -> bool:
        """Whether the fast path takes ``frame`` (then it answers it); False leaves it to the SDK."""
        method = frame.get("method")
        if method == "notifications/cancelled":
            params = frame.get("params")
            ident = params.get("requestId") if isinstance(params, dict) else None
            task = self.flying.get(ident) if isinstance(ident, int | str) else None
            if task is None:
                return False
            self.cancelled.add(ident)
            task.cancel()
            return True
        if method != "tools/call" or frame.get("jsonrpc") != "2.0":
            return False
        ident = frame.get("id")
        if isinstance(ident, bool) or not isinstance(ident, int | str) or ident in self.flying:
            return False
        params = frame.get("params")
        if not isinstance(params, dict) or not KNOWN.issuperset(params):
            return False
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return False
        if meta is not None and (not isinstance(meta, dict) or "progressToken" in meta):
            return False
        version = self._version(meta)
        if version is None:
            return False
        answer = self._answer(ident, name, dict(arguments or {}), line, version)
        self.flying[ident] = asyncio.get_running_loop().create_task(answer)
        return True

    def _version(self, meta: dict[str, Any] | None) -> str | None:
        """The protocol version the call is answered in (a 2026-07-28 request says it in its
        ``_meta``, a handshake-era one speaks the connection's), None when the fast path leaves
        the call to the SDK: before the handshake, or a version or envelope the SDK would refuse."""
        session = self.gateway.clients.get("stdio")
        if session is None:  # no request has reached the SDK's server yet
            return None
        stated = (meta or {}).get(PROTOCOL_VERSION_META_KEY)
        if stated is not None:
            return stated if stated in MODERN_PROTOCOL_VERSIONS else None
        version = session.protocol_version
        if not self.wire.initialized or version in MODERN_PROTOCOL_VERSIONS:
            return None
        return version

    async def _answer(
        self, ident: Any, name: str, arguments: dict[str, Any], line: str, version: str
    ) -> None:
        try:
            answer = await self.gateway.fast_call(name, arguments)
        except asyncio.CancelledError:
            if ident in self.cancelled:  # the client cancelled it: no answer, as the SDK does
                return
            raise
        except Exception as error:  # this call fails, closed; the connection goes on
            kind = type(error).__name__
            answer = error_result(f"policyc did not send the call of `{name}`: it failed ({kind}: {error})")
        finally:
            self.flying.pop(ident, None)
            self.cancelled.discard(ident)
        if isinstance(answer, Verdict):
            self.gateway.predecided[ident] = Handover(call_digest(name, arguments), answer)
            await self.wire.pass_on(line)
            return
        await self.wire.send({"jsonrpc": "2.0", "id": ident, "result": self._wire_form(answer, version)})

    def _wire_form(self, result: Any, version: str) -> dict[str, Any]:
        """A ``CallToolResult`` as the SDK's server answers it in ``version``: shaped by that
        version's schema; on 2026-07-28, with its ``resultType`` and the server's name stamped."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        shaped = serialize_server_result("tools/call", version, dumped)
        if version in MODERN_PROTOCOL_VERSIONS:
            shaped.setdefault("resultType", "complete")
            meta = shaped.get("_meta")
            if meta is None:
                shaped["_meta"] = {SERVER_INFO_META_KEY: self.server.server_info_stamp}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
                shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: self.server.server_info_stamp}
        return shaped
