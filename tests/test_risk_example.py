"""examples/risk_budgets on the AgentDojo traces: the README's commands print what the
README shows, the committed thresholds are the ones they write, and the records follow the
traces (the attacker's arguments violated, the user's not)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from policyc.risk.thresholds import read_thresholds

from .conftest import ROOT, run_policyc

FOLDER = ROOT / "examples" / "risk_budgets"
README = (FOLDER / "README.md").read_text("utf-8")


def shown(prefix: str) -> tuple[list[str], str]:
    """The command of the README's console block that starts with ``prefix``, and its output."""
    for block in re.findall(r"```console\n(.*?)```", README, flags=re.S):
        command, _, output = block.partition("\n")
        if command.startswith(f"$ {prefix}"):
            return shlex.split(command)[1:], output
    raise AssertionError(f"README.md shows no `{prefix}` command")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, agentdojo_traces):
    """A folder laid out like the checkout with the exported traces in `traces/`, where the
    README's commands run."""
    folder = tmp_path_factory.mktemp("risk_budgets")
    (folder / "examples" / "risk_budgets").mkdir(parents=True)
    shutil.copy(FOLDER / "policy.dl", folder / "examples" / "risk_budgets" / "policy.dl")
    (folder / "traces").symlink_to(agentdojo_traces, target_is_directory=True)
    command, output = shown("python examples/risk_budgets/derive.py")
    run = subprocess.run(
        [sys.executable, str(ROOT / command[1]), *command[2:]],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == output
    return folder


def records(workdir) -> list[dict]:
    return [json.loads(line) for line in (workdir / "calib.jsonl").read_text().splitlines()]


def test_records_follow_the_traces(workdir, agentdojo_traces) -> None:
    """One record per argument with a role of each expected call: the attacker's violated, the
    user's not; each run is one episode."""
    from policyc.risk.declarations import read_declarations

    declarations = read_declarations(FOLDER / "policy.dl")
    expected: dict[tuple[str, bool], int] = {}
    for name in ("benign.jsonl", "attacked.jsonl"):
        for line in (agentdojo_traces / name).read_text().splitlines():
            run = json.loads(line)
            episode = f"{run['suite']}/{run['user_task']}/{run.get('injection_task') or 'benign'}"
            for key, violated in (("expect_allow", False), ("expect_deny", True)):
                for call in run[key]:
                    for argument, value in call["args"].items():
                        role = declarations.role_of(f"{call['tool']}.{argument}")
                        if role is not None and value not in (None, []):
                            expected[(episode, violated)] = expected.get((episode, violated), 0) + 1
    found: dict[tuple[str, bool], int] = {}
    for record in records(workdir):
        key = (record["episode"], record["violated"])
        found[key] = found.get(key, 0) + 1
        assert 0 <= record["score"] <= 1
    assert found == expected
    assert not any(violated for (episode, violated) in found if episode.endswith("/benign"))


def test_calibration_prints_what_the_readme_shows_and_writes_the_committed_thresholds(workdir) -> None:
    command, output = shown("policyc calibrate")
    run = run_policyc(*command[1:], cwd=workdir)
    assert run.status == 0, run.stderr
    assert run.stdout == output
    assert read_thresholds(workdir / "thresholds.json") == read_thresholds(FOLDER / "thresholds.json")
    # the guarantee's own arithmetic on the calibration data: CRC's (k + 1) / (n + 1) <= α
    report = run_policyc(*command[1:], "--format", "json", cwd=workdir).json()
    for name, stratum in report["strata"].items():
        if stratum["budget"] < 1:
            calibration = stratum["calibration"]
            k, n = calibration["violated_and_allowed"], calibration["fields"]
            assert (k + 1) / (n + 1) <= stratum["budget"] or stratum["threshold"] == "-inf", name
    assert report["roles"]["credential"]["certified"] == "through pool"
    assert report["roles"]["target"]["certified"] == "individually"


def test_calibrating_from_the_traces_is_calibrating_on_the_derived_records(workdir) -> None:
    """`--from-traces` makes the records derive.py writes, from the archive itself."""
    policy = "examples/risk_budgets/policy.dl"
    derived = run_policyc("calibrate", policy, "--data", "calib.jsonl", "-o", "a.json", cwd=workdir)
    traced = run_policyc("calibrate", policy, "--from-traces", "traces", "-o", "b.json", cwd=workdir)
    assert derived.status == 0 and traced.status == 0, traced.stderr
    assert read_thresholds(workdir / "a.json") == read_thresholds(workdir / "b.json")
    made = traced.stdout.splitlines()[0]
    assert made.startswith(f"made {len(records(workdir)):,} records from ")
    unlabelled = workdir / "plain.jsonl"
    unlabelled.write_text(json.dumps({"events": []}) + "\n", "utf-8")
    none = run_policyc("calibrate", policy, "--from-traces", str(unlabelled), "-o", "c.json", cwd=workdir)
    assert none.status == 1 and "no calibration records" in none.stderr
    both = run_policyc(
        "calibrate", policy, "--data", "calib.jsonl", "--from-traces", "traces", "-o", "d.json", cwd=workdir
    )
    assert both.status == 2 and "one of them" in both.stderr


def test_splits_print_what_the_readme_shows(workdir) -> None:
    command, output = shown("python examples/risk_budgets/splits.py")
    run = subprocess.run(
        [sys.executable, str(ROOT / command[1]), *command[2:]],
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == output
