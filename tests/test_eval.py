"""Evaluation semantics through the Python API: relations, aggregates, arithmetic,
functors, inline relations, facts checking, verdicts and failing closed."""

from __future__ import annotations

import math

import pytest

import policyc
from policyc.runtime.errors import PolicyError
from policyc.runtime.evaluator import Limits
from policyc.runtime.facts import FactsError
from policyc.runtime.functors import MissingFunctors
from policyc.runtime.policy import EvaluationError


def evaluate(
    source: str, facts: dict | None = None, functors=None, **options
) -> policyc.runtime.policy.Result:
    return policyc.load(source, functors, **options).evaluate(facts or {})


def test_recursion_and_negation() -> None:
    result = evaluate(
        """
        .decl Edge(a: symbol, b: symbol)
        .input Edge
        Reach(x, y) :- Edge(x, y).
        Reach(x, z) :- Reach(x, y), Edge(y, z).
        Node(x) :- Edge(x, _).
        Node(y) :- Edge(_, y).
        Unreachable(x, y) :- Node(x), Node(y), not Reach(x, y).
        .output Reach, Unreachable
        """,
        {"Edge": [["a", "b"], ["b", "c"], ["c", "a"], ["d", "a"]]},
    )
    reach = result.relation("Reach")
    assert ("a", "a") in reach and ("d", "c") in reach and ("a", "d") not in reach
    assert result.relation("Unreachable") == {("a", "d"), ("b", "d"), ("c", "d"), ("d", "d")}


def test_mutual_recursion() -> None:
    result = evaluate(
        """
        .decl Next(a: number, b: number)
        .input Next
        Even(0).
        Odd(y) :- Even(x), Next(x, y).
        Even(y) :- Odd(x), Next(x, y).
        .output Even, Odd
        """,
        {"Next": [[i, i + 1] for i in range(6)]},
    )
    assert result.relation("Even") == {(0,), (2,), (4,), (6,)}
    assert result.relation("Odd") == {(1,), (3,), (5,)}


def test_aggregates_and_empty_groups() -> None:
    source = """
        .decl Spend(user: symbol, item: symbol, amount: number)
        .decl User(u: symbol)
        .input Spend, User
        Count(u, n) :- User(u), n = count : { Spend(u, _, _) }.
        Total(u, t) :- User(u), t = sum a : { Spend(u, _, a) }.
        Most(u, m) :- User(u), m = max a : { Spend(u, _, a) }.
        Least(u, m) :- User(u), m = min a : Spend(u, _, a).
        Mean(u, m) :- User(u), m = mean a : { Spend(u, _, a) }.
        .output Count, Total, Most, Least, Mean
    """
    result = evaluate(
        source,
        {"User": [["ann"], ["bob"]], "Spend": [["ann", "tea", 3], ["ann", "cake", 3], ["ann", "pie", 6]]},
    )
    assert result.relation("Count") == {("ann", 3), ("bob", 0)}
    # each distinct binding counts: two items costing 3 both count
    assert result.relation("Total") == {("ann", 12), ("bob", 0)}
    assert result.relation("Most") == {("ann", 6)}  # nothing for bob: no maximum of nothing
    assert result.relation("Least") == {("ann", 3)}
    assert result.relation("Mean") == {("ann", 4.0)}


def test_arithmetic_integers_and_floats() -> None:
    result = evaluate(
        """
        .decl N(x: number)
        .decl F(x: float)
        .input N, F
        Int(x, x / 2, x % 3, -x / 2, x * x - 1) :- N(x).
        Real(y, y / 2, y * 1.5) :- F(y).
        .output Int, Real
        """,
        {"N": [[7], [-7]], "F": [[3], [0.5]]},
    )
    assert result.relation("Int") == {(7, 3, 1, -3, 48), (-7, -3, -1, 3, 48)}
    assert result.relation("Real") == {(3.0, 1.5, 4.5), (0.5, 0.25, 0.75)}


def test_string_and_number_comparisons() -> None:
    result = evaluate(
        """
        .decl W(w: symbol)
        .input W
        Before(a, b) :- W(a), W(b), a < b.
        Long(a) :- W(a), strlen(a) >= 5.
        .output Before, Long
        """,
        {"W": [["apple"], ["fig"], ["banana"]]},
    )
    assert result.relation("Before") == {("apple", "fig"), ("apple", "banana"), ("banana", "fig")}
    assert result.relation("Long") == {("apple",), ("banana",)}


def test_builtin_functors() -> None:
    result = evaluate(
        """
        .decl U(url: symbol)
        .input U
        Host(u, url_host(u), url_scheme(u)) :- U(u).
        Api(u) :- U(u), contains("/api/", u), startswith(lower(u), "https"), match("https?://[a-z.]+/.*", u).
        Parts(cat(substr(u, 0, 5), "!"), to_string(strlen(u)), to_number("42")) :- U(u), endswith(u, "x").
        .output Host, Api, Parts
        """,
        {"U": [["https://Example.com/api/x"], ["example.org/a"]]},
    )
    assert result.relation("Host") == {
        ("https://Example.com/api/x", "example.com", "https"),
        ("example.org/a", "example.org", ""),
    }
    assert result.relation("Api") == set()  # the regex asks for lower-case letters only
    assert result.relation("Parts") == {("https!", "25", 42)}


def test_functors_from_mapping_decorator_and_caching() -> None:
    calls: list[tuple] = []

    @policyc.functor("risk")
    def risk(tool: str) -> int:
        calls.append((tool,))
        return {"send_email": 5, "read_file": 1}.get(tool, 0)

    source = """
        .functor risk(tool: symbol): number
        .functor trusted(tool: symbol): bool
        .decl Call(a: symbol, tool: symbol)
        .input Call
        Deny(a) :- Call(a, t), risk(t) > 3, not trusted(t).
    """
    facts = {"Call": [["a1", "send_email"], ["a2", "send_email"], ["a3", "read_file"]]}
    result = evaluate(source, facts, {"risk": risk, "trusted": lambda tool: tool == "read_file"})
    assert result.relation("Deny") == {("a1",), ("a2",)}
    assert sorted(calls) == [("read_file",), ("send_email",)]  # one call per distinct argument
    with pytest.raises(MissingFunctors, match="`trusted`"):
        policyc.load(source, [risk])


def test_functor_failures_fail_closed() -> None:
    source = """
        .functor check(a: symbol): bool
        .functor score(a: symbol): number
        .input Call
        Deny(a) :- Call(a), check(a).
        Deny(a) :- Call(a), score(a) > 10.
    """

    def boom(a: str) -> bool:
        raise RuntimeError("service down")

    result = evaluate(source, {"Call": [["a1"]]}, {"check": boom, "score": lambda a: 1})
    assert result.errored and "service down" in result.errors[0].message
    decision = result.decide("a1")
    assert not decision.allowed and decision.errored
    assert decision.reasons[0].rule == "policyc:error" and "service down" in decision.reasons[0].message
    wrong_type = evaluate(source, {"Call": [["a1"]]}, {"check": lambda a: False, "score": lambda a: "high"})
    assert wrong_type.errored and "returned str where `number` is declared" in wrong_type.errors[0].message
    no_value = evaluate(source, {"Call": [["a1"]]}, {"check": lambda a: False, "score": lambda a: None})
    assert not no_value.errored and no_value.relation("Deny") == set()  # None: no value, no error


def test_division_by_zero_fails_closed() -> None:
    result = evaluate('.decl N(x: number)\n.input N\nDeny("a") :- N(x), 10 / x > 1.', {"N": [[0], [2]]})
    assert result.errored and result.errors[0].kind == "arithmetic"
    assert not result.decide("a").allowed


def test_any_typed_results_are_compared_at_runtime() -> None:
    source = """
        .functor arg(a: symbol, key: symbol): any
        .input Call
        Deny(a) :- Call(a), arg(a, "bags") > 0.
        Deny(a) :- Call(a), arg(a, "to") = "evil@example.com".
    """
    args = {"a1": {"bags": 2}, "a2": {"to": "evil@example.com"}, "a3": {"bags": 0}}
    result = evaluate(source, {"Call": [[a] for a in args]}, {"arg": lambda a, k: args[a].get(k)})
    assert result.relation("Deny") == {("a1",), ("a2",)}
    mixed = evaluate(source, {"Call": [["a1"]]}, {"arg": lambda a, k: "two"})  # "two" > 0 cannot be decided
    assert mixed.errored and not mixed.decide("a1").allowed


def test_inline_relations_are_evaluated_for_given_values() -> None:
    source = """
        .decl Anchored(v: symbol) inline
        .functor mentions(text: symbol, v: symbol): bool
        .decl Request(q: symbol)
        .decl Dest(a: symbol, v: symbol)
        .input Request, Dest
        Anchored(v) :- Request(q), mentions(q, v).
        Anchored("ops@example.com").
        Deny(a) :- Dest(a, v), not Anchored(v).
    """
    facts = {
        "Request": [["mail bob@example.com the report"]],
        "Dest": [["a1", "bob@example.com"], ["a2", "evil@example.com"], ["a3", "ops@example.com"]],
    }
    result = evaluate(source, facts, {"mentions": lambda q, v: v in q})
    assert result.relation("Deny") == {("a2",)}
    assert "Anchored" not in result.relations


def test_verdicts_default_and_reasons() -> None:
    source = """
        .default deny
        .decl Call(a: symbol, tool: symbol)
        .decl Untrusted(a: symbol)
        .input Call, Untrusted
        Allow(a) :- Call(a, "read_file").
        Allow(a) :- Call(a, "send_email").
        @id("no-untrusted-send")
        @message("{a} sends mail after reading {{untrusted}} content")
        @suggest("ask the user before sending to {to}")
        @severity("high")
        Deny(a) :- Call(a, "send_email"), Untrusted(a), to = "user".
    """
    facts = {
        "Call": [["a1", "read_file"], ["a2", "send_email"], ["a3", "send_email"], ["a4", "delete_file"]],
        "Untrusted": [["a2"]],
    }
    result = evaluate(source, facts)
    assert result.decide("a1").allowed and result.decide("a3").allowed
    denied = result.decide("a2")
    assert not denied.allowed and not denied.errored
    (reason,) = denied.reasons
    assert reason.rule == "no-untrusted-send" and reason.severity == "high"
    assert reason.message == "`a2` sends mail after reading {untrusted} content"  # no session: no call
    assert reason.suggestion == "ask the user before sending to `user`"
    assert reason.facts == ('Call("a2", "send_email")', 'Untrusted("a2")')
    assert "Blocked: `a2` sends mail" in denied.feedback and "Suggestion: ask the user" in denied.feedback
    by_default = result.decide("a4")
    assert not by_default.allowed and by_default.reasons[0].rule == "policyc:default-deny"
    assert not result.decide("unknown").allowed


def test_every_deny_reason_is_reported() -> None:
    result = evaluate(
        """
        .input Send, Untrusted, Secret
        @id("untrusted") Deny(a) :- Send(a), Untrusted(a, src).
        @id("secret") Deny(a) :- Send(a), Secret(a).
        """,
        {"Send": [["a"]], "Untrusted": [["a", "doc1"], ["a", "doc2"]], "Secret": [["a"]]},
    )
    reasons = result.decide("a").reasons
    assert sorted((r.rule, r.bindings.get("src")) for r in reasons) == [
        ("secret", None),
        ("untrusted", "doc1"),
        ("untrusted", "doc2"),
    ]


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"Nope": [["a"]]}, "relation `Nope` is not a relation of the policy"),
        ({"Derived": [["a"]]}, "relation `Derived` is not an input"),
        ({"Call": [["a"]]}, "relation `Call`, row 1: expected 2 values, got 1"),
        ({"Call": [["a", 3]]}, "relation `Call`, row 1, value 2: expected a string, got 3"),
        ({"Size": [["big"]]}, "relation `Size`, row 1, value 1: expected an integer"),
        ({"Size": [[True]]}, "true is not a policy value"),
        ({"Call": "oops"}, "expected a list of rows"),
        ({"Call": [None]}, "expected a list of 2 values, got null"),
    ],
)
def test_malformed_facts(facts: dict, message: str) -> None:
    source = """
        .decl Call(a: symbol, tool: symbol)
        .decl Size(n: number)
        .input Call, Size
        Derived(a) :- Call(a, _).
        Deny(a) :- Derived(a), Size(n), n > 3.
    """
    result = evaluate(source, facts)
    assert result.errored and message in result.errors[0].message
    assert not result.decide("a").allowed
    with pytest.raises(FactsError, match=message.split(":")[0]):
        policyc.load(source).evaluate(facts, strict=True)


def test_limits_fail_closed() -> None:
    source = """
        .decl N(x: number)
        .input N
        Count(x) :- N(x).
        Count(y) :- Count(x), y = x + 1, y < 100000.
        Deny("a") :- Count(5).
    """
    result = evaluate(source, {"N": [[0]]}, limits=Limits(max_facts=1000))
    assert result.errored and result.errors[0].kind == "limit"
    assert not result.decide("b").allowed
    with pytest.raises(EvaluationError, match="more than 1,000 facts"):
        policyc.load(source, limits=Limits(max_facts=1000)).evaluate({"N": [[0]]}, strict=True)


def test_load_refuses_policies_with_errors(tmp_path) -> None:
    with pytest.raises(PolicyError, match="undefined-relation") as caught:
        policyc.load(".input S\nDeny(a) :- S(a), T(a).")
    assert caught.value.diagnostics[0].name == "undefined-relation"
    with pytest.raises(PolicyError, match="cannot read"):
        policyc.load(str(tmp_path / "missing.dl"))
    path = tmp_path / "p.dl"
    path.write_text(".input S\nDeny(a) :- S(a).\n", "utf-8")
    assert policyc.load(path).evaluate({"S": [["x"]]}).relation("Deny") == {("x",)}
    assert sorted(policyc.load(str(path)).relations) == ["Allow", "Deny", "S"]


def test_float_constants_round_trip() -> None:
    result = evaluate(
        ".decl F(x: float)\n.input F\nBig(x) :- F(x), x > 1e300, x < 1.7976931348623157e308.\n.output Big",
        {"F": [[1e301], [1.7976931348623157e308]]},  # the largest float: not below itself
    )
    assert result.relation("Big") == {(1e301,)}
    assert evaluate(".decl F(x: float)\n.input F\nBig(x) :- F(x).", {"F": [[math.inf]]}).errored


def test_membership_checks_come_before_computed_values() -> None:
    """`to_number` is only called on the arguments the known-key check lets through: a check
    whose arguments are all bound filters before a functor computes."""
    policy = policyc.load(
        ".decl Did(e: symbol, k: symbol)\n.decl BudgetKey(k: symbol)\n.decl Arg(e: symbol, k: symbol, v: symbol)\n"
        ".input Did, Arg\n"
        'BudgetKey("lines").\n'
        'Amount(e, key, n) :- Did(e, "spend"), BudgetKey(key), Arg(e, key, v), n = to_number(v).\n'
        "Deny(e) :- Amount(e, _, n), n > 5.\n"
    )
    result = policy.evaluate(
        {"Did": [["e1", "spend"]], "Arg": [["e1", "path", "a.py"], ["e1", "lines", "9"]]}
    )
    assert not result.errored, [e.message for e in result.errors]
    assert result.relation("Amount") == {("e1", "lines", 9)}
