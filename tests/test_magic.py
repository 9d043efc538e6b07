"""Demand-driven evaluation (magic sets, compiler/magic.py): where the planner applies it, that
every relation but the demand-driven ones is what the plain evaluation and clingo derive, that
same-generation on a large tree does little work, and how plans show and carry it."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler import plan as p
from policyc.compiler.magic import NO_MAGIC, Options, is_magic
from policyc.compiler.pipeline import compile_source
from policyc.compiler.plan_read import from_data
from policyc.compiler.plan_write import to_data
from policyc.compiler.planner import build_plan
from policyc.compiler.show import show_plan
from policyc.runtime.policy import Policy

from .conftest import examples
from .programs import FUNCTOR_LINES, FUNCTORS, OracleCase, demand_block

SG = """
.decl par(c: symbol, p: symbol)
.decl Ask(q: symbol)
.input par, Ask
.decl sg(x: symbol, y: symbol)
sg(x, x) :- par(x, _).
sg(x, y) :- par(x, xp), sg(xp, yp), par(y, yp).
Deny(y) :- Ask(q), sg(q, y).
"""


def plan_of(text: str, magic: Options | None = None) -> p.Plan:
    compilation = compile_source(text, "policy.dl")
    assert compilation.ok, [d.message for d in compilation.diagnostics]
    return build_plan(compilation, magic)


def demand_driven(plan: p.Plan) -> dict[str, str]:
    return {r.name: r.adornment for r in plan.relations if r.magic is not None}


def tree(nodes: int) -> list[list[str]]:
    """A complete ternary tree: node i's parent is (i - 1) // 3."""
    return [[f"n{i}", f"n{(i - 1) // 3}"] for i in range(1, nodes)]


def depth(i: int) -> int:
    return 0 if i == 0 else 1 + depth((i - 1) // 3)


def ancestor(i: int, at: int) -> int:
    """Node i's ancestor at depth ``at``."""
    while depth(i) > at:
        i = (i - 1) // 3
    return i


def test_same_generation_on_a_large_tree_derives_only_what_is_asked() -> None:
    plan = plan_of(SG)
    assert demand_driven(plan) == {"sg": "bf"}
    nodes = 3000
    result = Policy(plan).evaluate({"par": tree(nodes), "Ask": [["n17"]]})
    assert not result.errored, result.errors
    # hand-derived: the nodes as deep as n17 with an ancestor in common that has a parent (the
    # root has none, so it is no one's common ancestor): those below n17's ancestor at depth 1
    expected = {
        (f"n{i}",) for i in range(nodes) if depth(i) == depth(17) and ancestor(i, 1) == ancestor(17, 1)
    }
    assert len(expected) == 9
    assert result.relations["Deny"] == expected
    # the work: sg holds n17's generation and its ancestors' (1 + 3 + 9 + 27 facts at most),
    # where the full relation has over a million facts
    assert len(result.relations["sg"]) <= 1 + 3 + 9 + 27
    assert result.relations["magic@sg@bf"] == {("n17",), ("n5",), ("n1",), ("n0",)}


def test_demand_driven_answers_equal_the_full_evaluation() -> None:
    facts = {"par": tree(200), "Ask": [["n17"], ["n40"], ["nowhere"]]}
    magic = Policy(plan_of(SG)).evaluate(facts)
    full = Policy(plan_of(SG, NO_MAGIC)).evaluate(facts)
    assert magic.relations["Deny"] == full.relations["Deny"] and magic.relations["Deny"]
    assert magic.relations["sg"] < full.relations["sg"]
    assert magic.decide("n16").allowed is full.decide("n16").allowed is False


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (".output sg", "an output is observed in full"),
        ("All(x, y) :- sg(x, y).", "read with no argument bound"),
        ('Other(y) :- par(y, _), !sg("n1", y).', "read under negation"),
        ("Count(n) :- Ask(q), n = count : { sg(q, _) }.", "read inside an aggregate"),
        ("Up(x) :- Ask(y), sg(x, y).", "bound at different arguments"),
    ],
)
def test_where_it_does_not_pay_relations_are_computed_in_full(change: str, why: str) -> None:
    assert demand_driven(plan_of(SG + change + "\n")) == {}, why


def test_constants_and_expressions_seed_the_demand() -> None:
    text = SG.replace(
        "Deny(y) :- Ask(q), sg(q, y).", 'Deny(y) :- sg("n4", y).\nCheck(y) :- Ask(y), sg(y, y).'
    )
    plan = plan_of(text)
    assert demand_driven(plan) == {"sg": "bf"}
    facts = {"par": tree(60), "Ask": [["n7"]]}
    magic, full = Policy(plan).evaluate(facts), Policy(plan_of(text, NO_MAGIC)).evaluate(facts)
    for name in ("Deny", "Check"):
        assert magic.relations[name] == full.relations[name] and magic.relations[name]


def test_a_transformation_that_would_recurse_through_negation_is_not_applied() -> None:
    # the demand for sg would depend on `not Bad(q)`, and Bad on sg
    text = SG.replace(
        "Deny(y) :- Ask(q), sg(q, y).",
        'Deny(y) :- Ask(q), !Bad(q), sg(q, y).\nBad(x) :- Ask(x), sg(x, "n5").',
    )
    plan = plan_of(text)
    assert demand_driven(plan) == {}
    facts = {"par": tree(40), "Ask": [["n17"], ["n20"]]}
    full = Policy(plan_of(text, NO_MAGIC)).evaluate(facts).relations["Deny"]
    assert Policy(plan).evaluate(facts).relations["Deny"] == full


def test_observed_relations_and_the_opt_out() -> None:
    assert demand_driven(plan_of(SG, Options(observed=frozenset({"sg"})))) == {}
    assert demand_driven(plan_of(SG, NO_MAGIC)) == {}


def test_the_plan_shows_demand_driven_relations_and_their_magic_rules() -> None:
    compilation = compile_source(SG, "policy.dl")
    lines = show_plan(compilation)
    assert "  demand-driven: sg (adornment bf: argument 1 bound), demanded values in magic@sg@bf" in lines
    assert "  rule magic@sg@bf<-Deny@policy.dl:8#2 [policy.dl:8] (magic rule, base)" in lines
    assert "    emit magic@sg@bf(q)" in lines
    # each rule of sg starts from the demanded values (the delta variant from its new facts)
    start = lines.index("  rule sg@policy.dl:6 (base)")
    assert lines[start + 1] == "    scan magic@sg@bf(x)"
    assert not any("magic" in line for line in show_plan(compilation, no_magic=True))


def test_bundled_plans_carry_the_transformation() -> None:
    plan = plan_of(SG)
    data = json.loads(json.dumps(to_data(plan)))
    assert from_data(data) == plan
    sg = next(r for r in data["relations"] if r["name"] == "sg")
    assert sg["adornment"] == "bf" and data["relations"][sg["magic"]]["name"] == "magic@sg@bf"
    for bad in ("fff", "ff", "bx", ""):
        broken = json.loads(json.dumps(data))
        next(r for r in broken["relations"] if r["name"] == "sg")["adornment"] = bad
        with pytest.raises(p.PlanError):
            from_data(broken)
    broken = json.loads(json.dumps(data))
    next(r for r in broken["relations"] if r["name"] == "sg")["magic"] = len(data["relations"])
    with pytest.raises(p.PlanError):
        from_data(broken)
    plain = to_data(plan_of(SG, NO_MAGIC))
    assert all("adornment" not in r and "magic" not in r for r in plain["relations"])


def test_explanations_go_through_demand_driven_relations() -> None:
    facts = {"par": tree(40), "Ask": [["n17"]]}
    result = Policy(plan_of(SG)).evaluate(facts)
    tree_ = result.why("Deny", ("n20",))
    assert tree_ is not None
    assert sorted(c.fact for c in tree_.children) == ['Ask("n17")', 'sg("n17", "n20")']
    assert not any(is_magic(r.head) for r in [tree_, *tree_.children] if hasattr(r, "head"))


def test_the_cli_prints_relations_in_full(tmp_path, cli) -> None:
    policy = tmp_path / "sg.dl"
    policy.write_text(SG, "utf-8")
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"par": tree(13), "Ask": [["n4"]]}), "utf-8")
    run = cli("eval", str(policy), "--facts", str(facts), "--format", "json")
    relations = json.loads(run.stdout)["relations"]
    full = Policy(plan_of(SG, NO_MAGIC)).evaluate(json.loads(facts.read_text("utf-8")))
    assert {"sg", "Deny"} <= set(relations) and not any(is_magic(name) for name in relations)
    assert len(relations["sg"]) == len(full.relations["sg"])
    run = cli("eval", str(policy), "--facts", str(facts), "--format", "json", "--query", "Deny")
    assert json.loads(run.stdout)["relations"]["Deny"] == [["n4"], ["n5"], ["n6"]]
    shown = cli("check", "--show", "plan", str(policy))
    assert "demand-driven: sg" in shown.stdout
    assert "magic" not in cli("check", "--show", "plan", "--no-magic", str(policy)).stdout


@st.composite
def demand_cases(draw) -> OracleCase:
    facts: dict[str, list[tuple]] = {}
    lines = draw(demand_block(facts))
    return OracleCase("\n".join(FUNCTOR_LINES + lines) + "\n", facts)


def agree(case: OracleCase) -> None:
    compilation = compile_source(case.text, "random.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    facts = {name: [list(row) for row in rows] for name, rows in case.facts.items()}
    magic = Policy(build_plan(compilation), FUNCTORS)
    mine = magic.evaluate(facts)
    plain = Policy(build_plan(compilation, NO_MAGIC), FUNCTORS).evaluate(facts)
    assert not mine.errored and not plain.errored, (mine.errors, plain.errors)
    expected = solve_unique(compilation, to_clingo(compilation, case.facts), FUNCTORS)
    for relation in magic.plan.relations:
        name = relation.name
        if is_magic(name):
            continue
        assert plain.relations[name] == expected[name], (name, case.text, case.facts)
        if relation.magic is None:
            assert mine.relations[name] == expected[name], (name, case.text, case.facts)
        else:
            assert mine.relations[name] <= expected[name], (name, case.text, case.facts)


@examples(60, 600)
def test_demand_driven_programs_agree_with_plain_evaluation_and_clingo(examples: int) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(demand_cases())(agree)
    )()


def test_the_random_demand_programs_are_transformed() -> None:
    """The templates of tests/programs.py give demand-driven relations (else the property
    above would test nothing)."""
    from .programs import DEMANDED, QUERIES

    text = "\n".join(
        [
            ".decl DEdge(a: number, b: number)",
            ".decl DSeed(a: number)",
            ".input DEdge, DSeed",
            *(t.format(n=f"Dm{i}") for i, t in enumerate(DEMANDED)),
            QUERIES[0].format(q="Dq0", n="Dm0"),
            *(QUERIES[0].format(q=f"Dq{i}", n=f"Dm{i}") for i in range(len(DEMANDED))),
            QUERIES[5].format(q="Dq9", n="Dm1", m="Dm2"),
            ".output " + ", ".join([f"Dq{i}" for i in range(len(DEMANDED))] + ["Dq9"]),
        ]
    )
    found = demand_driven(plan_of("\n".join(FUNCTOR_LINES) + "\n" + text))
    # all but the symmetric closure (its rule `x(a, b) :- x(b, a)` binds the other argument)
    assert set(found) == {f"Dm{i}" for i in range(len(DEMANDED))} - {"Dm3"} | {"Dm4Odd"}, found


def test_a_session_follows_the_demand_as_facts_arrive() -> None:
    import policyc

    policy = policyc.load(SG)
    plain = policyc.load(SG, magic=NO_MAGIC)
    assert demand_driven(policy.plan) == {"sg": "bf"}
    session = policyc.Monitor(policy).session("s")
    seen: dict[str, list] = {"par": [], "Ask": []}
    edges = tree(40)
    batches = [{"par": edges[:10]}, {"Ask": [["n5"]]}, {"par": edges[10:]}, {"Ask": [["n30"], ["n2"]]}]
    for batch in batches:
        session.add_facts(batch)
        for name, rows in batch.items():
            seen[name].extend(rows)
        named = {value for rows in seen.values() for row in rows for value in row}
        for node in sorted({"n4", "n6", "n13", "n16", "n31", "n39"} & named):  # a session decides these
            assert session.decide(node).allowed is plain.evaluate(seen).decide(node).allowed, (batch, node)
    # hand-derived: n4 is of n5's generation (under n1), n29 of n30's (under n2), n31 is not
    assert not session.decide("n4").allowed and not session.decide("n29").allowed
    assert session.decide("n31").allowed


def test_the_corpus_program_is_demand_driven() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parent / "souffle" / "demand.dl").read_text("utf-8")
    assert demand_driven(plan_of(text)) == {"reach": "bf", "sg": "bf"}


def test_coverage_names_the_policys_own_rules(tmp_path, cli) -> None:
    (tmp_path / "sg.dl").write_text(SG, "utf-8")
    (tmp_path / "sg_test.toml").write_text(
        'policy = "sg.dl"\n\n[[test]]\nname = "n5 is of n4\'s generation"\n'
        'facts = { par = [["n4", "n1"], ["n5", "n1"], ["n1", "n0"]], Ask = [["n4"]] }\ndeny = ["n5"]\n',
        "utf-8",
    )
    run = cli("test", "--coverage", "--format", "json", str(tmp_path))
    assert run.status == 0, run.stdout + run.stderr
    rules = json.loads(run.stdout)["coverage"]["rules"]
    assert sorted((r["line"], r["id"], r["fired"]) for r in rules) == [
        (6, "sg@sg.dl:6", True),
        (7, "sg@sg.dl:7", True),
        (8, "Deny@sg.dl:8", True),
    ]
