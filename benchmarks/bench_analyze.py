"""How long `policyc check --deep` takes, on the example policies and on generated ones.

In one process and one run: the in-process deep analysis (`policyc.analyzer.deep.analyse`,
after the ordinary checks) of every policy in `examples/`, and of policies of 50, 200 and 1,000
rules generated like `bench_check.py` generates them, at the default bound (2). For each, it
prints the time of the ordinary checks (the baseline: what `policyc check` costs anyway), the
time of the deep analysis, the ratio, the findings, and how many bounded questions were left
unanswered in the time allowed. Target: each example policy under 10 s.

    python benchmarks/bench_analyze.py [--sizes 50,200,1000] [--bound 2]
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


def measure(name: str, compile_it, bound: int) -> tuple[str, float, float, int, int, int]:
    started = time.perf_counter()
    compilation = compile_it()
    checked = time.perf_counter() - started
    started = time.perf_counter()
    result = analyse(compilation, bound)
    deep = time.perf_counter() - started
    return name, checked, deep, len(result.findings), result.questions, result.unanswered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--bound", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for path in sorted(ROOT.glob("examples/*/*.dl")):
        rows.append(
            measure(str(path.relative_to(ROOT)), lambda path=path: compile_file(str(path)), args.bound)
        )
    for size in (int(s) for s in args.sizes.split(",")):
        text = generate(size)
        rows.append(
            measure(
                f"generated, {size:,} rules", lambda text=text: compile_source(text, "gen.dl"), args.bound
            )
        )
    print(
        f"{'policy':42} {'check s':>8} {'deep s':>8} {'deep/check':>10} {'findings':>8} {'questions':>9} {'unanswered':>10}"
    )
    for name, checked, deep, found, questions, unanswered in rows:
        print(
            f"{name:42} {checked:8.3f} {deep:8.3f} {deep / checked:10.1f} {found:8} {questions:9} {unanswered:10}"
        )
    slowest = max((r for r in rows if r[0].startswith("examples/")), key=lambda r: r[2])
    print(f"\nslowest example: {slowest[0]} in {slowest[2]:.2f} s (target: under 10 s)")


if __name__ == "__main__":
    main()
