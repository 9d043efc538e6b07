"""Soufflé programs that policyc must evaluate as Soufflé does: aggregates' own variables,
expressions in atom arguments, existence checks, `range`; each checked against clingo (through
the analyzer's translation) or against answers derived by hand."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.pipeline import compile_source

from .conftest import examples


def agree_with_clingo(text: str, facts: dict[str, list[tuple]]) -> dict[str, set[tuple]]:
    """The relations policyc derives, after checking that clingo derives the same."""
    compilation = compile_source(text, "souffle.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    result = policyc.load(text).evaluate({name: [list(row) for row in rows] for name, rows in facts.items()})
    assert not result.errored, result.errors
    expected = solve_unique(compilation, to_clingo(compilation, facts))
    for relation in result.relations:
        assert result.relations[relation] == expected[relation], relation
    return result.relations


def plan_text(text: str) -> list[str]:
    """The lines `policyc check --show plan` prints for a policy, stripped."""
    from policyc.compiler.show import show_plan

    return [line.strip() for line in show_plan(compile_source(text, "souffle.dl"))]


# ------------------------------------------------------------------ aggregates' own variables

A = ".decl a(n: number, z: number)\n.input a\n"
A_FACTS = {"a": [(1, 3), (1, 7), (2, 4), (3, -1), (3, 9), (3, 2)]}


def test_two_aggregates_share_a_local_variable() -> None:
    text = A + "r(n, lo, hi) :- a(n, _), lo = min z : a(n, z), hi = max z : a(n, z).\n.output r"
    assert agree_with_clingo(text, A_FACTS)["r"] == {(1, 3, 7), (2, 4, 4), (3, -1, 9)}


def test_the_target_of_an_aggregate_is_its_own() -> None:
    """Soufflé: a variable of the target is never injected, so `a` inside is not the head's."""
    text = ".decl r(a: number)\n.input r\nm(a) :- a = max a : r(a).\n.output m"
    assert agree_with_clingo(text, {"r": [(1,), (5,), (3,)]})["m"] == {(5,)}


def test_a_target_variable_bound_outside_does_not_group() -> None:
    """`sum z : a(n, z)` with `z` also bound outside: the sum over every `z` of `n`."""
    text = A + "s(n, z, t) :- a(n, z), t = sum z : a(n, z).\n.output s"
    relations = agree_with_clingo(text, A_FACTS)
    assert relations["s"] == {(1, 3, 10), (1, 7, 10), (2, 4, 4), (3, -1, 10), (3, 9, 10), (3, 2, 10)}


def test_variables_grounded_outside_still_group() -> None:
    text = A + ".decl k(n: number)\n.input k\nc(n, k) :- k(n), k = count : a(n, _).\n.output c"
    assert agree_with_clingo(text, {**A_FACTS, "k": [(1,), (3,), (4,)]})["c"] == {(1, 2), (3, 3), (4, 0)}


def test_a_witness_is_still_an_error() -> None:
    text = A + "w(z) :- n = count : a(_, z), n > 0.\n.output w"
    errors = [d for d in compile_source(text, "w.dl").diagnostics if d.is_error]
    assert [d.name for d in errors] == ["unsafe-variable"]
    assert "only inside an aggregate" in errors[0].message


# ----------------------------------------------------------- expressions in atom arguments

E = ".decl e(x: number, y: number)\n.input e\n"
E_FACTS = {"e": [(2, 1), (3, 2), (2, 2), (4, 3), (4, 5), (6, 3)]}


def test_atoms_whose_expressions_need_each_other() -> None:
    """Bound from one atom, the other's expression is a filter (by hand: (y + 1, x) and
    (x + 1, y) both facts)."""
    text = E + "p(x, y) :- e(x + 1, y), e(y + 1, x).\n.output p"
    assert agree_with_clingo(text, E_FACTS)["p"] == {(1, 1), (2, 2), (3, 3), (5, 3), (3, 5)}


def test_the_same_inside_an_aggregate() -> None:
    text = E + "c(n) :- n = count : { e(x + 1, y), e(y + 1, x) }.\n.output c"
    assert agree_with_clingo(text, E_FACTS)["c"] == {(5,)}


def test_the_plan_shows_the_filter() -> None:
    text = E + "p(x, y) :- e(x + 1, y), e(y + 1, x).\n.output p"
    lines = plan_text(text)
    assert "filter _2 = (x + 1)" in lines, lines


# --------------------------------------------------------------- errors of `eval --format json`


def eval_json(tmp_path, policy: str, facts: str | None) -> tuple[int, dict]:
    import json

    from click.testing import CliRunner

    from policyc.cli import main

    (tmp_path / "p.dl").write_text(policy, "utf-8")
    facts_path = tmp_path / "facts.json"
    if facts is not None:
        facts_path.write_text(facts, "utf-8")
    args = ["eval", str(tmp_path / "p.dl"), "--facts", str(facts_path), "--format", "json"]
    done = CliRunner().invoke(main, args)
    return done.exit_code, json.loads(done.stdout)


def test_eval_json_prints_the_policy_errors(tmp_path) -> None:
    status, out = eval_json(tmp_path, E + "p(x) :- e(x, _), q(x).\n", "{}")
    assert status == 1
    assert [d["name"] for d in out["diagnostics"]] == ["undefined-relation"]
    assert "`q` is not defined" in out["errors"][0]


def test_eval_json_prints_an_input_error(tmp_path) -> None:
    status, out = eval_json(tmp_path, E + "p(x) :- e(x, _).\n", None)
    assert status == 2
    assert "cannot read facts" in out["errors"][0] and out["diagnostics"] == []


def test_eval_json_prints_what_a_program_derives(tmp_path) -> None:
    facts = '{"e": [[2, 1], [3, 2]]}'
    status, out = eval_json(tmp_path, E + "p(x, y) :- e(x + 1, y), e(y + 1, x).\n.output p", facts)
    assert status == 0 and out["relations"]["p"] == [[1, 1], [2, 2]]


# ----------------------------------------------------------------------- existence checks


def visits(text: str, head: str, facts: dict[str, list]) -> tuple[set, Counter]:
    """What the rule of ``head`` derives from ``facts`` (unary relations), and how many facts of
    each relation its code went through."""
    from policyc.runtime import codegen
    from policyc.runtime.codegen import FAIL
    from policyc.runtime.limits import Limits, Meter
    from policyc.runtime.relations import Relation

    visited: Counter[str] = Counter()

    class Counting(set):
        def __init__(self, name: str, items: list) -> None:
            super().__init__(items)
            self.name = name

        def __iter__(self):
            for item in super().__iter__():
                visited[self.name] += 1
                yield item

    plan = policyc.load(text).plan
    index = plan.relation_index()
    relations = [Relation(spec.arity) for spec in plan.relations]
    for name, rows in facts.items():
        relations[index[name]] = Relation.owning(1, Counting(name, rows))
    rule = next(r for s in plan.strata for r in s.rules if plan.relations[r.head].name == head)
    _, function = codegen.compile_rule(plan, rule)
    out: set = set()
    function(relations, [], out, [], {}, Meter(Limits(), lambda: 0, lambda op: FAIL, False))
    return out, visited


UNARY = ".decl e(x: number)\n.decl i(x: number)\n.input e, i\n"


def test_an_atom_of_wildcards_is_checked_once() -> None:
    """`e(_)` three times is three existence checks before `i` is scanned: 3 facts of `e` are
    looked at, whatever the size of `e` (iterated, it would be 100 + 100² + 100³)."""
    text = UNARY + "q(x) :- e(_), e(_), e(_), i(x).\n.output q"
    out, visited = visits(text, "q", {"e": list(range(100)), "i": [7, 8]})
    assert out == {7, 8}
    assert visited == {"e": 3, "i": 2}
    lines = plan_text(text)
    start = lines.index("rule q@souffle.dl:4 (once)") + 1
    assert lines[start : start + 4] == ["exists e(_)", "exists e(_)", "exists e(_)", "scan i(x)"]


def test_a_variable_occurring_once_is_a_wildcard() -> None:
    text = UNARY + "q(x) :- e(_a), e(y), i(x).\n.output q"
    out, visited = visits(text, "q", {"e": list(range(100)), "i": [7, 8]})
    assert out == {7, 8} and visited == {"e": 2, "i": 2}


def test_an_empty_relation_fails_the_check() -> None:
    text = UNARY + "q(x) :- i(x), e(_).\n.output q"
    out, visited = visits(text, "q", {"e": [], "i": [7, 8]})
    assert out == set() and visited["i"] == 0


def test_existence_checks_agree_with_clingo() -> None:
    text = E + ".decl i(x: number)\n.input i\nr(x) :- i(x), e(x, _), e(_, _), !e(_, x).\n.output r"
    facts = {**E_FACTS, "i": [(2,), (3,), (4,), (6,), (9,)]}
    assert agree_with_clingo(text, facts)["r"] == {(4,), (6,)}
    assert "exists, lookup on [0] e(=x, _)" in plan_text(text)


# ------------------------------------------------------------------------------------ range

RANGES = """
.decl n(a: number, b: number)
.input n
up(x) :- x = range(0, 10).
down(x) :- x = range(10, 0).
by(x) :- x = range(1, 10, 3).
back(x) :- x = range(9, 0, -4).
still(x) :- x = range(3, 5, 0).
none(x) :- x = range(4, 4, 0).
between(a, b, x) :- n(a, b), x = range(a, b).
stepped(a, b, x) :- n(a, b), x = range(a, 20, b).
known(a) :- n(a, _), a = range(0, 5).
pairs(c) :- c = count : { x = range(0, 7), y = range(x, 3) }.
.output up, down, by, back, still, none, between, stepped, known, pairs
"""


def test_range_as_souffle_has_it() -> None:
    """By hand from Soufflé's definition: `to` excluded; default step 1 up, -1 down; step 0
    gives `from` once unless the range is empty."""
    facts = {"n": [(1, 4), (4, 1), (2, 2), (7, -3), (3, 0)]}
    r = agree_with_clingo(RANGES, facts)
    assert r["up"] == {(i,) for i in range(10)}
    assert r["down"] == {(i,) for i in range(1, 11)}
    assert r["by"] == {(1,), (4,), (7,)} and r["back"] == {(9,), (5,), (1,)}
    assert r["still"] == {(3,)} and r["none"] == set()
    assert r["between"] == {(1, 4, 1), (1, 4, 2), (1, 4, 3), (4, 1, 4), (4, 1, 3), (4, 1, 2)} | {
        (7, -3, x) for x in range(-2, 8)
    } | {(3, 0, 3), (3, 0, 2), (3, 0, 1)}
    assert r["stepped"] == {(1, 4, x) for x in (1, 5, 9, 13, 17)} | {(4, 1, x) for x in range(4, 20)} | {
        (2, 2, x) for x in range(2, 20, 2)
    } | {(3, 0, 3)}  # range(7, 20, -3) is empty: counting down from 7 never reaches 20
    assert r["known"] == {(1,), (4,), (2,), (3,)}
    assert r["pairs"] == {(12,)}  # x < 3: 3 + 2 + 1 values of y; x = 3: none; x > 3: counting down, 1 + 2 + 3


def test_float_ranges_add_the_step() -> None:
    text = "f(x) :- x = range(0.0, 1.0, 0.25).\ng(x) :- x = range(1.0, 0.0).\n.output f, g"
    result = policyc.load(text).evaluate({})
    assert result.relation("f") == {(0.0,), (0.25,), (0.5,), (0.75,)}
    assert result.relation("g") == {(1.0,)}


def test_a_range_too_large_fails_closed() -> None:
    from policyc.runtime.limits import MAX_RANGE

    text = f"Deny(x) :- x = range(0, {MAX_RANGE + 1}).\n"
    result = policyc.load(text).evaluate({})
    assert result.errored
    assert [e.message for e in result.errors] == [
        f"range(0, {MAX_RANGE + 1}) has {MAX_RANGE + 1:,} values, more than {MAX_RANGE:,} (the limit of a range)"
    ]
    assert not result.decide("x").allowed
    assert policyc.load(f"S(x) :- x = range(0, {MAX_RANGE}).\n.output S").evaluate({}).relation("S")


def test_the_plan_shows_a_range_and_round_trips() -> None:
    from policyc.compiler.plan_read import from_data
    from policyc.compiler.plan_write import to_data

    plan = policyc.load(RANGES).plan
    assert from_data(to_data(plan)) == plan
    assert "for x in range(1, 10, 3)" in plan_text(RANGES)


def test_range_is_checked() -> None:
    text = (
        ".decl n(a: number)\n.input n\n"
        "a(x) :- n(x), x < range(0, 3).\n"
        "b(x) :- n(x), x = range(0).\n"
        'c(x) :- x = range(0, "9").\n'
        "d(range(0, 2)) :- n(_).\n"
    )
    found = [(d.span.line, d.name) for d in compile_source(text, "r.dl").diagnostics if d.is_error]
    assert found == [
        (3, "misplaced-generator"),
        (4, "arity-mismatch"),
        (5, "type-mismatch"),
        (6, "misplaced-generator"),
    ]


def test_a_declared_range_functor_is_a_functor() -> None:
    text = ".functor range(a: number, b: number): number\nr(x) :- x = range(1, 2).\n.output r"
    result = policyc.load(text, {"range": lambda a, b: a + b}).evaluate({})
    assert result.relation("r") == {(3,)}


def souffle_range(start: int, stop: int, step: int | None) -> list[int]:
    """Soufflé's loops for `range`, written out (src/include/souffle/utility/EvaluatorUtil.h)."""
    if step is None:
        step = 1 if start <= stop else -1
    values = []
    if step > 0:
        x = start
        while x < stop:
            values.append(x)
            x += step
    elif step < 0:
        x = start
        while stop < x:
            values.append(x)
            x += step
    elif start != stop:
        values.append(start)
    return values


@examples(15, 200)
def test_random_ranges_agree_with_souffle_and_clingo(examples: int) -> None:
    small = st.integers(-6, 6)
    triples = st.lists(st.tuples(small, small, small), min_size=1, max_size=6, unique=True)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(triples)
    def run(rows: list[tuple[int, int, int]]) -> None:
        text = (
            ".decl n(a: number, b: number, s: number)\n.input n\n"
            "by(a, b, s, x) :- n(a, b, s), x = range(a, b, s).\n"
            "plain(a, b, x) :- n(a, b, _), x = range(a, b).\n"
            ".output by, plain\n"
        )
        relations = agree_with_clingo(text, {"n": rows})
        assert relations["by"] == {(a, b, s, x) for a, b, s in rows for x in souffle_range(a, b, s)}
        assert relations["plain"] == {(a, b, x) for a, b, _ in rows for x in souffle_range(a, b, None)}

    run()


def test_an_aggregates_own_variable_has_its_own_type() -> None:
    """`d` counts the symbols `d` of the body: the outer `d` is a number, the inner a symbol."""
    text = ".decl Dep(a: symbol, b: symbol)\n.input Dep\nMany(a) :- Dep(a, _), d = count : { Dep(a, d) }, d > 1.\n.output Many"
    facts = {"Dep": [("x", "p"), ("x", "q"), ("y", "p")]}
    assert agree_with_clingo(text, facts)["Many"] == {("x",)}


def test_an_integer_constant_in_a_float_place_is_a_float() -> None:
    """Soufflé gives a constant the type of its place: `a(42)` with `a(x: float)` holds 42.0,
    so `x / 5` of it divides floats (8.4), and so does `7 / 2` in a float head (3.5)."""
    text = (
        ".decl a(x: float)\na(42).\n.decl t(x: float)\nt(x / 5) :- a(x).\n.decl u(x: float)\nu(7 / 2).\n"
        "u(y) :- a(z), z > 3, y = 1.\n.decl n(x: number)\nn(7 / 2).\n.output t, u, n"
    )
    result = policyc.load(text).evaluate({})
    assert result.relations["t"] == {(8.4,)}
    assert result.relations["u"] == {(3.5,), (1.0,)} and all(
        type(v) is float for (v,) in result.relations["u"]
    )
    assert result.relations["n"] == {(3,)}
