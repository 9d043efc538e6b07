"""Table of semantic checks: each policy, and exactly the diagnostics it must produce.

Each expectation is (name, line, text): a diagnostic of that name on that line whose span
starts with that text. The lists are complete: any other diagnostic fails the test.
"""

from __future__ import annotations

import pytest

from policyc.compiler.pipeline import compile_source

CASES = {
    # ------------------------------------------------------------ clean programs
    "clean-toxic-flow": (
        """
        .input UntrustedInput, SensitiveInput, DependsOn, ExternalSend
        Tainted(e) :- UntrustedInput(e).
        Tainted(e) :- DependsOn(e, e'), Tainted(e').
        HasSecret(e) :- SensitiveInput(e).
        HasSecret(e) :- DependsOn(e, e'), HasSecret(e').
        Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).
        """,
        [],
    ),
    "clean-aggregates": (
        """
        .decl Spend(a: symbol, amount: number)
        .input Spend
        Total(t) :- t = sum x : { Spend(_, x) }.
        Most(m) :- m = max x : Spend(_, x).
        Many(n) :- n = count : { Spend(_, _) }, n > 3.
        PerUser(u, t) :- Spend(u, _), t = sum x : { Spend(u, x) }.
        Avg(v) :- v = mean x : { Spend(_, x) }.
        Deny(a) :- Spend(a, _), Total(t), t > 100, Most(m), m > 50, Many(_), PerUser(a, _), Avg(v), v > 1.5.
        """,
        [],
    ),
    "clean-assignment-chain": (
        """
        .input P
        Deny(a) :- P(a, n), m = n + 1, k = m * 2, k > 10.
        Deny(a) :- P(a, n), 10 < n * 2.
        Deny(a) :- P(a, _), x = "s", y = cat(x, a), y != "".
        """,
        [],
    ),
    # ------------------------------------------------------- undefined-relation
    "undefined-relation": (
        """
        .input Tainted, Send
        Deny(a) :- Send(a), Taint(a).
        """,
        [("unused-relation", 2, "Tainted"), ("undefined-relation", 3, "Taint")],
    ),
    "undefined-relation-each-use": (
        """
        .input Send
        Deny(a) :- Send(a), Missing(a).
        Allow(a) :- Send(a), not Missing(a).
        """,
        [("undefined-relation", 3, "Missing"), ("undefined-relation", 4, "Missing")],
    ),
    "undefined-output": (
        """
        .output Nowhere
        """,
        [("undefined-relation", 2, "Nowhere")],
    ),
    "undefined-relation-in-aggregate": (
        """
        N(n) :- n = count : { Ghost(_) }.
        .output N
        """,
        [("undefined-relation", 2, "Ghost")],
    ),
    # ----------------------------------------------------------- arity-mismatch
    "arity-declared": (
        """
        .decl R(x: symbol, n: number)
        .input R
        Deny(a) :- R(a).
        """,
        [("arity-mismatch", 4, "R(a)")],
    ),
    "arity-first-use": (
        """
        .input R
        Deny(a) :- R(a, b), R(b).
        """,
        [("arity-mismatch", 3, "R(b)")],
    ),
    "arity-verdict": (
        """
        .input R
        Deny(a, b) :- R(a, b).
        """,
        [("arity-mismatch", 3, "Deny(a, b)")],
    ),
    "arity-functor": (
        """
        .input R
        Deny(a) :- R(a), contains(a).
        Deny(a) :- R(a), x = lower(a, a), x != "".
        """,
        [("arity-mismatch", 3, "contains(a)"), ("arity-mismatch", 4, "lower(a, a)")],
    ),
    # ------------------------------------------------------------ type-mismatch
    "type-decl-vs-constant": (
        """
        .decl R(x: symbol, n: number)
        .input R
        Deny(a) :- R(a, "three").
        """,
        [("type-mismatch", 4, '"three"')],
    ),
    "type-variable-flow": (
        """
        .decl S(x: symbol)
        .decl N(x: number)
        .input S, N
        Deny(a) :- S(a), N(a).
        """,
        [("type-mismatch", 5, "a")],
    ),
    "type-comparison": (
        """
        .decl R(x: symbol, n: number)
        .input R
        Deny(a) :- R(a, n), n > "big".
        """,
        [("type-mismatch", 4, 'n > "big"')],
    ),
    "type-arithmetic-on-symbol": (
        """
        .decl R(x: symbol)
        .input R
        Deny(a) :- R(a), b = a + 1, b > 0.
        """,
        [("type-mismatch", 4, "a")],
    ),
    "type-functor-parameter": (
        """
        .decl R(x: symbol, n: number)
        .input R
        Deny(a) :- R(a, n), x = lower(n), x = a.
        """,
        [("type-mismatch", 4, "n")],
    ),
    "type-inferred-relation": (
        """
        .input Src
        Mid(x) :- Src(x), x = "s".
        Deny(a) :- Mid(a), Mid(b), b = 3, a = b.
        """,
        [("type-mismatch", 4, "b")],
    ),
    "type-predicate-as-value": (
        """
        .input R
        Deny(a) :- R(a), x = contains(a, "x"), x = a.
        """,
        [("type-mismatch", 3, 'contains(a, "x")')],
    ),
    "type-function-as-condition": (
        """
        .input R
        Deny(a) :- R(a), lower(a).
        """,
        [("type-mismatch", 3, "lower(a)")],
    ),
    "type-integer-fits-float": (
        """
        .decl F(x: symbol, v: float)
        .input F
        Deny(a) :- F(a, v), v > 1, w = v * 2, w < 10.5.
        """,
        [],
    ),
    "type-any-result": (
        """
        .functor arg(a: symbol, k: symbol): any
        .input R
        Deny(a) :- R(a), arg(a, "n") > 3, arg(a, "s") = "x".
        """,
        [],
    ),
    # ----------------------------------------------------------- unsafe-variable
    "unsafe-head": (
        """
        .input R
        Deny(a) :- R(b).
        """,
        [("unsafe-variable", 3, "a"), ("singleton-variable", 3, "b")],
    ),
    "unsafe-negation": (
        """
        .input R, Q
        Deny(a) :- R(a), not Q(a, z).
        """,
        [("unsafe-variable", 3, "z")],
    ),
    "unsafe-comparison": (
        """
        .input R
        Deny(a) :- R(a), x > 3.
        """,
        [("unsafe-variable", 3, "x")],
    ),
    "unsafe-function-argument": (
        """
        .input R
        Deny(a) :- R(a), contains(a, y).
        """,
        [("unsafe-variable", 3, "y")],
    ),
    "unsafe-assignment-cause": (
        """
        .input R
        Deny(a) :- R(a), x = y + 1, x > 2.
        """,
        [("unsafe-variable", 3, "y")],
    ),
    "unsafe-witness": (
        """
        .input R
        Deny(a) :- R(a), n = count : { R(w) }, w != "x".
        """,
        [("unsafe-variable", 3, "w")],
    ),
    "unsafe-fact-variable": (
        """
        Send(v6).
        .output Send
        """,
        [("unsafe-variable", 2, "v6")],
    ),
    "unsafe-wildcard-head": (
        """
        .input R
        Out(_) :- R(_).
        .output Out
        """,
        [("unsafe-variable", 3, "_")],
    ),
    "unsafe-wildcard-comparison": (
        """
        .input R
        Deny(a) :- R(a), a != _.
        """,
        [("unsafe-variable", 3, "_")],
    ),
    "safe-correlated-aggregate": (
        """
        .input R
        Deny(a) :- R(a, _), n = count : { R(a, _) }, n > 2.
        """,
        [],
    ),
    "safe-expression-in-atom": (
        """
        .input R, S
        Deny(a) :- R(a), S(lower(a)).
        """,
        [],
    ),
    "unsafe-expression-in-atom": (
        """
        .input R, S
        Deny(a) :- R(a), S(lower(b)).
        """,
        [("unsafe-variable", 3, "b")],
    ),
    "safe-expression-bound-by-same-atom": (
        """
        .input R, S
        Deny(a) :- R(a), S(lower(b), b).
        """,
        [],
    ),
    "inline-binds-by-caller": (
        """
        .decl Anchored(v: symbol) inline
        .functor mentions(q: symbol, v: symbol): bool
        .input Request, Dest
        Anchored(v) :- Request(q), mentions(q, v).
        Deny(a) :- Dest(a, v), not Anchored(v).
        """,
        [],
    ),
    "inline-cannot-bind": (
        """
        .decl Ok(v: symbol) inline
        .input Known
        Ok(v) :- Known(v).
        Deny(a) :- Ok(a).
        """,
        [("unsafe-variable", 5, "a")],
    ),
    # ------------------------------------------------------------ negation-cycle
    "negation-self": (
        """
        .input R
        P(x) :- R(x), not P(x).
        .output P
        """,
        [("negation-cycle", 3, "P(x)")],
    ),
    "negation-two": (
        """
        .input R
        A(x) :- R(x), not B(x).
        B(x) :- R(x), A(x).
        .output B
        """,
        [("negation-cycle", 3, "B(x)")],
    ),
    "aggregate-cycle": (
        """
        .input R
        N(n) :- R(_), n = count : { N(_) }.
        .output N
        """,
        [("negation-cycle", 3, "N(_)")],
    ),
    "inline-recursive": (
        """
        .decl Reach(x: symbol) inline
        .input E
        Reach(x) :- E(x, "goal").
        Reach(x) :- E(x, y), Reach(y).
        Deny(a) :- E(a, _), Reach(a).
        """,
        [("invalid-directive", 2, "Reach")],
    ),
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
        Deny(a) :- Send(a, x), contains(x, "evil"), strlen(x) > 3.
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


def _dedent(source: str) -> str:
    lines = source.split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


@pytest.mark.parametrize("case", sorted(CASES))
def test_check(case: str) -> None:
    source, expected = CASES[case]
    text = _dedent(source)
    result = compile_source(text, "case.dl")
    found = sorted((d.name, d.span.line) for d in result.diagnostics)
    assert found == sorted((name, line) for name, line, _ in expected), [
        (d.name, d.span.line, d.message) for d in result.diagnostics
    ]
    for d in result.diagnostics:
        at = text[d.span.start : d.span.start + 40]
        matches = [snippet for name, line, snippet in expected if name == d.name and line == d.span.line]
        assert any(at.startswith(s) for s in matches), (d.name, d.span.line, at, d.message)


def test_a_builtin_declared_again_with_another_signature_says_which() -> None:
    text = ".functor contains(s: symbol, n: number): bool\n"
    (d,) = compile_source(text, "case.dl").diagnostics
    assert d.name == "invalid-directive"
    assert "`contains` is a builtin functor" in d.message
    assert "contains(text: symbol, part: symbol): bool" in d.message
    (d,) = compile_source(".functor to_number(t: symbol): symbol\n", "case.dl").diagnostics
    assert "to_number(text: symbol): number" in d.message


def test_a_builtin_declared_again_as_it_is_gets_a_warning_whose_fix_removes_it() -> None:
    text = (
        ".input Send\n"
        ".functor lower(x: symbol): symbol\n"
        "  .functor contains(s: symbol, sub: symbol): bool   \n"
        ".functor strlen(s: symbol): number  // the length\n"
        'Deny(a) :- Send(a, x), contains(lower(x), "evil"), strlen(x) > 3.\n'
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
        '.input Send\n// the length\nDeny(a) :- Send(a, x), contains(lower(x), "evil"), strlen(x) > 3.\n'
    )
    assert not compile_source(fixed, "case.dl").diagnostics
