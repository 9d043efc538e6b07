"""The compiler's stages: each returns its own type, the pipeline returns the last one reached,
and planning is its last stage."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from policyc.compiler.pipeline import STAGES, compile_source, plan
from policyc.compiler.planner import PlanningError
from policyc.compiler.stages import Checked, Parsed, Planned, Resolved, Stratified
from policyc.runtime.errors import PolicyError
from policyc.runtime.planned import plan_of

POLICY = "Deny(a) :- Send(a), not Ok(a).\n.input Send, Ok\n"
TYPES = {"parse": Parsed, "resolve": Resolved, "check": Checked, "stratify": Stratified, "plan": Planned}


@pytest.mark.parametrize("stage", STAGES)
def test_upto_returns_that_stage_s_result(stage: str) -> None:
    result = compile_source(POLICY, "p.dl", upto=stage)
    assert type(result) is TYPES[stage]
    assert result.completed == stage
    assert result.ok


def test_each_stage_has_every_field_of_the_one_before() -> None:
    order = [TYPES[stage] for stage in STAGES]
    for earlier, later in itertools.pairwise(order):
        assert issubclass(later, earlier)
        names = [f.name for f in dataclasses.fields(later)]
        assert names[: len(dataclasses.fields(earlier))] == [f.name for f in dataclasses.fields(earlier)]


def test_syntax_errors_stop_after_parsing() -> None:
    result = compile_source("Deny(a) :- Send(a)\n", "p.dl", upto="plan")
    assert type(result) is Parsed
    assert not result.ok


def test_a_policy_with_errors_is_stratified_but_not_planned() -> None:
    text = "Deny(a) :- Send(a), Missing(a).\n.input Send\n"
    stratified = compile_source(text, "p.dl")
    result = compile_source(text, "p.dl", upto="plan")
    assert type(result) is Stratified
    assert result.diagnostics == stratified.diagnostics
    assert not result.ok
    with pytest.raises(PlanningError):
        plan(result)


def test_the_plan_stage_plans_what_the_pipeline_stratified() -> None:
    stratified = compile_source(POLICY, "p.dl")
    assert isinstance(stratified, Stratified)
    planned = plan(stratified)
    assert planned.plan == compile_source(POLICY, "p.dl", upto="plan").plan
    assert plan(planned) is planned
    assert plan_of(stratified) == planned.plan


def test_plan_of_a_policy_with_errors_says_its_first_error() -> None:
    compilation = compile_source("Deny(a) :- Send(a), Missing(a), Gone(a).\n.input Send\n", "p.dl")
    with pytest.raises(PolicyError) as raised:
        plan_of(compilation)
    message = str(raised.value)
    assert message.startswith("p.dl:1:21: ")
    assert message.endswith("(and 1 more)")
    assert len(raised.value.diagnostics) == 2


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="the stages are parse, resolve, check, stratify, plan"):
        compile_source(POLICY, "p.dl", upto="evaluate")
