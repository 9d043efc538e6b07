"""`policyc mcp --listen` keeps clients apart at the servers too: each streamable HTTP session has
its own connections to the servers (its own processes) unless gateway.toml marks a server
`shared = true`; a server's sampling request goes to the client whose call caused it; a session
that ends stops its servers; `--max-sessions-per-key` bounds the sessions one key holds. Real
clients of two principals over streamable HTTP, against the installed command."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .support.gateway import SERVE_DEMO, listening, one_server, text
from .support.service import keys_file

# A stateful server: it remembers a value, says its process id (written to pids.txt as it
# starts), and asks the client's model a question during a call.
SERVER = (
    """
import os, sys
import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

with open(sys.argv[1], "a") as pids:
    pids.write(f"{os.getpid()}\\n")
TOOLS = [mt.Tool(name=n, input_schema={"type": "object"}) for n in ("whoami", "remember", "recall", "ask")]
memory = {}


async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    if params.name == "whoami":
        answer = str(os.getpid())
    elif params.name == "remember":
        memory["value"] = params.arguments["value"]
        answer = "kept"
    elif params.name == "recall":
        answer = memory.get("value", "nothing")
    else:
        question = mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text="Who are you?"))
        sampled = await ctx.session.create_message(messages=[question], max_tokens=10)
        answer = sampled.content.text
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=answer)])
"""
    + SERVE_DEMO
)

POLICY = """
.import events
@id("remembering-needs-approval")
@message("keeping a value needs the user's approval")
Escalate(a) :- ToolCall(a, "demo.remember").
"""


def _start(tmp_path: Path, *extra: str, more: str = "") -> tuple[Any, str, dict[str, str]]:
    keys = keys_file(tmp_path, {"alice": (), "bob": ()})
    policy, config = one_server(tmp_path, SERVER, POLICY)
    script, pids = json.dumps(str(tmp_path / "server.py")), json.dumps(str(tmp_path / "pids.txt"))
    config.write_text(
        f"[servers.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{script}, {pids}]\n{more}"
    )
    process, port = listening(tmp_path, policy, config, "--keys", str(tmp_path / "keys.toml"), *extra)
    return process, f"http://127.0.0.1:{port}/mcp", keys


class Client:
    """A client of one principal: its own streamable HTTP session, a model that answers a
    sampling request with the principal's name, and a user who approves what is put to them."""

    def __init__(self, url: str, key: str, name: str) -> None:
        self.url, self.key, self.name = url, key, name
        self.asked = 0
        self.approvals: list[str] = []

    async def elicitation(self, context: Any, params: Any) -> mt.ElicitResult:
        self.approvals.append(params.message)
        return mt.ElicitResult(action="accept", content={"approve": True})

    async def sampling(self, context: Any, params: Any) -> mt.CreateMessageResult:
        self.asked += 1
        answer = mt.TextContent(type="text", text=f"the model of {self.name}")
        return mt.CreateMessageResult(role="assistant", content=answer, model="m")

    def session(self) -> Any:
        @contextlib.asynccontextmanager
        async def opened() -> Any:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.key}"})
            async with http, streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(
                    read, write, sampling_callback=self.sampling, elicitation_callback=self.elicitation
                ) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                    yield session

        return opened()


async def _call(session: ClientSession, tool: str, **arguments: Any) -> str:
    with anyio.fail_after(60):
        result = await session.call_tool(f"demo.{tool}", arguments)
    assert not result.is_error, text(result)
    return text(result)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a child that exited but was not reaped yet is a zombie: not running
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _gone(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_each_session_has_its_own_servers_and_their_requests_go_back_to_it(tmp_path: Path) -> None:
    process, url, keys = _start(tmp_path)
    alice, bob = Client(url, keys["alice"], "alice"), Client(url, keys["bob"], "bob")
    seen: dict[str, Any] = {}
    try:

        async def scenario() -> None:
            async with alice.session() as a:
                async with bob.session() as b:  # bob connected last, and can sample too
                    seen["alice pid"] = int(await _call(a, "whoami"))
                    seen["bob pid"] = int(await _call(b, "whoami"))
                    await _call(a, "remember", value="alice's secret")
                    seen["bob recalls"] = await _call(b, "recall")
                    seen["alice recalls"] = await _call(a, "recall")
                    seen["alice asks"] = await _call(a, "ask")
                    seen["bob asks"] = await _call(b, "ask")
                # bob's session has ended: his server with it, alice's still runs
                seen["bob's server stopped"] = await anyio.to_thread.run_sync(_gone, seen["bob pid"])
                seen["alice's server runs"] = _alive(seen["alice pid"])
                seen["alice recalls later"] = await _call(a, "recall")

        anyio.run(scenario)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert seen["alice pid"] != seen["bob pid"]
    assert seen["bob recalls"] == "nothing"
    assert seen["alice recalls"] == seen["alice recalls later"] == "alice's secret"
    assert seen["alice asks"] == "the model of alice" and seen["bob asks"] == "the model of bob"
    assert alice.asked == 1 and bob.asked == 1
    # alice's escalated call was put to alice's user only
    assert len(alice.approvals) == 1 and "approval" in alice.approvals[0] and bob.approvals == []
    assert seen["bob's server stopped"] and seen["alice's server runs"]
    # the servers of the sessions, and the one the gateway probed at start (stopped since)
    pids = [int(line) for line in (tmp_path / "pids.txt").read_text().split()]
    assert len(pids) == 3 and {seen["alice pid"], seen["bob pid"]} < set(pids)


def test_a_shared_server_is_one_process_and_asks_the_client_whose_call_is_in_flight(tmp_path: Path) -> None:
    process, url, keys = _start(tmp_path, more="shared = true\n")
    alice, bob = Client(url, keys["alice"], "alice"), Client(url, keys["bob"], "bob")
    seen: dict[str, Any] = {}
    try:

        async def scenario() -> None:
            async with alice.session() as a:
                async with bob.session() as b:
                    seen["pids"] = {await _call(a, "whoami"), await _call(b, "whoami")}
                    await _call(a, "remember", value="shared by design")
                    seen["bob recalls"] = await _call(b, "recall")
                    seen["alice asks"] = await _call(a, "ask")

        anyio.run(scenario)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert len(seen["pids"]) == 1
    assert seen["bob recalls"] == "shared by design"
    assert seen["alice asks"] == "the model of alice" and bob.asked == 0


def test_sessions_per_key_are_bounded(tmp_path: Path) -> None:
    process, url, keys = _start(tmp_path, "--max-sessions-per-key", "1")
    alice, bob = Client(url, keys["alice"], "alice"), Client(url, keys["bob"], "bob")
    seen: dict[str, Any] = {}
    try:

        async def scenario() -> None:
            async with alice.session() as first:
                await _call(first, "whoami")
                async with alice.session() as second:
                    with pytest.raises(MCPError) as refused:
                        await second.list_tools()
                    seen["refused"] = str(refused.value)
                async with bob.session() as b:  # another key's sessions are its own
                    seen["bob"] = await _call(b, "recall")
            async with alice.session() as again:  # the first one ended: room for another
                seen["again"] = await _call(again, "recall")

        anyio.run(scenario)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "--max-sessions-per-key" in seen["refused"] and "alice" in seen["refused"]
    assert seen["bob"] == seen["again"] == "nothing"
