"""How fast `policyc check` is, and whether it stays linear in the size of the policy.

Generates policies of 1,000, 5,000 and 20,000 rules in three shapes:

* ``forge``: like the FORGE listings (typed input relations, recursive provenance, deny rules
  over tool calls with comparisons, functor calls, negation, aggregates and annotations);
* ``deep``: a chain, one relation per rule (``R1(x) :- R0(x).``, ``R2(x) :- R1(x).``, ...),
  so as many relations, strata and dependency edges as rules;
* ``wide``: one relation with every rule (``W(x) :- In(x, "v1").``, ...),

then, in one process and one run, for each shape and size:

* times the whole check pipeline in process (read, parse, resolve, every check, stratify);
* times a plain Lark parse of the same text (tree building only, no checks, no recovery) as
  the baseline an LALR parser in Python sets;
* times the installed `policyc check` command end to end (process start-up included), and
  the same command on an empty policy: its fixed cost.

Prints rules per second, the ratio to Lark, the per-rule cost at the largest size over that
at the smallest (1.00 = linear), and one summary line per target: at least 5,000 rules/s for
the pipeline on every shape and size, and for the whole command on the deep and wide shapes at
every size (the FORGE-like shape's whole command is printed for information), and a linear
per-rule cost. The command runs as an installed package runs, with its bytecode written.

    python benchmarks/bench_check.py [--sizes 1000,5000,20000] [--shapes forge,deep,wide] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLS = ["send_email", "send_money", "read_file", "get_webpage", "create_file", "delete_file", "post_message"]


def generate(rules: int, seed: int = 7) -> str:
    """A policy with exactly `rules` rules and facts."""
    rng = random.Random(seed)
    out = [
        ".functor is_tool(a: symbol, name: symbol): bool",
        ".functor tool_arg(a: symbol, key: symbol): any",
        ".decl Actions(a: symbol)",
        ".decl DependsOn(e: symbol, d: symbol)",
        ".decl Untrusted(e: symbol)",
        ".decl Sensitive(e: symbol)",
        ".decl Amount(a: symbol, n: number)",
        ".input Actions, DependsOn, Untrusted, Sensitive, Amount",
    ]
    written = 0
    group = 0
    while written < rules:
        g = group
        group += 1
        tool = TOOLS[g % len(TOOLS)]
        block = [
            f"Tainted{g}(e) :- Untrusted(e).",
            f"Tainted{g}(e) :- DependsOn(e, d), Tainted{g}(d).",
            f"Secret{g}(e) :- Sensitive(e).",
            f"Secret{g}(e) :- DependsOn(e, d), Secret{g}(d).",
            f'Known{g}("ops@example.com").',
            f'@id("g{group}-exfil")\n@message("{{a}} would leak data")\n'
            f'Deny(a) :- Actions(a), is_tool(a, "{tool}"), Tainted{g}(a), Secret{g}(a).',
            f'Deny(a) :- Actions(a), is_tool(a, "{tool}"), to = tool_arg(a, "to"), to != "", not Known{g}(to).',
            f"Spent{g}(t) :- t = sum n : {{ Amount(_, n) }}.",
            f"Deny(a) :- Actions(a), Amount(a, n), Spent{g}(t), t + n > {rng.randint(100, 10_000)}.",
            f"Deny(a) :- Actions(a), n = count : {{ DependsOn(a, _) }}, n > {rng.randint(5, 50)}, "
            f"not Secret{g}(a).",
        ]
        for statement in block:
            if written >= rules:
                break
            out.append(statement)
            written += 1
    return "\n".join(out) + "\n"


def generate_deep(rules: int) -> str:
    """A chain of ``rules`` rules, each relation defined from the one before it."""
    out = [".decl R0(x: symbol)", ".input R0"]
    out += [f"R{i}(x) :- R{i - 1}(x)." for i in range(1, rules)]
    out.append(f"Deny(a) :- R{rules - 1}(a).")
    return "\n".join(out) + "\n"


def generate_wide(rules: int) -> str:
    """``rules`` rules, all but the last defining the same relation."""
    out = [".decl In(x: symbol, y: symbol)", ".input In", ".decl W(x: symbol)"]
    out += [f'W(x) :- In(x, "v{i}").' for i in range(rules - 1)]
    out.append("Deny(a) :- W(a).")
    return "\n".join(out) + "\n"


SHAPES = {"forge": generate, "deep": generate_deep, "wide": generate_wide}
TARGET = 5_000  # rules/s
COMMAND_TARGET = ("deep", "wide")  # the shapes the whole command's target is for
LINEAR = 1.25  # per-rule cost at the largest size / at the smallest, at most


def time_pipeline(text: str, repeat: int) -> float:
    from policyc.compiler.pipeline import compile_source

    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        result = compile_source(text, "bench.dl")  # `check`'s stages, up to stratify
        best = min(best, time.perf_counter() - start)
        gc.enable()
        assert result.ok, [d.message for d in result.diagnostics if d.is_error][:3]
    return best


def time_lark_baseline(text: str, repeat: int) -> float:
    from importlib import resources

    from lark import Lark

    grammar = resources.files("policyc.grammar").joinpath("policy.lark").read_text("utf-8")
    grammar += "\nprogram: item*\n"
    parser = Lark(grammar, parser="lalr", lexer="basic", start="program")
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        parser.parse(text.replace(" inline", ""))
        best = min(best, time.perf_counter() - start)
        gc.enable()
    return best


def time_command(path: Path, repeat: int) -> float | None:
    """The best time of ``policyc check PATH`` as an installed package runs it: with its
    modules' bytecode written (pip writes it when it installs; an editable checkout writes it
    the first time, which the untimed first run does, whatever PYTHONDONTWRITEBYTECODE says)."""
    command = shutil.which("policyc", path=str(Path(sys.executable).parent))
    if command is None:
        return None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    best = float("inf")
    for n in range(repeat + 1):
        start = time.perf_counter()
        done = subprocess.run([command, "check", str(path)], capture_output=True, env=env)
        if n:
            best = min(best, time.perf_counter() - start)
        assert done.returncode == 0, done.stdout[-2000:]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    time_pipeline(generate(100), 1)  # warm up: the grammar's tables and the library are built once
    rows: dict[str, list[tuple[int, float, float, float | None]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.dl"
        empty.write_text("", "utf-8")
        startup = time_command(empty, args.repeat)
        for shape in shapes:
            rows[shape] = []
            for size in sizes:
                text = SHAPES[shape](size)
                path = Path(folder) / f"{shape}_{size}.dl"
                path.write_text(text, "utf-8")
                pipeline = time_pipeline(text, args.repeat)
                lark = time_lark_baseline(text, args.repeat)
                command = time_command(path, args.repeat)
                rows[shape].append((size, pipeline, lark, command))
    if startup is not None:
        print(
            f"`policyc check` on an empty policy: {startup:.3f} s (start-up, imports, the builtins prelude)\n"
        )
    print(
        f"{'shape':>5} {'rules':>7} {'check rules/s':>14} {'µs/rule':>8} {'lark parse rules/s':>19} "
        f"{'check/lark':>10} {'command s':>10} {'command rules/s':>16} {'less start-up':>14}"
    )
    for shape, found in rows.items():
        for size, pipeline, lark, command in found:
            if command is None:
                command_text = f"{'n/a':>10} {'n/a':>16} {'n/a':>14}"
            else:
                beyond = command - (startup or 0.0)
                command_text = f"{command:10.2f} {size / command:16,.0f} {size / max(beyond, 1e-9):14,.0f}"
            print(
                f"{shape:>5} {size:>7} {size / pipeline:14,.0f} {pipeline / size * 1e6:8.1f} {size / lark:19,.0f} "
                f"{pipeline / lark:10.2f} {command_text}"
            )
    print()
    for shape, found in rows.items():
        first, last = found[0], found[-1]
        growth = (last[1] / last[0]) / (first[1] / first[0])
        slowest = min(size / pipeline for size, pipeline, _, _ in found)
        print(
            _verdict(
                slowest >= TARGET,
                f"{shape}: pipeline at least {TARGET:,} rules/s at every size: slowest {slowest:,.0f}",
            )
        )
        commands = [(size, command) for size, _, _, command in found if command is not None]
        if commands:
            worst = min(commands, key=lambda c: c[0] / c[1])
            line = (
                f"{shape}: whole command at least {TARGET:,} rules/s at every size: slowest "
                f"{worst[0] / worst[1]:,.0f} (at {worst[0]:,} rules)"
            )
            if shape in COMMAND_TARGET:
                print(_verdict(worst[0] / worst[1] >= TARGET, line))
            else:  # FORGE-like rules are two to three times the size of a chain's or a fan's
                print(f"info    {line}; the target is for the deep and wide shapes")
        if len(found) > 1:
            print(
                _verdict(
                    growth <= LINEAR,
                    f"{shape}: linear: per-rule cost at {last[0]:,} rules / at {first[0]:,} rules {growth:.2f} "
                    f"(at most {LINEAR})",
                )
            )


def _verdict(met: bool, line: str) -> str:
    return f"{'met    ' if met else 'NOT MET'} {line}"


if __name__ == "__main__":
    main()
