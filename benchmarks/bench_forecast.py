"""What a forecast costs at each step, and whether it grows with the session.

The Copilot push gate of ``examples/forecast``, with the model learned there: the recorded
sessions of ``test.jsonl`` played one after another as one long session (event ids renamed),
and after every event ``session.forecast()`` — the abstraction of the step into the model's
predicates, kept up to date by what the step changed (``policyc.runtime.volatile``), and the
state's cached probabilities. In the same run and on the same session it also times

* the monitor's own step (recording the event, deciding a tool call), the baseline;
* the predicates computed whole for the step from the session's maintained relations, as a
  decision that needs a volatile relation in full computes it.

Two workloads: ``implicit``, events as recorded (each depends on every earlier one, so the
provenance closure the policy keeps grows with the session and so does the monitor's own step),
and ``local``, the same events where a result depends on its call only (the policy's own work
per event stays flat). It prints the mean time per step by position in the session, the
forecast's time relative to the monitor's step, and the flatness of the forecast (mean at the
last position / mean at the first). Target: the forecast costs a bounded multiple of the
monitor's step at every length, and with ``local`` its time per step is flat (at most 1.25x)
while computing the predicates whole grows with the session.

    python benchmarks/bench_forecast.py [--events 2000] [--buckets 100,500,1000,2000]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

import policyc
from policyc.forecast import Forecaster

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "forecast"


def workload(count: int, local: bool) -> list[dict[str, Any]]:
    """``count`` events: the example's test sessions one after another, ids renamed."""
    records = [json.loads(line) for line in (EXAMPLE / "test.jsonl").read_text().splitlines() if line]
    events: list[dict[str, Any]] = []
    round_number = 0
    while len(events) < count:
        for n, record in enumerate(records):
            prefix = f"s{round_number}.{n}."
            for event in record["events"]:
                copy = dict(event, id=prefix + event["id"])
                if "of" in copy:
                    copy["of"] = prefix + copy["of"]
                if local:
                    copy["deps"] = [copy["of"]] if "of" in copy else []
                events.append(copy)
        round_number += 1
    return events[:count]


def run(events: list[dict[str, Any]], buckets: list[int]) -> dict[str, dict[int, float]]:
    policy = policyc.load(str(EXAMPLE / "copilot_forecast.dl"))
    monitor = policyc.Monitor(policy, forecast=Forecaster(str(EXAMPLE / "model.json"), threshold=0.4))
    session = monitor.session("bench", principal="dev")
    abstraction = monitor.forecaster.abstraction
    times: dict[str, list[tuple[int, float]]] = {"monitor step": [], "forecast": [], "computed whole": []}
    clock = time.perf_counter
    gc.disable()
    try:
        session.forecast()
        for position, event in enumerate(events, 1):
            started = clock()
            if event["kind"] == "tool_call":
                session.authorize(event)
            else:
                session.record(event)
            recorded = clock()
            forecast = session.forecast()
            forecasted = clock()
            if forecast.error is not None:
                raise SystemExit(f"the forecast failed at event {position}: {forecast.error}")
            if position in buckets or any(b - 20 < position <= b for b in buckets):
                whole_started = clock()
                abstraction.computed(session)
                whole = clock() - whole_started
                times["computed whole"].append((position, whole))
            times["monitor step"].append((position, recorded - started))
            times["forecast"].append((position, forecasted - recorded))
    finally:
        gc.enable()
    # the mean of the 20 steps up to each bucket
    return {
        name: {b: statistics.fmean(t for p, t in samples if b - 20 < p <= b) for b in buckets}
        for name, samples in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--buckets", default="100,500,1000,2000")
    args = parser.parse_args()
    buckets = sorted(int(b) for b in args.buckets.split(",") if int(b) <= args.events)
    for name, local in (("implicit", False), ("local", True)):
        result = run(workload(args.events, local), buckets)
        print(f"workload {name}: mean µs per step over the 20 steps up to each position")
        print(f"{'':16}" + "".join(f"{b:>10,}" for b in buckets))
        for system, means in result.items():
            print(f"{system:16}" + "".join(f"{means[b] * 1e6:10.1f}" for b in buckets))
        ratio = [result["forecast"][b] / result["monitor step"][b] for b in buckets]
        print(f"{'forecast/step':16}" + "".join(f"{r:10.2f}" for r in ratio))
        whole = [result["computed whole"][b] / result["forecast"][b] for b in buckets]
        print(f"{'whole/forecast':16}" + "".join(f"{r:10.1f}" for r in whole))
        first, last = buckets[0], buckets[-1]
        flat = result["forecast"][last] / result["forecast"][first]
        print(f"forecast flatness {last:,}/{first:,}: {flat:.2f}\n")


if __name__ == "__main__":
    main()
