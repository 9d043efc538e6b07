"""What a Soufflé program carries besides its rules runs as written: I/O options on `.input`
and `.output` (read, kept by the formatter, reported as ignored), `@`-prefixed calls of
user-defined functors, and the conversions `to_number`, `to_float`, `to_string` and
`to_unsigned` of every primitive type, with `ord`.

Expected values of the conversions follow Soufflé's source (souffle-lang/souffle): the
interpreter's ``UNARY_OP(F2I, RamFloat, static_cast<RamSigned>)``, ``I2F``, ``U2I`` … and
``CONV_TO_STRING`` (``std::to_string``) in ``src/interpreter/Engine.cpp``, the overloads of
each name in ``src/FunctorOps.cpp``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.compiler.formatter import format_source
from policyc.compiler.pipeline import check_source
from policyc.stdlib import builtins

from .conftest import examples

IO = """.decl edge(a: number, b: number)
.decl path(a: number, b: number)
.input edge(IO=file, filename="edge.facts", delimiter="\\t", headers=true), path
.output path(IO=stdout, attributeNames="a\\tb", n=3)
path(a, b) :- edge(a, b).
path(a, c) :- path(a, b), edge(b, c).
"""


def test_io_options_are_read_and_reported_as_ignored() -> None:
    diagnostics = check_source(IO)
    assert [(d.name, d.span.line) for d in diagnostics] == [("ignored-option", 3), ("ignored-option", 4)]
    first, second = diagnostics
    assert IO.splitlines()[2][first.span.column - 1 : first.span.end_column - 1] == (
        '(IO=file, filename="edge.facts", delimiter="\\t", headers=true)'
    )
    assert "`edge`" in first.message and "reads facts" in first.message
    assert "`path`" in second.message and "prints" in second.message
    # the relation without options (`path` of `.input`) is not reported, and nothing is an error
    assert not [d for d in diagnostics if d.is_error]


def apply_fixes(text: str, diagnostics: list) -> str:
    edits = sorted((e for d in diagnostics if d.fix for e in d.fix.edits), key=lambda e: -e.span.start)
    for edit in edits:
        text = text[: edit.span.start] + edit.text + text[edit.span.end :]
    return text


def test_the_fix_removes_the_options_and_the_policy_means_the_same() -> None:
    fixed = apply_fixes(IO, check_source(IO))
    assert ".input edge, path\n" in fixed and ".output path\n" in fixed
    assert check_source(fixed) == []
    facts = {"edge": [[1, 2], [2, 3]]}
    assert policyc.load_source(IO).evaluate(facts).relation("path") == {(1, 2), (2, 3), (1, 3)}
    assert policyc.load_source(fixed).evaluate(facts).relation("path") == {(1, 2), (2, 3), (1, 3)}


def test_the_formatter_keeps_io_options() -> None:
    written = '.decl e(x: number)\n.input   e( IO = file ,filename = "e.csv" , n=0x10 )\n'
    formatted = format_source(written)
    assert formatted == '.decl e(x: number)\n.input e(IO=file, filename="e.csv", n=0x10)\n'
    assert format_source(formatted) == formatted


@pytest.mark.parametrize(
    ("text", "expected", "line"),
    [
        (".input e(IO)", "unexpected `)`", 2),
        (".input e(=file)", "unexpected `=`", 2),
        (".output e(IO=file", "unexpected end of file", 3),
    ],
)
def test_malformed_io_options_are_syntax_errors(text: str, expected: str, line: int) -> None:
    diagnostics = check_source(".decl e(x: number)\n" + text + "\n")
    assert [d.name for d in diagnostics] == ["syntax-error"]
    assert expected in diagnostics[0].message
    assert diagnostics[0].span.line == line


AT_CALLS = """.functor inc(x: number): number
.decl a(x: number)
a(x) :- x = @inc(1).
a(x) :- x = @inc( 2 ) + inc(3).
"""


def test_at_calls_are_calls_of_the_functor() -> None:
    assert check_source(AT_CALLS) == []
    result = policyc.load_source(AT_CALLS, functors={"inc": lambda x: x + 1}).evaluate({})
    assert result.relation("a") == {(2,), (7,)}
    assert format_source(AT_CALLS) == AT_CALLS.replace("@inc( 2 )", "@inc(2)")


def test_an_at_call_of_an_undeclared_functor_names_it() -> None:
    diagnostics = check_source(".decl a(x: number)\na(x) :- x = @nope(1).\n")
    assert [(d.name, d.span.line) for d in diagnostics] == [("undefined-function", 2)]
    assert "`nope`" in diagnostics[0].message


CONVERSIONS = """.decl N(n: number)
.decl F(f: float)
.decl T(t: symbol)
.input N, F, T
.decl toN(x: symbol, n: number)
.decl toF(x: symbol, f: float)
.decl toS(x: symbol, s: symbol)
.decl toU(x: symbol, u: unsigned)
toN(to_string(n), to_number(n)) :- N(n).
toN(to_string(f), to_number(f)) :- F(f).
toN(t, to_number(t)) :- T(t).
toF(to_string(n), to_float(n)) :- N(n).
toF(to_string(f), to_float(f)) :- F(f).
toS(t, to_string(t)) :- T(t).
toU(to_string(n), to_unsigned(n)) :- N(n), n >= 0.
toU(to_string(f), to_unsigned(f)) :- F(f), f >= 0.0.
toU(t, to_unsigned(t)) :- T(t).
"""


def test_the_conversions_take_every_primitive_type() -> None:
    """FunctorOps.cpp overloads `to_number` (S2I, F2I, U2I, I2I), `to_float` (S2F, I2F, U2F,
    F2F), `to_string` (I2S, F2S, U2S, S2S) and `to_unsigned` (S2U, I2U, F2U, U2U); F2I and F2U
    are static_casts (truncation), the ..2S ones std::to_string (six decimals for a float)."""
    assert check_source(CONVERSIONS) == []
    result = policyc.load_source(CONVERSIONS).evaluate(
        {"N": [[-3], [0], [42]], "F": [[2.75], [-2.75], [0.5]], "T": [["0x10"], ["7kg"]]}
    )
    assert not result.errored, result.errors
    assert result.relation("toN") == {
        ("-3", -3),
        ("0", 0),
        ("42", 42),
        ("2.750000", 2),
        ("-2.750000", -2),
        ("0.500000", 0),
        ("0x10", 16),
        ("7kg", 7),
    }
    assert result.relation("toF") == {
        ("-3", -3.0),
        ("0", 0.0),
        ("42", 42.0),
        ("2.750000", 2.75),
        ("-2.750000", -2.75),
        ("0.500000", 0.5),
    }
    assert result.relation("toS") == {("0x10", "0x10"), ("7kg", "7kg")}
    assert result.relation("toU") == {
        ("0", 0),
        ("42", 42),
        ("2.750000", 2),
        ("0.500000", 0),
        ("0x10", 16),
        ("7kg", 7),
    }


@pytest.mark.parametrize("value", [-1, -0.5 - 1, "-3", "x"])
def test_an_unsigned_conversion_without_a_value_is_an_error(value) -> None:
    """Soufflé's C++ casts wrap a negative value around the word size; a policy's values are
    exact, so policyc refuses (the literal fails, closed, with the error recorded)."""
    with pytest.raises(ValueError):
        builtins.to_unsigned(value)
    result = policyc.load_source(
        ".decl V(x: symbol)\n.input V\n.decl U(u: unsigned)\nU(to_unsigned(to_number(x))) :- V(x).\n"
    ).evaluate({"V": [[str(value)]]})
    assert result.relation("U") == set() and result.errored


@pytest.mark.parametrize("value", [[1, 2], None, True])
def test_the_conversions_refuse_values_that_are_not_primitive(value) -> None:
    for name in ("to_number", "to_float", "to_string", "to_unsigned"):
        with pytest.raises(ValueError):
            builtins.BUILTINS[name](value)


@examples(100, 2000)
def test_ord_numbers_texts_apart_and_in_one_order(examples: int) -> None:
    """Soufflé's `ord` is a text's index in its symbol table: equal for equal texts, different
    for different ones, and a total order. policyc's is the same every run."""
    policy = policyc.load_source(
        ".decl T(t: symbol)\n.input T\n.decl Before(a: symbol, b: symbol)\n"
        "Before(a, b) :- T(a), T(b), ord(a) < ord(b).\n"
    )

    @settings(max_examples=examples, deadline=None)
    @given(st.text(max_size=8), st.text(max_size=8))
    def check(a: str, b: str) -> None:
        assert (builtins.ord_(a) == builtins.ord_(b)) == (a == b)
        assert builtins.ord_(a) > 0
        before = policy.evaluate({"T": [[a], [b]]}).relation("Before")
        assert len(before) == (0 if a == b else 1)

    check()


def test_a_host_functor_may_return_unsigned_and_a_negative_value_is_refused() -> None:
    source = ".functor half(x: number): unsigned\n.decl H(x: number, h: unsigned)\nH(x, half(x)) :- x = range(-2, 3).\n"
    assert check_source(source) == []
    result = policyc.load_source(source, functors={"half": lambda x: x // 2}).evaluate({})
    assert result.relation("H") == {(0, 0), (1, 0), (2, 1)}
    assert result.errored and "`unsigned`" in str(result.errors[0])


NEGATED = """.type P = [a: number, b: number]
.decl r(p: P)
.decl e(x: number)
.input r, e
"""


def test_a_wildcard_inside_a_record_of_a_negated_atom_matches_any_field() -> None:
    source = NEGATED + "q(x) :- e(x), !r([x, _]).\nq2(x) :- e(x), !r([_, [x, _]]).\n"
    source = source.replace(
        ".decl r(p: P)", ".type Q = [a: number, b: P]\n.decl r(p: P)\n.decl s(q: Q)\n.input s"
    )
    source = source.replace("!r([_, [x, _]])", "!s([_, [x, _]])")
    assert check_source(source) == []
    result = policyc.load_source(source).evaluate(
        {"e": [[1], [2], [3]], "r": [[[1, 5]], [[3, 3]]], "s": [[[0, [2, 9]]]]}
    )
    assert not result.errored, result.errors
    assert result.relation("q") == {(2,)}
    assert result.relation("q2") == {(1,), (3,)}


def test_a_variable_inside_a_record_of_a_negated_atom_must_be_bound() -> None:
    diagnostics = check_source(NEGATED + "q(x) :- e(x), !r([y, _]).\n")
    assert [(d.name, d.span.line, d.span.column) for d in diagnostics] == [("unsafe-variable", 5, 19)]
    assert "`y`" in diagnostics[0].message


TUNED = """.pragma "magic-transform" "*"
.decl edge(a: number, b: number)
.decl path(a: number, b: number)
.input edge
path(a, b) :- edge(a, b).
path(a, c) :- path(a, b), edge(b, c).
.plan 0:(1,2),  1:( 2, 1 )
"""


def test_plans_and_pragmas_are_read_kept_and_reported_as_ignored() -> None:
    diagnostics = check_source(TUNED)
    assert [(d.name, d.span.line) for d in diagnostics] == [("ignored-option", 1), ("ignored-option", 7)]
    assert '`.pragma "magic-transform"`' in diagnostics[0].message
    assert "`.plan`" in diagnostics[1].message and "--show plan" in (diagnostics[1].help or "")
    formatted = format_source(TUNED)
    assert formatted.endswith(".plan 0:(1,2), 1:(2,1)\n") and formatted.startswith(
        '.pragma "magic-transform" "*"\n'
    )
    assert format_source(formatted) == formatted
    fixed = apply_fixes(TUNED, diagnostics)
    assert ".plan" not in fixed and ".pragma" not in fixed and check_source(fixed) == []
    facts = {"edge": [[1, 2], [2, 3]]}
    assert policyc.load_source(TUNED).evaluate(facts).relation("path") == {(1, 2), (2, 3), (1, 3)}


@pytest.mark.parametrize(
    ("text", "line"), [(".plan 0:1", 1), (".plan x:(1)", 1), (".pragma magic", 1), (".plan", 2)]
)
def test_malformed_plans_and_pragmas_are_syntax_errors(text: str, line: int) -> None:
    """Each is one error where the text stops being a plan or pragma (`.plan` alone: at the
    next statement, where its orders were expected); the statement after it still parses."""
    diagnostics = check_source(text + "\n.decl e(x: number)\n")
    assert [(d.name, d.span.line) for d in diagnostics] == [("syntax-error", line)]


@pytest.mark.parametrize("storage", ["btree", "brie", "btree_delete"])
def test_data_structure_qualifiers_are_read_kept_and_reported_as_ignored(storage: str) -> None:
    source = (
        f".decl e(x: number, y: number) {storage}\n.input e\n.decl brie(btree: number)\nbrie(x) :- e(x, _).\n"
    )
    diagnostics = check_source(source)
    assert [(d.name, d.span.line, d.span.column) for d in diagnostics] == [("ignored-option", 1, 31)]
    assert f"`{storage}`" in diagnostics[0].message
    assert format_source(source) == source
    fixed = apply_fixes(source, diagnostics)
    assert fixed.startswith(".decl e(x: number, y: number)\n") and check_source(fixed) == []
    result = policyc.load_source(source).evaluate({"e": [[1, 2], [3, 4]]})
    assert result.relation("brie") == {(1,), (3,)}


def test_a_data_structure_qualifier_goes_with_the_others() -> None:
    source = ".decl r(a: number, b: number) brie eqrel\nr(1, 2).\n"
    assert [d.name for d in check_source(source)] == ["ignored-option"]
    assert format_source(source) == source
    assert policyc.load_source(source).evaluate({}).relation("r") == {(1, 1), (1, 2), (2, 1), (2, 2)}


CASTS = """.type City <: symbol
.type Town <: symbol
.decl city(c: City)
.input city
.decl n(x: number)
.input n
"""


def test_as_gives_a_value_the_name_of_another_type_kept_alike() -> None:
    """Without `as`, two subtypes of one base do not mix; with it they do, and the value is
    the same value."""
    mixed = CASTS + ".decl town(t: Town)\ntown(c) :- city(c).\n"
    assert [d.name for d in check_source(mixed)] == ["type-mismatch"]
    cast = CASTS + ".decl town(t: Town)\ntown(as(c, Town)) :- city(c).\n"
    assert check_source(cast) == []
    assert policyc.load_source(cast).evaluate({"city": [["Sydney"]]}).relation("town") == {("Sydney",)}
    assert format_source(cast) == cast


@pytest.mark.parametrize(
    ("target", "conversion"), [("float", "to_float"), ("unsigned", "to_unsigned"), ("symbol", "to_string")]
)
def test_as_does_not_convert_a_number(target: str, conversion: str) -> None:
    """Soufflé's `as(x, float)` reinterprets the bits of a number; policyc refuses, naming the
    conversion that computes the value."""
    source = CASTS + f".decl r(x: {target})\nr(as(x, {target})) :- n(x).\n"
    (d,) = check_source(source)
    assert (d.name, d.span.line, d.span.column) == ("type-mismatch", 8, 3)
    assert f"`{conversion}(x)`" in d.message


def test_an_unknown_type_or_a_malformed_as_is_located() -> None:
    (d,) = check_source(CASTS + ".decl r(x: City)\nr(as(c, Ctiy)) :- city(c).\n")
    assert (d.name, d.span.line, d.span.column) == ("type-mismatch", 8, 9)
    assert "`Ctiy`" in d.message
    (d,) = check_source(CASTS + ".decl r(x: City)\nr(as(c)) :- city(c).\n")
    assert (d.name, d.span.line, d.span.column) == ("syntax-error", 8, 3)


def test_the_stages_after_the_type_checker_see_the_values() -> None:
    from policyc.analyzer.asp import solve_unique, to_clingo
    from policyc.compiler import ast
    from policyc.compiler.pipeline import compile_source

    source = CASTS + '.decl k(n: number)\nk(m) :- m = count : { city(c), as(c, Town) != "x" }.\n'
    compilation = compile_source(source)
    assert compilation.ok
    rules = [rule for _, rule in compilation.program.rules() if rule.head.name == "k"]
    terms = [t for rule in rules for lit in rule.body for t in ast.literal_terms(lit)]
    assert terms and not any(ast.has_cast(t) for t in terms)
    facts = {"city": [["a"], ["x"]]}
    assert policyc.load_source(source).evaluate(facts).relation("k") == {(1,)}
    assert solve_unique(compilation, to_clingo(compilation, facts), facts)["k"] == {(1,)}
