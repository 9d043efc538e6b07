"""Sessions whose events depend on every earlier event: the default when a host gives no
``deps`` (an LLM saw its whole history).

The toxic-flow policy over sessions of 100 to 100,000 events recorded without ``deps``: half
tool results (1% untrusted, 1% sensitive), half tool calls, a third of them sends, every call
decided as it arrives. In one process and one run it measures:

* policyc sessions, which keep that dependency implicitly (the order says it);
* the same events with the dependency written out, ``deps`` listing every earlier event — what
  the session stored before (quadratic; run up to ``--explicit-limit`` events);
* a hand-written incremental implementation of the policy (two flags: a tainted or secret
  event has been seen), the floor.

It prints microseconds per event, decisions per second, the p50/p99 latency of a decision and the
memory the session holds (tracemalloc, in a second pass), and the flatness: decisions per second
at the largest size over that at 1,000 events. Targets: memory linear in the session's length,
flatness at least 0.8.

    python benchmarks/bench_history.py [--sizes 100,1000,10000,100000] [--explicit-limit 2000]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from typing import Any

import policyc

POLICY = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).
HasSecret(e) :- Label(e, "sensitive").
HasSecret(e) :- DependsOn(e, d), HasSecret(d).
@id("toxic-flow")
Deny(a) :- is_tool(a, "send"), Tainted(a), HasSecret(a).
"""


def workload(size: int, seed: int = 5) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i in range(size):
        if i % 2:
            events.append(
                {"id": f"c{i}", "kind": "tool_call", "tool": "send" if rng.random() < 0.33 else "read"}
            )
            continue
        event: dict[str, Any] = {"id": f"r{i}", "kind": "tool_result", "text": "result"}
        draw = rng.random()
        if draw < 0.01:
            event["labels"] = ["untrusted"]
        elif draw < 0.02:
            event["labels"] = ["sensitive"]
        events.append(event)
    return events


def explicit(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same events with every earlier event listed in ``deps``."""
    ids = [e["id"] for e in events]
    return [{**e, "deps": ids[:i]} for i, e in enumerate(events)]


def policyc_run(monitor: Any, events: list[dict[str, Any]]) -> tuple[float, list[float], list[bool]]:
    session = monitor.session("s")
    latencies, verdicts = [], []
    clock = time.perf_counter
    started = clock()
    for event in events:
        if event["kind"] == "tool_call":
            t = clock()
            verdicts.append(session.authorize(event).allowed)
            latencies.append(clock() - t)
        else:
            session.record(event)
    return clock() - started, latencies, verdicts


def hand_run(events: list[dict[str, Any]]) -> tuple[float, list[float], list[bool]]:
    """The policy for this workload by hand: a call is denied when it is a send and both an
    untrusted and a sensitive event came before it."""
    tainted = secret = False
    latencies, verdicts = [], []
    clock = time.perf_counter
    started = clock()
    for event in events:
        if event["kind"] == "tool_call":
            t = clock()
            verdicts.append(not (event["tool"] == "send" and tainted and secret))
            latencies.append(clock() - t)
        else:
            labels = event.get("labels") or ()
            tainted = tainted or "untrusted" in labels
            secret = secret or "sensitive" in labels
    return clock() - started, latencies, verdicts


def held(monitor: Any, events: list[dict[str, Any]]) -> float:
    """The memory (MB) a session holds after recording ``events``."""
    gc.collect()
    tracemalloc.start()
    session = monitor.session("m")
    for event in events:
        session.record(event)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del session
    return size / 1e6


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument(
        "--explicit-limit", type=int, default=2000, help="largest size run with deps written out"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    monitor = policyc.Monitor(policyc.load(POLICY))
    print(
        f"{'events':>8} {'engine':<22} {'µs/event':>9} {'decisions/s':>12} {'p50 µs':>8} {'p99 µs':>8} {'MB':>8}"
    )
    rates: dict[int, float] = {}
    for size in sizes:
        events = workload(size)
        calls = sum(1 for e in events if e["kind"] == "tool_call")
        runs = [("policyc (implicit)", lambda ev=events: policyc_run(monitor, ev), events)]
        if size <= args.explicit_limit:
            written = explicit(events)
            runs.append(("policyc (deps written)", lambda ev=written: policyc_run(monitor, ev), written))
        runs.append(("hand-written", lambda ev=events: hand_run(ev), None))
        expected = None
        for name, run, recorded in runs:
            gc.collect()
            elapsed, latencies, verdicts = run()
            if expected is None:
                expected = verdicts
            assert verdicts == expected, f"{name} decides otherwise"
            memory = f"{held(monitor, recorded):8.1f}" if recorded is not None else f"{'-':>8}"
            rate = calls / elapsed
            if name == "policyc (implicit)":
                rates[size] = rate
            print(
                f"{size:>8} {name:<22} {elapsed / size * 1e6:9.1f} {rate:12,.0f} "
                f"{percentile(latencies, 50) * 1e6:8.1f} {percentile(latencies, 99) * 1e6:8.1f} {memory}"
            )
    base = 1000 if 1000 in rates else min(rates)
    top = max(rates)
    print(f"flatness: decisions/s at {top:,} events / at {base:,} = {rates[top] / rates[base]:.2f}")


if __name__ == "__main__":
    main()
