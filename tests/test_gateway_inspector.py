"""The MCP Inspector's CLI mode (`npx @modelcontextprotocol/inspector --cli`) as the client of
`policyc mcp` in front of @modelcontextprotocol/server-everything: it lists the tools as S.T,
an allowed call reaches the server, and a denied call comes back as an error result carrying
the policy's feedback, not the server's answer. The Inspector runs headless: no display, no
browser."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import policyc_command
from .npm_servers import NpmServers, npm_servers  # noqa: F401  (a fixture)

POLICY = """\
.import events

@id("no-secret-echo")
@message("{a} would echo a secret")
@suggest("Echo something else.")
Deny(a) :- ToolCall(a, "everything.echo"), ToolArg(a, "message", "secret").
"""


def inspect(servers: NpmServers, folder: Path, *method: str) -> tuple[int, dict]:
    """Run the Inspector's CLI against the gateway: its exit status and the JSON it printed."""
    policy = folder / "policy.dl"
    policy.write_text(POLICY)
    gateway = [*policyc_command(), "mcp", str(policy), "--name", "everything", "--", *servers.everything]
    # output to files, not pipes: a process the gateway started may outlive it and hold a pipe
    with open(folder / "stdout", "w+") as stdout, open(folder / "stderr", "w+") as stderr:
        done = subprocess.run(
            [*servers.inspector, "--cli", *gateway, *method],  # the Inspector installed by npm ci
            cwd=servers.folder,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            timeout=120,
            env=dict(
                os.environ,
                MCP_CATALOG_PATH=str(folder / "catalog.json"),  # the Inspector's own file, kept out of $HOME
                npm_config_update_notifier="false",
            ),
        )
        stdout.seek(0)
        stderr.seek(0)
        printed, said = stdout.read(), stderr.read()
    try:
        return done.returncode, json.loads(printed)
    except json.JSONDecodeError:
        pytest.fail(f"the Inspector printed no JSON (status {done.returncode}):\n{printed}\n{said}")


def text_of(result: dict) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_tools_list_shows_the_servers_tools_as_s_t(npm_servers, tmp_path: Path) -> None:  # noqa: F811
    status, listed = inspect(npm_servers, tmp_path, "--method", "tools/list")
    assert status == 0
    names = [tool["name"] for tool in listed["tools"]]
    assert "everything.echo" in names and "everything.get-sum" in names
    assert all(name.startswith("everything.") for name in names)


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_an_allowed_call_reaches_the_server(npm_servers, tmp_path: Path) -> None:  # noqa: F811
    call = ("--method", "tools/call", "--tool-name", "everything.echo", "--tool-arg", "message=hello")
    status, result = inspect(npm_servers, tmp_path, *call)
    assert status == 0 and not result.get("isError")
    assert text_of(result) == "Echo: hello"


def test_a_denied_call_is_an_error_result_with_the_feedback(npm_servers, tmp_path: Path) -> None:  # noqa: F811
    call = ("--method", "tools/call", "--tool-name", "everything.echo", "--tool-arg", "message=secret")
    status, result = inspect(npm_servers, tmp_path, *call)
    assert status != 0  # the Inspector's CLI exits non-zero on a result with isError
    assert result["isError"] is True
    text = text_of(result)
    assert "would echo a secret" in text and "Echo something else." in text
    assert "Echo: secret" not in text  # the server never saw the call
