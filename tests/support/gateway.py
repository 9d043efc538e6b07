"""A real `policyc mcp` gateway, started by the `mcp` SDK's stdio client as a user's MCP client
starts it, and the text of a tool's result."""

from __future__ import annotations

import contextlib
import sys
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
