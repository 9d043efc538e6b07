"""How fast `policyc serve` decides over loopback, against the same sessions decided in process.

It starts the installed `policyc serve` on a free port of 127.0.0.1 with a policy over the event
vocabulary (an action may not send what an untrusted result influenced), and measures:

* **agent-like load**: 1, 8 and 32 concurrent sessions (asyncio tasks of one client process, one
  keep-alive connection each), each recording a tool result and then asking for a decision on a
  call that depends on it, a few milliseconds apart (``--pause``), for ``--steps`` steps: the p50
  and p99 decision latency measured by the client (request sent to answer read) and inside the
  service (its ``Server-Timing`` header: reading the request to writing the answer, the commit to
  SQLite included);
* **saturation**: the same steps with no pause, from ``--clients`` client processes with
  ``--saturate`` sessions in all (a client process's own cost is then spread over processes):
  decisions per second, against the same steps decided by an in-process monitor
  (``policyc.Monitor``) in this process.

Each is measured for services with ``--workers`` 0 (sessions decided in the server process), 1
and 2. Targets (FORGE reports a median of 0.19 ms at its monitor and 0.72 ms at its clients with
32 agents): p50 in the service at most 0.19 ms and at the client at most 0.72 ms at 32 sessions;
saturation at least half the in-process rate with one worker, and 1.6x that with two. Every
request goes to 127.0.0.1; each server stops when its measurement ends.

    python benchmarks/bench_serve.py [--steps 200] [--pause 0.003] [--saturate 16] [--clients 4] [--workers 0,1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

POLICY = """
.import events
Influenced(e, d) :- DependsOn(e, d).
Influenced(e, d) :- DependsOn(e, x), Influenced(x, d).
@id("untrusted-send")
Deny(a) :- ToolCall(a, "send_email"), Influenced(a, d), Label(d, "untrusted").
"""


def steps_of(session: str, steps: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each step: a tool result (a third of them untrusted) and a call depending on it; a
    result depends on the call before it within a task of ten steps (so the work a step takes
    does not grow with the session, as in tau2-like tasks)."""
    out = []
    for i in range(steps):
        deps = [f"a{i - 1}"] if i % 10 else []
        result = {"id": f"r{i}", "kind": "tool_result", "tool": "fetch", "deps": deps}
        if i % 3 == 0:
            result["labels"] = ["untrusted"]
        call = {
            "id": f"a{i}",
            "kind": "tool_call",
            "tool": "send_email" if i % 2 else "read",
            "deps": [f"r{i}"],
        }
        out.append((result, call))
    return out


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def one_session(
    client: Any, name: str, steps: int, pause: float, samples: list[tuple[float, float]]
) -> int:
    answer = await client.post("/v1/sessions", json={"session": name})
    assert answer.status_code == 201, answer.text
    seq = 0
    for result, call in steps_of(name, steps):
        answer = await client.post(f"/v1/sessions/{name}/events", json={"events": [result]})
        seq = answer.json()["seq"]
        if pause:
            await asyncio.sleep(pause)
        sent = time.perf_counter()
        answer = await client.post(f"/v1/sessions/{name}/authorize", json={"event": call, "after_seq": seq})
        took = time.perf_counter() - sent
        assert answer.status_code == 200, answer.text
        inside = float(answer.headers["server-timing"].split("dur=")[1]) / 1000
        samples.append((took, inside))
    return steps


async def load(url: str, key: str, sessions: int, steps: int, pause: float, tag: str) -> dict[str, float]:
    import httpx

    samples: list[tuple[float, float]] = []
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(
        base_url=url, headers={"authorization": f"Bearer {key}"}, limits=limits, timeout=60
    ) as client:
        start = time.perf_counter()
        done = await asyncio.gather(
            *(one_session(client, f"{tag}-{n}", steps, pause, samples) for n in range(sessions))
        )
        elapsed = time.perf_counter() - start
    client_side = [c for c, _ in samples]
    server_side = [s for _, s in samples]
    return {
        "decisions_per_s": sum(done) / elapsed,
        "client_p50": statistics.median(client_side),
        "client_p99": percentile(client_side, 0.99),
        "server_p50": statistics.median(server_side),
        "server_p99": percentile(server_side, 0.99),
    }


def _client_process(url: str, key: str, sessions: int, steps: int, tag: str, out: Any) -> None:
    out.put(asyncio.run(load(url, key, sessions, steps, 0.0, tag)))


def saturate(url: str, key: str, clients: int, sessions: int, steps: int) -> dict[str, float]:
    """Decisions per second over ``clients`` processes (their latencies pooled as medians)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    share = max(1, sessions // clients)
    start = time.perf_counter()
    processes = [
        context.Process(target=_client_process, args=(url, key, share, steps, f"sat{n}", out))
        for n in range(clients)
    ]
    for process in processes:
        process.start()
    results = [out.get(timeout=600) for _ in processes]
    elapsed = time.perf_counter() - start
    for process in processes:
        process.join(timeout=60)
    merged = {k: statistics.median(r[k] for r in results) for k in results[0]}
    merged["decisions_per_s"] = clients * share * steps / elapsed
    return merged


def in_process(sessions: int, steps: int) -> float:
    import policyc

    monitor = policyc.Monitor(policyc.load(POLICY))
    start = time.perf_counter()
    for n in range(sessions):
        session = monitor.session(f"s{n}", principal="agent", roles=("agent",))
        for result, call in steps_of(f"s{n}", steps):
            session.record(result)
            session.authorize(call)
    return sessions * steps / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(
    command: str, folder: str, key: str, workers: int, args: argparse.Namespace
) -> list[tuple[str, dict]]:
    """The agent-like loads and the saturation against a fresh service with ``workers``."""
    port = free_port()
    server = subprocess.Popen(
        [
            command,
            "serve",
            "policy.dl",
            "--keys",
            "keys.toml",
            "--db",
            f"bench-{workers}.db",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        cwd=folder,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        rows = []
        for sessions in (1, 8, 32):
            found = asyncio.run(load(url, key, sessions, args.steps, args.pause, f"l{sessions}"))
            rows.append((f"agent-like, {sessions} sessions", found))
        rows.append(
            (
                f"saturation, {args.clients} clients",
                saturate(url, key, args.clients, args.saturate, args.steps),
            )
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.003)
    parser.add_argument("--saturate", type=int, default=16)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", default="0,1,2", help="the --workers of the services measured, in turn")
    args = parser.parse_args()
    from policyc.serve.keys import new_key

    command = shutil.which("policyc", path=str(Path(sys.executable).parent))
    assert command is not None, "install policyc with its serve extra"
    key, digest = new_key()
    results: dict[int, list[tuple[str, dict]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "policy.dl").write_text(POLICY, "utf-8")
        Path(folder, "keys.toml").write_text(
            f'[principals.agent]\nroles = ["agent"]\nkeys = ["{digest}"]\n', "utf-8"
        )
        for workers in (int(w) for w in args.workers.split(",")):
            results[workers] = measure(command, folder, key, workers, args)
    local = in_process(args.saturate, args.steps)
    print(
        f"{'workers':>7} {'load':28} {'decisions/s':>12} {'client p50 ms':>14} {'client p99 ms':>14} "
        f"{'service p50 ms':>15} {'service p99 ms':>15}"
    )
    for workers, rows in results.items():
        for name, r in rows:
            print(
                f"{workers:>7} {name:28} {r['decisions_per_s']:12,.0f} {r['client_p50'] * 1e3:14.3f} "
                f"{r['client_p99'] * 1e3:14.3f} {r['server_p50'] * 1e3:15.3f} {r['server_p99'] * 1e3:15.3f}"
            )
    print(f"{'':>7} {'in process (same steps)':28} {local:12,.0f}")
    print()
    for workers, rows in results.items():
        at32, saturated = rows[2][1], rows[3][1]
        print(
            f"--workers {workers}: service p50 at 32 sessions {at32['server_p50'] * 1e3:.3f} ms (target at most 0.19, "
            f"FORGE's); client p50 {at32['client_p50'] * 1e3:.3f} ms (target at most 0.72); saturation / in process "
            f"{saturated['decisions_per_s'] / local:.2f} (target at least 0.5 with one worker)"
        )
    if 1 in results and 2 in results:
        one, two = results[1][3][1]["decisions_per_s"], results[2][3][1]["decisions_per_s"]
        print(f"saturation with two workers / with one: {two / one:.2f} (target at least 1.6)")


if __name__ == "__main__":
    main()
