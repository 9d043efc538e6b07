"""Rules far larger than Python lets one function nest: a rule joining 30 relations, a rule of
150 conditions, aggregates over long bodies. They check, compile, load, evaluate and decide
(reasons, explanations, monitor sessions), and agree with clingo.

Code generation writes a rule as nested loops and tests; Python refuses a function nested 100
levels deep or with 20 nested loops, so a deep body goes on in helper functions.
"""

from __future__ import annotations

import random

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.pipeline import compile_source

from .conftest import run_policyc
from .programs import FUNCTORS


def agrees_with_clingo(text: str, facts: dict[str, list[tuple]]) -> policyc.runtime.policy.Result:
    compilation = compile_source(text, "wide.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    policy = policyc.load(text, FUNCTORS)
    result = policy.evaluate({name: [list(row) for row in rows] for name, rows in facts.items()})
    assert not result.errored, result.errors
    expected = solve_unique(compilation, to_clingo(compilation, facts), FUNCTORS)
    for relation in policy.plan.relations:
        if not relation.inline:
            assert result.relations[relation.name] == expected[relation.name], relation.name
    return result


def session_agrees(text: str, facts: dict[str, list[tuple]]) -> None:
    """A monitor session given the facts one relation at a time decides every value they
    name as the evaluation does."""
    actions = sorted({value for rows in facts.values() for row in rows for value in row})
    policy = policyc.load(text, FUNCTORS)
    result = policy.evaluate({name: [list(row) for row in rows] for name, rows in facts.items()})
    session = policyc.Monitor(policy).session("s")
    for name, rows in facts.items():
        session.add_facts({name: [list(row) for row in rows]})
    for action in actions:
        mine, expected = session.decide(action), result.decide(action)
        assert (mine.allowed, mine.errored) == (expected.allowed, expected.errored), action
        assert {r.facts for r in mine.reasons} == {r.facts for r in expected.reasons}, action


# ---------------------------------------------------------------------------- 30 relations

JOINED = 30


def chain_policy(n: int = JOINED) -> str:
    lines = [f".decl R{i}(x: number, y: number)" for i in range(n)]
    lines.append(".input " + ", ".join(f"R{i}" for i in range(n)))
    body = ", ".join(f"R{i}(x{i}, x{i + 1})" for i in range(n))
    lines.append(f'@id("chain") @message("{{x0}} reaches {{x{n}}}")')
    lines.append(f"Deny(x0) :- {body}, x{n} > x0.")
    # the same body, recursively: each link of the chain may come from the one before
    lines.append(f"Reach(x0, x{n}) :- {body}.")
    lines.append(f"Reach(x, z) :- Reach(x, y), R0(y, z), {', '.join(f'R{i}(z, _)' for i in range(1, 4))}.")
    lines.append(".output Reach")
    return "\n".join(lines) + "\n"


def chain_facts(n: int = JOINED, seed: int = 7) -> dict[str, list[tuple]]:
    rng = random.Random(seed)
    facts: dict[str, list[tuple]] = {}
    for i in range(n):
        rows = {(v, v + 1) for v in range(4)} | {(rng.randrange(6), rng.randrange(6)) for _ in range(4)}
        facts[f"R{i}"] = sorted(rows)
    return facts


def test_a_rule_joining_30_relations_agrees_with_clingo() -> None:
    result = agrees_with_clingo(chain_policy(), chain_facts())
    assert (0,) in result.relation("Deny")
    decision = result.decide(0)
    assert not decision.allowed and decision.reasons[0].rule == "chain"
    assert len(decision.reasons[0].facts) == JOINED
    assert decision.explain() is not None


def test_a_rule_joining_30_relations_in_a_session() -> None:
    session_agrees(chain_policy(), chain_facts())


def test_a_rule_joining_30_relations_checks_compiles_and_shows_its_plan(tmp_path) -> None:
    path = tmp_path / "chain.dl"
    path.write_text(chain_policy(), "utf-8")
    shown = run_policyc("check", str(path), "--show", "plan")
    assert shown.status == 0, shown.stderr
    assert "R29" in shown.stdout
    bundle = tmp_path / "chain.bundle"
    compiled = run_policyc("compile", str(path), "-o", str(bundle))
    assert compiled.status == 0, compiled.stderr
    facts = {name: [list(row) for row in rows] for name, rows in chain_facts().items()}
    assert (0,) in policyc.load(bundle).evaluate(facts).relation("Deny")


# -------------------------------------------------------------------------- 150 conditions

CONDITIONS = 150


def long_policy(n: int = CONDITIONS) -> str:
    """A rule of ``n`` conditions of every kind: atoms (scanned and checked), negations,
    comparisons, computed values, functor tests and calls."""
    conditions = ["N(x, y)", "M(y)", "x != 3"]
    computed = ["x", "y"]  # variables holding numbers, the latest last
    seen = []  # variables bound by scanning an atom
    i = 0
    while len(conditions) < n:
        kind = i % 6
        if kind == 0:
            conditions.append(f"x + {i} > y - {i + 1}")
        elif kind == 1:
            conditions.append(f"c{i} = {computed[-1]} + inc({i % 3})")
            computed.append(f"c{i}")
        elif kind == 2:
            conditions.append(f"not M({computed[-1]} + 100)")
        elif kind == 3:
            conditions.append("N(x, y)")
        elif kind == 4:
            conditions.append(f"{computed[-1]} >= {computed[-2]}")
        elif i % 12 == 5:
            conditions.append(f"Next({seen[-1] if seen else 'y'}, w{i})")
            seen.append(f"w{i}")
        else:
            conditions.append(f"{seen[-1]} != {i + 1000}")
        i += 1
    text = """
        .decl N(x: number, y: number)
        .decl M(x: number)
        .decl Next(x: number, y: number)
        .input N, M, Next
        .functor inc(x: number): number
    """
    return (
        text
        + f'@id("long") Deny(x) :- {", ".join(conditions)}.\nLong(x, y) :- {", ".join(conditions)}.\n.output Long\n'
    )


def long_facts() -> dict[str, list[tuple]]:
    rng = random.Random(3)
    rows = {(rng.randrange(8), rng.randrange(8)) for _ in range(24)} | {(v, v) for v in range(8)}
    return {
        "N": sorted(rows),
        "M": [(v,) for v in range(0, 8, 2)],
        "Next": [(v, (v + 1) % 8) for v in range(8)],  # one value each: the rule stays small
    }


def test_a_rule_of_150_conditions_agrees_with_clingo() -> None:
    text = long_policy()
    assert text.count(",") >= CONDITIONS - 1
    result = agrees_with_clingo(text, long_facts())
    assert result.relation("Deny")  # the rule fires for some values, and not for others
    assert len(result.relation("Deny")) < 8


def test_a_rule_of_150_conditions_in_a_session() -> None:
    session_agrees(long_policy(), long_facts())


def test_an_aggregate_over_a_long_body_agrees_with_clingo() -> None:
    n = 24
    lines = [f".decl R{i}(x: number, y: number)" for i in range(n)]
    lines.append(".input " + ", ".join(f"R{i}" for i in range(n)))
    body = ", ".join(f"R{i}(x{i}, x{i + 1})" for i in range(1, n))
    lines.append(f"Paths(x, c) :- R0(x, _), c = count : {{ R0(x, x1), {body} }}.")
    lines.append(f"Longest(x, m) :- R0(x, _), m = max x{n} : {{ R0(x, x1), {body} }}.")
    lines.append(".output Paths, Longest")
    result = agrees_with_clingo("\n".join(lines) + "\n", chain_facts(n, seed=11))
    assert any(c > 0 for _, c in result.relation("Paths"))


def test_a_long_rule_over_implicit_dependencies_in_a_session() -> None:
    # events without `deps` depend on every earlier one: the session drives the rule from the
    # new event, and checks the 25 atoms after `DependsOn` in a function of their own
    body = ", ".join(f"Label(d, l{i})" for i in range(25))
    policy = policyc.load(
        f'.import events\n@id("deep") Deny(a) :- Action(a), DependsOn(a, d), {body}, l0 = "x".\n'
    )
    session = policyc.Monitor(policy).session("s")
    for i in range(5):
        session.record({"id": f"r{i}", "kind": "tool_result", "labels": ["y"]})
    assert session.authorize({"id": "a1", "kind": "tool_call", "tool": "t"}).allowed
    session.record({"id": "r5", "kind": "tool_result", "labels": ["x"]})
    decision = session.authorize({"id": "a2", "kind": "tool_call", "tool": "t"})
    assert not decision.allowed and not decision.errored and decision.reasons[0].rule == "deep"
    assert not session.sticky
