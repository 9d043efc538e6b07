"""Soufflé's syntax: its operators with its precedence, hexadecimal and binary integers,
`max`/`min`/`cat` of several values, `;` in bodies and several heads.

The precedence table below is Soufflé's (src/parser/parser.yy, loosest first); the values
operators compute are checked against definitions written here from Soufflé's semantics
(C++ on signed integers, power truncated toward zero); disjunctions and several heads against
the plain rules written out by hand.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer import asp
from policyc.compiler import ast
from policyc.compiler.formatter import format_source
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import check_source, compile_source
from policyc.compiler.source import SourceFile

from .conftest import examples

# Soufflé's `%left` / `%right` declarations, loosest first
LEVELS = [["lor"], ["lxor"], ["land"], ["bor"], ["bxor"], ["band"], ["bshl", "bshr", "bshru"]]
LEVELS += [["+", "-"], ["*", "/", "%"], ["^"]]
LEVEL = {op: i for i, ops in enumerate(LEVELS) for op in ops}
BINARY = list(LEVEL)


def term_of(text: str) -> ast.Term:
    module, diagnostics = parse(SourceFile("p.dl", f"P({text})."))
    assert diagnostics == [], [d.message for d in diagnostics]
    return module.statements[0].head.args[0]


def shape(term: ast.Term) -> object:
    if isinstance(term, ast.Var):
        return term.name
    if isinstance(term, ast.Integer):
        return term.value
    if isinstance(term, ast.BinOp):
        return (term.op, shape(term.left), shape(term.right))
    if isinstance(term, ast.Negate):
        return ("-", shape(term.operand))
    if isinstance(term, ast.UnaryOp):
        return (term.op, shape(term.operand))
    if isinstance(term, ast.Call):
        return (term.name, *[shape(a) for a in term.args])
    raise AssertionError(term)


@pytest.mark.parametrize("first", BINARY)
def test_binary_operators_group_as_in_souffle(first: str) -> None:
    for second in BINARY:
        found = shape(term_of(f"a {first} b {second} c"))
        right = LEVEL[second] > LEVEL[first] or (first == second == "^")  # `^` groups to the right
        expected = (first, "a", (second, "b", "c")) if right else (second, (first, "a", "b"), "c")
        assert found == expected, (first, second)


def test_prefix_operators_bind_tighter_than_binary_ones_but_power() -> None:
    assert shape(term_of("-a ^ 2")) == ("-", ("^", "a", 2))
    assert shape(term_of("-2 ^ 2")) == ("-", ("^", 2, 2))
    assert shape(term_of("(-2) ^ 2")) == ("^", -2, 2)
    assert shape(term_of("2 ^ -a")) == ("^", 2, ("-", "a"))
    assert shape(term_of("bnot a band b")) == ("band", ("bnot", "a"), "b")
    assert shape(term_of("lnot a * b")) == ("*", ("lnot", "a"), "b")
    assert shape(term_of("bnot a ^ b")) == ("bnot", ("^", "a", "b"))
    assert shape(term_of("lnot lnot a")) == ("lnot", ("lnot", "a"))


def test_hexadecimal_and_binary_integers() -> None:
    assert [shape(term_of(t)) for t in ("0x1F", "0XfF", "0b101", "0B0", "-0x10", "007")] == [
        31,
        255,
        5,
        0,
        -16,
        7,
    ]
    digits = "0x" + "f" * 5000  # no limit on digits in these bases
    assert shape(term_of(digits)) == int(digits, 16)
    for bad in ("0x", "0b2", "0x1G"):
        _, diagnostics = parse(SourceFile("p.dl", f"P({bad})."))
        assert [d.name for d in diagnostics] == ["syntax-error"], bad
    assert format_source("P(0x1F, -0b11, 0X0a).") == "P(0x1F, -0b11, 0X0a).\n"


def test_max_min_and_cat_take_several_values() -> None:
    assert shape(term_of("max(a, b, c)")) == ("max", ("max", "a", "b"), "c")
    assert shape(term_of("min(a, 1)")) == ("min", "a", 1)
    assert shape(term_of("cat(a, b, c, d)")) == ("cat", ("cat", ("cat", "a", "b"), "c"), "d")
    text = "P(max(a, b, c), max(max(a, b), c), cat(a, b, c), cat(cat(a, b), c), min(1, 2) + 1).\n"
    assert format_source(text) == text  # each as written
    result = policyc.load(
        """
        .decl N(a: number, b: number)
        .input N
        Out(max(a, b, 3), min(a, b, 3), max(cat("x", "b"), "xa"), min("b", "a", "c"), cat("p", "q", "r")) :- N(a, b).
        F(max(1.5, 2), min(-0.5, 1.0)) :- N(_, _).
        .output Out, F
        """
    ).evaluate({"N": [[1, 5], [-2, 0]]})
    assert result.relation("Out") == {(5, 1, "xb", "a", "pqr"), (3, -2, "xb", "a", "pqr")}
    assert result.relation("F") == {(2, -0.5)}


def test_aggregates_other_than_max_and_min_have_no_function_form() -> None:
    _, diagnostics = parse(SourceFile("p.dl", "P(x) :- Q(x, y), x = count(y, 1)."))
    assert [(d.name, d.span.column) for d in diagnostics] == [("syntax-error", 22)]
    assert "`count` is an aggregate" in diagnostics[0].message


def test_operators_are_reserved_words() -> None:
    _, diagnostics = parse(SourceFile("p.dl", "P(band) :- Q(band)."))
    assert diagnostics and "reserved word" in diagnostics[0].message


def test_types_of_the_operators() -> None:
    def problems(body: str) -> list[tuple[str, int]]:
        text = f".decl Q(n: number, f: float, s: symbol)\n.input Q\nP(v) :- Q(n, f, s), {body}.\n.output P"
        return [(d.name, d.span.column) for d in check_source(text) if d.is_error]

    assert problems("v = n band 3 bshl n") == []
    assert problems("v = f ^ 2.0") == []
    assert problems('v = max(s, "a")') == []
    assert problems("v = f band 1") == [("type-mismatch", 25)]  # at `f`
    assert problems("v = lnot s") == [("type-mismatch", 30)]  # at `s`
    assert problems("v = max(s, n)") == [("type-mismatch", 25)]  # at `max(...)`
    assert problems("v = s ^ 2") == [("type-mismatch", 25)]


# ------------------------------------------------------------------- evaluation


def souffle(op: str, a: int, b: int) -> int | None:
    """Soufflé's value of ``a op b`` on signed integers (None: policyc gives no value)."""
    if op == "band":
        return a & b
    if op == "bor":
        return a | b
    if op == "bxor":
        return a ^ b
    if op == "bshl":
        return a * 2**b if b >= 0 else None
    if op == "bshr":
        return math.floor(Fraction(a, 2**b)) if b >= 0 else None  # arithmetic: rounds down
    if op == "bshru":
        return (a + 2**32 if a < 0 else a) // 2**b if b >= 0 else None  # a negative `a` as 32 bits
    if op == "land":
        return int(bool(a) and bool(b))
    if op == "lor":
        return int(bool(a) or bool(b))
    if op == "lxor":
        return int(bool(a) != bool(b))
    if op == "^":
        if b < 0 and a == 0:
            return None
        return math.trunc(Fraction(a) ** b)  # C++'s pow, truncated toward zero
    if op == "max":
        return a if a > b else b
    if op == "min":
        return a if a < b else b
    raise AssertionError(op)


OPS = ["band", "bor", "bxor", "bshl", "bshr", "bshru", "land", "lor", "lxor", "^", "max", "min"]
PROGRAM = "\n".join(
    [".decl N(a: number, b: number)", ".input N"]
    + [
        f"R{i}(a, b, {'max(a, b)' if op == 'max' else 'min(a, b)' if op == 'min' else f'a {op} b'}) :- N(a, b)."
        for i, op in enumerate(OPS)
    ]
    + ["U(a, bnot a, lnot a) :- N(a, _).", ".output " + ", ".join(f"R{i}" for i in range(len(OPS))) + ", U"]
)


@examples(20, 300)
def test_operators_compute_what_souffle_computes(examples: int) -> None:
    policy = policyc.load(PROGRAM)
    pairs = st.lists(
        st.tuples(st.integers(-70, 70), st.integers(-4, 40)), min_size=1, max_size=6, unique=True
    )

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pairs)
    def check(rows: list[tuple[int, int]]) -> None:
        result = policy.evaluate({"N": [list(r) for r in rows]})
        for i, op in enumerate(OPS):
            expected = {(a, b, v) for a, b in rows if (v := souffle(op, a, b)) is not None}
            assert result.relation(f"R{i}") == expected, op
        assert result.relation("U") == {(a, -a - 1, int(a == 0)) for a, _ in rows}
        failing = any(souffle(op, a, b) is None for a, b in rows for op in OPS)
        assert result.errored == failing

    check()


def test_operations_without_a_value_fail_closed_and_say_why() -> None:
    text = ".decl N(a: number)\n.input N\nR(a bshl a) :- N(a).\nS(0 ^ a) :- N(a).\nT(2 ^ a) :- N(a).\n.output R, S, T"
    result = policyc.load(text).evaluate({"N": [[-1], [1], [70000]]})
    assert result.relation("R") == {(2,)}
    assert result.relation("S") == {(0,)}
    assert result.relation("T") == {(0,), (2,)}  # 2 ^ -1 is 0, truncated as in Soufflé
    messages = {e.message for e in result.evaluation.errors}
    assert any("shift left by a negative count" in m for m in messages)
    assert any("a power with no value" in m for m in messages)


# ------------------------------------------------------------ `;` and several heads

WRITTEN = """
.decl E(x: number, y: number)
.decl F(x: number)
.input E, F
@id("both") @message("{x}")
A(x), B(x, y) :- E(x, y), (F(x) ; F(y), x < y ; not F(x), (x = 1 ; y = 0x2)).
C(x) :- F(x) ; E(x, _), !F(x).
D(x) :- E(x, y), !(F(x) ; F(y), x < y).
.output A, B, C, D
"""
EXPANDED = """
.decl E(x: number, y: number)
.decl F(x: number)
.input E, F
A(x) :- E(x, y), F(x).
B(x, y) :- E(x, y), F(x).
A(x) :- E(x, y), F(y), x < y.
B(x, y) :- E(x, y), F(y), x < y.
A(x) :- E(x, y), not F(x), x = 1.
B(x, y) :- E(x, y), not F(x), x = 1.
A(x) :- E(x, y), not F(x), y = 2.
B(x, y) :- E(x, y), not F(x), y = 2.
C(x) :- F(x).
C(x) :- E(x, _), !F(x).
D(x) :- E(x, y), !F(x), !F(y).
D(x) :- E(x, y), !F(x), x >= y.
.output A, B, C, D
"""


def test_a_disjunction_is_the_rules_it_stands_for() -> None:
    written = [s for s in parse(SourceFile("w.dl", WRITTEN))[0].statements if isinstance(s, ast.Rule)]
    expanded = [s for s in parse(SourceFile("e.dl", EXPANDED))[0].statements if isinstance(s, ast.Rule)]
    assert [(r.head, r.body) for r in written] == [(r.head, r.body) for r in expanded]
    assert all(r.annotation("id") is not None for r in written[:8])
    assert check_source(WRITTEN) == []  # one `@id` for the rules of one statement; `y` is no singleton
    assert [d.name for d in check_source(EXPANDED)] == ["singleton-variable"] * 2  # `y` of A's rules


@examples(15, 200)
def test_a_disjunction_evaluates_as_its_rules(examples: int) -> None:
    written, expanded = policyc.load(WRITTEN), policyc.load(EXPANDED)
    small = st.integers(0, 3)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(small, small), max_size=8), st.lists(small, max_size=3))
    def check(edges: list[tuple[int, int]], marked: list[int]) -> None:
        facts = {"E": [list(e) for e in edges], "F": [[m] for m in marked]}
        one, other = written.evaluate(facts), expanded.evaluate(facts)
        assert {n: one.relation(n) for n in "ABCD"} == {n: other.relation(n) for n in "ABCD"}

    check()


def test_diagnostics_point_at_the_alternative_written() -> None:
    text = ".decl E(x: number)\n.input E\nP(x) :- E(x) ;\n    E(y).\n.output P"
    found = [(d.name, d.span.line, d.span.column) for d in check_source(text) if d.is_error]
    assert found == [("unsafe-variable", 3, 3)]  # `x` of the head: not bound by `E(y)` ...
    message = next(d.message for d in check_source(text) if d.is_error)
    assert "x" in message


def test_ids_stay_unique_across_statements() -> None:
    text = '.decl E(x: number)\n.input E\n@id("r") Deny(x) :- E(x) ; x = 1.\n@id("r") Deny(x) :- E(x).'
    found = [(d.name, d.span.line) for d in check_source(text) if d.is_error]
    assert found == [("invalid-annotation", 4)]


def test_what_a_disjunction_cannot_be() -> None:
    def errors(text: str) -> list[tuple[int, str]]:
        return [(d.span.column, d.message) for d in parse(SourceFile("p.dl", text))[1]]

    (column, message), *_ = errors("P(n) :- n = count : { Q(x) ; R(x) }.")
    assert column == 13 and "cannot hold `;`" in message
    many = "P(x) :- Q(x), " + ", ".join(f"(A{i}(x) ; B{i}(x))" for i in range(9)) + "."
    (column, message), *_ = errors(many)  # 2 ** 9 rules
    assert column == 1 and "more than 256 rules" in message
    assert errors("P(x) :- Q(x), (A(x) ; ).")
    assert errors("P(x) :- Q(x), not ().")


def test_parenthesised_terms_still_start_literals() -> None:
    module, diagnostics = parse(
        SourceFile("p.dl", "P(x) :- Q(x), (x + 1) * 2 > 3, (x) = 1, (Q(x)), (x band 1) = 0.")
    )
    assert diagnostics == []
    body = module.statements[0].body
    assert [type(lit).__name__ for lit in body] == ["Atom", "Comparison", "Comparison", "Atom", "Comparison"]


def test_formatting_keeps_the_written_form() -> None:
    text = '@id("r")\nA(x), B(x) :- E(x), (F(x) ; /* or */ G(x), x = bnot 2 ^ 3) ; H(x).  // end\n'
    assert format_source(text) == text
    assert format_source("P(x) :- Q(x), !(A(x) ; B(x)).") == "P(x) :- Q(x), not (A(x) ; B(x)).\n"
    long = (
        "A(x), B(x) :- "
        + " ; ".join(f"SomeLongRelationName{i}(x), OtherRelation{i}(x)" for i in range(3))
        + "."
    )
    formatted = format_source(long)
    assert formatted.splitlines()[0] == "A(x), B(x) :-" and format_source(formatted) == formatted


# ------------------------------------------------------------------------ analysis


def test_clingo_translation_of_the_operators() -> None:
    text = (
        ".decl N(a: number)\n.input N\n"
        "R(a band 6, a bor 1, a bxor 3, bnot a, a ^ 2, a bshl 3, 0x10 + 0b1) :- N(a).\n.output R"
    )
    compilation = compile_source(text)
    facts = {"N": [(5,), (-2,)]}
    expected = policyc.load(text).evaluate({"N": [[5], [-2]]}).relation("R")
    assert asp.solve_unique(compilation, asp.to_clingo(compilation, facts), {})["R"] == expected


@pytest.mark.parametrize(
    "term",
    [
        "a bshr 1",
        "a bshru 1",
        "a land 1",
        "a lor 1",
        "a lxor 1",
        "lnot a",
        "max(a, 1)",
        "min(a, 1)",
        "a ^ a",
        "a bshl a",
    ],
)
def test_what_clingo_cannot_express_is_said_with_its_place(term: str) -> None:
    text = f".decl N(a: number)\n.input N\nR(x) :- N(a),\n    x = {term}.\n.output R"
    with pytest.raises(asp.Untranslatable, match=r"has no clingo counterpart") as raised:
        asp.to_clingo(compile_source(text, "p.dl"), {"N": [(1,)]})
    assert str(raised.value).endswith("(at p.dl:4:9)")


def test_the_language_server_sees_one_variable_per_name_in_a_statement() -> None:
    from policyc.lsp.index import VARIABLE, Index

    text = ".decl E(x: number)\n.input E\nA(x), B(x) :- E(x) ; x = 1, E(_).\nC(x) :- E(x).\n"
    index = Index.build(compile_source(text, "p.dl", upto="resolve"))
    xs = [o for o in index.occurrences if o.symbol.kind == VARIABLE]
    assert sorted((o.span.line, o.span.column) for o in xs) == [
        (3, 3),
        (3, 9),
        (3, 17),
        (3, 22),
        (4, 3),
        (4, 11),
    ]
    first = {o.symbol for o in xs if o.span.line == 3}
    assert len(first) == 1 and not first & {o.symbol for o in xs if o.span.line == 4}


def test_a_statement_that_repeats_itself_is_told_so() -> None:
    text = ".decl E(x: number)\n.input E\nA(x) :- E(x) ; E(x).\nB(x), B(x) :- E(x).\nA(y) :- E(y).\n"
    found = [(d.name, d.span.line, d.message.split(" (")[0]) for d in check_source(text)]
    assert found == [
        ("duplicate-rule", 3, "this rule says the same thing twice"),
        ("duplicate-rule", 4, "this rule says the same thing twice"),
        ("duplicate-rule", 5, "this rule repeats the rule on line 3"),
    ]


def test_hover_shows_a_statement_once() -> None:
    from policyc.lsp.document import build
    from policyc.lsp.hover import relation

    text = ".decl E(x: number)\n.input E\nA(x), B(x) :- E(x) ; x = 1, E(_).\n.output A, B\n"
    shown = relation(build(text, "/p.dl", 1), "A")
    assert shown.count("A(x), B(x) :- E(x) ; x = 1, E(_).") == 1, shown


def test_the_outline_has_one_entry_per_head_written() -> None:
    from policyc.lsp.document import build
    from policyc.lsp.outline import outline

    text = ".decl E(x: number)\n.input E\nA(x), B(x) :- E(x) ; x = 1, E(_).\n.output A, B\n"
    entries = {s.name: [c.detail for c in s.children] for s in outline(build(text, "/p.dl", 1))}
    assert entries["A"] == ["rule"] and entries["B"] == ["rule"]


def test_the_deep_analysis_says_which_rules_its_search_cannot_translate() -> None:
    from policyc.analyzer.deep import analyse

    text = ".decl S(a: symbol, n: number)\n.input S\nDeny(a) :- S(a, n), x = n bshr 1, x > 3.\nDeny(a) :- S(a, n), n > 9.\n"
    found = [(d.name, d.span.line, d.span.column) for d in analyse(compile_source(text, "p.dl")).findings]
    assert ("unsearched-rule", 3, 25) in found
    plain = text.replace("n bshr 1", "n / 2")
    assert "unsearched-rule" not in {d.name for d in analyse(compile_source(plain, "p.dl")).findings}


def test_the_deep_analysis_says_which_rules_hold_a_float_instead_of_failing(tmp_path) -> None:
    from policyc.analyzer.deep import analyse

    from .conftest import run_policyc

    text = (
        '.decl X(a: symbol, x: float)\n.input X\nDeny(a) :- X(a, x), x > 2.5.\nDeny(a) :- X(a, _), a = "b".\n'
    )
    found = [(d.name, d.span.line) for d in analyse(compile_source(text, "p.dl")).findings]
    assert ("unsearched-rule", 3) in found and ("unsearched-rule", 4) not in found
    (tmp_path / "p.dl").write_text(text, "utf-8")
    run = run_policyc("check", "--deep", "p.dl", cwd=tmp_path)
    assert run.status == 0 and "internal error" not in run.stderr, run.stderr
    assert "[PC308]" in run.stdout and "floating-point" in run.stdout, run.stdout
