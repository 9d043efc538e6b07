"""How fast policyc evaluates, against the bar a general engine must meet.

In one process and one run, for the toxic-flow policy of DESIGN.md on generated event graphs
(1,000 / 10,000 / 100,000 events: each depends on 1-3 earlier events; 5% untrusted inputs,
5% sensitive inputs, 10% actions of which 30% external sends) and for a transitive closure on
random graphs, it times:

* policyc: a loaded policy evaluating the facts (compiled once, as a monitor would);
* a hand-written semi-naive evaluator of the same program in plain Python, the practical
  limit for an engine hosted in the interpreter: value-level (a unary relation is a set of
  values, a binary one a set of pairs), built from the same input rows, with the index and
  the rounds a careful programmer would write (it trusts its input; policyc checks the type
  of every value and drops duplicate rows, and that is included in its time);
* clingo, one shot: ground and solve the program with the facts, read the model.

and prints the ratios (targets: policyc within 1.5x of the hand-written code, and at least
5x faster than clingo at 10,000 events), and the memory policyc uses per stored fact.

    python benchmarks/bench_eval.py [--sizes 1000,10000,100000] [--repeat 7] [--no-clingo]
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from toxic_flow import INPUTS_POLICY  # beside this script

import policyc

TOXIC = INPUTS_POLICY


CLOSURE = """
.decl Edge(x: number, y: number)
.input Edge
Path(x, y) :- Edge(x, y).
Path(x, z) :- Path(x, y), Edge(y, z).
.output Path
"""


def event_graph(events: int, seed: int = 11) -> dict[str, list[list[Any]]]:
    rng = random.Random(seed)
    facts: dict[str, list[list[Any]]] = {
        "UntrustedInput": [],
        "SensitiveInput": [],
        "DependsOn": [],
        "ExternalSend": [],
    }
    for i in range(events):
        e = f"e{i}"
        if i:
            for d in {rng.randrange(i) for _ in range(rng.randint(1, 3))}:
                facts["DependsOn"].append([e, f"e{d}"])
        draw = rng.random()
        if draw < 0.05:
            facts["UntrustedInput"].append([e])
        elif draw < 0.10:
            facts["SensitiveInput"].append([e])
        elif draw < 0.20 and rng.random() < 0.3:
            facts["ExternalSend"].append([e])
    return facts


def random_graph(nodes: int, edges: int, seed: int = 5) -> dict[str, list[list[Any]]]:
    rng = random.Random(seed)
    pairs = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}
    return {"Edge": [list(p) for p in sorted(pairs)]}


# ------------------------------------------------------------------ hand-written evaluators


def handwritten_toxic(facts: dict[str, list[list[Any]]]) -> set[tuple]:
    """The toxic-flow program evaluated the way one would write it by hand, value-level: each
    unary relation a set of the values of its rows, the dependents of each event in a dict
    built from the DependsOn rows, semi-naive rounds over sets of values."""
    untrusted = {row[0] for row in facts["UntrustedInput"]}
    sensitive = {row[0] for row in facts["SensitiveInput"]}
    dependents: dict[str, list[str]] = {}
    for e, d in facts["DependsOn"]:
        dependents.setdefault(d, []).append(e)

    def label(base: set[str]) -> set[str]:  # X(e) :- Base(e).  X(e) :- DependsOn(e, d), X(d).
        full = set(base)
        delta = set(base)
        while delta:
            delta = {e for d in delta for e in dependents.get(d, ())} - full
            full |= delta
        return full

    tainted = label(untrusted)
    secret = label(sensitive)
    return {(a,) for (a,) in facts["ExternalSend"] if a in tainted and a in secret}


def handwritten_closure(facts: dict[str, list[list[Any]]]) -> set[tuple]:
    successors: dict[int, list[int]] = {}
    for x, y in facts["Edge"]:
        successors.setdefault(x, []).append(y)
    full = {(x, y) for x, y in facts["Edge"]}
    delta = set(full)
    while delta:
        delta = {(x, z) for x, y in delta for z in successors.get(y, ())} - full
        full |= delta
    return full


# -------------------------------------------------------------------------------- clingo


def clingo_run(program: str, facts: dict[str, list[list[Any]]], relation: str) -> set[tuple]:
    import clingo

    def term(v: Any) -> str:
        return str(v) if isinstance(v, int) else '"' + v + '"'

    text = program.replace("Tainted", "tainted").replace("HasSecret", "hassecret")
    lines = []
    for rule in _clingo_rules(program):
        lines.append(rule)
    for name, rows in facts.items():
        lines.extend(f"{name.lower()}({','.join(term(v) for v in row)})." for row in rows)
    del text
    control = clingo.Control(["--warn=none"])
    control.add("base", [], "\n".join(lines))
    control.ground([("base", [])])
    found: set[tuple] = set()
    with control.solve(yield_=True) as handle:
        for model in handle:
            for symbol in model.symbols(atoms=True):
                if symbol.name == relation.lower():
                    found.add(
                        tuple(
                            a.number if a.type == clingo.SymbolType.Number else a.string
                            for a in symbol.arguments
                        )
                    )
    return found


def _clingo_rules(program: str) -> list[str]:
    """The benchmark programs' rules in clingo syntax (lower-case predicates, upper-case variables)."""
    import re

    rules = []
    for line in program.splitlines():
        if ":-" not in line:
            continue
        line = re.sub(r"\b([A-Z][A-Za-z]*)\(", lambda m: m.group(1).lower() + "(", line)
        line = re.sub(
            r"\b([a-z])('?)(?=[,)])", lambda m: m.group(1).upper() + ("P" if m.group(2) else ""), line
        )
        rules.append(line)
    return rules


# ------------------------------------------------------------------------------- timing


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def best_of_each(repeat: int, *fns: Callable[[], Any]) -> list[tuple[float, Any]]:
    """The best time and the value of each function, run in turns (one run of each, ``repeat``
    times) so that what else the machine does weighs on all of them alike."""
    results: list[tuple[float, Any]] = [(float("inf"), None)] * len(fns)
    for _ in range(repeat):
        for n, fn in enumerate(fns):
            gc.collect()
            start = time.perf_counter()
            value = fn()
            results[n] = (min(results[n][0], time.perf_counter() - start), value)
    return results


def memory_per_fact(policy: Any, facts: dict) -> float:
    gc.collect()
    tracemalloc.start()
    result = policy.evaluate(facts)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stored = sum(len(rows) for rows in result.relations.values())
    return current / max(stored, 1)


def run_case(
    label: str,
    program: str,
    facts: dict,
    relation: str,
    handwritten: Callable,
    repeat: int,
    with_clingo: bool,
) -> dict[str, Any]:
    policy = policyc.load(program)
    (t_policyc, result), (t_hand, expected) = best_of_each(
        repeat, lambda: policy.evaluate(facts), lambda: handwritten(facts)
    )
    assert not result.errored, result.errors
    derived = result.relation(relation)
    assert derived == expected, f"{label}: policyc and the hand-written evaluator disagree"
    t_clingo = None
    if with_clingo:
        t_clingo, from_clingo = best_of(1, lambda: clingo_run(program, facts, relation))
        assert from_clingo == derived, f"{label}: policyc and clingo disagree"
    facts_in = sum(len(rows) for rows in facts.values())
    return {
        "case": label,
        "facts": facts_in,
        "derived": len(derived),
        "policyc": t_policyc,
        "hand": t_hand,
        "clingo": t_clingo,
        "bytes_per_fact": memory_per_fact(policy, facts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each, in turns; the best is kept")
    parser.add_argument("--no-clingo", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(
            run_case(
                f"toxic flow, {size:,} events",
                TOXIC,
                event_graph(size),
                "Deny",
                handwritten_toxic,
                args.repeat,
                not args.no_clingo,
            )
        )
    for nodes, edges in ((200, 400), (400, 1200)):
        rows.append(
            run_case(
                f"closure, {nodes} nodes {edges} edges",
                CLOSURE,
                random_graph(nodes, edges),
                "Path",
                handwritten_closure,
                args.repeat,
                not args.no_clingo,
            )
        )
    print(
        f"{'case':36} {'policyc s':>10} {'hand s':>9} {'clingo s':>9} {'policyc/hand':>13} "
        f"{'clingo/policyc':>15} {'bytes/fact':>11}"
    )
    for row in rows:
        clingo_time = f"{row['clingo']:9.3f}" if row["clingo"] is not None else f"{'n/a':>9}"
        speedup = f"{row['clingo'] / row['policyc']:15.1f}" if row["clingo"] is not None else f"{'n/a':>15}"
        print(
            f"{row['case']:36} {row['policyc']:10.4f} {row['hand']:9.4f} {clingo_time} "
            f"{row['policyc'] / row['hand']:13.2f} {speedup} {row['bytes_per_fact']:11.0f}"
        )
    print("\ntargets: policyc/hand at most 1.5; clingo/policyc at least 5 at 10,000 events")


if __name__ == "__main__":
    main()
