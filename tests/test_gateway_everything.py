"""`policyc mcp` in front of @modelcontextprotocol/server-everything, the reference server's
protocol coverage, with the `mcp` SDK's stdio client: its prompts, resources, a long-running
operation's progress, a sampling request and an elicitation request all pass through the
gateway, and a denied call never reaches the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt

from .npm_servers import npm_servers  # noqa: F401  (a fixture)
from .support.gateway import gateway, text

POLICY = """.import events
@id("no-secret-echo") @message("{a} would echo a secret")
Deny(a) :- ToolCall(a, "everything.echo"), ToolArg(a, "message", "secret").
"""


def test_server_everythings_protocol_passes_through(npm_servers, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    asked: list[str] = []
    progress: list[float] = []

    async def sampling_callback(
        context: Any, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult:
        asked.append(f"sample: {params.messages[0].content.text}")
        return mt.CreateMessageResult(
            role="assistant", content=mt.TextContent(type="text", text="teal"), model="m"
        )

    async def elicitation_callback(context: Any, params: Any) -> mt.ElicitResult:
        asked.append(f"elicit: {params.message}")
        return mt.ElicitResult(action="decline")

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async def scenario() -> dict[str, Any]:
        args = [str(tmp_path / "policy.dl"), "--name", "everything", "--", *npm_servers.everything]
        callbacks = {"sampling_callback": sampling_callback, "elicitation_callback": elicitation_callback}
        async with gateway(args, tmp_path / "stderr.txt", **callbacks) as client:
            seen: dict[str, Any] = {}
            seen["tools"] = [t.name for t in (await client.list_tools()).tools]
            seen["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
            seen["prompt"] = await client.get_prompt("everything.simple-prompt")
            resources = (await client.list_resources()).resources
            seen["read"] = await client.read_resource(resources[0].uri)
            seen["long"] = await client.call_tool(
                "everything.trigger-long-running-operation",
                {"duration": 0.3, "steps": 3},
                progress_callback=on_progress,
            )
            seen["sampled"] = await client.call_tool(
                "everything.trigger-sampling-request", {"prompt": "a colour"}
            )
            seen["elicited"] = await client.call_tool("everything.trigger-elicitation-request", {})
            seen["echo"] = await client.call_tool("everything.echo", {"message": "hello"})
            seen["denied"] = await client.call_tool("everything.echo", {"message": "secret"})
            return seen

    seen = anyio.run(scenario)
    assert {"everything.echo", "everything.trigger-sampling-request"} <= set(seen["tools"])
    assert "everything.simple-prompt" in seen["prompts"] and seen["prompt"].messages
    assert seen["read"].contents and seen["read"].contents[0].text
    assert not seen["long"].is_error and progress == sorted(progress) and len(progress) >= 3
    assert not seen["sampled"].is_error and "teal" in text(seen["sampled"])
    assert any(a.startswith("sample: ") and "a colour" in a for a in asked)
    assert any(a.startswith("elicit: ") for a in asked), "the server's elicitation reached the client"
    assert not seen["echo"].is_error and "hello" in text(seen["echo"])
    assert seen["denied"].is_error and "would echo a secret" in text(seen["denied"])
