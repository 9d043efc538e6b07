"""The MCP servers behind the gateway, as clients of the official ``mcp`` SDK.

:class:`Upstreams` connects to every server of a :class:`~.config.GatewayConfig` — a command
it starts (stdio) or a URL (streamable HTTP) — as an async context manager, and offers:

* ``upstreams.tools``, after :meth:`~Upstreams.list_tools`: the tools of every running server,
  each an :class:`UpstreamTool` named ``S.T`` (``server.tool``), with the SDK's
  ``mcp.types.Tool`` it was listed as (name, description, ``inputSchema``);
* :meth:`~Upstreams.call_tool` ``(qualified, arguments)``: the tool's ``CallToolResult``; a
  server that is not running (it failed to start or crashed), a tool it does not have, a
  timeout or a broken connection give a result with ``isError`` set that says so, never an
  exception, and the other servers keep serving;
* :meth:`~Upstreams.session` ``(name)``: a running server's ``ClientSession`` (None when it is
  not running), for the requests the gateway passes through (prompts, resources, completions);
* :attr:`~Upstreams.failures`: why each server that is not running stopped.

Without an event loop of one's own, :func:`list_tools` starts the servers, lists their tools and
stops them::

    from policyc.gateway.config import read_config
    from policyc.gateway.upstreams import list_tools

    tools, failures = list_tools(read_config("gateway.toml"))
    for tool in tools:
        print(tool.qualified, tool.tool.description, tool.tool.input_schema)

Servers start in parallel; one that does not start (or answer ``initialize``) within
``start_timeout`` seconds is left out, its reason in ``failures``. Requests and notifications a
server sends back (sampling, elicitation, roots, logging, progress, list changes) go to the
callbacks given to :class:`Upstreams` (see :class:`Callbacks`); without them, the SDK's defaults
refuse requests and drop notifications.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from .config import GatewayConfig, Upstream

if TYPE_CHECKING:
    import mcp.types as mt
    from mcp import ClientSession

START_TIMEOUT = 30.0  # seconds a server has to start and answer `initialize`
RESTART_BACKOFF = 1.0  # seconds before the first restart of a server that stopped; doubled each time
RESTART_LONGEST = 30.0  # the longest wait before a restart


@dataclass(frozen=True)
class UpstreamTool:
    """A tool of an upstream server: ``qualified`` is ``server.name``, the name clients and the
    policy see; ``tool`` the SDK's ``Tool`` as the server listed it."""

    server: str
    name: str
    tool: mt.Tool

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


@dataclass(frozen=True)
class Callbacks:
    """What to do with what a server sends back, each called with the server's name first:
    ``notification(server, message)`` for every notification (and transport error);
    ``sampling(server, context, params)``, ``elicitation(server, context, params)`` and
    ``list_roots(server, context)`` answer the server's requests as the SDK's client callbacks
    do (None: refused)."""

    notification: Callable[[str, Any], Awaitable[None]] | None = None
    sampling: Callable[[str, Any, Any], Awaitable[Any]] | None = None
    elicitation: Callable[[str, Any, Any], Awaitable[Any]] | None = None
    list_roots: Callable[[str, Any], Awaitable[Any]] | None = None


@dataclass
class _Connection:
    server: Upstream
    session: ClientSession | None = None
    failure: str | None = None
    stop: Any = None  # an anyio.Event, set to stop the connection
    done: Any = None  # an anyio.Event, set once the connection has ended
    capabilities: Any = None
    instructions: str | None = None
    info: Any = None  # the Implementation (name, version) the server announced
    restarts: int = 0  # how many times the server was started again before this connection
    pipes: Any = None  # a stdio server's Pipes (the fast path's calls), None for other servers


@dataclass
class Upstreams:
    """The connections to the servers of ``config``; ``async with`` starts them all and stops
    them at the end. ``errlog`` receives the stdio servers' stderr."""

    config: GatewayConfig
    callbacks: Callbacks = field(default_factory=Callbacks)
    errlog: TextIO = field(default_factory=lambda: sys.stderr)
    start_timeout: float = START_TIMEOUT
    tools: dict[str, UpstreamTool] = field(default_factory=dict)
    connections: dict[str, _Connection] = field(default_factory=dict)
    group: Any = None

    async def __aenter__(self) -> Upstreams:
        import anyio

        self.group = anyio.create_task_group()
        await self.group.__aenter__()
        try:
            started = []
            for server in self.config.servers:
                connection = _Connection(server, stop=anyio.Event(), done=anyio.Event())
                self.connections[server.name] = connection
                ready = anyio.Event()
                started.append(ready)
                self.group.start_soon(self._run, connection, ready)
            for ready in started:
                await ready.wait()
        except BaseException:
            self.group.cancel_scope.cancel()
            await self.group.__aexit__(None, None, None)
            raise
        return self

    async def stop(self) -> None:
        """Stop every server (each transport ends its process) and wait until they have ended."""
        for connection in self.connections.values():
            connection.stop.set()
        for connection in self.connections.values():
            await connection.done.wait()

    async def release(self, names: set[str]) -> None:
        """Stop the servers ``names`` and forget them (no failure: they are not wanted here)."""
        for name in names:
            self.connections[name].stop.set()
        for name in names:
            await self.connections.pop(name).done.wait()
        self.tools = {q: t for q, t in self.tools.items() if t.server not in names}

    async def __aexit__(self, *exc: Any) -> None:
        for connection in self.connections.values():
            connection.stop.set()
        try:
            await self.group.__aexit__(*exc)
        finally:
            self.group = None

    # ------------------------------------------------------------------------- queries

    @property
    def failures(self) -> dict[str, str]:
        """Why each server that is not running stopped (or never started)."""
        return {name: c.failure for name, c in self.connections.items() if c.failure is not None}

    def announced(self) -> dict[str, Any]:
        """The name and version (``Implementation``) each server announced when it started."""
        return {name: c.info for name, c in self.connections.items() if c.info is not None}

    def session(self, name: str) -> ClientSession | None:
        """The session of a running server, None for a server not running or not configured."""
        connection = self.connections.get(name)
        return None if connection is None else connection.session

    def capabilities(self, name: str) -> Any:
        """What a running server said it can do (``ServerCapabilities``), None otherwise."""
        connection = self.connections.get(name)
        return None if connection is None or connection.session is None else connection.capabilities

    def running(self) -> list[str]:
        """The names of the servers running now, in the configuration's order."""
        return [name for name, c in self.connections.items() if c.session is not None]

    async def list_tools(self) -> list[UpstreamTool]:
        """The tools of every running server, listed again (every page), in the configuration's
        order; also kept in :attr:`tools`. A server that fails to list is marked not running."""
        import mcp.types as mt

        found: dict[str, UpstreamTool] = {}
        for name in self.running():
            session = self.session(name)
            assert session is not None
            try:
                cursor = None
                while True:
                    params: mt.PaginatedRequestParams | None = (
                        mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    page = await session.list_tools(params=params)
                    for tool in page.tools:
                        listed = UpstreamTool(name, tool.name, tool)
                        found.setdefault(listed.qualified, listed)
                    cursor = page.next_cursor
                    if not cursor:
                        break
            except Exception as error:
                self._lost(name, f"listing its tools failed: {_describe(error)}")
        self.tools = found
        return list(found.values())

    async def call_tool(
        self,
        qualified: str,
        arguments: Mapping[str, Any] | None,
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> mt.CallToolResult:
        """Call ``qualified`` (``server.tool``) with ``arguments``: its result, or a result with
        ``isError`` set saying why there is none (a server not running or not configured, a
        timeout, a broken connection). ``progress`` receives the server's progress reports."""
        import mcp.types as mt

        server, _, tool = qualified.partition(".")
        connection = self.connections.get(server)
        if connection is None or not tool:
            return error_result(f"no server `{server}` behind the gateway for the tool `{qualified}`")
        session = connection.session
        if session is None:
            return error_result(f"the server `{server}` is not running: {connection.failure or 'stopped'}")
        try:
            result = await session.call_tool(
                tool,
                dict(arguments or {}),
                read_timeout_seconds=connection.server.timeout,
                progress_callback=progress,  # type: ignore[arg-type]
                meta=dict(meta) if meta else None,  # type: ignore[arg-type]
            )
        except Exception as error:
            return self._failed(connection, qualified, error)
        if not isinstance(result, mt.CallToolResult):
            return error_result(f"the server `{server}` answered the call with a {type(result).__name__}")
        return result

    async def relay_call(self, qualified: str, arguments: Mapping[str, Any]) -> mt.CallToolResult:
        """:meth:`call_tool` for the fast path: a stdio server of the handshake era is called
        through its :class:`~.pipes.Pipes` (its answer checked as the SDK's session checks it, the
        structured content against the tool's ``outputSchema`` too); any other through
        :meth:`call_tool`. A failure is an error result, as :meth:`call_tool` gives."""
        import mcp.types as mt
        from mcp_types.methods import validate_server_result
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        server, _, tool = qualified.partition(".")
        connection = self.connections.get(server)
        session = None if connection is None else connection.session
        if (
            connection is None
            or session is None
            or connection.pipes is None
            or session.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):
            return await self.call_tool(qualified, arguments)
        try:
            raw = await connection.pipes.call(
                {"name": tool, "arguments": dict(arguments)}, connection.server.timeout
            )
            validate_server_result("tools/call", str(session.protocol_version), raw)
            result = mt.CallToolResult.model_validate(raw, by_name=False)
            if not result.is_error:
                await check_structured(self, server, tool, result)
        except Exception as error:  # an error answer, a timeout, a closed connection, a wrong result
            return self._failed(connection, qualified, error)
        return result

    def _failed(self, connection: _Connection, qualified: str, error: BaseException) -> mt.CallToolResult:
        """The error result of a call that failed; a server whose connection ended is marked
        not running."""
        server, _, tool = qualified.partition(".")
        reason = _describe(error)
        if _connection_closed(error, connection):
            self._lost(server, f"it stopped during a call of `{tool}`: {reason}")
            return error_result(f"the server `{server}` stopped during the call: {reason}")
        return error_result(f"the call of `{qualified}` failed: {reason}")

    # ------------------------------------------------------------------- connections

    async def _run(self, connection: _Connection, ready: Any) -> None:
        import anyio

        from .probe import missing_command

        server = connection.server
        try:
            not_found = missing_command(server)
            if not_found is not None:  # said with the PATH used, rather than as the OS's error
                connection.failure = not_found
                return
            async with contextlib.AsyncExitStack() as stack:
                session = await stack.enter_async_context(self._client(server, connection))
                with anyio.fail_after(self.start_timeout):  # no task group may start inside it
                    result = await session.initialize()
                connection.capabilities = result.capabilities
                connection.instructions = result.instructions
                connection.info = result.server_info
                connection.session = session
                ready.set()
                await connection.stop.wait()
                connection.session = None
        except TimeoutError:
            connection.failure = f"it did not start within {self.start_timeout:g} s"
        except Exception as error:
            if connection.failure is None:
                connection.failure = f"it could not be started: {_describe(error)}"
        except BaseException:
            raise
        finally:
            connection.session = None
            ready.set()
            connection.done.set()
            if connection.failure is not None:
                print(
                    f"policyc mcp: server `{server.name}` is not running: {connection.failure}",
                    file=sys.stderr,
                )

    @contextlib.asynccontextmanager
    async def _client(self, server: Upstream, connection: _Connection | None = None) -> Any:
        from mcp import ClientSession

        async with contextlib.AsyncExitStack() as stack:
            if server.command is not None:
                from mcp.client.stdio import StdioServerParameters

                from .pipes import server_pipes

                parameters = StdioServerParameters(
                    command=server.command,
                    args=list(server.args),
                    env=dict(server.env) or None,
                    cwd=server.cwd,
                )
                # the fast path's tools/call frames pass beside the session
                read, write, pipes = await stack.enter_async_context(server_pipes(parameters, self.errlog))
                if connection is not None:
                    connection.pipes = pipes
            else:
                from mcp.client.streamable_http import streamable_http_client

                client = None
                if server.headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    client = create_mcp_http_client(headers=dict(server.headers))
                    await stack.enter_async_context(client)
                assert server.url is not None
                read, write = await stack.enter_async_context(
                    streamable_http_client(server.url, http_client=client)
                )
            session = await stack.enter_async_context(
                _bounded_session(ClientSession, self, server.name)(read, write, **self._handlers(server.name))
            )
            yield session

    def _handlers(self, name: str) -> dict[str, Any]:
        callbacks = self.callbacks
        handlers: dict[str, Any] = {}
        if callbacks.notification is not None:
            notify = callbacks.notification

            async def message_handler(message: Any) -> None:
                await notify(name, message)

            handlers["message_handler"] = message_handler
        if callbacks.sampling is not None:
            sample = callbacks.sampling

            async def sampling_callback(context: Any, params: Any) -> Any:
                return await sample(name, context, params)

            handlers["sampling_callback"] = sampling_callback
        if callbacks.elicitation is not None:
            elicit = callbacks.elicitation

            async def elicitation_callback(context: Any, params: Any) -> Any:
                return await elicit(name, context, params)

            handlers["elicitation_callback"] = elicitation_callback
        if callbacks.list_roots is not None:
            roots = callbacks.list_roots

            async def list_roots_callback(context: Any) -> Any:
                return await roots(name, context)

            handlers["list_roots_callback"] = list_roots_callback
        return handlers

    def _lost(self, name: str, reason: str) -> None:
        """Mark a server not running (it crashed, or stopped answering) and end its connection."""
        connection = self.connections[name]
        if connection.failure is None:
            connection.failure = reason
        connection.session = None
        connection.stop.set()
        for qualified in [q for q, t in self.tools.items() if t.server == name]:
            del self.tools[qualified]
        if connection.restarts < connection.server.restart and self.group is not None:
            self.group.start_soon(self._restart, name, connection)

    async def _restart(self, name: str, old: _Connection) -> None:
        """Start a server that stopped again, after a wait that doubles with each restart
        (``restart`` in its configuration bounds how many); once it runs, its tools are listed
        again through a ``ToolListChangedNotification`` to the callbacks."""
        import anyio
        import mcp.types as mt

        await old.done.wait()
        attempt = old.restarts + 1
        await anyio.sleep(min(RESTART_BACKOFF * 2 ** (attempt - 1), RESTART_LONGEST))
        connection = _Connection(old.server, stop=anyio.Event(), done=anyio.Event(), restarts=attempt)
        self.connections[name] = connection
        ready = anyio.Event()
        assert self.group is not None
        self.group.start_soon(self._run, connection, ready)
        await ready.wait()
        if connection.session is None:  # it did not start: try again while restarts are left
            if attempt < old.server.restart:
                self.group.start_soon(self._restart, name, connection)
            return
        print(
            f"policyc mcp: server `{name}` started again (restart {attempt} of {old.server.restart})",
            file=sys.stderr,
        )
        if self.callbacks.notification is not None:
            await self.callbacks.notification(name, mt.ToolListChangedNotification())


def _connection_closed(error: BaseException, connection: _Connection) -> bool:
    """Whether a call failed because the server's connection ended (a stdio server that exited
    ends it): a connection already torn down, a stdio server's output ended, or the SDK's
    ``CONNECTION_CLOSED`` error from a server over HTTP. (The code alone does not say it: it is
    -32000, the first code JSON-RPC leaves to servers, which a server may answer a call with.)"""
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if connection.done.is_set() or connection.session is None:
        return True
    if connection.pipes is not None:
        return bool(connection.pipes.closed)
    return (
        isinstance(error, MCPError)
        and error.code == CONNECTION_CLOSED
        and error.message == "Connection closed"
    )


def _describe(error: BaseException) -> str:
    """An exception as one line, its group's first member for an exception group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def error_result(text: str) -> mt.CallToolResult:
    """A tool result with ``isError`` set and ``text`` as its only content."""
    import mcp.types as mt

    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def list_tools(
    config: GatewayConfig, errlog: TextIO | None = None
) -> tuple[list[UpstreamTool], dict[str, str]]:
    """Start the servers of ``config``, list their tools, stop them: the tools (``S.T``) and why
    each server that did not answer failed."""
    import anyio

    async def listing() -> tuple[list[UpstreamTool], dict[str, str]]:
        async with Upstreams(config, errlog=errlog or sys.stderr) as upstreams:
            tools = await upstreams.list_tools()
            return tools, upstreams.failures

    return anyio.run(listing)


def _bounded_session(base: Any, upstreams: Upstreams, server: str) -> Any:
    """The SDK's ``ClientSession`` whose check of a tool's result against its ``outputSchema``
    is bounded as the check of a call's arguments is (:mod:`.schema`): in a worker thread, with
    patterns on RE2, given up at the decision's deadline. (The SDK's own check runs Python's
    backtracking engine on the event loop, where one hostile result would stall every client.)"""

    class BoundedSession(base):
        async def validate_tool_result(self, name: str, result: Any) -> None:
            await check_structured(upstreams, server, name, result)

    return BoundedSession


async def check_structured(upstreams: Upstreams, server: str, name: str, result: Any) -> None:
    """Check a result's structured content against the ``outputSchema`` of the tool ``name`` of
    ``server`` as listed: in a worker thread, with patterns on RE2, given up at the decision's
    deadline. ``RuntimeError`` saying what is wrong (the messages of the SDK's own check)."""
    listed = upstreams.tools.get(f"{server}.{name}")
    schema = None if listed is None else listed.tool.output_schema
    if schema is None:
        return
    import anyio

    from .schema import Expired, problem

    content = result.structured_content
    if content is None:
        raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
    timeout = upstreams.config.session.decide_timeout
    try:
        wrong = await anyio.to_thread.run_sync(problem, schema, content, time.monotonic() + timeout)
    except Expired:
        raise RuntimeError(
            f"the structured content returned by tool {name} could not be checked against its "
            f"outputSchema within {timeout:g} s"
        ) from None
    if wrong is not None:
        raise RuntimeError(f"Invalid structured content returned by tool {name}: {wrong}")
