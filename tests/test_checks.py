"""Table of semantic checks of resolution, types, safety and stratification: each policy, and
exactly the diagnostics it must produce (see tests/checks_table.py)."""

from __future__ import annotations

import pytest

from .checks_table import assert_diagnostics

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
    # ----------------------------------------------- missing-verdict-annotation
    "missing-verdict-annotation": (
        """
        .input Send, Pay
        Deny(a) :- Send(a).
        @id("pay-needs-approval")
        Escalate(a) :- Pay(a).
        @id("ok") @message("{a} is fine")
        Deny(a) :- Send(a), Pay(a).
        Allow(a) :- Send(a).
        """,
        [("missing-verdict-annotation", 3, "Deny"), ("missing-verdict-annotation", 5, "Escalate")],
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
        Deny(a) :- R(a), x = contains("x", a), x = a.
        """,
        [("type-mismatch", 3, 'contains("x", a)')],
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
    # `+` and `*` on a value of type `any`: a text would be joined or repeated
    "type-any-operand": (
        """
        .functor arg(a: symbol, k: symbol): any
        .input R
        .output Out
        Deny(a) :- R(a), n = arg(a, "x") + arg(a, "y"), n > 3.
        Deny(a) :- R(a), v = arg(a, "x"), w = v, n = 2 * w, n > 3.
        Deny(a) :- R(a), n = max(arg(a, "x"), arg(a, "y")) + 1, n > 3.
        Deny(a) :- R(a), n = sum v + 1 : { R(b), v = arg(b, "x") }, n > 3.
        Out(a, n + 1) :- R(a), n = arg(a, "x").
        """,
        [
            ("type-mismatch", 5, 'arg(a, "x")'),
            ("type-mismatch", 5, 'arg(a, "y")'),
            ("type-mismatch", 6, "w"),
            ("type-mismatch", 7, "max("),
            ("type-mismatch", 8, "v"),
            ("type-mismatch", 9, "n"),
        ],
    ),
    "type-any-operand-converted-or-typed": (
        """
        .functor arg(a: symbol, k: symbol): any
        .decl Limit(a: symbol, n: number)
        .input R, Limit
        Deny(a) :- R(a), n = to_number(arg(a, "x")) + 1, n > 3.
        Deny(a) :- Limit(a, n), n = arg(a, "x"), m = n * 2, m > 3.
        Deny(a) :- R(a), n = arg(a, "x") - 1, m = -arg(a, "y"), n > m.
        Deny(a) :- R(a), n = (arg(a, "x") - 0) * 2, n > 3.
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
        Deny(a) :- R(a), contains(y, a).
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
    "inline-cannot-bind": (  # its rule leaves `v` to the caller (one that binds it is stored)
        """
        .decl Short(v: symbol) inline
        Short(v) :- strlen(v) < 3.
        Deny(a) :- Short(a).
        """,
        [("unsafe-variable", 4, "a")],
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
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check(case: str) -> None:
    assert_diagnostics(*CASES[case])
