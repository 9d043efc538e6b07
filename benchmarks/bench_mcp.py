"""What `policyc mcp` adds to a tool call: `tools/call` of server-everything's `echo`, direct and
through the gateway, after 10, 100 and 1,000 earlier calls of the same connection.

An MCP client of the official SDK (stdio) starts `@modelcontextprotocol/server-everything`
itself (**direct**), or the installed `policyc mcp` in front of it (**gateway**), with a policy
over the event vocabulary (a taint closure over the dependencies, and a rule on the call's
argument). For each history length a new connection makes that many calls, then times
``--calls`` more, one at a time: the p50 and p99 latency from sending the request to reading the
answer. The gateway is measured with each event depending on every earlier one (`depends =
"all"`, the default) and with a result depending on its call only (`depends = "call"`).

The CPU time per call of the process the client talks to (the server direct; the gateway,
its server not counted, through it) is measured too: on a busy machine the latency mostly
says how long three processes wait for a core, the CPU time what the gateway itself spends. An
echo tool on the Python SDK's own server (`MCPServer`), called direct, shows what one hop
through the SDK costs: the gateway is an SDK server to its client and an SDK client to its
server.

The monitor's own part is measured apart: the same calls decided, and their results recorded,
by a monitor in this process.

The gateway answers ``tools/call`` on its fast path (JSON-RPC frames, decided on the event
loop); it is measured against the same gateway with ``--no-fast-path`` (every request through
the MCP SDK) in the same run, and, with ``--baseline REF``, against the gateway of commit REF
(installed into an environment of its own, cached: benchmarks/git_baseline.py) — the yardstick
of the CPU target when given, the SDK path's otherwise. Every (client, history) pair runs in a random order (``--seed``),
so that a machine whose load drifts does not make one history length look slower.

Targets, at every history length: the gateway adds at most 1 ms at p50 (gateway p50 less
direct p50), its p50 is at most 2.5 times direct's, its CPU time per call at most 0.3 times the
SDK path's; and it stays flat with history length (p50 after the longest history at most 1.5
times p50 after the shortest).

server-everything comes from `tests/mcp_npm` (the versions the tests pin), installed with
`npm ci` into a temporary folder unless ``--npm`` names a folder where it is installed.

    python benchmarks/bench_mcp.py [--calls 200] [--history 10,100,1000] [--npm DIR] [--seed N] [--baseline REF]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SDK_ECHO = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool(name="echo", description="Echoes back the input string")
def echo(message: str) -> str:
    return "Echo: " + message


server.run()
"""

POLICY = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).
@id("no-tainted-echo")
Deny(a) :- ToolCall(a, "everything.echo"), Tainted(a).
@id("no-secret")
Deny(a) :- ToolCall(a, "everything.echo"), ToolArg(a, "message", "secret").
"""


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def install(into: Path) -> Path:
    """``tests/mcp_npm`` installed with ``npm ci`` into ``into``: the entry of server-everything."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed to install server-everything"
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(ROOT / "tests" / "mcp_npm" / name, into / name)
    subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=into, check=True
    )
    return entry(into)


def entry(folder: Path) -> Path:
    found = folder / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    assert found.is_file(), f"no server-everything in {folder}"
    return found


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system; Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child() -> int:
    """The process this one started last (the server, or the gateway, the client talks to)."""
    mine = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == mine:
            found.append((int(fields[19]), int(stat.parent.name)))
    assert found, "no child process"
    return max(found)[1]


def timed(command: list[str], earlier: int, calls: int) -> tuple[list[float], float]:
    """The latency of each of ``calls`` calls of echo, after ``earlier`` calls, on one
    connection, and the CPU time per call of the process the client started (the server
    direct; the gateway, not its server, through the gateway)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    parameters = StdioServerParameters(command=command[0], args=command[1:])
    tool = "everything.echo" if "mcp" in command[1:3] else "echo"

    async def run() -> tuple[list[float], float]:
        samples = []
        async with Client(parameters) as client:
            for i in range(earlier):
                await client.call_tool(tool, {"message": f"m{i}"})
            process = child()
            before = cpu_seconds(process)
            for i in range(calls):
                start = time.perf_counter()
                result = await client.call_tool(tool, {"message": f"m{i}"})
                samples.append(time.perf_counter() - start)
                assert not result.is_error, result
            used = cpu_seconds(process) - before
        return samples, used / calls

    return anyio.run(run)


def in_process(policy: str, depends: str, earlier: int, calls: int) -> list[float]:
    """The time the monitor takes, in this process, to decide each of ``calls`` calls of echo
    and record its result (as the gateway does), after ``earlier`` calls."""
    from policyc.runtime.opener import load
    from policyc.runtime.session import Monitor

    session = Monitor(load(policy)).session("bench")
    samples = []
    for i in range(earlier + calls):
        call = {"id": f"c{i}", "kind": "tool_call", "tool": "everything.echo", "args": {"message": f"m{i}"}}
        result = {
            "id": f"r{i}",
            "kind": "tool_result",
            "of": f"c{i}",
            "tool": "everything.echo",
            "text": f"Echo: m{i}",
        }
        if depends == "call":
            result["deps"] = [f"c{i}"]
        start = time.perf_counter()
        assert session.authorize(call).allowed
        session.record(result)
        if i >= earlier:
            samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls timed after the earlier ones")
    parser.add_argument("--history", default="10,100,1000", help="the numbers of earlier calls")
    parser.add_argument("--npm", type=Path, help="a folder where tests/mcp_npm is installed")
    parser.add_argument("--seed", type=int, default=None, help="the seed of the order the runs take")
    parser.add_argument(
        "--baseline", help="a commit whose gateway is measured too (the CPU target's yardstick)"
    )
    args = parser.parse_args()
    histories = [int(h) for h in args.history.split(",")]
    policyc = shutil.which("policyc", path=str(Path(sys.executable).parent))
    node = shutil.which("node")
    assert policyc is not None and node is not None, "install policyc with its mcp extra, and Node.js"
    with tempfile.TemporaryDirectory() as folder:
        server = entry(args.npm) if args.npm else install(Path(folder))
        Path(folder, "policy.dl").write_text(POLICY, "utf-8")
        for depends in ("all", "call"):
            Path(folder, f"{depends}.toml").write_text(
                f'[servers.everything]\ncommand = "{node}"\nargs = ["{server}"]\n\n[session]\ndepends = "{depends}"\n',
                "utf-8",
            )
        ways = {"direct": [node, str(server)]}
        gateway = [policyc, "mcp", str(Path(folder, "policy.dl")), "--config"]
        for depends in ("all", "call"):
            ways[f"gateway, depends={depends}"] = [*gateway, str(Path(folder, f"{depends}.toml"))]
        ways["SDK path, depends=all"] = [*gateway, str(Path(folder, "all.toml")), "--no-fast-path"]
        yardstick = "SDK path, depends=all"
        if args.baseline:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import git_baseline

            commit = git_baseline.resolve(args.baseline)
            old = git_baseline.installed(commit, extras="mcp")
            yardstick = f"gateway at {commit[:7]}"
            ways[yardstick] = [str(old), *gateway[1:], str(Path(folder, "all.toml"))]
        Path(folder, "echo.py").write_text(SDK_ECHO, "utf-8")
        ways["SDK server, direct"] = [sys.executable, str(Path(folder, "echo.py"))]
        results: dict[tuple[str, int], tuple[float, float, float]] = {}
        runs = [(way, earlier) for earlier in histories for way in ways]
        random.Random(args.seed).shuffle(runs)
        for way, earlier in runs:
            samples, cpu = timed(ways[way], earlier, args.calls)
            results[way, earlier] = (statistics.median(samples), percentile(samples, 0.99), cpu)
        decisions = {
            (depends, earlier): in_process(str(Path(folder, "policy.dl")), depends, earlier, args.calls)
            for depends in ("all", "call")
            for earlier in histories
        }
    print(
        f"{'client':24} {'earlier calls':>13} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13} {'p50 / direct':>13} "
        f"{'CPU ms/call':>12}"
    )
    for earlier in histories:
        direct = results["direct", earlier][0]
        for way in ways:
            p50, p99, cpu = results[way, earlier]
            print(
                f"{way:24} {earlier:13,} {p50 * 1e3:8.3f} {p99 * 1e3:8.3f} {(p50 - direct) * 1e3:13.3f} "
                f"{p50 / direct:13.2f} {cpu * 1e3:12.3f}"
            )
    print("(CPU ms/call: of the server direct; of the gateway, its server not counted, through it)")
    print("(SDK server: an echo tool on the Python `mcp` SDK's own server, for what one SDK hop costs)")
    print()
    for (depends, earlier), samples in decisions.items():
        print(
            f"in process, depends={depends}, after {earlier:,} calls: a decision and its result recorded, "
            f"p50 {statistics.median(samples) * 1e3:.3f} ms, p99 {percentile(samples, 0.99) * 1e3:.3f} ms"
        )
    print()
    first, last = histories[0], histories[-1]
    for way in [w for w in ways if w.startswith("gateway,")]:
        added = max(results[way, h][0] - results["direct", h][0] for h in histories)
        ratio = max(results[way, h][0] / results["direct", h][0] for h in histories)
        cpu = max(results[way, h][2] / results[yardstick, h][2] for h in histories)
        growth = results[way, last][0] / results[way, first][0]
        print(
            f"{way}: adds at most {added * 1e3:.3f} ms at p50 ({verdict(added <= 1e-3)}: at most 1 ms); "
            f"p50 / direct at most {ratio:.2f} ({verdict(ratio <= 2.5)}: at most 2.5); "
            f"CPU per call / {yardstick}'s at most {cpu:.2f} ({verdict(cpu <= 0.3)}: at most 0.3); "
            f"p50 after {last:,} earlier calls / after {first:,}: {growth:.2f} ({verdict(growth <= 1.5)}: at most 1.5)"
        )


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
