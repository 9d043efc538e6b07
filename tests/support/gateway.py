"""A real `policyc mcp` gateway, started by the `mcp` SDK's stdio client as a user's MCP client
starts it, and the text of a tool's result."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

POLICYC = str(Path(sys.executable).parent / "policyc")


@contextlib.asynccontextmanager
async def gateway(args: list[str], log: Path, **callbacks: Any) -> AsyncIterator[ClientSession]:
    """A client session with `policyc mcp ARGS` started as a subprocess (its stderr in ``log``)."""
    parameters = StdioServerParameters(command=POLICYC, args=["mcp", *args])
    with log.open("w") as errlog:
        async with stdio_client(parameters, errlog=errlog) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                with anyio.fail_after(60):
                    await session.initialize()
                yield session


def text(result: mt.CallToolResult) -> str:
    """The text blocks of a tool's result, a line each."""
    return "\n".join(block.text for block in result.content if isinstance(block, mt.TextContent))


# the end of a test's MCP server script: the SDK's low-level server `demo` made of the script's
# `list_tools` and `call_tool`, served over stdio
SERVE_DEMO = """

async def main():
    server = Server("demo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


def one_server(folder: Path, server: str, policy: str, more: str = "") -> tuple[Path, Path]:
    """``folder`` holding an MCP server script (``server.py``), a policy and a gateway.toml whose
    one server, ``demo``, runs the script with this Python (``more``: further config lines)."""
    (folder / "server.py").write_text(server, "utf-8")
    (folder / "policy.dl").write_text(policy, "utf-8")
    script = json.dumps(str(folder / "server.py"))
    (folder / "gateway.toml").write_text(
        f"[servers.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{script}]\n{more}", "utf-8"
    )
    return folder / "policy.dl", folder / "gateway.toml"


def listening(folder: Path, policy: Path, config: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """`policyc mcp POLICY --config CONFIG --listen 127.0.0.1:PORT EXTRA...` started on a free
    port (its stderr in ``folder/stderr.txt``), once the port accepts connections: the process
    and the port."""
    from .commands import free_port

    port = free_port()
    log = (folder / "stderr.txt").open("w")
    process = subprocess.Popen(
        [POLICYC, "mcp", str(policy), "--config", str(config), "--listen", f"127.0.0.1:{port}", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, (folder / "stderr.txt").read_text()
            time.sleep(0.1)
