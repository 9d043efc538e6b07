"""The MCP server the client talks to: the SDK's low-level server, translating each request to
the upstream servers and, for ``tools/call``, to the policy (:mod:`.decide`) first.

A :class:`Gateway` holds the running upstreams (:class:`~.upstreams.Upstreams`), the monitor,
the tools hidden from ``tools/list`` (proved always denied, or refused by a pin) and, per client
connection, its :class:`~.decide.Gate`. :meth:`Gateway.server` builds the ``mcp`` server whose
handlers are the gateway's methods; :func:`serve` runs it over stdio or streamable HTTP.

What passes through, and how (docs/mcp.md, "What passes through"):

* ``tools/list``: the union of the servers' tools as ``S.T``, less the hidden ones;
* ``tools/call``: checked against the tool's ``inputSchema``, decided, then forwarded (progress
  reports of the server go back to the client, a cancellation of the client goes on to the
  server) and its result recorded;
* ``prompts/list`` and ``prompts/get`` (prompts named ``S.P``; a prompt got is recorded),
  ``resources/list``, ``resources/templates/list``, ``resources/read`` (recorded),
  ``resources/subscribe`` and ``unsubscribe``, ``completion/complete``, ``logging/setLevel``
  (to every server): forwarded to the server they belong to;
* from the servers: log messages, list-changed and resource-updated notifications go to the
  client; sampling, elicitation and roots requests go to the client when it declared the
  capability, and are refused otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from .approval import Pending, asker, can_elicit, input_required, modern, resumed
from .config import GatewayConfig, Upstream
from .decide import Gate, Handover, Verdict
from .schema import Expired, problem, unrunnable
from .sessions import InFlight, Servers, View
from .upstreams import Callbacks, Upstreams, UpstreamTool, error_result

if TYPE_CHECKING:
    from policyc.runtime.protocols import MonitorLike


@dataclass
class Gateway:
    """The gateway in front of ``upstreams``, deciding with ``monitor``. ``hidden`` maps each
    tool left out of ``tools/list`` (``S.T``) to why; ``screen``, when given, is asked again
    each time the tools are listed anew, for the tools to hide among those listed.

    Behind ``--listen``, ``own`` are the servers each client session starts for itself (the
    servers not ``shared``; ``upstreams`` then holds the shared ones) and ``max_sessions``
    bounds the sessions of one key's principal (:mod:`.sessions`)."""

    config: GatewayConfig
    monitor: MonitorLike
    upstreams: Upstreams
    hidden: dict[str, str] = field(default_factory=dict)
    screen: Callable[[list[UpstreamTool], Mapping[str, Any]], Mapping[str, str]] | None = None
    log: TextIO = field(default_factory=lambda: sys.stderr)
    gates: dict[str, Gate] = field(default_factory=dict)
    clients: dict[str, Any] = field(default_factory=dict)  # each connection's last ServerSession
    resources: dict[str, str] = field(default_factory=dict)  # a listed resource's URI -> server
    templates: dict[str, str] = field(default_factory=dict)  # a listed template -> server
    reported: set[str] = field(default_factory=set)  # the hidden tools already logged
    pending: dict[str, Pending] = field(default_factory=dict)  # calls put to the user, by state
    predecided: dict[Any, Handover] = field(default_factory=dict)  # escalated on the fast path, by id
    own: tuple[Upstream, ...] = ()
    max_sessions: int | None = None
    views: dict[str, View] = field(default_factory=dict)  # the sessions with servers of their own
    owners: dict[str, str | None] = field(default_factory=dict)  # each HTTP session's principal
    flight: InFlight = field(default_factory=InFlight)
    group: Any = None  # the task group running the sessions' own servers

    @functools.cached_property
    def main(self) -> View:
        """The view of ``upstreams``: over stdio, every server; behind ``--listen``, the shared ones."""
        return View(Servers((self.upstreams,)), self.hidden)

    # ------------------------------------------------------------------ tools

    async def refresh(self, view: View | None = None) -> None:
        """List a view's servers' tools again (at start, and when a server says they changed)."""
        view = view or self.main
        hidden = view.hidden
        tools = await view.servers.list_tools()
        if self.screen is not None:
            screened = self.screen(tools, view.servers.announced())
            for name in [n for n, why in hidden.items() if why.startswith("pin:")]:
                del hidden[name]
            hidden.update({name: f"pin: {why}" for name, why in screened.items()})
        for name in [n for n, why in hidden.items() if why.startswith("schema:")]:
            del hidden[name]
        for tool in tools:  # a schema the gateway cannot check in bounded time: refused whole
            for which, schema in (
                ("inputSchema", tool.tool.input_schema),
                ("outputSchema", tool.tool.output_schema),
            ):
                unchecked = None if tool.qualified in hidden else unrunnable(schema)
                if unchecked is not None:
                    hidden[tool.qualified] = (
                        f"schema: its {which} has a pattern the gateway cannot check in bounded time: {unchecked}"
                    )
        for tool in tools:
            why = hidden.get(tool.qualified)
            if why is not None and tool.qualified not in self.reported:
                self.reported.add(tool.qualified)
                print(f"policyc mcp: `{tool.qualified}` is not listed: {why}", file=self.log)

    def visible(self, view: View | None = None) -> dict[str, UpstreamTool]:
        view = view or self.main
        return {q: t for q, t in view.servers.tools.items() if q not in view.hidden}

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        new = self._key(ctx) not in self.clients
        view = await self._view(ctx)
        if new and _can_list_roots(ctx):
            await self.roots_changed(ctx, None)  # servers that asked before it connected ask again
        tools = [t.tool.model_copy(update={"name": q}) for q, t in self.visible(view).items()]
        return mt.ListToolsResult(tools=tools)

    async def _checked(self, schema: Any, arguments: dict[str, Any]) -> str | None:
        """What the tool's ``inputSchema`` finds wrong with ``arguments``, checked in a worker
        thread (so that no other call waits for it) that ends by the decision's deadline
        (:mod:`.schema`): past it, the call is refused (``policyc:timeout``)."""
        timeout = self.config.session.decide_timeout
        deadline = time.monotonic() + timeout
        try:
            return await anyio.to_thread.run_sync(problem, schema, arguments, deadline)
        except Expired:
            return _schema_timeout(timeout)

    async def roots_changed(self, ctx: Any, params: Any) -> None:
        """The client's roots changed (or a client with roots connected): its servers are told."""
        servers = self.views.get(self._key(ctx), self.main).servers
        for server, session in [(n, servers.session(n)) for n in servers.running()]:
            try:
                if session is not None:
                    await session.send_roots_list_changed()
            except Exception as error:
                self._note(server, "telling it the roots changed", error)

    def _unsendable(self, name: str, view: View) -> tuple[UpstreamTool | None, str | None]:
        """The tool ``name`` stands for, or why no call of it is sent (hidden, not running, unknown)."""
        if name in view.hidden:
            return None, f"policyc did not send the call of `{name}`: {view.hidden[name]}"
        tool = view.servers.tool(name)
        if tool is None:
            down = view.servers.failure(name.partition(".")[0])
            if down is not None:
                return None, f"the server `{name.partition('.')[0]}` is not running: {down}"
            return None, f"no tool `{name}` behind the gateway (`tools/list` names the tools)"
        return tool, None

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        name = params.name
        arguments = dict(params.arguments or {})
        view = await self._view(ctx)
        gate = self._gate(ctx)
        tool, refused = self._unsendable(name, view)
        if tool is None:
            return error_result(refused or "")
        handed = self._handed(ctx, name, arguments)
        wrong = None if handed is not None else await self._checked(tool.tool.input_schema, arguments)
        if wrong is not None:
            return error_result(f"the call of `{name}` was not sent: {wrong}")
        if params.request_state is not None:  # the retry of a call put to the user (2026-07-28)
            limit = self.monitor.approval_timeout
            verdict, arguments = await resumed(
                self.pending, self._key(ctx), gate, name, arguments, params, limit
            )
        else:
            verdict = handed if handed is not None else await gate.decide(name, arguments)
            if verdict.decision is not None and verdict.decision.escalated:
                assert verdict.call is not None
                if modern(ctx) and can_elicit(ctx):
                    ttl = self.monitor.approval_ttl
                    return input_required(self.pending, self._key(ctx), name, arguments, verdict, ttl)
                verdict = await gate.settle(verdict.call, name, verdict.decision, asker(ctx))
        if not verdict.forward:
            return error_result(verdict.text)
        assert verdict.call is not None  # a call is forwarded only once recorded and allowed
        key = self._key(ctx)
        with self.flight.at(key, tool.server):
            result = await view.servers.call_tool(name, arguments, progress=ctx.session.report_progress)
        await self._answered(gate, verdict, tool, name, result, view, key)
        return result

    def _handed(self, ctx: Any, name: str, arguments: dict[str, Any]) -> Verdict | None:
        """The verdict of this call decided on the fast path and handed over (it escalated), None
        for a call not decided yet. The handover is this call's only: same connection, request
        id, tool and arguments."""
        from policyc.runtime.approvals import call_digest

        if self._key(ctx) != "stdio" or ctx.request_id not in self.predecided:
            return None
        handover = self.predecided.pop(ctx.request_id)
        return handover.verdict if handover.digest == call_digest(name, arguments) else None

    async def _answered(
        self,
        gate: Gate,
        verdict: Verdict,
        tool: UpstreamTool,
        name: str,
        result: Any,
        view: View | None = None,
        key: str = "stdio",
    ) -> None:
        """Record the result of a forwarded call (and tell the clients that see its server when
        it stopped)."""
        assert verdict.call is not None
        if (view or self.main).servers.failure(tool.server) is not None:  # it stopped: its tools are gone
            await self._tools_changed(None if view is None or view is self.main else key)
        server = self.config.server(tool.server)
        labels = server.labels_of(tool.name) if server is not None else ()
        await gate.result(verdict.call, name, result, labels)

    async def fast_call(self, name: str, arguments: dict[str, Any]) -> Any:
        """A ``tools/call`` of the stdio client on the fast path (:mod:`.fastcall`): the result to
        answer (a ``CallToolResult``), or the :class:`~.decide.Verdict` of a call that escalated,
        for the SDK path to go on with. The same checks and decisions as :meth:`call_tool`, the
        schema's and the policy's on the event loop when the monitor runs in process (each
        within the decision's deadline, which, passed, is a denial)."""
        gate = self._gate_of("stdio")
        tool, why = self._unsendable(name, self.main)
        if tool is None:
            return error_result(why or "")
        if self.inline:
            timeout = self.config.session.decide_timeout
            try:
                wrong = problem(tool.tool.input_schema, arguments, time.monotonic() + timeout)
            except Expired:
                wrong = _schema_timeout(timeout)
        else:
            wrong = await self._checked(tool.tool.input_schema, arguments)
        if wrong is not None:
            return error_result(f"the call of `{name}` was not sent: {wrong}")
        verdict = await gate.decide(name, arguments, inline=self.inline)
        if verdict.decision is not None and verdict.decision.escalated:
            return verdict
        if not verdict.forward:
            return error_result(verdict.text)
        result = await self.upstreams.relay_call(name, arguments)
        await self._answered(gate, verdict, tool, name, result)
        return result

    @functools.cached_property
    def inline(self) -> bool:
        """Whether decisions may run on the event loop: the monitor runs in this process (a
        service's client would wait for the network there)."""
        from policyc.runtime.session import Monitor

        return isinstance(self.monitor, Monitor)

    # ----------------------------------------------------------- passing through

    async def list_prompts(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        view = await self._view(ctx)
        prompts = []
        for server, session in self._serving("prompts", view):
            try:
                listed = await session.list_prompts()
            except Exception as error:
                self._note(server, "listing its prompts", error)
                continue
            prompts += [p.model_copy(update={"name": f"{server}.{p.name}"}) for p in listed.prompts]
        return mt.ListPromptsResult(prompts=prompts)

    async def get_prompt(self, ctx: Any, params: Any) -> Any:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        server, _, name = params.name.partition(".")
        session = (await self._view(ctx)).servers.session(server)
        if session is None or not name:
            raise MCPError(INVALID_PARAMS, f"no prompt `{params.name}` behind the gateway")
        arguments = dict(params.arguments or {})
        with self.flight.at(self._key(ctx), server):
            result = await session.get_prompt(name, arguments=arguments or None)
        config = self.config.server(server)
        await self._gate(ctx).prompt(server, name, arguments, result, config.labels if config else ())
        return result

    async def list_resources(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        view = await self._view(ctx)
        resources = []
        for server, session in self._serving("resources", view):
            try:
                listed = await session.list_resources()
            except Exception as error:
                self._note(server, "listing its resources", error)
                continue
            for resource in listed.resources:
                self.resources.setdefault(str(resource.uri), server)
                resources.append(resource)
        return mt.ListResourcesResult(resources=resources)

    async def list_resource_templates(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        view = await self._view(ctx)
        templates = []
        for server, session in self._serving("resources", view):
            try:
                listed = await session.list_resource_templates()
            except Exception as error:
                self._note(server, "listing its resource templates", error)
                continue
            for template in listed.resource_templates:
                self.templates.setdefault(template.uri_template, server)
                templates.append(template)
        return mt.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        server, session = self._owner(uri, await self._view(ctx))
        with self.flight.at(self._key(ctx), server):
            result = await session.read_resource(uri)
        config = self.config.server(server)
        await self._gate(ctx).resource(server, uri, result.contents, config.labels if config else ())
        return result

    async def subscribe(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        _, session = self._owner(str(params.uri), await self._view(ctx))
        await session.subscribe_resource(str(params.uri))
        return mt.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        _, session = self._owner(str(params.uri), await self._view(ctx))
        await session.unsubscribe_resource(str(params.uri))
        return mt.EmptyResult()

    async def complete(self, ctx: Any, params: Any) -> Any:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        ref = params.ref
        servers = (await self._view(ctx)).servers
        if getattr(ref, "type", "") == "ref/prompt":
            server, _, name = ref.name.partition(".")
            session = servers.session(server)
            if session is None or not name:
                raise MCPError(INVALID_PARAMS, f"no prompt `{ref.name}` behind the gateway")
            ref = ref.model_copy(update={"name": name})
        else:
            server = self.templates.get(getattr(ref, "uri", ""), "")
            session = servers.session(server)
            if session is None:
                raise MCPError(
                    INVALID_PARAMS, f"no resource template `{getattr(ref, 'uri', '')}` behind the gateway"
                )
        argument = params.argument.model_dump(by_alias=True, exclude_none=True)
        context = params.context.arguments if params.context is not None else None
        with self.flight.at(self._key(ctx), server):
            return await session.complete(ref, argument, context_arguments=context)

    async def set_level(self, ctx: Any, params: Any) -> Any:
        import mcp.types as mt

        view = await self._view(ctx)
        for server, session in self._serving("logging", view):
            try:
                await session.set_logging_level(params.level)
            except Exception as error:
                self._note(server, "setting its logging level", error)
        return mt.EmptyResult()

    # ------------------------------------------------------------ from the servers

    async def notified(self, server: str, message: Any, key: str | None = None) -> None:
        """A notification (or transport error) of an upstream server, passed on to the clients
        that see the server: the session ``key``'s for a server of its own, every client's for a
        shared one."""
        import mcp.types as mt

        if isinstance(message, Exception):
            return
        view = None if key is None else self.views.get(key)
        if isinstance(message, mt.ToolListChangedNotification):
            for each in [view] if view is not None else [self.main, *self.views.values()]:
                await self.refresh(each)
        for client in self._clients(key):
            try:
                if isinstance(message, mt.LoggingMessageNotification):
                    params = message.params
                    await client.send_log_message(params.level, params.data, logger=params.logger or server)
                elif isinstance(
                    message,
                    mt.ToolListChangedNotification
                    | mt.PromptListChangedNotification
                    | mt.ResourceListChangedNotification
                    | mt.ResourceUpdatedNotification,
                ):
                    await client.send_notification(message)
            except Exception as error:
                self._note(server, "passing a notification on", error)

    def _clients(self, key: str | None) -> list[Any]:
        """The client of the session ``key`` (None: every client)."""
        if key is None:
            return list(self.clients.values())
        return [self.clients[key]] if key in self.clients else []

    async def _tools_changed(self, key: str | None = None) -> None:
        import mcp.types as mt

        for client in self._clients(key):
            try:
                await client.send_notification(mt.ToolListChangedNotification())
            except Exception as error:
                print(f"policyc mcp: telling a client its tools changed failed: {error}", file=self.log)

    async def sampled(self, server: str, context: Any, params: Any, key: str | None = None) -> Any:
        import mcp.types as mt

        request = mt.CreateMessageRequest(params=params)
        return await self._to_client("sampling", request, mt.CreateMessageResult, server, key)

    async def elicited(self, server: str, context: Any, params: Any, key: str | None = None) -> Any:
        import mcp.types as mt

        return await self._to_client(
            "elicitation", mt.ElicitRequest(params=params), mt.ElicitResult, server, key
        )

    async def roots(self, server: str, context: Any, key: str | None = None) -> Any:
        import mcp.types as mt

        return await self._to_client("roots", mt.ListRootsRequest(), mt.ListRootsResult, server, key)

    async def _to_client(
        self, capability: str, request: Any, result_type: Any, server: str, key: str | None
    ) -> Any:
        """A server's request, sent to the client it is for: the session ``key``'s for a server of
        its own; for a shared server, the client with a request in flight at it (or the only
        client). Refused when that cannot be told, or the client cannot answer it."""
        import mcp.types as mt

        if key is None:
            key, why = self.flight.route(server, list(self.clients))
            if key is None:
                return mt.ErrorData(
                    code=mt.INVALID_REQUEST,
                    message=f"policyc mcp cannot tell which client the {capability} request is for: {why}",
                )
        client = self.clients.get(key)
        declared = None if client is None else client.client_capabilities
        if client is None or declared is None or getattr(declared, capability, None) is None:
            return mt.ErrorData(
                code=mt.INVALID_REQUEST, message=f"the client behind policyc mcp has no {capability}"
            )
        try:
            return await client.send_request(request, result_type)
        except Exception as error:
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"the client failed: {error}")

    # ------------------------------------------------------------------ sessions

    def _key(self, ctx: Any) -> str:
        """Whose policy session a request is of: its streamable HTTP session's (``Mcp-Session-Id``);
        over HTTP without one (a stateless 2026-07-28 client), its principal's; ``stdio``."""
        request = getattr(ctx, "request", None)
        if request is None:
            return "stdio"
        headers = getattr(request, "headers", None)
        found = headers.get("mcp-session-id") if headers is not None else None
        if found:
            return f"http:{found}"
        from .access import caller

        who = caller()
        return f"http-principal:{who[0] if who is not None else ''}"

    def _client(self, ctx: Any) -> str:
        """The key of the request's session, its client noted (and, at an HTTP session's first
        request, admitted within its principal's sessions: ``MCPError`` past the limit)."""
        key = self._key(ctx)
        if key not in self.clients and key != "stdio":
            self._admit(key, ctx)
        self.clients[key] = ctx.session
        return key

    def _admit(self, key: str, ctx: Any) -> None:
        """A new HTTP session of the key's principal, within ``max_sessions``; its end (the
        client's DELETE, the SDK's idle timeout) stops what it holds (:meth:`_ended`)."""
        from .access import caller

        who = caller()
        principal = None if who is None else who[0]
        if self.max_sessions is not None:
            held = sum(1 for owner in self.owners.values() if owner == principal)
            if held >= self.max_sessions:
                from mcp import MCPError
                from mcp.types import INVALID_REQUEST

                whose = "clients without a key" if principal is None else f"the principal `{principal}`"
                raise MCPError(
                    INVALID_REQUEST,
                    f"{whose} already holds {held} sessions of policyc mcp (--max-sessions-per-key "
                    f"{self.max_sessions}): end one first",
                )
        self.owners[key] = principal
        # the SDK's Connection of this session, whose exit stack it closes when the session ends
        # (a low-level handler reaches it through the request's ServerSession only)
        connection = ctx.session._connection
        if f"http:{connection.session_id}" == key:
            connection.exit_stack.push_async_callback(self._ended, key)

    async def _ended(self, key: str) -> None:
        """The HTTP session ``key`` ended: its servers stop, its policy session's last answers are
        recorded, and it no longer counts against its principal's sessions."""
        self.clients.pop(key, None)
        self.owners.pop(key, None)
        view = self.views.pop(key, None)
        if view is not None and view.stop is not None:
            view.stop.set()
        gate = self.gates.pop(key, None)
        if gate is not None:
            await gate.flush()

    async def _view(self, ctx: Any) -> View:
        """The servers of the request's session: behind ``--listen`` with servers of its own, they
        are started at its first request (the requests that come meanwhile wait for them)."""
        import anyio

        key = self._client(ctx)
        if not self.own or key == "stdio":
            return self.main
        view = self.views.get(key)
        if view is None:
            kept = {n: why for n, why in self.hidden.items() if not why.startswith(("pin:", "schema:"))}
            view = View(self.main.servers, kept, ready=anyio.Event(), stop=anyio.Event())
            self.views[key] = view
            self.group.start_soon(self._own_servers, key, view)
        await view.ready.wait()
        return view

    async def _own_servers(self, key: str, view: View) -> None:
        """Run the servers of the session ``key``'s own until its view is stopped. A server that
        does not start fails that session's calls of it, naming it."""
        config = dataclasses.replace(self.config, servers=self.own)
        callbacks = Callbacks(
            notification=lambda server, message: self.notified(server, message, key),
            sampling=lambda server, context, params: self.sampled(server, context, params, key),
            elicitation=lambda server, context, params: self.elicited(server, context, params, key),
            list_roots=lambda server, context: self.roots(server, context, key),
        )
        try:
            async with Upstreams(config, callbacks, errlog=self.log) as own:
                view.servers = Servers((self.upstreams, own))
                await self.refresh(view)
                view.ready.set()
                await view.stop.wait()
        except Exception as error:
            print(
                f"policyc mcp: the servers of a session stopped: {type(error).__name__}: {error}",
                file=self.log,
            )
        finally:
            view.ready.set()

    def _gate(self, ctx: Any) -> Gate:
        return self._gate_of(self._client(ctx))

    def _gate_of(self, key: str) -> Gate:
        """The gate of a connection, made at its first request: over HTTP with keys, its session's
        principal and roles are its key's (whatever the configuration's ``[session]`` says)."""
        gate = self.gates.get(key)
        if gate is None:
            options = self.config.session
            if key != "stdio":
                from .access import caller

                who = caller()
                if who is not None:
                    options = dataclasses.replace(options, principal=who[0], roles=who[1])
            gate = Gate(self.monitor, f"mcp-{uuid.uuid4().hex[:16]}", options)
            self.gates[key] = gate
        return gate

    def _serving(self, capability: str, view: View) -> list[tuple[str, Any]]:
        found = []
        for name in view.servers.running():
            declared = view.servers.capabilities(name)
            if declared is not None and getattr(declared, capability, None) is not None:
                found.append((name, view.servers.session(name)))
        return found

    def _owner(self, uri: str, view: View) -> tuple[str, Any]:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        server = self.resources.get(uri)
        if server is None:
            serving = self._serving("resources", view)
            if len(serving) == 1:  # one server has resources: it is the one
                server = serving[0][0]
        session = view.servers.session(server) if server is not None else None
        if server is None or session is None:
            raise MCPError(
                INVALID_PARAMS,
                f"no server behind the gateway has the resource `{uri}` (list resources first)",
            )
        return server, session

    def _note(self, server: str, doing: str, error: BaseException) -> None:
        print(
            f"policyc mcp: server `{server}`: {doing} failed: {type(error).__name__}: {error}", file=self.log
        )

    def server(self) -> Any:
        """The ``mcp`` low-level server whose handlers are this gateway's."""
        import mcp.types as mt
        from mcp.server.lowlevel import Server

        from policyc.compiler.version import __version__

        from .probe import instructions

        server: Any = Server(
            "policyc-mcp",
            version=__version__,
            instructions=instructions(self.upstreams.failures),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_completion=self.complete,
        )
        server.add_request_handler("logging/setLevel", mt.SetLevelRequestParams, self.set_level)
        server.add_notification_handler(
            "notifications/roots/list_changed", mt.NotificationParams, self.roots_changed
        )
        return server


def _schema_timeout(timeout: float) -> str:
    return (
        "policyc:timeout: checking the arguments against the tool's inputSchema took longer "
        f"than the decision's deadline ({timeout:g} s)"
    )


def _can_list_roots(ctx: Any) -> bool:
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.roots is not None


STOP_TIMEOUT = 15.0  # seconds the servers have to stop when the gateway is told to end


@dataclass
class _Ending:
    """What the signal watcher stops: the upstreams once they run, the gateway once it serves
    stdio (whose reading of the client's input no cancellation interrupts), the audit log's close."""

    closing: Callable[[], None] | None = None
    upstreams: Upstreams | None = None
    gateway: Gateway | None = None


async def _stop_on_signal(scope: Any, ending: _Ending) -> None:
    """On SIGTERM or SIGHUP (what a client or a supervisor sends to end the gateway), from the
    moment the gateway starts: before it serves stdio, cancel ``scope`` (starting servers are
    stopped as the gateway unwinds); once it serves stdio, record the servers' last answers, stop
    every server the gateway started, close the audit log and end the process — itself, since
    the stdio transport reads the client's input in a thread that nothing interrupts but input."""
    import os
    import signal

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            if ending.gateway is None or ending.upstreams is None:
                scope.cancel()
                return
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT):
                for gate in list(ending.gateway.gates.values()):
                    await gate.flush()
                await ending.upstreams.stop()
            if ending.closing is not None:
                ending.closing()
            sys.stderr.flush()
            os._exit(0)


async def serve(
    config: GatewayConfig,
    monitor: MonitorLike,
    hidden: Mapping[str, str],
    listen: tuple[str, int] | None = None,
    screen: Callable[[list[UpstreamTool], Mapping[str, Any]], Mapping[str, str]] | None = None,
    log: TextIO | None = None,
    closing: Callable[[], None] | None = None,
    allow_missing: bool = False,
    fast: bool = True,
    keys: Any = None,
    max_sessions: int | None = None,
) -> None:
    """Start the upstream servers and serve the gateway over stdio (``listen`` None) or
    streamable HTTP at ``listen`` (host, port, path ``/mcp``) until the client goes away, or
    until SIGTERM or SIGHUP (then ``closing`` runs before the process ends: the audit log's).
    A server that did not start stops it (:class:`~.probe.ServersMissing`) unless
    ``allow_missing``. ``fast``: on stdio, ``tools/call`` takes the fast path (:mod:`.fastcall`).
    ``keys``: over HTTP, the clients' bearer keys (:mod:`.access`; None: no keys asked);
    ``max_sessions``: over HTTP, the sessions one key's principal may hold at once."""
    ending = _Ending(closing)
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signal, group.cancel_scope, ending)
        await _serve(
            config, monitor, hidden, listen, screen, log, ending, allow_missing, fast, keys, max_sessions
        )
        group.cancel_scope.cancel()


async def _serve(
    config: GatewayConfig,
    monitor: MonitorLike,
    hidden: Mapping[str, str],
    listen: tuple[str, int] | None,
    screen: Callable[[list[UpstreamTool], Mapping[str, Any]], Mapping[str, str]] | None,
    log: TextIO | None,
    ending: _Ending,
    allow_missing: bool = False,
    fast: bool = True,
    keys: Any = None,
    max_sessions: int | None = None,
) -> None:
    from mcp.server.lowlevel import NotificationOptions

    out = log or sys.stderr
    holder: dict[str, Gateway] = {}

    async def notified(server: str, message: Any) -> None:
        if "gateway" in holder:
            await holder["gateway"].notified(server, message)

    def early() -> Any:  # a server's request before the gateway serves any client
        import mcp.types as mt

        return mt.ErrorData(code=mt.INVALID_REQUEST, message="no client has connected to policyc mcp yet")

    async def sampled(server: str, context: Any, params: Any) -> Any:
        return await holder["gateway"].sampled(server, context, params) if "gateway" in holder else early()

    async def elicited(server: str, context: Any, params: Any) -> Any:
        return await holder["gateway"].elicited(server, context, params) if "gateway" in holder else early()

    async def roots(server: str, context: Any) -> Any:
        return await holder["gateway"].roots(server, context) if "gateway" in holder else early()

    callbacks = Callbacks(notification=notified, sampling=sampled, elicitation=elicited, list_roots=roots)
    async with Upstreams(config, callbacks, errlog=out) as upstreams:
        gateway = Gateway(config, monitor, upstreams, dict(hidden), screen, out)
        holder["gateway"] = gateway
        await gateway.refresh()
        if upstreams.failures:
            from .probe import ServersMissing, missing

            if not allow_missing:
                raise ServersMissing(upstreams.failures)
            print(
                f"policyc mcp: serving without them (--allow-missing):\n{missing(upstreams.failures)}",
                file=out,
            )
        names = ", ".join(f"{t.qualified}" for t in gateway.visible().values())
        print(f"policyc mcp: serving {len(gateway.visible())} tools: {names}", file=out)
        own = tuple(s for s in config.servers if not s.shared) if listen is not None else ()
        if own:  # probed: from now on each session starts its own
            await upstreams.release({s.name for s in own})
            gateway.own, gateway.max_sessions = own, max_sessions
        elif listen is not None:
            gateway.max_sessions = max_sessions
        server = gateway.server()
        options = server.create_initialization_options(
            NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        )
        try:
            if listen is None:
                from mcp.server.stdio import stdio_server

                ending.upstreams, ending.gateway = upstreams, gateway
                if fast:
                    from .fastcall import FastCalls
                    from .wire import opened

                    async with opened() as wire:
                        if wire is not None:
                            calls = FastCalls(gateway, wire, server)
                            wire.take = calls.take
                            try:
                                await server.run(wire.read, wire.write, options)
                            finally:
                                await calls.close()
                            return
                async with stdio_server() as (read, write):
                    await server.run(read, write, options)
                return
            import uvicorn

            host, port = listen
            shown = f"[{host}]" if ":" in host else host
            asking: dict[str, Any] = {}
            if keys is not None:
                from .access import http_options

                asking = http_options(keys, f"http://{shown}:{port}")
            app = server.streamable_http_app(host=host, **asking)
            settings = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
            from policyc.serve.server import listening

            bound = listening(host, port)  # before saying so: a port in use is said alone
            port = bound.getsockname()[1]  # the one it got, for --listen HOST:0
            print(f"policyc mcp: listening on http://{shown}:{port}/mcp", file=out)
            if keys is None:
                print(
                    "policyc mcp: --no-auth: no client is asked who it is (loopback only); every "
                    "streamable HTTP session is a policy session of its own",
                    file=out,
                )
            else:
                print(
                    f"policyc mcp: clients authenticate with a bearer key of the keys file "
                    f"({len(set(keys.by_digest.values()))} principals); each session is its key's principal's",
                    file=out,
                )
            async with anyio.create_task_group() as sessions:
                gateway.group = sessions
                try:
                    await uvicorn.Server(settings).serve(sockets=[bound])
                finally:
                    for view in gateway.views.values():  # their servers stop
                        view.stop.set()
        finally:
            for gate in list(gateway.gates.values()):  # the answers after each connection's last call
                await gate.flush()
