"""What each client session of the gateway reaches: the servers it may call, the tools hidden
from it, and where a server's own requests go.

Over stdio the gateway has one client and one set of servers. Behind ``--listen`` every
streamable HTTP session gets its own connections to the servers (its own processes for stdio
servers), started at its first request and stopped when the session ends, so that one client's
calls never change what a server holds for another, and a server's sampling, elicitation or
roots request can only be its own client's. A server the configuration marks ``shared = true``
keeps one connection for every session; its requests go to the client whose call is in flight
at that server (:func:`route`).

:class:`Servers` puts several :class:`~.upstreams.Upstreams` (the shared ones and a session's
own) behind the part of their interface the gateway uses; a :class:`View` is one session's
servers and the tools hidden from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp.types as mt

    from .upstreams import Upstreams, UpstreamTool


@dataclass(frozen=True)
class Servers:
    """The servers of several :class:`~.upstreams.Upstreams` as one: each server belongs to the
    first part that has a connection to it."""

    parts: tuple[Upstreams, ...]

    def _part(self, name: str) -> Upstreams | None:
        return next((p for p in self.parts if name in p.connections), None)

    @property
    def tools(self) -> dict[str, UpstreamTool]:
        """Every tool (``S.T``) of every part, the first part's where two have one name."""
        found: dict[str, UpstreamTool] = {}
        for part in self.parts:
            for qualified, tool in part.tools.items():
                found.setdefault(qualified, tool)
        return found

    def tool(self, qualified: str) -> UpstreamTool | None:
        """The tool ``S.T`` (a call's lookup: no merged listing made)."""
        return next((t for part in self.parts if (t := part.tools.get(qualified)) is not None), None)

    def failure(self, name: str) -> str | None:
        """Why the server ``name`` is not running (None: it runs, or is not one of these)."""
        part = self._part(name)
        return None if part is None else part.connections[name].failure

    def announced(self) -> dict[str, Any]:
        return {name: info for part in self.parts for name, info in part.announced().items()}

    def session(self, name: str) -> Any:
        part = self._part(name)
        return None if part is None else part.session(name)

    def capabilities(self, name: str) -> Any:
        part = self._part(name)
        return None if part is None else part.capabilities(name)

    def running(self) -> list[str]:
        return [name for part in self.parts for name in part.running()]

    async def list_tools(self) -> list[UpstreamTool]:
        for part in self.parts:
            await part.list_tools()
        return list(self.tools.values())

    async def call_tool(
        self, qualified: str, arguments: Mapping[str, Any] | None, progress: Any = None
    ) -> mt.CallToolResult:
        part = self._part(qualified.partition(".")[0])
        if part is None:
            from .upstreams import error_result

            return error_result(f"no server `{qualified.partition('.')[0]}` behind the gateway")
        return await part.call_tool(qualified, arguments, progress=progress)


@dataclass
class View:
    """One client session's servers and the tools hidden from it (``S.T`` to why). ``ready`` is
    set once its own servers have started and ``stop`` ends them (both None for the view the
    sessions share)."""

    servers: Servers
    hidden: dict[str, str]
    ready: Any = None  # an anyio.Event
    stop: Any = None  # an anyio.Event


@dataclass
class InFlight:
    """The requests each client (by key) has in flight at each server, to know whose call a
    shared server's request to a client belongs to."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @contextlib.contextmanager
    def at(self, key: str, server: str) -> Iterator[None]:
        """Count a request of ``key`` at ``server`` while the block runs."""
        mine = self.counts.setdefault(key, {})
        mine[server] = mine.get(server, 0) + 1
        try:
            yield
        finally:
            mine[server] -= 1
            if not mine[server]:
                del mine[server]
            if not mine:
                del self.counts[key]

    def route(self, server: str, clients: Collection[str]) -> tuple[str | None, str]:
        """The key of the client a request of the shared ``server`` goes to — the one client with
        a request in flight at it, or else the only client connected — or why there is none.

        >>> flight = InFlight({"http:a": {"git": 1}})
        >>> flight.route("git", ["http:a", "http:b"])
        ('http:a', '')
        >>> flight.route("web", ["http:a", "http:b"])[1]
        'no client has a request in flight at the shared server `web`'
        >>> flight.route("web", ["stdio"])
        ('stdio', '')
        >>> with flight.at("http:b", "git"):
        ...     flight.route("git", ["http:a", "http:b"])[1]
        '2 clients have requests in flight at the shared server `git`'
        """
        busy = [key for key, servers in self.counts.items() if servers.get(server) and key in clients]
        if len(busy) == 1:
            return busy[0], ""
        if busy:
            return None, f"{len(busy)} clients have requests in flight at the shared server `{server}`"
        if len(clients) == 1:
            return next(iter(clients)), ""
        if not clients:
            return None, "no client has connected to policyc mcp yet"
        return None, f"no client has a request in flight at the shared server `{server}`"
