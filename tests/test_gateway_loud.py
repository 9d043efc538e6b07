"""`policyc mcp` fails loudly when an upstream server does not start, `policyc mcp check`, and
the client entries of `policyc mcp init`, run as written. The installed command,
started with a desktop client's short environment, exits non-zero naming the server and why
(a command not found: with the PATH used), unless `--allow-missing`, which serves the servers
that did start and tells the client which did not."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from .support.gateway import POLICYC, gateway, text

MINIMAL = {"PATH": "/usr/bin:/bin"}  # what a desktop client gives the servers it starts

# a small real MCP server: one tool, `echo`
ECHO = """
import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx, params):
    names = ("echo", "wipe", "ask")
    return mt.ListToolsResult(
        tools=[mt.Tool(name=n, description=f"{n} (v1)", input_schema={"type": "object"}) for n in names]
    )


async def call_tool(ctx, params):
    return mt.CallToolResult(content=[mt.TextContent(type="text", text="echoed")])


server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


def setup(tmp_path: Path, broken: str) -> tuple[Path, Path]:
    """A policy allowing everything, and a configuration of the echo server and a ``broken`` one."""
    (tmp_path / "echo.py").write_text(ECHO)
    python = json.dumps(sys.executable)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"[servers.echo]\ncommand = {python}\nargs = [{json.dumps(str(tmp_path / 'echo.py'))}]\n\n"
        f"[servers.broken]\n{broken}\n"
    )
    policy = tmp_path / "p.dl"
    policy.write_text(".import events\n.default allow\n")
    return policy, config


def start(policy: Path, config: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """The gateway started as a desktop client starts it (PATH `/usr/bin:/bin`, cwd `/`), its
    input closed at once."""
    return subprocess.run(
        [POLICYC, "mcp", str(policy), "--config", str(config), "--analysis-timeout", "0", *options],
        cwd="/",
        env=MINIMAL,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        (
            'command = "no-such-mcp-server"',
            "the command `no-such-mcp-server` was not found on the PATH `/usr/bin:/bin`",
        ),
        pytest.param(
            'command = "/no/such/server"',
            "the command `/no/such/server` is not an executable file",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            f'command = {json.dumps(sys.executable)}\nargs = ["-c", "0"]',
            "it could not be started",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            f'command = {json.dumps(sys.executable)}\nargs = ["-c", "import sys; sys.stdin.readline(); sys.exit(4)"]',
            "it could not be started",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["not-found", "not-executable", "exits-at-once", "crashes-in-initialize"],
)
def test_a_server_that_does_not_start_stops_the_gateway_naming_it(
    tmp_path: Path, broken: str, said: str
) -> None:
    policy, config = setup(tmp_path, broken)
    began = time.monotonic()
    done = start(policy, config)
    assert done.returncode == 1, done.stderr
    assert "the MCP server `broken` did not start" in done.stderr and said in done.stderr, done.stderr
    assert "--allow-missing" in done.stderr and "Traceback" not in done.stderr
    assert "serving" not in done.stderr and done.stdout == ""
    assert time.monotonic() - began < 30  # at once, not after the start timeout


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_allow_missing_serves_the_others_and_tells_the_client_which_did_not_start(tmp_path: Path) -> None:
    policy, config = setup(tmp_path, 'command = "no-such-mcp-server"')
    args = [str(policy), "--config", str(config), "--analysis-timeout", "0", "--allow-missing"]

    async def scenario() -> tuple[str | None, list[str], str, str]:
        async with gateway(args, tmp_path / "stderr.txt") as client:
            told = client.initialize_result
            names = [tool.name for tool in (await client.list_tools()).tools]
            echoed = await client.call_tool("echo.echo", {})
            down = await client.call_tool("broken.anything", {})
            assert down.is_error
            return None if told is None else told.instructions, names, text(echoed), text(down)

    instructions, names, echoed, down = anyio.run(scenario)
    assert names == ["echo.echo", "echo.wipe", "echo.ask"] and echoed == "echoed"
    assert instructions is not None and "`broken`" in instructions and "no-such-mcp-server" in instructions
    assert "the server `broken` is not running" in down and "no-such-mcp-server" in down
    log = (tmp_path / "stderr.txt").read_text()
    assert "serving without them (--allow-missing)" in log and "the MCP server `broken` did not start" in log


CHECKED = """.import events
.default allow
Deny(a) :- ToolCall(a, "echo.wipe").
Escalate(a) :- ToolCall(a, "echo.ask").
"""


def check(policy: Path, config: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`policyc mcp check`, started with a desktop client's environment."""
    return subprocess.run(
        [POLICYC, "mcp", "check", str(policy), "--config", str(config), *options],
        cwd="/",
        env=MINIMAL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_check_lists_each_servers_tools_with_the_policys_view(tmp_path: Path) -> None:
    policy, config = setup(tmp_path, 'command = "no-such-mcp-server"')
    policy.write_text(CHECKED)
    failed = check(policy, config)
    assert failed.returncode == 1, failed.stderr
    lines = failed.stdout.splitlines()
    assert "server `echo`: 3 tool(s)" in lines and "  echo.echo: listed" in lines
    assert any(
        line.startswith("  echo.wipe: always denied: every call of `echo.wipe` is denied") for line in lines
    )
    assert any(line.startswith("  echo.ask: escalated") for line in lines)
    assert (
        "server `broken`: did not start: the command `no-such-mcp-server` was not found on the PATH `/usr/bin:/bin`"
        in lines
    )
    assert "Traceback" not in failed.stderr

    # only the servers that start: the check passes; a tool whose pinned definition changed fails it
    lock = tmp_path / "gateway.lock.json"
    config.write_text(
        config.read_text()
        .split("[servers.broken]")[0]
        .replace("[servers.echo]", f"lock = {json.dumps(str(lock))}\n[servers.echo]", 1)
    )
    pinned = subprocess.run([POLICYC, "mcp", "lock", "--config", str(config)], capture_output=True, text=True)
    assert pinned.returncode == 0, pinned.stderr
    passed = check(policy, config, "--format", "json")
    assert passed.returncode == 0, passed.stderr
    report = json.loads(passed.stdout)
    assert report["ok"] and [s["server"] for s in report["servers"]] == ["echo"]
    views = {t["tool"]: (t["view"], t["pinned"]) for t in report["servers"][0]["tools"]}
    assert views == {
        "echo.echo": ("listed", True),
        "echo.wipe": ("always denied", True),
        "echo.ask": ("escalated", True),
    }
    script = tmp_path / "echo.py"
    script.write_text(script.read_text().replace("(v1)", "(v2)"))
    changed = check(policy, config)
    assert changed.returncode == 1
    assert "  echo.echo: changed: the description changed since the lock" in changed.stdout.splitlines()


def test_check_refuses_a_policy_the_gateway_could_not_run(tmp_path: Path) -> None:
    policy, config = setup(tmp_path, 'command = "no-such-mcp-server"')
    policy.write_text("Deny(a) :- Nowhere(a).\n")
    done = check(policy, config)
    assert done.returncode == 1 and "Nowhere" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_init_prints_client_entries_that_work_as_written(tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(ECHO)
    out = tmp_path / "starter"
    init = subprocess.run(
        [
            POLICYC,
            "mcp",
            "init",
            "--name",
            "echo",
            "--out",
            "starter",
            "--",
            sys.executable,
            str(tmp_path / "echo.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert init.returncode == 0, init.stderr
    printed = init.stdout
    claude_at = printed.index("Claude Desktop (claude_desktop_config.json):\n") + len(
        "Claude Desktop (claude_desktop_config.json):\n"
    )
    entry = json.loads(printed[claude_at : printed.index("VS Code (.vscode/mcp.json):")])["mcpServers"][
        "echo"
    ]
    policy, config = str(out / "echo.dl"), str(out / "gateway.toml")
    assert entry == {"command": POLICYC, "args": ["mcp", policy, "--config", config]}
    vscode_at = printed.index("VS Code (.vscode/mcp.json):\n") + len("VS Code (.vscode/mcp.json):\n")
    vscode = json.loads(printed[vscode_at : printed.index("MCP Inspector CLI:")])["servers"]["echo"]
    assert vscode == {"type": "stdio", **entry}
    inspector = printed.split("MCP Inspector CLI:\n")[1].strip()
    assert inspector.endswith(f"--cli --method tools/list -- {POLICYC} mcp {policy} --config {config}")

    # the entry as a desktop client starts it: PATH /usr/bin:/bin, in the folder /
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def listed(parameters: StdioServerParameters) -> list[str]:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with stdio_client(parameters, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    with anyio.fail_after(60):
                        await client.initialize()
                        return [tool.name for tool in (await client.list_tools()).tools]

    as_written = StdioServerParameters(command=entry["command"], args=entry["args"], env=MINIMAL, cwd="/")
    assert anyio.run(listed, as_written) == ["echo.echo", "echo.wipe", "echo.ask"]

    # a broken entry (its server's command not found on the client's PATH) fails, naming both
    broken = Path(config).read_text().replace(json.dumps(sys.executable), '"echo-server-not-installed"')
    Path(config).write_text(broken)
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        cwd="/",
        env=MINIMAL,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "the command `echo-server-not-installed` was not found on the PATH `/usr/bin:/bin`" in done.stderr


def test_a_bare_command_is_written_with_its_absolute_path() -> None:
    from policyc.gateway.entries import absolute_command

    program, *rest = absolute_command(["sh", "-c", "true"])
    assert Path(program).is_absolute() and Path(program).name == "sh" and rest == ["-c", "true"]
    assert absolute_command(["./srv", "x"]) == ("./srv", "x")
    assert absolute_command(["no-such-program-here"]) == ("no-such-program-here",)


CRASHING = ECHO.replace(
    'return mt.CallToolResult(content=[mt.TextContent(type="text", text="echoed")])',
    'import os\n    if params.name == "wipe":\n        os._exit(3)  # dies in the middle of the call\n'
    '    return mt.CallToolResult(content=[mt.TextContent(type="text", text="echoed")])',
)


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_a_server_that_dies_later_names_itself_and_restarts_as_configured(tmp_path: Path) -> None:
    assert CRASHING != ECHO
    policy, config = setup(tmp_path, 'command = "unused"')
    (tmp_path / "echo.py").write_text(CRASHING)
    config.write_text(
        config.read_text()
        .split("[servers.broken]")[0]
        .replace("[servers.echo]\n", "[servers.echo]\nrestart = 1\n")
    )
    args = [str(policy), "--config", str(config), "--analysis-timeout", "0"]

    async def until_listed(client: Any) -> list[str]:
        with anyio.fail_after(20):
            while True:
                names = [tool.name for tool in (await client.list_tools()).tools]
                if names:
                    return names
                await anyio.sleep(0.2)

    async def scenario() -> list[tuple[bool, str]]:
        said = []
        async with gateway(args, tmp_path / "stderr.txt") as client:
            for _ in range(2):  # the first crash is followed by a restart, the second is not
                crashed = await client.call_tool("echo.wipe", {})
                down = await client.call_tool("echo.echo", {})
                said += [(bool(crashed.is_error), text(crashed)), (bool(down.is_error), text(down))]
                if len(said) == 2:
                    assert await until_listed(client) == ["echo.echo", "echo.wipe", "echo.ask"]
                    again = await client.call_tool("echo.echo", {})
                    said.append((bool(again.is_error), text(again)))
        return said

    said = anyio.run(scenario)
    assert said[0][0] and "the server `echo` stopped during the call" in said[0][1]
    assert said[1][0] and "the server `echo` is not running" in said[1][1]
    assert said[2] == (False, "echoed")
    assert said[3][0] and "the server `echo` stopped during the call" in said[3][1]
    assert said[4][0] and "the server `echo` is not running" in said[4][1]
    log = (tmp_path / "stderr.txt").read_text()
    assert log.count("server `echo` started again (restart 1 of 1)") == 1
