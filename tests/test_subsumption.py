"""Subsumption rules (Soufflé's ``r(a) <= r(b) :- body.``): a tuple of ``r`` dominated by
another, distinct, tuple of ``r`` is not in the result. Shortest distances are checked against
Dijkstra's algorithm computed here, on random graphs with cycles (where the recursion without
subsumption never ends); the greatest value per key against Python's ``max``; sessions against
a full evaluation; diagnostics, formatting, plans and bundles, the language server, the
analyzer's per-rule refusal.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.deep import deep_findings
from policyc.compiler.formatter import format_source
from policyc.compiler.pipeline import compile_source, plan
from policyc.compiler.plan_read import from_data
from policyc.compiler.plan_write import to_data
from policyc.lsp import document
from policyc.lsp.hover import describe
from policyc.lsp.navigate import definition, references
from policyc.lsp.outline import outline
from policyc.runtime.bundle import build_bundle
from policyc.runtime.evaluator import CompiledPlan
from policyc.runtime.limits import Limits
from policyc.runtime.session_plan import SessionPlan

from .conftest import examples

DIST = """
.decl edge(x: number, y: number, w: number)
.input edge
.decl dist(x: number, d: number)
dist(0, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 <= d1.
.output dist
"""

graphs = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 6)), max_size=12)


def dijkstra(edges: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    """The length of a shortest path from node 0 to every node it reaches."""
    best = {0: 0}
    queue = [(0, 0)]
    while queue:
        d, x = heapq.heappop(queue)
        if d > best[x]:
            continue
        for a, b, w in edges:
            if a == x and d + w < best.get(b, d + w + 1):
                best[b] = d + w
                heapq.heappush(queue, (d + w, b))
    return set(best.items())


@examples(30, 300)
def test_shortest_distances_are_dijkstras(examples: int) -> None:
    policy = policyc.load(DIST)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs)
    def check(edges: list[tuple[int, int, int]]) -> None:
        result = policy.evaluate({"edge": [list(e) for e in edges]})
        assert not result.errored, result.errors
        assert result.relations["dist"] == dijkstra(edges)

    check()


def test_a_cycle_ends_with_subsumption_and_fails_closed_without() -> None:
    cycle = {"edge": [[0, 1, 1], [1, 2, 1], [2, 0, 1]]}
    assert policyc.load(DIST).evaluate(cycle).relations["dist"] == {(0, 0), (1, 1), (2, 2)}
    plain = DIST.replace("dist(x, d1) <= dist(x, d2) :- d2 <= d1.", "")
    result = policyc.load(plain, limits=Limits(max_facts=500, max_seconds=10)).evaluate(cycle)
    assert result.errored
    assert not result.decide(0).allowed  # an error is a denial


BEST = """
.decl score(k: symbol, v: number)
.input score
.decl best(k: symbol, v: number)
best(k, v) :- score(k, v).
best(k, v1) <= best(k, v2) :- v1 < v2.
.output best
"""


@examples(30, 300)
def test_a_non_recursive_subsumption_keeps_the_greatest_per_key(examples: int) -> None:
    policy = policyc.load(BEST)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(-3, 3)), max_size=10))
    def check(scores: list[tuple[str, int]]) -> None:
        result = policy.evaluate({"score": [list(s) for s in scores]})
        greatest = {k: max(v for key, v in scores if key == k) for k, _ in scores}
        assert result.relations["best"] == set(greatest.items())

    check()


def test_a_tuple_never_subsumes_itself_and_mutual_dominators_both_go() -> None:
    text = """
    .decl m(x: number)
    m(1). m(4). m(2).
    m(x) <= m(y) :- x <= y.
    .decl pair(k: symbol, v: number)
    pair("a", 1). pair("a", 2). pair("b", 3).
    pair(k, a) <= pair(k, b) :- a != b.
    .output m, pair
    """
    result = policyc.load(text).evaluate({})
    assert result.relations["m"] == {(4,)}  # `4 <= 4` holds, but 4 is not dominated by another tuple
    # ("a", 1) and ("a", 2) dominate each other: both are dropped, as Soufflé deletes both
    assert result.relations["pair"] == {("b", 3)}


def test_a_disjunctive_body_and_conditions_on_other_relations() -> None:
    text = """
    .decl offer(tool: symbol, price: number, vendor: symbol)
    .decl trusted(vendor: symbol)
    trusted("x").
    offer("t", 5, "x"). offer("t", 3, "y"). offer("t", 4, "x"). offer("u", 9, "y").
    offer(t, p1, v1) <= offer(t, p2, v2) :- trusted(v2), p2 < p1 ; !trusted(v1), trusted(v2).
    .output offer
    """
    result = policyc.load(text).evaluate({})
    # ("t", 5, "x") by ("t", 4, "x"); ("t", 3, "y") by either trusted offer; "u" has no rival
    assert result.relations["offer"] == {("t", 4, "x"), ("u", 9, "y")}


def located(text: str) -> list[tuple[str, int, int, str]]:
    return [
        (d.code, d.span.line, d.span.column, d.message)
        for d in compile_source(text).diagnostics
        if d.severity.name == "ERROR"
    ]


def test_malformed_subsumption_rules_are_located_errors() -> None:
    found = located(
        ".decl r(x: symbol, d: number)\n"
        ".decl q(x: symbol, d: number)\n"
        ".decl e(x: symbol, d: number)\n"
        ".input e\n"
        'r("a", 1). q("a", 1).\n'
        "r(x, a) <= q(x, b) :- a < b.\n"
        "e(x, a) <= e(x, b) :- a < b.\n"
        "r(x, a) <= r(x, b, c) :- a < b, c > 0.\n"
        "r(x, a) <= r(x, b) :- a < z.\n"
        ".decl s(x: number)\n"
        "s(x) <= s(y) :- x < y.\n"
        "Deny(x) <= Deny(y) :- x < y.\n"
        'Deny("a").\n'
    )
    assert sorted(found) == [
        ("PC102", 8, 12, "`r` has 2 arguments but is given 3 here"),
        ("PC104", 9, 27, "variable `z` in a comparison is not bound"),
        ("PC112", 6, 12, "a subsumption rule compares tuples of one relation: `r` is dominated by `q`"),
        ("PC112", 7, 1, "`e` is an input relation: its facts are kept as given"),
        ("PC112", 11, 1, "no rule or fact derives `s`: a subsumption rule has no tuple of it to drop"),
        ("PC112", 12, 1, "`Deny` is a verdict: a subsumption rule cannot drop its facts"),
    ]


def test_subsumption_rules_are_formatted_and_the_format_is_stable() -> None:
    text = (
        "dist( x,d1 )<=dist(x , d2):-d2<=d1 .\n"
        '@id("cheapest")\noffer(t, p1) <= offer(t, p2) :- p2 < p1 ; p2 = p1, t != "k".\n'
    )
    once = format_source(text, "s.dl")
    assert once == (
        "dist(x, d1) <= dist(x, d2) :- d2 <= d1.\n"
        '@id("cheapest")\noffer(t, p1) <= offer(t, p2) :- p2 < p1 ; p2 = p1, t != "k".\n'
    )
    assert format_source(once, "s.dl") == once


def test_plans_and_bundles_carry_subsumption_rules_and_sessions_recompute_them(tmp_path: Path) -> None:
    compilation = plan(compile_source(DIST))
    evaluation = compilation.plan
    dist = evaluation.relation_index()["dist"]
    (stratum,) = [s for s in evaluation.strata if dist in s.relations]
    (rule,) = stratum.subsumptions
    assert rule.head == dist and len(rule.head_args) == 4
    assert all(r.head != dist or len(r.head_args) == 2 for r in (*stratum.rules, *stratum.delta_rules))
    assert from_data(to_data(evaluation)) == evaluation
    assert dist not in SessionPlan(evaluation, CompiledPlan(evaluation)).incremental
    data = build_bundle(compilation, evaluation)
    assert json.loads(data)["plan"]["strata"] == to_data(evaluation)["strata"]
    bundle = tmp_path / "dist.bundle"
    bundle.write_bytes(data)
    edges = {"edge": [[0, 1, 4], [0, 2, 1], [2, 1, 1], [1, 3, 1], [3, 0, 1]]}
    from_bundle = policyc.load(bundle).evaluate(edges)
    assert from_bundle.relations == policyc.load(DIST).evaluate(edges).relations
    assert from_bundle.relations["dist"] == {(0, 0), (1, 2), (2, 1), (3, 3)}


SESSION = """
.decl edge(x: number, y: number, w: number)
.input edge
.decl dist(x: number, d: number)
dist(0, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 <= d1.
Deny(x) :- edge(_, x, _), dist(x, d), d > 2.
Allow(x) :- edge(_, x, _), dist(x, d), d <= 1.
"""


@examples(10, 100)
def test_sessions_decide_as_a_full_evaluation(examples: int) -> None:
    policy = policyc.load(SESSION)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(graphs, min_size=1, max_size=3))
    def check(batches: list[list[tuple[int, int, int]]]) -> None:
        session = policyc.Monitor(policy).session("s")
        seen: list[list[int]] = []
        for batch in batches:
            session.add_facts({"edge": [list(e) for e in batch]})
            seen.extend(list(e) for e in batch)
            scratch = policy.evaluate({"edge": seen})
            for action in {e[1] for e in seen}:
                mine, theirs = session.decide(action), scratch.decide(action)
                assert (mine.allowed, mine.errored) == (theirs.allowed, theirs.errored), (seen, action)

    check()


def test_the_language_server_reads_a_subsumption_rule() -> None:
    text = DIST
    snapshot = document.build(text, "/tmp/dist.dl", 1)
    rule_at = text.index("dist(x, d1) <=")
    symbols = {s.name: s for s in outline(snapshot)}
    details = [c.detail for c in symbols["dist"].children or []]
    assert "subsumption" in details
    dominating = snapshot.index.at(snapshot.path, text.index("dist(x, d2)"))
    assert dominating is not None
    hover = describe(snapshot, dominating)
    assert hover is not None and "dist" in hover
    # the declaration and the rules deriving it, not the subsumption rule (line 7)
    assert [t.span.line for t in definition(snapshot, dominating)] == [4, 5, 6]
    uses = references(snapshot, dominating, include_declaration=False)
    assert len({o.span for o in uses}) == len(uses)  # each written atom once
    assert {o.span.start for o in uses} >= {rule_at, text.index("dist(x, d2)")}
    variable = snapshot.index.at(snapshot.path, text.index("d2 <= d1") + 7)
    assert variable is not None and [t.span.start for t in definition(snapshot, variable)] == [
        text.index("d1) <=")
    ]


def test_the_analyzer_says_it_cannot_search_each_rule_it_cannot_translate() -> None:
    text = SESSION
    findings = deep_findings(compile_source(text))
    unsearched = sorted(d.span.line for d in findings if d.code == "PC308")
    # the rules of `dist` (a fact is translated as it is): the recursive rule and the subsumption
    assert unsearched == [6, 7]


def test_the_plan_shown_says_what_a_subsumption_rule_drops() -> None:
    from policyc.compiler.show import show_plan

    lines = show_plan(compile_source(DIST))
    at = lines.index("    drop dist(x, d1) dominated by dist(x, d2)")
    assert lines[at - 1] == "    filter d2 <= d1"
    assert any(line.endswith("(subsumption, after each round)") for line in lines[:at])


def test_why_not_names_the_tuple_that_drops_a_fact() -> None:
    result = policyc.load(DIST).evaluate({"edge": [[0, 1, 5], [0, 2, 1], [2, 1, 1]]})
    assert result.relations["dist"] == {(0, 0), (1, 2), (2, 1)}
    dropped = result.why_not("dist", (1, 5))
    assert not dropped.holds
    assert dropped.note is not None and "dist(0, 0)" not in dropped.note
    assert dropped.note.startswith("it is dropped when derived: dist(1, 2) dominates it")
    assert result.why_not("dist", (1, 1)).note is None  # nothing of `dist` dominates it
    assert result.relations["dist"] == {(0, 0), (1, 2), (2, 1)}  # the question changed nothing


def test_no_proof_counts_on_a_tuple_a_subsumption_rule_drops() -> None:
    # without the subsumption rule every send_email call would be denied (always-deny); with
    # it, `Mark(a, 1)` is dropped and none is
    text = """
    .import events
    Mark(a, 1) :- ToolCall(a, "send_email").
    Mark(a, 2) :- ToolCall(a, "send_email").
    Mark(a, x) <= Mark(a, y) :- x < y.
    Deny(a) :- ToolCall(a, "send_email"), Mark(a, 1).
    """
    assert not policyc.load(text).evaluate({"ToolCall": [["c1", "send_email"]]}).relations["Deny"]
    findings = deep_findings(compile_source(text))
    assert sorted((d.code, d.span.line) for d in findings) == [("PC308", 3), ("PC308", 4), ("PC308", 5)]


def test_a_relation_read_with_bound_arguments_is_not_made_demand_driven() -> None:
    """`dist` is recursive and read with its first argument bound, which would make it
    demand-driven; a tuple is dropped for any other tuple, so it is computed in full (and
    what its subsumption rule reads with it)."""
    text = (
        ".decl edge(x: symbol, y: symbol, w: number)\n.input edge\n.decl dist(x: symbol, d: number)\n"
        'dist("a", 0).\ndist(y, d + w) :- dist(x, d), edge(x, y, w).\n'
        "dist(x, d1) <= dist(x, d2) :- d2 <= d1.\n.decl Ask(x: symbol)\n.input Ask\n"
        "Deny(x) :- Ask(x), dist(x, d), d > 5.\n"
    )
    policy = policyc.load_source(text)
    assert all(r.magic is None and "@" not in r.name for r in policy.plan.relations)
    facts = {"edge": [["a", "b", 3], ["b", "c", 4], ["c", "a", 1], ["a", "c", 9]], "Ask": [["c"], ["b"]]}
    result = policy.evaluate(facts)
    assert result.relation("dist") == {("a", 0), ("b", 3), ("c", 7)}
    assert result.relation("Deny") == {("c",)}
