"""What demand-driven evaluation (magic sets) saves on queries with bound arguments.

In one process, for each size, it evaluates two programs both ways — planned as `policyc`
plans them (the recursive relation demand-driven) and with every relation in full (`--no-magic`)
— checks that the answers are the same, and prints the times, their ratio and the facts each
derived:

* same generation on a complete ternary tree of N nodes, asked for one node's generation;
* reachability on a random graph of N nodes (3 edges each), asked from two nodes.

    python benchmarks/bench_magic.py [--sizes 300,1000,3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from policyc.compiler.magic import NO_MAGIC
from policyc.compiler.pipeline import compile_source
from policyc.compiler.planner import build_plan
from policyc.runtime.policy import Policy

SAME_GENERATION = """
.decl par(c: symbol, p: symbol)
.decl Ask(q: symbol)
.input par, Ask
.decl sg(x: symbol, y: symbol)
sg(x, x) :- par(x, _).
sg(x, y) :- par(x, xp), sg(xp, yp), par(y, yp).
Deny(y) :- Ask(q), sg(q, y).
"""

REACH = """
.decl Edge(x: number, y: number)
.decl Start(x: number)
.input Edge, Start
.decl Reach(x: number, y: number)
Reach(x, y) :- Edge(x, y).
Reach(x, z) :- Edge(x, y), Reach(y, z).
Deny(y) :- Start(x), Reach(x, y), y < 10.
"""


def tree(nodes: int) -> dict[str, list[list[Any]]]:
    return {"par": [[f"n{i}", f"n{(i - 1) // 3}"] for i in range(1, nodes)], "Ask": [[f"n{nodes // 2}"]]}


def graph(nodes: int, seed: int = 7) -> dict[str, list[list[Any]]]:
    rng = random.Random(seed)
    # a sparse graph mostly going forward: reachability from a node is a small part of it
    edges = {(i, min(nodes - 1, i + rng.randint(1, 4))) for i in range(nodes) for _ in range(3)}
    return {"Edge": [list(e) for e in sorted(edges)], "Start": [[nodes - 40], [nodes - 25]]}


def timed(policy: Policy, facts: dict[str, list[list[Any]]], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = policy.evaluate(facts)
        best = min(best, time.perf_counter() - start)
    assert result is not None and not result.errored, result.errors if result else None
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,1000,3000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'program':<16}{'size':>7}{'demand s':>11}{'full s':>10}{'ratio':>9}{'facts':>10}{'full facts':>12}"
    )
    for name, text, make in (("same generation", SAME_GENERATION, tree), ("reachability", REACH, graph)):
        compilation = compile_source(text, f"{name}.dl")
        magic, plain = Policy(build_plan(compilation)), Policy(build_plan(compilation, NO_MAGIC))
        assert any(r.magic is not None for r in magic.plan.relations), "the program is not demand-driven"
        for size in sizes:
            facts = make(size)
            fast, mine = timed(magic, facts, args.repeat)
            slow, full = timed(plain, facts, args.repeat)
            assert mine.relations["Deny"] == full.relations["Deny"], (name, size)
            derived = sum(len(rows) for r, rows in mine.relations.items() if r not in facts)
            everything = sum(len(rows) for r, rows in full.relations.items() if r not in facts)
            print(
                f"{name:<16}{size:>7}{fast:>11.4f}{slow:>10.4f}{slow / fast:>8.1f}x{derived:>10}{everything:>12}"
            )


if __name__ == "__main__":
    main()
