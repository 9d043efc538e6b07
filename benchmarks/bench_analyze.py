"""How long `policyc check --deep` takes, on the example policies and on generated ones.

In one process: the in-process deep analysis (`policyc.analyzer.deep.analyse`, after the
ordinary checks) of every policy in `examples/`, of policies of 50 to 10,000 rules generated
like `bench_check.py` generates them, and of a *crowded* policy, whose `Deny` rules all read the
same relations and differ only in their comparisons (every pair of them may be a containment,
which only z3 can decide), at the default bound (2) and time limit (6 s, `--deep-timeout`).
Each policy is analysed `--repeat` times and the best time is kept. For each, it prints the
time of the ordinary checks (the baseline: what `policyc check` costs anyway), the time of the
deep analysis, the ratio, the findings, the bounded questions asked, and how many checks were
left undecided in the time allowed (bounded questions unanswered, rules and tools not checked),
then what those were. Target: each example policy under 10 s, and every policy within about its
time limit.

    python benchmarks/bench_analyze.py [--sizes 50,200,1000,4000,10000] [--crowded 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

from bench_check import generate  # noqa: E402

from policyc.analyzer.deep import analyse  # noqa: E402
from policyc.compiler.pipeline import compile_file, compile_source  # noqa: E402


def crowded(rules: int) -> str:
    """`Deny` rules over the relations of `generate` that differ only in their comparisons."""
    lines = [
        f"Deny(a) :- Actions(a), Amount(a, n), n > {i * 7}, n < {i * 7 + 5 + i % 3}." for i in range(rules)
    ]
    return generate(0) + "\n".join(lines) + "\n"


def measure(name: str, compile_it, bound: int, timeout: float, repeat: int) -> tuple:
    started = time.perf_counter()
    compilation = compile_it()
    checked = time.perf_counter() - started
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        result = analyse(compilation, bound, timeout)
        best = min(best, time.perf_counter() - started)
    return name, checked, best, len(result.findings), result.questions, result.unanswered, result.notes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000,4000,10000")
    parser.add_argument("--crowded", type=int, default=300, help="rules of the crowded policy (0: none)")
    parser.add_argument("--bound", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for path in sorted(ROOT.glob("examples/*/*.dl")):
        rows.append(
            measure(
                str(path.relative_to(ROOT)),
                lambda path=path: compile_file(str(path)),
                args.bound,
                args.timeout,
                args.repeat,
            )
        )
    texts = [
        (f"generated, {size:,} rules", generate(size)) for size in (int(s) for s in args.sizes.split(","))
    ]
    if args.crowded:
        texts.append((f"crowded, {args.crowded:,} rules", crowded(args.crowded)))
    for name, text in texts:
        rows.append(
            measure(
                name, lambda text=text: compile_source(text, "gen.dl"), args.bound, args.timeout, args.repeat
            )
        )
    print(
        f"{'policy':42} {'check s':>8} {'deep s':>8} {'deep/check':>10} {'findings':>8} {'questions':>9} {'undecided':>9}"
    )
    for name, checked, deep, found, questions, undecided, _ in rows:
        print(
            f"{name:42} {checked:8.3f} {deep:8.3f} {deep / checked:10.1f} {found:8} {questions:9} {undecided:9}"
        )
    slowest = max((r for r in rows if r[0].startswith("examples/")), key=lambda r: r[2])
    print(f"\nslowest example: {slowest[0]} in {slowest[2]:.2f} s (target: under 10 s)")
    undecided = [(name, notes) for name, *_, notes in rows if notes]
    if undecided:
        print(f"\nnot decided within the time limit ({args.timeout:g} s):")
        for name, notes in undecided:
            for note in notes:
                print(f"  {name}: {note}")


if __name__ == "__main__":
    main()
