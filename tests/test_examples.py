"""Every FORGE example end to end: compiled into a bundle, evaluated from the command line
and from Python, in agreement with clingo, with the expected verdicts and an explanation for
every denial. The scenarios live in `examples/forge/scenarios/`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.magic import is_magic
from policyc.compiler.pipeline import compile_file

from .conftest import EXAMPLES

FORGE = EXAMPLES / "forge"
SCENARIOS = sorted(p for p in (FORGE / "scenarios").iterdir() if p.is_dir())


def forge_functors(events: dict) -> dict:
    spec = importlib.util.spec_from_file_location("forge_functors", FORGE / "functors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.functors_for(events)


def test_every_listing_has_a_scenario() -> None:
    covered = {json.loads((s / "scenario.json").read_text("utf-8"))["policy"] for s in SCENARIOS}
    assert covered == {p.name for p in FORGE.glob("*.dl")}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_scenario(scenario: Path, tmp_path, cli) -> None:
    meta = json.loads((scenario / "scenario.json").read_text("utf-8"))
    facts = json.loads((scenario / "facts.json").read_text("utf-8"))
    events_file = scenario / "events.json"
    events = json.loads(events_file.read_text("utf-8")) if events_file.exists() else {}
    source = FORGE / meta["policy"]
    functors = forge_functors(events)

    bundle = tmp_path / "policy.bundle"
    assert cli("compile", str(source), "-o", str(bundle)).status == 0

    result = policyc.load(bundle, functors).evaluate(facts)
    assert not result.errored, result.errors
    for action in meta["expect"]["deny"]:
        decision = result.decide(action)
        assert not decision.allowed, action
        assert decision.reasons, action
        explanation = decision.explain()
        assert explanation.derivations or explanation.why_not is not None
        if decision.reasons[0].rule != "policyc:default-deny":
            assert explanation.derivations[0].fact == f'Deny("{action}")'
    for action in meta["expect"]["allow"]:
        assert result.decide(action).allowed, (action, result.decide(action).reasons)

    run = cli(
        "eval",
        str(bundle),
        "--facts",
        str(scenario / "facts.json"),
        "--format",
        "json",
        "--functors",
        str(FORGE / "functors.py"),
        env={"FORGE_EVENTS": str(events_file)} if events else {},
    )
    assert run.status == 0, run.stderr
    from_cli = json.loads(run.stdout)["relations"]
    for name, rows in from_cli.items():
        assert {tuple(r) for r in rows} == result.relation(name), name

    compilation = compile_file(str(source))
    plain = {n: [tuple(r) for r in rows] for n, rows in facts.items()}
    expected = solve_unique(compilation, to_clingo(compilation, plain), functors)
    specs = {r.name: r for r in result.evaluation.plan.relations}
    for name, found in result.relations.items():
        if is_magic(name):
            continue
        if specs[name].magic is not None:  # demand-driven: the facts asked for, each a true one
            assert found <= expected[name], name
        else:
            assert found == expected[name], name
