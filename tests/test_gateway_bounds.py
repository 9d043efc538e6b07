"""What `policyc mcp` bounds and compares exactly, against the installed command and a real
upstream MCP server written with the `mcp` SDK: a tool's `inputSchema` is checked with a
linear-time regular expression engine within the decision's deadline, in a thread, while
another connection is answered; a schema whose pattern RE2 cannot run is refused at start;
the retry of an escalated call must be the call the user was asked about (canonical JSON),
and the gateway forwards the approved arguments; the calls waiting for the user are bounded;
numbers reach the policy and the tool as the client wrote them."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from .support.commands import free_port
from .support.gateway import POLICYC, text

SERVER = """
import json

import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

# a value of `tree` is a node: an object whose `a` is a node, and that has `x` or `y`; an
# argument nested many levels deep makes a backtracking validator try both branches of each
TREE = {
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}, "required": ["x"]},
                {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}, "required": ["y"]},
            ]
        }
    },
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
}
TOOLS = [
    mt.Tool(name="echo", input_schema={"type": "object"}),
    mt.Tool(
        name="name",
        input_schema={"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}},
    ),
    mt.Tool(
        name="keys",
        input_schema={
            "type": "object",
            "patternProperties": {"^(a+)+$": {"type": "integer"}},
            "additionalProperties": False,
        },
    ),
    mt.Tool(name="tree", input_schema=TREE),
    mt.Tool(
        name="unique",
        input_schema={"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}},
    ),
    mt.Tool(
        name="twice",
        input_schema={"type": "object", "properties": {"w": {"type": "string", "pattern": "^(a)\\\\1$"}}},
    ),
    mt.Tool(
        name="out",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"v": {"type": "string", "pattern": "^(a+)+$"}}},
    ),
]


async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    if params.name == "out":
        value = {"v": "a" * 27 + "!"}
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="out")], structured_content=value)
    # the arguments exactly as the server received them (1 and 1.0 and true told apart)
    said = json.dumps(params.arguments, sort_keys=True)
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=said)])


server = Server("bounds", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""

POLICY = """.import events
@id("pay-needs-approval") @message("paying needs the user's approval")
Escalate(a) :- ToolCall(a, "up.echo"), tool_arg(a, "pay") = 1.
@id("rounded") @message("the policy read another number than the client wrote")
Deny(a) :- ToolCall(a, "up.echo"), n = tool_arg(a, "n"), n != to_number(tool_arg(a, "said")).
"""

HOSTILE = "a" * 27 + "!"  # `^(a+)+$` takes Python's `re` seconds on it, doubling per `a`


def files(tmp_path: Path, decide_timeout: float = 10.0) -> tuple[Path, Path]:
    script = tmp_path / "bounds_server.py"
    script.write_text(SERVER)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"[servers.up]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
        f"\n[session]\ndecide_timeout = {decide_timeout}\n"
    )
    policy = tmp_path / "policy.dl"
    policy.write_text(POLICY)
    return policy, config


class Listening:
    """`policyc mcp` serving streamable HTTP on a free port, its stderr in a file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tmp_path / "stderr.txt"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    POLICYC,
                    "mcp",
                    *args,
                    "--analysis-timeout",
                    "0",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    "--no-auth",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 60
        while "listening on" not in self.log.read_text():
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.kill()  # a gateway whose event loop is stuck answers no SIGTERM
        self.process.wait(timeout=30)


@contextlib.contextmanager
def listening(tmp_path: Path, *args: str) -> Iterator[Listening]:
    running = Listening(tmp_path, *args)
    try:
        yield running
    finally:
        running.stop()


def test_a_hostile_argument_is_refused_within_the_deadline_while_another_connection_is_answered(
    tmp_path: Path,
) -> None:
    policy, config = files(tmp_path, decide_timeout=1.5)
    deep: dict[str, Any] = {}
    for _ in range(40):  # both branches at every level: 2^40 steps for a validator that tries them
        deep = {"a": deep}
    # objects no sort orders: a validator that compares each with every other takes minutes
    distinct = [{"k": n} for n in range(20_000)]
    finished: list[str] = []
    after: dict[str, mt.CallToolResult] = {}

    async def call(url: str, tool: str, arguments: dict[str, Any], name: str) -> mt.CallToolResult:
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                await client.list_tools()  # the session's own servers start at its first request
                with anyio.fail_after(30):  # a check left to run would take far longer
                    result = await client.call_tool(tool, arguments)
                finished.append(name)
                with anyio.fail_after(30):  # the connection goes on after a refused call
                    after[name] = await client.call_tool("up.echo", {"next": name})
                return result

    async def scenario(url: str) -> dict[str, mt.CallToolResult]:
        results: dict[str, mt.CallToolResult] = {}

        async def one(tool: str, arguments: dict[str, Any], name: str, delay: float = 0.0) -> None:
            await anyio.sleep(delay)
            results[name] = await call(url, tool, arguments, name)

        async with anyio.create_task_group() as group:
            group.start_soon(one, "up.tree", {"tree": deep}, "tree")
            group.start_soon(one, "up.name", {"name": HOSTILE}, "name")
            group.start_soon(one, "up.keys", {HOSTILE: 1}, "keys")
            group.start_soon(one, "up.out", {}, "out")
            group.start_soon(one, "up.unique", {"xs": distinct}, "unique")
            group.start_soon(one, "up.unique", {"xs": [{"k": 1}, {"k": True}, {"k": 1.0}]}, "same")
            group.start_soon(one, "up.echo", {"n": 1}, "echo", 0.3)  # while the others run
        return results

    with listening(tmp_path, str(policy), "--config", str(config)) as running:
        results = anyio.run(scenario, running.url)
    assert results["tree"].is_error, text(results["tree"])
    assert "policyc:timeout" in text(results["tree"]) and "inputSchema" in text(results["tree"])
    assert "deadline (1.5 s)" in text(results["tree"])  # given up at the deadline set
    assert results["name"].is_error and "does not match" in text(results["name"])
    assert results["keys"].is_error and "'aaaaaaaaaaaaaaaaaaaaaaaaaaa!'" in text(results["keys"])
    # the server's result breaks its own outputSchema: found, with RE2, and not forwarded
    assert results["out"].is_error and "does not match '^(a+)+$'" in text(results["out"])
    assert not results["echo"].is_error and text(results["echo"]) == '{"n": 1}'
    # uniqueness is checked in linear time, with JSON's equality (1 and 1.0 equal, true apart)
    assert not results["unique"].is_error and json.loads(text(results["unique"])) == {"xs": distinct}
    assert results["same"].is_error and "non-unique" in text(results["same"])
    for name, next_call in after.items():  # a refused call, the timeout included, refuses itself only
        assert not next_call.is_error and text(next_call) == json.dumps({"next": name}), name
    # the call made while the hostile ones were checked was answered before the one given up
    # at the deadline: no check held the gateway's event loop
    assert finished.index("echo") < finished.index("tree")


def test_a_pattern_re2_cannot_run_refuses_its_tool_at_start_naming_it(tmp_path: Path) -> None:
    policy, config = files(tmp_path)

    async def scenario(url: str) -> tuple[list[str], mt.CallToolResult]:
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                names = [t.name for t in (await client.list_tools()).tools]
                return names, await client.call_tool("up.twice", {"w": "aa"})

    with listening(tmp_path, str(policy), "--config", str(config)) as running:
        names, called = anyio.run(scenario, running.url)
        log = running.log.read_text()
    assert "up.twice" not in names and "up.echo" in names
    assert "`up.twice` is not listed" in log and "properties.w.pattern" in log and "backreference" in log
    assert called.is_error and "backreference" in text(called)


@pytest.mark.slow  # the main suite has its logic (test_gateway_approval_retry.py)
def test_a_retry_is_the_call_the_user_approved_compared_as_canonical_json(tmp_path: Path) -> None:
    """On a 2026-07-28 connection (the SDK's `Client` with the installed gateway), a retry that
    brings back the approval state with `1.0` or `true` where the user saw `1` is refused, and
    the retry of the call itself is sent with the arguments the user saw, once."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    policy, config = files(tmp_path)
    args = ["mcp", str(policy), "--config", str(config), "--analysis-timeout", "0"]
    approve = {"approval": mt.ElicitResult(action="accept", content={"approve": True})}

    async def never_asked(context: Any, params: Any) -> mt.ElicitResult:
        raise AssertionError("a 2026-07-28 client is asked within the call's result")

    async def scenario() -> tuple[str | None, list[mt.CallToolResult], mt.CallToolResult, mt.CallToolResult]:
        parameters = StdioServerParameters(command=POLICYC, args=args)
        async with Client(parameters, elicitation_callback=never_asked) as client:
            session = client.session

            async def asked() -> str:
                result = await session.call_tool("up.echo", {"pay": 1}, allow_input_required=True)
                assert isinstance(result, mt.InputRequiredResult), result
                assert "pay = 1" in str(result.input_requests["approval"].params.message)
                assert result.request_state is not None
                return result.request_state

            async def retry(state: str, arguments: dict[str, Any]) -> mt.CallToolResult:
                result = await session.call_tool(
                    "up.echo",
                    arguments,
                    input_responses=approve,
                    request_state=state,
                    allow_input_required=True,
                )
                assert isinstance(result, mt.CallToolResult), result
                return result

            with anyio.fail_after(60):
                changed = [await retry(await asked(), {"pay": other}) for other in (1.0, True)]
                state = await asked()
                sent = await retry(state, {"pay": 1})
                again = await retry(state, {"pay": 1})
            return session.protocol_version, changed, sent, again

    version, changed, sent, again = anyio.run(scenario)
    assert version == "2026-07-28"
    for result in changed:
        assert result.is_error and "not the call the user was asked about" in text(result), text(result)
    assert not sent.is_error and text(sent) == '{"pay": 1}'
    assert again.is_error and "unknown, used, expired" in text(again)


def test_numbers_reach_the_policy_and_the_tool_as_the_client_wrote_them(tmp_path: Path) -> None:
    """JSON-RPC written by hand to the installed gateway over stdio (the SDK's client cannot
    write `NaN`): an integer past 64 bits is decided on and sent exactly; a number no JSON value
    holds is refused, the call not sent."""
    policy, config = files(tmp_path)
    huge = 2**64 + 1  # a float reads 18446744073709551616
    calls = {
        "huge": f'{{"n": {huge}, "said": "{huge}"}}',
        "negative": f'{{"n": {-(2**70)}, "said": "{-(2**70)}"}}',
        **{
            literal: f'{{"n": {literal}, "said": "1"}}'
            for literal in ("NaN", "Infinity", "-Infinity", "1e999")
        },
    }
    with (tmp_path / "stderr.txt").open("w") as log:
        gateway = subprocess.Popen(
            [POLICYC, "mcp", str(policy), "--config", str(config), "--analysis-timeout", "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert gateway.stdin is not None and gateway.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})]
    lines.append(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    for n, arguments in enumerate(calls.values(), start=1):
        params = f'{{"name": "up.echo", "arguments": {arguments}}}'
        lines.append(f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", "params": {params}}}')
    try:
        answers: dict[int, dict[str, Any]] = {}
        for line in lines:
            gateway.stdin.write(line + "\n")
            gateway.stdin.flush()
            if '"id"' in line:  # a request: wait for its answer (one call at a time)
                answer = json.loads(gateway.stdout.readline())
                answers[answer["id"]] = answer
    finally:
        gateway.kill()
        gateway.wait(timeout=30)
    results = {
        name: mt.CallToolResult.model_validate(answers[n]["result"]) for n, name in enumerate(calls, 1)
    }
    for name, value in (("huge", huge), ("negative", -(2**70))):
        assert not results[name].is_error, text(results[name])
        assert text(results[name]) == json.dumps({"n": value, "said": str(value)}, sort_keys=True)
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        result = results[literal]
        assert result.is_error and "not sent to the server" in text(result), text(result)
        assert "refused before any rule ran" in text(result), text(result)
