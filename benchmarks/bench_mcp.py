"""What `policyc mcp` adds to a tool call: `tools/call` of server-everything's `echo`, direct and
through the gateway, after 10, 100 and 1,000 earlier calls of the same connection.

An MCP client of the official SDK (stdio) starts `@modelcontextprotocol/server-everything`
itself (**direct**), or the installed `policyc mcp` in front of it (**gateway**), with a policy
over the event vocabulary (a taint closure over the dependencies, and a rule on the call's
argument). For each history length a new connection makes that many calls, then times
``--calls`` more, one at a time: the p50 and p99 latency from sending the request to reading the
answer. The gateway is measured with each event depending on every earlier one (`depends =
"all"`, the default) and with a result depending on its call only (`depends = "call"`).

Targets: the gateway adds at most 1 ms at p50 (gateway p50 less direct p50), and stays flat
with history length (p50 after 1,000 earlier calls at most 1.5 times p50 after 10).

server-everything comes from `tests/mcp_npm` (the versions the tests pin), installed with
`npm ci` into a temporary folder unless ``--npm`` names a folder where it is installed.

    python benchmarks/bench_mcp.py [--calls 200] [--history 10,100,1000] [--npm DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


def timed(command: list[str], earlier: int, calls: int) -> list[float]:
    """The latency of each of ``calls`` calls of echo, after ``earlier`` calls, on one connection."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    parameters = StdioServerParameters(command=command[0], args=command[1:])
    tool = "everything.echo" if "mcp" in command[1:3] else "echo"

    async def run() -> list[float]:
        samples = []
        async with Client(parameters) as client:
            for i in range(earlier + calls):
                start = time.perf_counter()
                result = await client.call_tool(tool, {"message": f"m{i}"})
                took = time.perf_counter() - start
                assert not result.is_error, result
                if i >= earlier:
                    samples.append(took)
        return samples

    return anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls timed after the earlier ones")
    parser.add_argument("--history", default="10,100,1000", help="the numbers of earlier calls")
    parser.add_argument("--npm", type=Path, help="a folder where tests/mcp_npm is installed")
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
        for depends in ("all", "call"):
            config = str(Path(folder, f"{depends}.toml"))
            ways[f"gateway, depends={depends}"] = [
                policyc,
                "mcp",
                str(Path(folder, "policy.dl")),
                "--config",
                config,
            ]
        results: dict[tuple[str, int], tuple[float, float]] = {}
        for earlier in histories:
            for way, command in ways.items():
                samples = timed(command, earlier, args.calls)
                results[way, earlier] = (statistics.median(samples), percentile(samples, 0.99))
    print(
        f"{'client':22} {'earlier calls':>13} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13} {'p50 / direct':>13}"
    )
    for earlier in histories:
        direct = results["direct", earlier][0]
        for way in ways:
            p50, p99 = results[way, earlier]
            print(
                f"{way:22} {earlier:13,} {p50 * 1e3:8.3f} {p99 * 1e3:8.3f} {(p50 - direct) * 1e3:13.3f} {p50 / direct:13.2f}"
            )
    print()
    first, last = histories[0], histories[-1]
    for way in list(ways)[1:]:
        added = max(results[way, h][0] - results["direct", h][0] for h in histories)
        growth = results[way, last][0] / results[way, first][0]
        print(
            f"{way}: adds at most {added * 1e3:.3f} ms at p50 (target at most 1 ms); p50 after {last:,} earlier "
            f"calls / after {first:,}: {growth:.2f} (target at most 1.5, flat)"
        )


if __name__ == "__main__":
    main()
