"""How fast a monitor decides, and whether it slows down as a session grows.

The toxic-flow workload of DESIGN.md, as a session: events arrive one at a time, each
depending on 1-3 random earlier events; 5% are untrusted inputs, 5% sensitive inputs, 10%
actions of which 30% are external sends. Every action is decided when it arrives. In one
process and one run, for sessions of 10, 100, 1,000 and 10,000 events, it measures:

* policyc sessions (``policyc.Monitor``; events recorded as they come, actions authorized);
* policyc re-evaluating every fact from scratch for each decision;
* a hand-written incremental implementation of that one policy (the practical limit);
* the same policy fused by hand the way code generated from it would have to work: events
  checked, every relation kept as a set of facts, dependencies indexed, recursion by semi-naive
  rounds — the ceiling for a generated Python pass, since it does exactly that work and no more;
* clingo multi-shot: one program part per event, grounded and solved as the event arrives;
* networkx: the action's transitive dependencies searched for each decision.

It prints decisions per second (all events appended and all actions decided, divided by the
number of actions) and the p50 and p99 latency of a decision (the action's own arrival and
verdict). Targets: policyc sessions at least 0.5x the hand-written code at every size;
decisions per second at 10,000 events at least 0.8x of that at 100 (flat); at least 20x
clingo at 10,000 events.

    python benchmarks/bench_decisions.py [--sizes 10,100,1000,10000] [--scratch-limit 1000]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import policyc

POLICY = """
.import events
UntrustedInput(e) :- Label(e, "untrusted").
SensitiveInput(e) :- Label(e, "sensitive").
ExternalSend(a) :- Action(a), Label(a, "external").
Tainted(e) :- UntrustedInput(e).
Tainted(e) :- DependsOn(e, e'), Tainted(e').
HasSecret(e) :- SensitiveInput(e).
HasSecret(e) :- DependsOn(e, e'), HasSecret(e').
@id("toxic-flow")
Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).
"""


def workload(size: int, seed: int = 3) -> list[dict[str, Any]]:
    """``size`` events; exactly a tenth of them (at least one) are actions, never the first."""
    rng = random.Random(seed)
    actions = set(rng.sample(range(1, size), max(1, size // 10)))
    events = []
    for i in range(size):
        event: dict[str, Any] = {
            "id": f"e{i}",
            "deps": sorted({f"e{rng.randrange(i)}" for _ in range(rng.randint(1, 3))}) if i else [],
        }
        labels = []
        if i in actions:
            event["kind"] = "tool_call"
            event["tool"] = "send_email" if rng.random() < 0.3 else "read_file"
            if event["tool"] == "send_email":
                labels.append("external")
        else:
            event["kind"] = "tool_result"
            draw = rng.random()
            if draw < 0.05:
                labels.append("untrusted")
            elif draw < 0.10:
                labels.append("sensitive")
        if labels:
            event["labels"] = labels
        events.append(event)
    return events


class Runner:
    """Feeds events; ``decide`` is called for each action and returns whether it is allowed."""

    def record(self, event: dict[str, Any]) -> None: ...

    def decide(self, event: dict[str, Any]) -> bool: ...


class Sessions(Runner):
    def __init__(self) -> None:
        self.session = policyc.Monitor(policyc.load(POLICY)).session("bench")

    def record(self, event: dict[str, Any]) -> None:
        self.session.record(event)

    def decide(self, event: dict[str, Any]) -> bool:
        return self.session.authorize(event).allowed


class Scratch(Runner):
    def __init__(self) -> None:
        from policyc.stdlib.events import event_facts

        self.policy = policyc.load(POLICY)
        self.facts: dict[str, list] = {}
        self.order: list[str] = []
        self.event_facts = event_facts
        self.known = set(self.policy.relations)

    def record(self, event: dict[str, Any]) -> None:
        for name, rows in self.event_facts(event, len(self.order), self.order).items():
            if name in self.known:
                self.facts.setdefault(name, []).extend(list(r) for r in rows)
        self.order.append(event["id"])

    def decide(self, event: dict[str, Any]) -> bool:
        self.record(event)
        return self.policy.evaluate(self.facts).decide(event["id"]).allowed


class Handwritten(Runner):
    """Toxic flow, incrementally, by hand: an event's labels follow from its dependencies'."""

    def __init__(self) -> None:
        self.tainted: set[str] = set()
        self.secret: set[str] = set()

    def record(self, event: dict[str, Any]) -> None:
        e, labels, deps = event["id"], event.get("labels", ()), event["deps"]
        if "untrusted" in labels or any(d in self.tainted for d in deps):
            self.tainted.add(e)
        if "sensitive" in labels or any(d in self.secret for d in deps):
            self.secret.add(e)

    def decide(self, event: dict[str, Any]) -> bool:
        self.record(event)
        e = event["id"]
        return not ("external" in event.get("labels", ()) and e in self.tainted and e in self.secret)


class Fused(Runner):
    """What one function generated for this policy would do per event, written by hand: the
    event checked (the session's own check), its facts built, and every relation of the
    policy maintained by semi-naive insertion over sets, with ``DependsOn`` indexed by its
    second position for the recursive rounds."""

    def __init__(self) -> None:
        from collections import defaultdict

        from policyc.stdlib.events import check_event

        self.check = check_event
        self.events: dict[str, dict[str, Any]] = {}
        self.depends: set[tuple[str, str]] = set()
        self.dependents: defaultdict[str, list[str]] = defaultdict(list)
        self.label: set[tuple[str, str]] = set()
        self.action: set[str] = set()
        self.external: set[str] = set()
        self.tainted: set[str] = set()
        self.secret: set[str] = set()
        self.deny: set[str] = set()

    def record(self, event: dict[str, Any]) -> None:
        event = self.check(dict(event), self.events)
        e = event["id"]
        self.events[e] = event
        deps = {(e, d) for d in event["deps"]} - self.depends
        self.depends |= deps
        for x, y in deps:
            self.dependents[y].append(x)
        labels = {(e, label) for label in event.get("labels", ())} - self.label
        self.label |= labels
        actions = {e} - self.action if event["kind"] == "tool_call" else set()
        self.action |= actions
        new_tainted = self._closure(self.tainted, "untrusted", labels, deps)
        new_secret = self._closure(self.secret, "sensitive", labels, deps)
        external = {x for x in actions if (x, "external") in self.label}
        external |= {x for x, label in labels if label == "external" and x in self.action}
        external -= self.external
        self.external |= external
        for x in external | new_tainted | new_secret:
            if x in self.external and x in self.tainted and x in self.secret:
                self.deny.add(x)

    def _closure(self, derived: set[str], label: str, labels: set, deps: set) -> set[str]:
        """``derived`` extended by the new facts (returned) of ``D(e) :- Label(e, label).``
        and ``D(e) :- DependsOn(e, e'), D(e').``"""
        got = {x for x, name in labels if name == label} | {x for x, y in deps if y in derived}
        got -= derived
        new = set(got)
        while got:
            derived |= got
            got = {x for y in got for x in self.dependents.get(y, ())} - derived
            new |= got
        return new

    def decide(self, event: dict[str, Any]) -> bool:
        self.record(event)
        return event["id"] not in self.deny


class Clingo(Runner):
    """Multi-shot: each event grounds the parameterized part ``step`` and its own facts."""

    RULES = """
    tainted(e) :- untrusted(e).
    tainted(e) :- depends(e, D), tainted(D).
    secret(e) :- sensitive(e).
    secret(e) :- depends(e, D), secret(D).
    deny(e) :- external(e), tainted(e), secret(e).
    """

    def __init__(self) -> None:
        import clingo

        self.clingo = clingo
        self.control = clingo.Control(["--warn=none"])
        self.control.add("step", ["e"], self.RULES)

    def record(self, event: dict[str, Any]) -> None:
        self._step(event)

    def _step(self, event: dict[str, Any]) -> None:
        e = event["id"]
        facts = [f"depends({e},{d})." for d in event["deps"]]
        facts.extend(f"{label}({e})." for label in event.get("labels", ()))
        part = f"facts_{e}"
        self.control.add(part, [], "\n".join(facts))
        self.control.ground([(part, []), ("step", [self.clingo.Function(e)])])

    def decide(self, event: dict[str, Any]) -> bool:
        self._step(event)
        denied = False
        target = self.clingo.Function("deny", [self.clingo.Function(event["id"])])
        with self.control.solve(yield_=True) as handle:
            for model in handle:
                denied = model.contains(target)
        return not denied


class NetworkX(Runner):
    """The action's transitive dependencies, searched for each decision."""

    def __init__(self) -> None:
        import networkx as nx

        self.nx = nx
        self.graph = nx.DiGraph()
        self.untrusted: set[str] = set()
        self.sensitive: set[str] = set()

    def record(self, event: dict[str, Any]) -> None:
        e = event["id"]
        self.graph.add_node(e)
        for d in event["deps"]:
            self.graph.add_edge(e, d)
        labels = event.get("labels", ())
        if "untrusted" in labels:
            self.untrusted.add(e)
        if "sensitive" in labels:
            self.sensitive.add(e)

    def decide(self, event: dict[str, Any]) -> bool:
        self.record(event)
        if "external" not in event.get("labels", ()):
            return True
        reach = self.nx.descendants(self.graph, event["id"]) | {event["id"]}
        return not (reach & self.untrusted and reach & self.sensitive)


def run(runner: Callable[[], Runner], events: list[dict[str, Any]]) -> dict[str, Any]:
    gc.collect()
    instance = runner()
    latencies = []
    verdicts = []
    start = time.perf_counter()
    for event in events:
        if event["kind"] == "tool_call":
            t = time.perf_counter()
            verdicts.append(instance.decide(event))
            latencies.append(time.perf_counter() - t)
        else:
            instance.record(event)
    total = time.perf_counter() - start
    latencies.sort()
    return {
        "decisions_per_s": len(latencies) / total if total else float("inf"),
        "p50": statistics.median(latencies) if latencies else 0.0,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0,
        "verdicts": verdicts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument(
        "--scratch-limit", type=int, default=1000, help="largest size re-evaluated from scratch"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept")
    args = parser.parse_args()
    systems: list[tuple[str, Callable[[], Runner]]] = [
        ("policyc session", Sessions),
        ("hand-written", Handwritten),
        ("fused by hand", Fused),
        ("policyc scratch", Scratch),
        ("clingo multi-shot", Clingo),
        ("networkx", NetworkX),
    ]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        events = workload(size)
        for name, factory in systems:
            if name == "policyc scratch" and size > args.scratch_limit:
                continue
            best = None
            for _ in range(args.repeat if name != "policyc scratch" else 1):
                outcome = run(factory, events)
                if best is None or outcome["decisions_per_s"] > best["decisions_per_s"]:
                    best = outcome
            results[(name, size)] = best
        reference = results[("hand-written", size)]["verdicts"]
        for name, _ in systems:
            if (name, size) in results:
                assert results[(name, size)]["verdicts"] == reference, f"{name} disagrees at {size} events"
    print(f"{'system':18} {'events':>7} {'decisions/s':>12} {'p50 µs':>9} {'p99 µs':>9} {'vs hand':>8}")
    for (name, size), r in results.items():
        ratio = r["decisions_per_s"] / results[("hand-written", size)]["decisions_per_s"]
        print(
            f"{name:18} {size:7,} {r['decisions_per_s']:12,.0f} {r['p50'] * 1e6:9.1f} {r['p99'] * 1e6:9.1f} {ratio:8.2f}"
        )
    sizes = sorted({size for _, size in results})
    big = sizes[-1]
    session = {s: results[("policyc session", s)]["decisions_per_s"] for s in sizes}
    print()
    if 100 in session:
        print(
            f"flatness: policyc session at {big:,} events / at 100 events = {session[big] / session[100]:.2f} "
            "(target at least 0.8)"
        )
    print(
        f"policyc session / hand-written, smallest over sizes = "
        f"{min(session[s] / results[('hand-written', s)]['decisions_per_s'] for s in sizes):.2f} (target at least 0.5)"
    )
    fused = {s: results[("fused by hand", s)]["decisions_per_s"] for s in sizes}
    print(
        f"fused by hand / hand-written, largest over sizes = "
        f"{max(fused[s] / results[('hand-written', s)]['decisions_per_s'] for s in sizes):.2f} "
        "(what generated code could reach at best)"
    )
    if ("clingo multi-shot", big) in results:
        print(
            f"policyc session / clingo at {big:,} events = "
            f"{session[big] / results[('clingo multi-shot', big)]['decisions_per_s']:.1f} (target at least 20)"
        )


if __name__ == "__main__":
    main()
