"""Soufflé's types, records and ADTs: a corpus of small programs whose answers are derived by
hand, each evaluated by policyc and by clingo (through the analyzer's translation); random
cons-lists whose elements, length and sum are computed in Python; type errors at their place;
the formatter; records and ADT values in JSON facts."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.asp import solve_unique, to_clingo
from policyc.compiler.formatter import format_source
from policyc.compiler.pipeline import compile_source
from policyc.runtime.values import Adt

from .conftest import examples

LIST = """
.type L = [head: number, tail: L]
.decl Lst(l: L)
.input Lst
.decl Elem(x: number, rest: L)
Elem(x, r) :- Lst([x, r]).
Elem(x, r) :- Elem(_, [x, r]).
.decl Len(n: number)
Len(n) :- n = count : { Elem(_, _) }.
.decl Total(n: number)
Total(n) :- n = sum x : { Elem(x, _) }.
.decl Last(x: number)
Last(x) :- Elem(x, nil).
.output Elem, Len, Total, Last
"""

ADT = """
.type Shape = Circle {r: number} | Rect {w: number, h: number} | Dot {}
.decl S(name: symbol, s: Shape)
S("a", $Circle(2)).
S("b", $Rect(2, 3)).
S("c", $Dot).
S("d", $Rect(4, 4)).
.decl Area(name: symbol, a: number)
Area(n, 3 * r * r) :- S(n, $Circle(r)).
Area(n, w * h) :- S(n, $Rect(w, h)).
Area(n, 0) :- S(n, $Dot()).
.decl Square(name: symbol)
Square(n) :- S(n, $Rect(w, w)).
.decl Big(s: Shape)
Big(s) :- S(n, s), Area(n, a), a > 10.
.output Area, Square, Big
"""

SUBTYPES = """
.type Host <: symbol
.type Url <: symbol
.type Port = unsigned
.type Endpoint = [host: Host, port: Port]
.decl Fetch(u: Url, e: Endpoint)
Fetch("https://a.example/x", ["a.example", 443]).
Fetch("http://b.example/", ["b.example", 80]).
.decl Trusted(h: Host)
Trusted("a.example").
.decl Insecure(u: Url)
Insecure(u) :- Fetch(u, [h, p]), p != 443, !Trusted(h).
.decl Pair(e: Endpoint)
Pair(e) :- Fetch(_, e), e = [h, _], Trusted(h).
Pair([h, p + 1]) :- Fetch(_, [h, p]), p < 100.
.output Insecure, Pair
"""

EDGES = """
.type P = [x: number, y: symbol]
.type T = A {x: number} | B {}
.decl R(p: P, t: T)
R([1, "a"], $A(1)). R([2, "b"], $B). R(nil, $B()). R([3, "c"], $A(4)).
.decl Blocked(p: P)
Blocked([2, "b"]).
.decl NotBlocked(x: number)
NotBlocked(x) :- R([x, y], _), !Blocked([x, y]).
.decl CountA(n: number)
CountA(n) :- n = count : { R([_, _], $A(_)) }.
.decl SumX(n: number)
SumX(n) :- n = sum x : { R([x, _], _) }.
.decl Is(p: P) inline
Is([x, y]) :- R([x, y], $A(_)).
.decl UsesInline(x: number)
UsesInline(x) :- R(p, _), p = [x, _], Is(p).
.decl Same(x: number)
Same(x) :- R([x, _], $A(x)).
.decl Next(x: number)
Next(x) :- R([y, _], _), R(q, _), q = [x, _], x = y + 1.
.output NotBlocked, CountA, SumX, UsesInline, Same, Next
"""

CORPUS = [
    (
        LIST,
        {"Lst": [((1, (2, (3, ()))),)]},
        {
            "Elem": {(1, (2, (3, ()))), (2, (3, ())), (3, ())},
            "Len": {(3,)},
            "Total": {(6,)},
            "Last": {(3,)},
        },
    ),
    (
        ADT,
        {},
        {
            "Area": {("a", 12), ("b", 6), ("c", 0), ("d", 16)},
            "Square": {("d",)},
            "Big": {(Adt(("Circle", 2)),), (Adt(("Rect", 4, 4)),)},
        },
    ),
    (
        SUBTYPES,
        {},
        {
            "Insecure": {("http://b.example/",)},
            "Pair": {(("a.example", 443),), (("b.example", 81),)},
        },
    ),
    (
        EDGES,
        {},
        {
            "NotBlocked": {(1,), (3,)},
            "CountA": {(2,)},
            "SumX": {(6,)},
            "UsesInline": {(1,), (3,)},
            "Same": {(1,)},
            "Next": {(2,), (3,)},
        },
    ),
]


def _evaluate(text: str, facts: dict) -> dict[str, set[tuple]]:
    compilation = compile_source(text, "records.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    policy = policyc.load(text)
    result = policy.evaluate({name: [list(row) for row in rows] for name, rows in facts.items()})
    assert not result.errored, result.errors
    return result.relations


def _clingo(text: str, facts: dict) -> dict[str, set[tuple]]:
    compilation = compile_source(text, "records.dl")
    return solve_unique(compilation, to_clingo(compilation, {n: list(r) for n, r in facts.items()}))


@pytest.mark.parametrize("index", range(len(CORPUS)))
def test_corpus_gives_the_hand_derived_answers_in_policyc_and_clingo(index: int) -> None:
    text, facts, expected = CORPUS[index]
    mine, theirs = _evaluate(text, facts), _clingo(text, facts)
    for name, rows in expected.items():
        assert mine[name] == rows, name
        assert theirs[name] == rows, name


@pytest.mark.parametrize("index", range(len(CORPUS)))
def test_plans_with_records_survive_a_bundle(index: int) -> None:
    from policyc.compiler.plan_read import from_data
    from policyc.compiler.plan_write import to_data

    plan = policyc.load(CORPUS[index][0]).plan
    assert from_data(json.loads(json.dumps(to_data(plan)))) == plan


def _cons(values: list[int]) -> tuple:
    out: tuple = ()
    for v in reversed(values):
        out = (v, out)
    return out


@examples(15, 200)
def test_random_lists_agree_with_python_and_clingo(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.lists(st.integers(-5, 5), min_size=1, max_size=5), min_size=1, max_size=3))
    def run(lists: list[list[int]]) -> None:
        facts = {"Lst": [(_cons(values),) for values in lists]}
        suffixes = {(v[i], _cons(v[i + 1 :])) for v in lists for i in range(len(v))}
        expected = {
            "Elem": suffixes,
            "Len": {(len(suffixes),)},
            "Total": {(sum(x for x, _ in suffixes),)},
            "Last": {(v[-1],) for v in lists},
        }
        mine, theirs = _evaluate(LIST, facts), _clingo(LIST, facts)
        for name, rows in expected.items():
            assert mine[name] == rows, (name, lists)
            assert theirs[name] == rows, (name, lists)

    run()


ERRORS = [
    (  # two subtypes of symbol do not mix
        '.type A <: symbol\n.type B <: symbol\n.decl P(a: A)\n.decl Q(b: B)\nP("x"). Q("x").\n'
        "Deny(x) :- P(x), Q(x).",
        "PC103",
        (6, 20),
    ),
    (  # a record of the wrong number of fields
        ".type R = [a: number, b: number]\n.decl P(r: R)\nP([1, 2, 3]).",
        "PC103",
        (3, 3),
    ),
    (  # a field of the wrong type
        '.type R = [a: number, b: number]\n.decl P(r: R)\nP([1, "two"]).',
        "PC103",
        (3, 7),
    ),
    (  # an unknown constructor
        ".type T = A {} | B {x: number}\n.decl P(t: T)\nP($C(1)).",
        "PC106",
        (3, 4),
    ),
    (  # a constructor with the wrong number of fields
        ".type T = A {} | B {x: number}\n.decl P(t: T)\nP($B(1, 2)).",
        "PC102",
        (3, 3),
    ),
    (  # an unknown type in a declaration
        '.decl P(x: Id)\nP("a").',
        "PC107",
        (1, 12),
    ),
    (  # a union of a symbol and a number type
        ".type A <: symbol\n.type U = A | number",
        "PC107",
        (2, 1),
    ),
    (  # a subtype of itself
        ".type A <: A",
        "PC107",
        (1, 7),
    ),
    (  # a branch name used twice
        ".type T = A {} | B {}\n.type S = A {x: number}",
        "PC107",
        (2, 11),
    ),
    (  # a record where a symbol is expected, no record type declared
        ".decl P(x: symbol)\nP([1, 2]).",
        "PC103",
        (2, 3),
    ),
    (  # `nil` where a symbol is expected
        ".type R = [a: number]\n.decl P(x: symbol)\nP(nil).",
        "PC103",
        (3, 3),
    ),
    (  # a record is not a number
        '.type R = [a: number]\n.decl P(r: R)\nP([1]).\nDeny("x") :- P(r), r > 1 + r.',
        "PC103",
        (4, 28),
    ),
]


@pytest.mark.parametrize("text, code, where", ERRORS)
def test_type_errors_are_located(text: str, code: str, where: tuple[int, int]) -> None:
    compilation = compile_source(text, "bad.dl")
    found = [(d.code, (d.span.line, d.span.column)) for d in compilation.diagnostics if d.is_error]
    assert (code, where) in found, found


def test_a_subtype_value_is_usable_where_its_base_is() -> None:
    text = (
        '.type Id <: symbol\n.decl P(i: Id)\n.decl Q(s: symbol)\nP("a").\nQ(x) :- P(x).\n'
        'Deny(x) :- Q(x), x = "a".\n.output Q'
    )
    assert not [d for d in compile_source(text, "ok.dl").diagnostics if d.is_error]
    assert _evaluate(text, {})["Deny"] == {("a",)}


@pytest.mark.parametrize("text", [LIST, ADT, SUBTYPES])
def test_formatting_is_idempotent_and_keeps_the_meaning(text: str) -> None:
    once = format_source(text, "r.dl")
    assert format_source(once, "r.dl") == once
    assert compile_source(once, "r.dl").program.modules[0].statements == (
        compile_source(text, "r.dl").program.modules[0].statements
    )


def test_records_and_adt_values_in_json_facts_and_results(tmp_path, cli) -> None:
    policy = tmp_path / "p.dl"
    policy.write_text(
        ".type P = [x: number, y: symbol]\n.type T = A {n: number} | B {}\n"
        ".decl In(p: P, t: T)\n.input In\n.decl Out(p: P, t: T)\n.output Out\n"
        "Out([x + 1, y], t) :- In([x, y], t), t != $B.\n"
    )
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"In": [[[1, "a"], {"A": [5]}], [[2, "b"], {"B": []}], [None, {"B": []}]]}))
    run = cli("eval", str(policy), "--facts", str(facts), "--format", "json", "--query", "Out")
    assert run.status == 0, run.stderr
    assert json.loads(run.stdout)["relations"]["Out"] == [[[2, "a"], {"A": [5]}]]
    text = cli("eval", str(policy), "--facts", str(facts), "--query", "Out")
    assert 'Out([2, "a"], $A(5))' in text.stdout


BRIDGE = """
.import events
.import lists
@id("env-file") Deny(a) :- ToolCall(a, "git_add"), ToolArgItem(a, "files", _, ".env").
@id("first-outside") Deny(a) :- ToolCall(a, "send"), ToolArgList(a, "to", [first, _]), first != "me@corp.example".
Second(a, x) :- ToolArgList(a, "to", [_, [x, _]]).
"""


@pytest.mark.parametrize(
    "tool, args, denied",
    [
        ("git_add", {"files": ["a.py", ".env"]}, True),
        ("git_add", {"files": ["a.py", "b.py"]}, False),
        ("git_add", {"files": ".env"}, False),  # not a list: no elements
        ("send", {"to": ["me@corp.example", "x@evil.example"]}, False),
        ("send", {"to": ["x@evil.example"]}, True),
        ("send", {"to": []}, False),  # nil: no first element
    ],
)
def test_list_arguments_reach_a_policy_as_records_and_elements(tool: str, args: dict, denied: bool) -> None:
    session = policyc.Monitor(policyc.load(BRIDGE)).session("s")
    decision = session.authorize({"id": "c1", "kind": "tool_call", "tool": tool, "args": args})
    assert decision.allowed is not denied


def test_list_elements_are_text_in_order() -> None:
    from policyc.stdlib.events import event_facts

    event = {"id": "c", "kind": "tool_call", "tool": "t", "args": {"l": ["a", 2, [3]]}}
    wanted = {"ToolArg": "ToolArg", "ToolArgList": "ToolArgList", "ToolArgItem": "ToolArgItem"}
    facts = event_facts(event, 0, [], wanted)
    assert "ToolArgList" not in event_facts(event, 0, [])  # only for a policy that has it
    assert facts["ToolArgList"] == {("c", "l", ("a", ("2", ("[3]", ()))))}
    assert facts["ToolArgItem"] == {("c", "l", 0, "a"), ("c", "l", 1, "2"), ("c", "l", 2, "[3]")}
    assert facts["ToolArg"] == {("c", "l", '["a", 2, [3]]')}  # the flat fact as before


def test_deep_analysis_says_per_rule_that_it_does_not_search_records() -> None:
    from policyc.analyzer.deep import deep_findings

    text = ".type T = A {x: number} | B {}\n.decl S(n: symbol, t: T)\n.input S\n"
    text += "Allow(n) :- S(n, $A(_)).\nDeny(n) :- S(n, $B).\n"
    findings = deep_findings(compile_source(text, "d.dl"))
    assert sorted((d.name, d.span.line) for d in findings) == [("unsearched-rule", 4), ("unsearched-rule", 5)]
    plain = deep_findings(compile_source('.import events\nAllow(a) :- ToolCall(a, "x").\n', "e.dl"))
    assert "unsearched-rule" not in {d.name for d in plain}  # the library's record relation, unread


# ---------------------------------------------------------- records keep their hash


def test_a_record_hashes_its_fields_once() -> None:
    """Storing a record built on another costs its own fields: a field's hash is computed once
    and kept (the hash is still the plain tuple's, so a record equals its fields' tuple)."""
    from policyc.runtime.values import Record

    class Counted:
        calls = 0

        def __hash__(self) -> int:
            Counted.calls += 1
            return 7

    inner = Record((Counted(),))
    outer = Record((1, inner))
    hash(outer), hash(outer), hash(Record((2, inner))), {outer, Record((3, outer))}
    assert Counted.calls == 1
    assert hash(Record((1, Record(("a",))))) == hash((1, ("a",))) and Record((1, 2)) == (1, 2)
    adt = Adt(("A", inner))
    assert hash(adt) == hash(("A", inner)) and Counted.calls == 1
    import pickle

    plain = Record((1, Record(("a",))))
    hash(plain)  # kept, and not pickled: another process hashes texts otherwise
    again = pickle.loads(pickle.dumps(plain))
    assert again == plain and "_hash" not in again.__dict__ and type(again[1]) is Record
    assert type(pickle.loads(pickle.dumps(Adt(("A", 1))))) is Adt


LONG = """
.type List = [head: number, tail: List]
.decl build(n: number, l: List)
build(0, nil).
build(n + 1, [n, l]) :- build(n, l), n < {cells}.
.output build
"""


def test_a_list_of_thousands_of_cells_is_stored_and_printed(tmp_path) -> None:
    """Each cell holds the one before it; the evaluator's records keep their hash, and the
    last cell, 3,000 records deep, is printed in text and JSON (no recursion)."""
    from click.testing import CliRunner

    from policyc.cli import main
    from policyc.runtime.values import Record

    text = LONG.format(cells=3000)
    found = policyc.load(text).evaluate({}).relations["build"]
    assert len(found) == 3001
    last = next(cell for n, cell in found if n == 3000)
    assert type(last) is Record and "_hash" in last.__dict__  # kept as it was stored
    depth = 0
    while last:
        depth, last = depth + 1, last[1]
    assert depth == 3000
    (tmp_path / "p.dl").write_text(text, "utf-8")
    done = CliRunner().invoke(main, ["eval", str(tmp_path / "p.dl"), "--query", "build"])
    assert done.exit_code == 0, done.output
    assert (
        done.stdout.splitlines()[-1]
        == "  build(3000, " + "".join(f"[{n}, " for n in range(2999, -1, -1)) + "nil" + "]" * 3000 + ")"
    )
    done = CliRunner().invoke(main, ["eval", str(tmp_path / "p.dl"), "--query", "build", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith('{"relations": {"build": [[0, null], [1, [0, null]], [2, [1, [0, null]]]')
