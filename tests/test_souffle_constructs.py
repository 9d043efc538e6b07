"""Soufflé's constructs beyond the corpus programs (tests/souffle/): what depends on the file
(`__FILE__`, `__LINE__`, `__INCL__`), the diagnostics of the constructs a policy refuses
(`autoinc()`, `recursive_iteration_cnt()`, `.limitsize`: order-dependent) or Soufflé refuses
(an IPv4 address with a part above 255), the formatter keeping each as written, and the limits
of what is accepted (`+` of a value of type `any`, an inline relation whose rule leaves its
head to the caller, a witness of `count`). Each expected value cites where it comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

import policyc
from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.formatter import format_source
from policyc.compiler.pipeline import compile_file, compile_source


def findings(text: str) -> list[Diagnostic]:
    """The diagnostics of a program, without the warnings about rules' missing `@id`/`@message`."""
    found = compile_source(text, "p.dl").diagnostics
    return [d for d in found if d.name != "missing-verdict-annotation"]


def problems(text: str) -> list[tuple[str, int, int]]:
    return [(d.name, d.span.line, d.span.column) for d in findings(text)]


def test_file_line_and_include_chain_are_what_souffles_scanner_makes_of_them(tmp_path: Path) -> None:
    """Soufflé's src/parser/scanner.ll: `__FILE__` is the file's name as reported, `__LINE__`
    the line of the word, `__INCL__` each `.include` on the way to the file, `file:line:column`
    from the outermost, joined by `;` (empty in a file nothing includes)."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "inner.dl").write_text("where(__FILE__, __LINE__, __INCL__).\n", "utf-8")
    (tmp_path / "middle.dl").write_text('\n.include "lib/inner.dl"\n', "utf-8")
    main = tmp_path / "main.dl"
    main.write_text(
        '.decl where(f: symbol, l: number, i: symbol)\n.include "middle.dl"\n'
        "where(__FILE__, __LINE__, __INCL__).\n.output where\n",
        "utf-8",
    )
    compilation = compile_file(str(main))
    assert [d.message for d in compilation.diagnostics] == []
    found = policyc.load(str(main)).evaluate({}).relations["where"]
    middle, inner = str(tmp_path / "middle.dl"), str(tmp_path / "lib" / "inner.dl")
    assert found == {
        (str(main), 3, ""),
        (inner, 1, f"{main}:2:1;{middle}:2:1"),
    }


def test_an_ipv4_address_with_a_part_above_255_is_refused_where_it_is_written() -> None:
    """scanner.ll: "IP out of range"."""
    found = compile_source(".decl a(x: number)\na(10.0.300.1).\n", "p.dl").diagnostics
    assert [(d.name, d.span.line, d.span.column) for d in found] == [("syntax-error", 2, 3)]
    assert "at most 255" in found[0].message


@pytest.mark.parametrize("call", ["autoinc()", "recursive_iteration_cnt()"])
def test_a_policy_refuses_a_counter(call: str) -> None:
    """Fail closed wins over Soufflé (clarification 1): a construct whose value follows the
    order of evaluation is refused in a policy, at its place; a Soufflé program is warned."""
    text = f".decl Send(a: symbol)\n.input Send\nDeny(a) :- Send(a), n = {call}, n > 3.\n"
    assert problems(text) == [("order-dependent", 3, text.splitlines()[2].index(call) + 1)]
    souffle = text.replace("Deny(a)", "Big(a)") + ".output Big\n"
    assert problems(souffle) == [("evaluation-order", 3, souffle.splitlines()[2].index(call) + 1)]


def test_a_policy_refuses_a_size_limit() -> None:
    text = ".decl Send(a: symbol)\n.input Send\nDeny(a) :- Send(a).\n.limitsize Deny(n=2)\n"
    assert problems(text) == [("order-dependent", 4, 1)]
    unknown = ".decl Send(a: symbol)\n.input Send\nDeny(a) :- Send(a).\n.limitsize Nope(n=2)\n"
    assert ("undefined-relation", 4, 12) in problems(unknown)


def test_each_count_starts_again_in_every_evaluation() -> None:
    text = ".decl N(s: symbol)\n.input N\n.decl M(s: symbol, n: number)\nM(s, autoinc()) :- N(s).\n.output M"
    policy = policyc.load(text)
    first = policy.evaluate({"N": [["b"], ["a"]]}).relations["M"]
    again = policy.evaluate({"N": [["b"], ["a"]]}).relations["M"]
    assert first == again == {("a", 0), ("b", 1)}


def test_the_formatter_keeps_souffles_spellings() -> None:
    text = (
        ".number_type N\n.symbol_type S\n.decl r?(x: N, s: S)\n.limitsize r?(n=3)\n"
        "r?(192.168.0.1, __FILE__).\nr?(__LINE__, s) :- r?(_, s), true.\nr?(1, s) :- r?(_, s), false.\n"
    )
    assert format_source(text) == text
    assert format_source(format_source(text)) == text


def test_plus_of_a_value_of_type_any_is_still_refused() -> None:
    """Clarification 2: `+` on operands of type `any` is a type error unless both are declared
    symbols; `+` of two symbols joins them."""
    text = (
        ".functor arg(a: symbol, key: symbol): any\n.decl A(a: symbol)\n.input A\n"
        'Deny(a) :- A(a), x = arg(a, "n") + "!", x = "1!".\n'
    )
    first = findings(text)[0]
    assert (first.name, first.span.column) == ("type-mismatch", 22) and "of type `any`" in first.message
    joined = '.decl A(a: symbol)\n.input A\nDeny(a) :- A(a), x = a + "!", x = "v!".\n'
    assert problems(joined) == []
    assert policyc.load(joined).evaluate({"A": [["v"], ["w"]]}).relations["Deny"] == {("v",)}


def test_a_witness_of_count_is_still_the_witness_problem() -> None:
    """GroundWitnesses.cpp grounds the witnesses of `min` and `max` only; Soufflé refuses the
    others (a count has no tuple that reaches it)."""
    text = (
        ".decl e(x: symbol)\n.input e\n.decl o(x: symbol, n: number)\no(x, n) :- n = count : e(x).\n.output o"
    )
    assert problems(text) == [("unsafe-variable", 4, 3)]


def test_a_witness_in_a_policy_decides_as_souffle_grounds_it() -> None:
    text = (
        ".decl Bid(a: symbol, amount: number)\n.input Bid\n"
        "Allow(a) :- m = max x : Bid(a, x).\n.default deny\n"
    )
    assert problems(text) == []
    result = policyc.load(text).evaluate({"Bid": [["low", 3], ["high", 9]]})
    assert result.relations["Allow"] == {("high",)}


def test_the_analyzer_does_not_model_a_size_limit() -> None:
    """clingo would derive every fact a `.limitsize` cuts off: the translation says it cannot."""
    from policyc.analyzer.asp import Untranslatable, to_clingo

    text = ".decl c(n: number)\nc(0).\nc(n + 1) :- c(n), n < 100.\n.limitsize c(n=10)\n.output c"
    with pytest.raises(Untranslatable, match="limitsize"):
        to_clingo(compile_source(text, "p.dl"), {})
    assert len(policyc.load(text).evaluate({}).relations["c"]) == 10


def test_the_formatter_keeps_the_oldest_spellings_and_the_hints() -> None:
    """What tests/souffle/oldest_syntax.dl reads, written back as written (a bare `.type`, `.once`,
    `5u` in each base, the hints and older qualifiers of a `.decl`, `.printsize`, `stateful`)."""
    text = (
        ".once\n.type T\n.decl r(t: T, n: unsigned) magic no_inline output\n"
        ".functor f(x: number): number stateful\n"
        'r("a", 0x1Fu).\nr("b", 0b101u).\nr("c", 5u).\n.printsize r\n'
    )
    assert format_source(text) == text
    assert format_source(format_source(text)) == text


def test_an_unsigned_constant_is_not_a_number() -> None:
    """parser.yy: `5u` is a NumericConstant of type Uint, which a `number` attribute does not take
    (Soufflé's type checker keeps `number` and `unsigned` apart)."""
    found = findings(".decl a(x: number)\na(5u).\n")
    assert [(d.name, d.span.line, d.span.column) for d in found] == [("type-mismatch", 2, 3)]
    assert "`unsigned`" in found[0].message


def test_a_stateful_functor_is_a_python_functor_and_the_qualifier_is_reported() -> None:
    """parser.yy: `stateful` gives a C++ functor Soufflé's symbol and record tables; a policyc
    functor is given the values themselves, so the qualifier changes nothing here."""
    text = ".functor twice(x: number): number stateful\n.decl a(x: number)\na(twice(4)).\n.output a\n"
    assert problems(text) == [("ignored-option", 1, 35)]

    @policyc.functor()
    def twice(x: int) -> int:
        return 2 * x

    assert policyc.load(text, functors=[twice]).evaluate({}).relations["a"] == {(8,)}


@pytest.mark.parametrize(
    ("text", "line", "column", "said", "hint"),
    [
        (
            '#include "other.dl"\n.decl a(x: number)\na(1).\n',
            1,
            1,
            "`#include` is a line of the C preprocessor",
            ".include",
        ),
        (
            ".decl a(x: number)\n  #define N 5\na(1).\n",
            2,
            3,
            "`#define` is a line of the C preprocessor",
            "where it is used",
        ),
        (
            ".decl a(x: number)\na(s) :- s = @@sum x : 0, {a(x)}.\n",
            2,
            13,
            "user-defined aggregators",
            "recursive rule",
        ),
        (
            ".lattice L<> { }\n.decl a(x: number)\na(1).\n",
            1,
            1,
            "lattices (`.lattice`) are not supported",
            "aggregate",
        ),
    ],
)
def test_what_policyc_does_not_read_is_refused_where_it_is_saying_why(
    text: str, line: int, column: int, said: str, hint: str
) -> None:
    """scanner.ll reads `#` lines as the C preprocessor's line markers (Soufflé runs mcpp over a
    program first), `@@f` as a user-defined aggregator and `.lattice` as a lattice declaration;
    policyc refuses each at its place, once, with what to write instead, and reads the rest."""
    found = findings(text)
    assert [(d.name, d.span.line, d.span.column) for d in found] == [("syntax-error", line, column)]
    assert said in found[0].message and hint in (found[0].help or "")
