"""How long storing nested records takes, against the same program without records.

The program builds a list of `--cells` cells (10,000 by default), each record holding the one
before it, so the last holds all the others: `build(n + 1, [n, l]) :- build(n, l)`. The same
program without records keeps, in place of each list, the number of its head (`build(n + 1, n)`):
the same facts, the same rounds of the recursion, the same joins, and no record. Both are
evaluated `--repeat` times in one process (`policyc.load(...).evaluate({})`), the best time of
each is kept, and the ratio is printed.

A record keeps its hash (computed once from its fields', runtime/values.py), so storing a cell
costs time in proportion to its two fields, not to the cells it holds: the ratio stays about
the same as the list grows. Before, each cell was hashed through all the cells below it, and
the time grew with the square of the length (10,000 cells took about 0.4 s, 40,000 about 10 s).

    python benchmarks/bench_records.py [--cells 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import policyc

WITH_RECORDS = """
.type List = [head: number, tail: List]
.decl build(n: number, l: List)
build(0, nil).
build(n + 1, [n, l]) :- build(n, l), n < {cells}.
.decl size(n: number)
size(n) :- build(n, _), n >= {cells}.
.output size
"""

WITHOUT_RECORDS = """
.decl build(n: number, l: number)
build(0, 0).
build(n + 1, n) :- build(n, l), n < {cells}.
.decl size(n: number)
size(n) :- build(n, _), n >= {cells}.
.output size
"""


def best(text: str, repeat: int) -> float:
    policy = policyc.load(text)
    fastest = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        result = policy.evaluate({})
        fastest = min(fastest, time.perf_counter() - started)
        assert not result.errored, result.errors
    return fastest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    records = best(WITH_RECORDS.format(cells=options.cells), options.repeat)
    plain = best(WITHOUT_RECORDS.format(cells=options.cells), options.repeat)
    print(f"cells: {options.cells:,}")
    print(f"with records:    {records:.3f} s")
    print(f"without records: {plain:.3f} s")
    print(f"ratio: {records / plain:.2f}")


if __name__ == "__main__":
    main()
