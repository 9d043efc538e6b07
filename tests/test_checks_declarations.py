"""Table of semantic checks of functors, directives, annotations, names and unused, empty or
duplicate parts: each policy, and exactly the diagnostics it must produce (see
tests/checks_table.py); and the fixes of redeclared builtins."""

from __future__ import annotations

import pytest

from policyc.compiler.pipeline import compile_source

from .checks_table import assert_diagnostics

CASES = {
    # --------------------------------------------------------- undefined-function
    "undefined-function": (
        """
        .input R
        Deny(a) :- R(a), tool_arg(a, "x") = "y".
        """,
        [("undefined-function", 3, "tool_arg")],
    ),
    "relation-called-as-function": (
        """
        .input R
        Deny(a) :- R(a), x = R(a), x = a.
        """,
        [("undefined-function", 3, "R")],
    ),
    # ---------------------------------------------------------- invalid-directive
    "directive-unknown-role": (
        """
        .role target budget 0.01
        .field send_money.recipient : targt
        """,
        [("invalid-directive", 3, "targt")],
    ),
    "directive-budget-range": (
        """
        .role target budget 1.5
        .role credential budget 0
        """,
        [("invalid-directive", 2, "1.5"), ("invalid-directive", 3, "0")],
    ),
    "directive-duplicate-default": (
        """
        .default deny
        .default allow
        """,
        [("invalid-directive", 3, ".default allow")],
    ),
    "directive-bad-default": (
        """
        .default maybe
        """,
        [("invalid-directive", 2, "maybe")],
    ),
    "directive-duplicate-decl": (
        """
        .decl R(x: symbol)
        .decl R(x: number)
        .input R
        """,
        [("invalid-directive", 3, "R")],
    ),
    "directive-unknown-type": (
        """
        .decl R(x: string)
        .input R
        """,
        [("invalid-directive", 2, "string")],
    ),
    "directive-field-twice": (
        """
        .role target budget 0.1
        .role content budget 0.2
        .field send.to : target
        .field send.to : content
        """,
        [("invalid-directive", 5, "send.to")],
    ),
    "directive-include-missing": (
        """
        .include "nowhere/missing.dl"
        """,
        [("invalid-directive", 2, '"nowhere/missing.dl"')],
    ),
    "directive-import-unknown": (
        """
        .import nosuchmodule
        """,
        [("invalid-directive", 2, "nosuchmodule")],
    ),
    "directive-builtin-redeclared": (
        """
        .functor lower(s: symbol, t: symbol): symbol
        .functor strlen(s: symbol): symbol
        .functor url_host(u: number): symbol
        """,
        [
            ("invalid-directive", 2, "lower"),
            ("invalid-directive", 3, "strlen"),
            ("invalid-directive", 4, "url_host"),
        ],
    ),
    # ------------------------------------------------------------- redeclared-builtin
    "redeclared-builtin-same-signature": (
        """
        .functor contains(s: symbol, sub: symbol): bool
        .functor strlen(text: symbol): number  // as in Soufflé
        .input Send
        Deny(a) :- Send(a, x), contains("evil", x), strlen(x) > 3.
        """,
        [("redeclared-builtin", 2, ".functor contains"), ("redeclared-builtin", 3, ".functor strlen")],
    ),
    "directive-inline-input": (
        """
        .decl R(x: symbol) inline
        .input R
        """,
        [("invalid-directive", 3, "R")],
    ),
    # --------------------------------------------------------- invalid-annotation
    "annotation-unknown": (
        """
        .input R
        @mesage("x")
        Deny(a) :- R(a).
        """,
        [("invalid-annotation", 3, "@mesage")],
    ),
    "annotation-duplicate-id": (
        """
        .input R, S
        @id("one")
        Deny(a) :- R(a).
        @id("one")
        Deny(a) :- S(a).
        """,
        [("invalid-annotation", 5, '"one"')],
    ),
    "annotation-placeholder": (
        """
        .input R
        @message("{a} goes to {recipient}")
        Deny(a) :- R(a).
        """,
        [("invalid-annotation", 3, '"{a} goes to {recipient}"')],
    ),
    "annotation-severity": (
        """
        .input R
        @severity("urgent")
        Deny(a) :- R(a).
        """,
        [("invalid-annotation", 3, '"urgent"')],
    ),
    "annotation-bare-word": (
        """
        .input R
        @severity(high)
        Deny(a) :- R(a).
        """,
        [("invalid-annotation", 3, "high")],
    ),
    "annotation-on-directive": (
        """
        @id("x")
        .input R
        """,
        [("invalid-annotation", 2, '@id("x")')],
    ),
    "annotation-fine": (
        """
        .input R
        @id("r1") @req("R1", "R2") @message("{a} is blocked {{really}}") @suggest("ask") @severity("critical")
        Deny(a) :- R(a).
        """,
        [],
    ),
    # ---------------------------------------------------------------- name-conflict
    "name-conflict": (
        """
        .functor risky(a: symbol): bool
        .input R
        risky(a) :- R(a).
        """,
        [("name-conflict", 4, "risky")],
    ),
    # ------------------------------------------------------------------- warnings
    "singleton": (
        """
        .input R, S
        Deny(a) :- R(a, b), S(a, _c).
        """,
        [("singleton-variable", 3, "b")],
    ),
    "singleton-named-by-message": (
        """
        .input R, S
        @message("{a} reads {b}")
        Deny(a) :- R(a, b), S(a, c).
        """,
        [("singleton-variable", 4, "c")],
    ),
    "singleton-in-aggregate": (
        """
        .input R
        Deny(a) :- R(a, _), n = count : { R(a, x) }, n > 1.
        """,
        [("singleton-variable", 3, "x")],
    ),
    "unused-relation": (
        """
        .input R
        Helper(x) :- R(x).
        Deny(a) :- R(a).
        """,
        [("unused-relation", 3, "Helper")],
    ),
    "unused-input": (
        """
        .decl Ignored(x: symbol)
        .input R, Ignored
        Deny(a) :- R(a).
        """,
        [("unused-relation", 2, "Ignored")],
    ),
    "no-entry-points-no-unused": (
        """
        .input R
        Helper(x) :- R(x).
        """,
        [],
    ),
    "empty-declared": (
        """
        .decl Approved(a: symbol)
        .input R
        Deny(a) :- R(a), not Approved(a).
        """,
        [("empty-relation", 2, "Approved")],
    ),
    "empty-derived": (
        """
        .decl Never(a: symbol)
        .input R
        Chain(a) :- Never(a).
        Deny(a) :- R(a), Chain(a).
        """,
        [("empty-relation", 2, "Never"), ("empty-relation", 4, "Chain")],
    ),
    "count-over-empty-is-not-empty": (
        """
        .decl Never(a: symbol)
        .input R
        N(n) :- n = count : { Never(_) }.
        Deny(a) :- R(a), N(0).
        """,
        [("empty-relation", 2, "Never")],
    ),
    "duplicate-rule": (
        """
        .input R, S
        Deny(a) :- R(a), S(a).
        Deny(b) :- R(b), S(b).
        Deny(a) :- S(a), R(a).
        """,
        [("duplicate-rule", 4, "Deny(b)"), ("duplicate-rule", 5, "Deny(a)")],
    ),
    "duplicate-fact": (
        """
        Level("SECRET", 2).
        Level("SECRET", 2).
        Level("TOP_SECRET", 3).
        .output Level
        """,
        [("duplicate-rule", 3, "Level")],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check(case: str) -> None:
    assert_diagnostics(*CASES[case])


def test_a_builtin_declared_again_with_another_signature_says_which() -> None:
    text = ".functor contains(s: symbol, n: number): bool\n"
    (d,) = compile_source(text, "case.dl").diagnostics
    assert d.name == "invalid-directive"
    assert "`contains` is a builtin functor" in d.message
    assert "contains(part: symbol, text: symbol): bool" in d.message
    (d,) = compile_source(".functor to_number(t: symbol): symbol\n", "case.dl").diagnostics
    assert d.name == "invalid-directive"
    assert "to_number(x: any): number" in d.message


def test_a_conversion_declared_as_it_was_before_it_took_every_type_is_a_warning() -> None:
    """`to_number` and `to_string` took only a text (an integer) before; a policy declaring
    them so still checks, told that the declaration is not needed."""
    for text in (".functor to_number(t: symbol): number\n", ".functor to_string(n: number): symbol\n"):
        (d,) = compile_source(text, "case.dl").diagnostics
        assert (d.name, d.severity.value) == ("redeclared-builtin", "warning")
        assert "needs nothing of its own" in d.message and d.fix is not None
    (d,) = compile_source(".functor to_number(t: symbol, u: symbol): number\n", "case.dl").diagnostics
    assert d.name == "invalid-directive"


def test_a_builtin_declared_again_as_it_is_gets_a_warning_whose_fix_removes_it() -> None:
    text = (
        ".input Send\n"
        ".functor lower(x: symbol): symbol\n"
        "  .functor contains(s: symbol, sub: symbol): bool   \n"
        ".functor strlen(s: symbol): number  // the length\n"
        '@id("evil") @message("{a} sends evil") Deny(a) :- Send(a, x), contains("evil", lower(x)), strlen(x) > 3.\n'
    )
    result = compile_source(text, "case.dl")
    assert result.ok
    found = sorted(result.diagnostics, key=lambda d: d.span.start)
    assert [(d.name, d.severity.value, d.span.line) for d in found] == [
        ("redeclared-builtin", "warning", line) for line in (2, 3, 4)
    ]
    assert "`lower` is a builtin functor" in found[0].message
    assert all(d.fix is not None and d.fix.safe for d in found)
    fixed = text
    for d in sorted(found, key=lambda d: -d.span.start):  # from the end: earlier offsets stay
        for edit in d.fix.edits:
            fixed = fixed[: edit.span.start] + edit.text + fixed[edit.span.end :]
    assert fixed == (
        '.input Send\n// the length\n@id("evil") @message("{a} sends evil") '
        'Deny(a) :- Send(a, x), contains("evil", lower(x)), strlen(x) > 3.\n'
    )
    assert not compile_source(fixed, "case.dl").diagnostics
