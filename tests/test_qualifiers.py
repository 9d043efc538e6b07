"""Relation qualifiers from Soufflé: ``eqrel`` (an equivalence relation) and ``choice-domain``
(one tuple per key). ``eqrel`` is checked against connected components computed here and
against clingo; ``choice-domain`` against the relation without it (from policyc and from
clingo): a subset, one tuple per key, the same keys, the same answer whatever the facts' order.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.formatter import format_source
from policyc.compiler.pipeline import compile_source, plan
from policyc.compiler.plan_read import from_data
from policyc.compiler.plan_write import to_data
from policyc.runtime.evaluator import CompiledPlan
from policyc.runtime.session_plan import SessionPlan

from .conftest import examples

EQREL = """
.decl link(a: number, b: number)
.input link
.decl same(a: number, b: number) eqrel
same(x, y) :- link(x, y).
.output same
"""

edges = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8)


def components(pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Every pair of values connected by the (undirected) links, each value with itself."""
    parent: dict[int, int] = {}

    def root(v: int) -> int:
        while parent.setdefault(v, v) != v:
            v = parent[v]
        return v

    for a, b in pairs:
        parent[root(a)] = root(b)
    return {(a, b) for a in parent for b in parent if root(a) == root(b)}


@examples(25, 300)
def test_an_eqrel_relation_is_the_equivalence_closure(examples: int) -> None:
    compilation = compile_source(EQREL)
    policy = policyc.load(EQREL)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(edges)
    def check(pairs: list[tuple[int, int]]) -> None:
        result = policy.evaluate({"link": [list(p) for p in pairs]})
        assert not result.errored
        assert result.relations["same"] == components(pairs)
        answer = solve_unique(compilation, to_clingo(compilation, {"link": set(pairs)}), {})
        assert answer["same"] == components(pairs)

    check()


def test_eqrel_facts_are_closed_too() -> None:
    result = policyc.load('.decl s(a: symbol, b: symbol) eqrel\ns("a", "b").\n.output s').evaluate({})
    assert result.relations["s"] == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}


CHOICE = """
.decl e(x: number, y: number)
.input e
.decl pick(x: number, y: number) {qualifier}
pick(x, y) :- e(x, y).
pick(x, y + 1) :- e(y, x), y < 3.
.output pick
"""


@examples(25, 300)
def test_a_choice_domain_keeps_one_tuple_per_key(examples: int) -> None:
    chosen = policyc.load(CHOICE.format(qualifier="choice-domain x"))
    plain = compile_source(CHOICE.format(qualifier=""))
    both = policyc.load(CHOICE.format(qualifier="choice-domain x, y"))

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(edges, st.randoms(use_true_random=False))
    def check(pairs: list[tuple[int, int]], shuffle: random.Random) -> None:
        unrestricted = solve_unique(plain, to_clingo(plain, {"e": set(pairs)}), {})["pick"]
        found = chosen.evaluate({"e": [list(p) for p in pairs]}).relations["pick"]
        assert found <= unrestricted
        assert {x for x, _ in found} == {x for x, _ in unrestricted}
        assert len({x for x, _ in found}) == len(found)  # one tuple per key
        shuffled = list(pairs)
        shuffle.shuffle(shuffled)
        assert chosen.evaluate({"e": [list(p) for p in shuffled]}).relations["pick"] == found
        two = both.evaluate({"e": [list(p) for p in pairs]}).relations["pick"]
        assert two <= unrestricted
        assert len({x for x, _ in two}) == len(two) == len({y for _, y in two})
        # every tuple left out shares a key with one kept (keys are kept as far as they can be)
        for x, y in unrestricted - two:
            assert any(x == a or y == b for a, b in two)

    check()


def test_the_first_round_deriving_a_key_decides_its_tuple() -> None:
    text = """
    .decl edge(a: number, b: number)
    edge(1, 2). edge(2, 3). edge(1, 3). edge(3, 4).
    .decl hop(n: number, d: number) choice-domain n
    hop(1, 0).
    hop(y, d + 1) :- hop(x, d), edge(x, y).
    .output hop
    """
    result = policyc.load(text).evaluate({})
    assert not result.errored
    # 3 is reached in round 1 (from 1) and round 2 (from 2): the first round's wins, and the
    # recursion ends although `hop` without the choice would hold several depths per node
    assert result.relations["hop"] == {(1, 0), (2, 1), (3, 1), (4, 2)}


def test_a_choice_recursion_terminates_where_the_plain_one_does_not() -> None:
    text = """
    .decl counter(n: number, k: number) choice-domain n
    counter(0, 0).
    counter(0, k + 1) :- counter(0, k).
    .output counter
    """
    assert policyc.load(text).evaluate({}).relations["counter"] == {(0, 0)}


def diagnostics(text: str) -> list[tuple[str, int, int, str]]:
    return [(d.code, d.span.line, d.span.column, d.message) for d in compile_source(text).diagnostics]


def test_malformed_qualifiers_are_located_errors() -> None:
    found = diagnostics(
        ".decl s(a: symbol, b: number) eqrel\n"
        ".decl t(a: symbol) eqrel\n"
        ".decl c(x: number, y: number) choice-domain z, (x, x)\n"
        ".decl i(x: number) inline eqrel\n"
        'c(1, 2). s("a", 1). t("a"). i(1).\n'
    )
    assert found == [
        ("PC107", 1, 1, "`eqrel` relation `s` must have two attributes of one type"),
        ("PC107", 2, 1, "`eqrel` relation `t` must have two attributes of one type"),
        ("PC107", 3, 45, "`z` is not an attribute of `c`"),
        ("PC107", 3, 49, "an attribute is named twice in one choice domain"),
        ("PC107", 4, 1, "`eqrel` relation `i` must have two attributes of one type"),
        ("PC107", 4, 1, "inline relation `i` cannot be `eqrel` or have a `choice-domain`"),
    ]


def test_qualifier_words_stay_ordinary_names_elsewhere() -> None:
    text = (
        ".decl eqrel(x: number)\neqrel(1).\n.decl choice(x: number)\nchoice(x) :- eqrel(x).\n.output choice"
    )
    assert policyc.load(text).evaluate({}).relations["choice"] == {(1,)}


def test_qualifiers_are_formatted_and_the_format_is_stable() -> None:
    text = ".decl c(x: number,y: symbol , z: number)  choice-domain x ,( y ,z )\n.decl s(a: symbol, b: symbol)   eqrel\n"
    once = format_source(text, "q.dl")
    assert (
        once
        == ".decl c(x: number, y: symbol, z: number) choice-domain x, (y, z)\n.decl s(a: symbol, b: symbol) eqrel\n"
    )
    assert format_source(once, "q.dl") == once


def test_plans_carry_choice_domains_and_sessions_recompute_them() -> None:
    text = CHOICE.format(qualifier="choice-domain x, (x, y)")
    evaluation = plan(compile_source(text)).plan
    spec = evaluation.relations[evaluation.relation_index()["pick"]]
    assert spec.choice == ((0,), (0, 1))
    assert from_data(to_data(evaluation)) == evaluation
    sessions = SessionPlan(evaluation, CompiledPlan(evaluation))
    assert evaluation.relation_index()["pick"] not in sessions.incremental
