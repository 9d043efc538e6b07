"""`policyc mcp --listen` for several clients: bearer keys from the KEYS.toml `policyc serve`
reads, each key's principal and roles the facts of the sessions it opens, one policy session per
streamable HTTP session, a session usable only by the principal that opened it, and the
start-up refusals (`--listen` with neither `--keys` nor `--no-auth`, `--no-auth` off loopback).
Two concurrent clients of different principals over real streamable HTTP, with the SDK's
client, against the installed command."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .support.gateway import POLICYC, SERVE_DEMO, listening, one_server, text
from .support.service import keys_file

SERVER = (
    """
import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [mt.Tool(name=n, input_schema={"type": "object"}) for n in ("echo", "admin", "fetch")]


async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=params.name + " done")])
"""
    + SERVE_DEMO
)

POLICY = """
.import events
@id("admins-only")
@message("only an admin may")
Deny(a) :- ToolCall(a, "demo.admin"), !HasRole("admin").
@id("not-after-a-fetch")
@message("not after untrusted content")
Deny(a) :- ToolCall(a, "demo.echo"), DependsOn(a, d), Label(d, "untrusted").
"""


def _keys(tmp_path: Path) -> dict[str, str]:
    return keys_file(tmp_path, {"alice": ("admin",), "bob": ("agent",)})


def _files(tmp_path: Path) -> tuple[Path, Path]:
    return one_server(tmp_path, SERVER, POLICY, '\n[servers.demo.tools.fetch]\nlabels = ["untrusted"]\n')


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    policy, config = _files(tmp_path)
    return listening(tmp_path, policy, config, *extra)


def test_two_clients_with_different_keys_are_two_principals_and_two_sessions(tmp_path: Path) -> None:
    keys = _keys(tmp_path)
    process, port = _start(tmp_path, "--keys", str(tmp_path / "keys.toml"))
    url = f"http://127.0.0.1:{port}/mcp"
    seen: dict[str, Any] = {}
    try:

        async def client(name: str, calls: list[str], started: anyio.Event, other: anyio.Event) -> None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {keys[name]}"})
            async with http, streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    answers = []
                    for n, tool in enumerate(calls):
                        answers.append(await session.call_tool(tool, {}))
                        if n == 0:  # both have begun before either goes on: the sessions overlap
                            started.set()
                            await other.wait()
                    seen[name] = answers

        async def both() -> None:
            alice_started, bob_started = anyio.Event(), anyio.Event()
            alice = ["demo.fetch", "demo.echo", "demo.admin"]  # untrusted content, then an echo
            bob = ["demo.echo", "demo.admin", "demo.echo"]  # echoes, and tries the admin tool
            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    group.start_soon(client, "alice", alice, alice_started, bob_started)
                    group.start_soon(client, "bob", bob, bob_started, alice_started)

        anyio.run(both)

        # no key, a wrong key: refused before anything else
        assert httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
        wrong = httpx.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
    finally:
        process.terminate()
        process.wait(timeout=30)
    alice, bob = seen["alice"], seen["bob"]
    # alice's fetch taints her session only
    assert alice[1].is_error and "not after untrusted content" in text(alice[1])
    assert not bob[0].is_error and not bob[2].is_error
    # the roles are the keys': alice is an admin, bob is not
    assert not alice[2].is_error and text(alice[2]) == "admin done"
    assert bob[1].is_error and "only an admin may" in text(bob[1])


def test_a_session_answers_only_the_principal_that_opened_it(tmp_path: Path) -> None:
    keys = _keys(tmp_path)
    process, port = _start(tmp_path, "--keys", str(tmp_path / "keys.toml"))
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    try:
        with httpx.Client(timeout=30) as http:
            opened = http.post(
                url, json=initialize, headers={**headers, "Authorization": f"Bearer {keys['alice']}"}
            )
            assert opened.status_code == 200, opened.text
            session = opened.headers["mcp-session-id"]
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            theirs = http.post(
                url,
                json=ping,
                headers={**headers, "Authorization": f"Bearer {keys['bob']}", "Mcp-Session-Id": session},
            )
            mine = http.post(
                url,
                json=ping,
                headers={**headers, "Authorization": f"Bearer {keys['alice']}", "Mcp-Session-Id": session},
            )
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert theirs.status_code == 404
    assert mine.status_code in (200, 202)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ((), "--listen needs --keys KEYS.toml"),
        (("--no-auth", "--keys", "k.toml"), "one of them"),
    ],
)
def test_listen_without_a_way_to_know_its_clients_does_not_start(
    tmp_path: Path, extra: tuple[str, ...], said: str
) -> None:
    policy, config = _files(tmp_path)
    run = subprocess.run(
        [POLICYC, "mcp", str(policy), "--config", str(config), "--listen", "127.0.0.1:1", *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr


def test_no_auth_is_refused_off_loopback_and_a_bad_keys_file_is_named(tmp_path: Path) -> None:
    policy, config = _files(tmp_path)
    off = subprocess.run(
        [POLICYC, "mcp", str(policy), "--config", str(config), "--listen", "0.0.0.0:1", "--no-auth"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert off.returncode == 2 and "--no-auth only on a loopback address" in off.stderr
    (tmp_path / "bad.toml").write_text("[principals.x]\nroles = 3\n", "utf-8")
    bad = subprocess.run(
        [
            POLICYC,
            "mcp",
            str(policy),
            "--config",
            str(config),
            "--listen",
            "0.0.0.0:1",
            "--keys",
            str(tmp_path / "bad.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "bad.toml" in bad.stderr and "Traceback" not in bad.stderr


def test_a_port_in_use_is_one_line_and_status_2(tmp_path: Path) -> None:
    policy, config = _files(tmp_path)
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        done = subprocess.run(
            [
                POLICYC,
                "mcp",
                str(policy),
                "--config",
                str(config),
                "--listen",
                f"127.0.0.1:{port}",
                "--no-auth",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 2
    assert f"policyc: error: 127.0.0.1:{port} is in use" in done.stderr
    assert "Traceback" not in done.stderr and "listening on" not in done.stderr
