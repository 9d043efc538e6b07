"""The evaluator against clingo (through the analyzer's translation, policyc.analyzer.asp): on random stratified programs with random facts, every
relation policyc derives equals the one in clingo's unique answer set.

Relations evaluated demand-driven (magic sets) hold only the facts asked for: each one
clingo derives. 200 programs run by default; the slow suite (`pytest -m slow`) runs 2,500.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.magic import is_magic
from policyc.compiler.pipeline import compile_source

from .conftest import examples
from .programs import FUNCTORS, OracleCase, oracle_programs


def check_against_clingo(case: OracleCase) -> None:
    compilation = compile_source(case.text, "random.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    policy = policyc.load(case.text, FUNCTORS)
    result = policy.evaluate({name: [list(row) for row in rows] for name, rows in case.facts.items()})
    assert not result.errored, result.errors
    expected = solve_unique(compilation, to_clingo(compilation, case.facts), FUNCTORS)
    mine = result.relations
    for relation in policy.plan.relations:
        if is_magic(relation.name):
            continue
        if relation.magic is not None:  # demand-driven: the facts asked for, each a true one
            assert mine[relation.name] <= expected[relation.name], (relation.name, case.text, case.facts)
        elif not relation.inline:
            assert mine[relation.name] == expected[relation.name], (relation.name, case.text, case.facts)


@examples(200, 2500)
def test_random_programs_agree_with_clingo(examples: int) -> None:
    run = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(oracle_programs())(check_against_clingo)
    )
    run()
