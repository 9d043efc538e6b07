"""How fast a monitor decides, and whether it slows down as a session grows.

The toxic-flow workload of DESIGN.md, as a session: events arrive one at a time, each
depending on 1-3 random earlier events; 5% are untrusted inputs, 5% sensitive inputs, 10%
actions of which 30% are external sends. Every action is decided when it arrives. In one
process and one run, for sessions of 10, 100, 1,000 and 10,000 events, it measures:

* policyc sessions (``policyc.Monitor``; events recorded as they come, actions authorized);
* policyc sessions of the same policy written over its own input relations, as FORGE's
  listings and Soufflé programs are (``.input DependsOn, UntrustedInput, ...``): each event's
  rows given by one ``session.add_facts`` call, each action decided by ``session.decide``;
* policyc re-evaluating every fact from scratch for each decision;
* a hand-written incremental implementation of that one policy (the practical limit);
* the same policy fused by hand the way code generated from it would have to work: events
  checked, every relation kept as a set of facts, dependencies indexed, recursion by semi-naive
  rounds — the ceiling for a generated Python pass, since it does exactly that work and no more;
* clingo multi-shot: one program part per event, grounded and solved as the event arrives;
* networkx: the action's transitive dependencies searched for each decision.

It prints decisions per second (all events appended and all actions decided, divided by the
number of actions) and the p50 and p99 latency of a decision (the action's own arrival and
verdict). Every system must decide exactly what the hand-written code decides (checked).
Targets: policyc sessions at least 0.5x the hand-written code at every size; decisions per
second at 10,000 events at least 0.8x of that at 100 (flat), for recorded events and for given
facts alike; given facts at least 0.9x as fast as recorded events at every size; at least 20x
clingo at 10,000 events.

**Measuring on a noisy machine.** A measurement covers about 1,000 events whatever the size (100
sessions of 10 events, 10 of 100, one of 1,000 or more), built before the clock starts; the
monitor is prepared once per policy, as a deployment does. Each system is measured ``--repeat``
times, the systems taking turns (round after round, all of them in each round), and the fastest
measurement is kept: another process slowing the machine down for a while then costs every
system some rounds, not one system all of its runs, and the ratios between systems stay put. A
system whose first measurement takes more than 2 s is measured once (clingo at 10,000 events:
its target is far from where it stands).

    python benchmarks/bench_decisions.py [--sizes 10,100,1000,10000] [--scratch-limit 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from toxic_flow import EVENTS_POLICY, INPUTS_POLICY  # beside this script

import policyc

POLICY = EVENTS_POLICY


@functools.cache
def monitor(text: str) -> policyc.Monitor:
    """The monitor of a policy, prepared once (sessions are what is measured)."""
    return policyc.Monitor(policyc.load(text))


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


def given_facts(events: list[dict[str, Any]]) -> dict[str, dict[str, list[list[str]]]]:
    """Each event as the rows of the input relations of ``INPUTS_POLICY``, by event id."""
    given = {}
    for event in events:
        e, labels = event["id"], event.get("labels", ())
        rows: dict[str, list[list[str]]] = {}
        if event["deps"]:
            rows["DependsOn"] = [[e, d] for d in event["deps"]]
        for label, relation in (
            ("untrusted", "UntrustedInput"),
            ("sensitive", "SensitiveInput"),
            ("external", "ExternalSend"),
        ):
            if label in labels:
                rows[relation] = [[e]]
        given[e] = rows
    return given


class Runner:
    """Feeds events; ``decide`` is called for each action and returns whether it is allowed."""

    def record(self, event: dict[str, Any]) -> None: ...

    def decide(self, event: dict[str, Any]) -> bool: ...


class Sessions(Runner):
    def __init__(self) -> None:
        self.session = monitor(POLICY).session("bench")

    def record(self, event: dict[str, Any]) -> None:
        self.session.record(event)

    def decide(self, event: dict[str, Any]) -> bool:
        return self.session.authorize(event).allowed


class GivenFacts(Runner):
    """The policy over its own input relations: one ``add_facts`` call per event, with the
    event's rows (made before the clock starts, as the events of the other systems are)."""

    def __init__(self, given: dict[str, dict[str, list[list[str]]]]) -> None:
        self.session = monitor(INPUTS_POLICY).session("bench")
        self.given = given

    def record(self, event: dict[str, Any]) -> None:
        self.session.add_facts(self.given[event["id"]])

    def decide(self, event: dict[str, Any]) -> bool:
        self.session.add_facts(self.given[event["id"]])
        return self.session.decide(event["id"]).allowed


class Scratch(Runner):
    def __init__(self) -> None:
        from policyc.stdlib.events import event_facts

        self.policy = monitor(POLICY).policy
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


EVENTS_PER_MEASUREMENT = 1000
SLOW = 2.0  # seconds: a system whose first measurement takes longer is measured once


def run(runner: Callable[[], Runner], events: list[dict[str, Any]], sessions: int = 1) -> dict[str, Any]:
    """One measurement: ``sessions`` sessions of the events, one after the other (each made
    before the clock starts)."""
    instances = [runner() for _ in range(sessions)]
    gc.collect()
    latencies = []
    verdicts = []
    start = time.perf_counter()
    for instance in instances:
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
        "seconds": total,
        "decisions_per_s": len(latencies) / total if total else float("inf"),
        "p50": statistics.median(latencies) if latencies else 0.0,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0,
        "verdicts": verdicts[: len(verdicts) // sessions],
    }


def measure(
    systems: list[tuple[str, Callable[[], Runner]]], events: list[dict[str, Any]], repeat: int
) -> dict[str, dict[str, Any]]:
    """The fastest of ``repeat`` measurements of each system, the systems taking turns."""
    sessions = max(1, EVENTS_PER_MEASUREMENT // len(events))
    best: dict[str, dict[str, Any]] = {}
    once: set[str] = set()
    for _ in range(repeat):
        for name, factory in systems:
            if name in once:
                continue
            outcome = run(factory, events, sessions)
            if outcome["seconds"] > SLOW:
                once.add(name)
            if name not in best or outcome["decisions_per_s"] > best[name]["decisions_per_s"]:
                best[name] = outcome
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument(
        "--scratch-limit", type=int, default=1000, help="largest size re-evaluated from scratch"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="measurements per system and size; the fastest is kept"
    )
    args = parser.parse_args()
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        events = workload(size)
        systems: list[tuple[str, Callable[[], Runner]]] = [
            ("policyc session", Sessions),
            ("policyc add_facts", functools.partial(GivenFacts, given_facts(events))),
            ("hand-written", Handwritten),
            ("fused by hand", Fused),
            ("policyc scratch", Scratch),
            ("clingo multi-shot", Clingo),
            ("networkx", NetworkX),
        ]
        if size > args.scratch_limit:
            systems = [(name, factory) for name, factory in systems if name != "policyc scratch"]
        for name, outcome in measure(systems, events, args.repeat).items():
            results[(name, size)] = outcome
        reference = results[("hand-written", size)]["verdicts"]
        for name, _ in systems:
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
    given = {s: results[("policyc add_facts", s)]["decisions_per_s"] for s in sizes}
    print()
    if 100 in session:
        print(
            f"flatness: policyc session at {big:,} events / at 100 events = {session[big] / session[100]:.2f} "
            "(target at least 0.8)"
        )
        print(
            f"flatness: policyc add_facts at {big:,} events / at 100 events = {given[big] / given[100]:.2f} "
            "(target at least 0.8)"
        )
    if 100 in session:
        hand = {s: results[("hand-written", s)]["decisions_per_s"] for s in (100, big)}
        print(
            f"flatness of the hand-written code itself = {hand[big] / hand[100]:.2f}: taint spreads as the "
            "graph grows, so each event derives more (the workload's own growth)"
        )
        steady = {}
        for size in (100, big):
            events = [{k: v for k, v in e.items() if k != "labels"} for e in workload(size)]
            found = measure(
                [("policyc session", Sessions), ("hand-written", Handwritten)], events, args.repeat
            )
            assert found["policyc session"]["verdicts"] == found["hand-written"]["verdicts"]
            steady[size] = found["policyc session"]["decisions_per_s"]
        print(
            f"flatness: policyc session on the same graphs without labels (the same work at every length) "
            f"= {steady[big] / steady[100]:.2f} (what the session itself adds as it grows)"
        )
    print(
        "policyc add_facts / policyc session: "
        + ", ".join(f"{given[s] / session[s]:.2f} at {s:,}" for s in sizes)
        + " (target at least 0.9 at every size)"
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
