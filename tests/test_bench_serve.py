"""benchmarks/bench_serve.py, the yardstick of `policyc serve`: it runs end to end against the
installed command, counts the CPU of the service's whole process tree, pairs every ratio within a
round, and (in the slow suite) measures a baseline commit installed in an environment of its own."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "bench_serve.py"


@pytest.fixture
def benchmarks(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The benchmark's modules, imported as the script imports them (from beside it)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    yield {name: importlib.import_module(name) for name in ("bench_serve", "serve_report", "git_baseline")}


def test_the_smoke_run_measures_the_working_tree_end_to_end(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", str(figures)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    found = json.loads(figures.read_text("utf-8"))
    assert [s["name"] for s in found["services"]] == ["tree"]
    (turn,) = found["turns"]
    assert list(turn["loads"]) == ["sync, 1 client", "sync, 2 clients", "asyncio, 2 sessions"]
    for load, figures_of_load in turn["loads"].items():
        assert figures_of_load["decisions"] > 0 and figures_of_load["decisions_per_s"] > 0, load
        assert 0 < figures_of_load["client_p50"] <= figures_of_load["client_p99"], load
        assert figures_of_load["service_p50"] > 0, load  # the service's own Server-Timing
    for clients in ("sync, 1 client", "sync, 2 clients"):
        assert turn["loads"][clients]["service_cpu"] > 0 and turn["loads"][clients]["client_cpu"] > 0
    assert "tree sync, 2 clients" in ran.stdout and "over baseline" not in ran.stdout
    assert found["in_process"] > 0


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--variant=--no-such-flag"], ["tree --no-such-flag did not start", "No such option"]),
        (["--baseline", "no-such-ref"], ["`no-such-ref` names no commit"]),
    ],
)
def test_what_cannot_run_is_said_without_a_traceback(
    tmp_path: Path, flags: list[str], said: list[str]
) -> None:
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ran.returncode == 1
    assert all(words in ran.stderr for words in said) and "Traceback" not in ran.stderr


_BUSY = """
import subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", "import sys, time\\nwhile time.process_time() < 0.3: pass\\nprint(flush=True)\\nsys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
)
child.stdout.readline()
print("child busy", flush=True)
sys.stdin.readline()
child.stdin.close()
child.wait()
print("child reaped", flush=True)
sys.stdin.readline()
"""


def test_the_service_cpu_counts_its_children_living_and_reaped(benchmarks: dict[str, ModuleType]) -> None:
    cpu_seconds = benchmarks["bench_serve"].cpu_seconds
    parent = subprocess.Popen(
        [sys.executable, "-c", _BUSY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        assert parent.stdout.readline() == "child busy\n"
        own = sum(
            int(v) for v in Path(f"/proc/{parent.pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
        )
        living = cpu_seconds(parent.pid)
        assert living >= own / os.sysconf("SC_CLK_TCK") + 0.28  # the child's 0.3 s, to the clock's tick
        parent.stdin.write("\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == "child reaped\n"
        assert cpu_seconds(parent.pid) >= living  # the reaped child's time stays counted
    finally:
        parent.kill()
        parent.wait()
    assert math.isnan(cpu_seconds(parent.pid))  # once it is gone


def test_ratios_pair_the_services_round_by_round(benchmarks: dict[str, ModuleType]) -> None:
    report = benchmarks["serve_report"]
    load = "sync, 8 clients"

    def turn(service: str, number: int, rate: float) -> object:
        return report.Turn(service, number, {load: {"decisions_per_s": rate}})

    # the machine was twice as fast in round 1: pooled medians would say 175/150, pairs 1.5 and 1.0
    turns = [turn("baseline", 0, 100), turn("tree", 0, 150), turn("baseline", 1, 200), turn("tree", 1, 200)]
    assert report.ratios(turns, "tree", "baseline", load, "decisions_per_s") == [1.5, 1.0]
    # a round the budget cut short pairs nothing
    turns.append(turn("tree", 2, 400))
    assert report.ratios(turns, "tree", "baseline", load, "decisions_per_s") == [1.5, 1.0]
    text = report.report(["baseline", "tree"], turns, "baseline")
    (line,) = [line for line in text.splitlines() if line.startswith(f"decisions/s, {load}")]
    assert line.split()[-2:] == ["1.25", "(1.00-1.50)"]


def test_the_baseline_is_a_commit_of_this_repository(benchmarks: dict[str, ModuleType]) -> None:
    git_baseline = benchmarks["git_baseline"]
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert git_baseline.resolve("HEAD") == head
    default = git_baseline.resolve(git_baseline.default_ref())
    assert subprocess.run(["git", "merge-base", "--is-ancestor", default, head], cwd=ROOT).returncode == 0
    with pytest.raises(ValueError, match="`no-such-ref` names no commit"):
        git_baseline.resolve("no-such-ref")


@pytest.mark.slow
def test_a_baseline_commit_runs_from_its_own_environment_beside_the_tree(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    ran = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--baseline",
            "HEAD",
            "--variant",
            "--sync full",
            "--rounds",
            "2",
            "--seconds",
            "0.3",
            "--clients",
            "1",
            "--async-sessions",
            "0",
            "--json",
            str(figures),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "POLICYC_BENCH_CACHE": str(tmp_path / "cache")},
    )
    assert ran.returncode == 0, ran.stderr
    found = json.loads(figures.read_text("utf-8"))
    services = {s["name"]: s for s in found["services"]}
    assert set(services) == {"baseline", "tree", "tree --sync full"}
    assert services["tree --sync full"]["flags"] == ["--sync", "full"]
    # the variant's rate over the tree's, beside its figures over the baseline's
    over_tree = ran.stdout.split("decisions/s over tree, round by round")[1].splitlines()
    assert "tree --sync full" in over_tree[1] and over_tree[2].startswith("sync, 1 client")
    # the baseline's command is the commit's code, installed (not the working tree's, editable)
    command = Path(services["baseline"]["command"])
    assert command.is_relative_to(tmp_path / "cache")
    installed = subprocess.run(
        [str(command.parent / "python"), "-c", "import policyc.serve.app as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    committed = subprocess.run(
        ["git", "show", "HEAD:serve/app.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert Path(installed).is_relative_to(tmp_path / "cache") and Path(installed).read_text() == committed
    assert [(t["service"], t["round"]) for t in found["turns"]].count(("baseline", 1)) == 1
    assert "over baseline, round by round" in ran.stdout


@pytest.mark.slow
def test_the_postgresql_services_and_the_failover_are_measured(tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    ran = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--smoke", "--postgres", "--failover", "1", "--lease-ttl", "1"),
            *("--async-sessions", "0", "--json", str(figures)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    found = json.loads(figures.read_text("utf-8"))
    names = ["tree", "tree on postgresql", "tree on postgresql, 2 instances"]
    assert [s["name"] for s in found["services"]] == names
    turns = {turn["service"]: turn["loads"] for turn in found["turns"]}
    for name in names[1:]:
        for load in turns[name].values():
            assert load["decisions"] > 0 and load["service_cpu"] > 0 and load["database_cpu"] > 0
    assert all(math.isnan(load["database_cpu"]) for load in turns["tree"].values())
    (trial,) = found["failover"]
    assert 0.5 < trial["seconds"] < 30  # at least most of the lease, as the owner was not renewing
    assert "2 instances / 1" in ran.stdout and "failover (kill -9" in ran.stdout
