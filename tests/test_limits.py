"""Limits bound an evaluation and each call of a monitor session as a whole, and a decision past
its limit is a denial that says which limit was hit.

The work a rule does is checked as it goes (not only once it has finished): cross products,
non-linear recursion, slow functors and backtracking regular expressions stop at the limit,
in full evaluation and in the maintenance a session does as events arrive. No test measures
time tightly: a call given ``Limits(max_seconds=1)`` must return well within ``WITHIN``
seconds (it runs in a thread, so that a call that does not stop fails the test instead of
hanging the suite).
"""

from __future__ import annotations

import json
import math
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

import policyc
from policyc.runtime.errors import PolicyError
from policyc.runtime.evaluator import Limits

WITHIN = 20.0  # seconds a call given a limit of one second may take, on any machine
ONE_SECOND = Limits(max_seconds=1)


def returns(call: Callable[[], Any], within: float = WITHIN) -> Any:
    """What ``call()`` returns, failing the test if it has not returned within ``within`` s."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # re-raised in the test's thread
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), f"the call did not return within {within} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def denied_by_limit(decision: Any, *words: str) -> None:
    assert not decision.allowed and decision.errored
    message = decision.reasons[0].message
    assert "limit" in message or "longer than" in message, message
    for word in words:
        assert word in message, message


# ------------------------------------------------------------------------- full evaluation

CROSS = """
.decl A(x: number)
.decl B(x: number)
.decl C(x: number)
.input A, B, C
Deny("a") :- A(x), B(y), C(z), x + y + z < 0.
"""


def test_a_cross_product_stops_at_the_time_limit() -> None:
    values = [[i] for i in range(1000)]  # a billion bindings: minutes of work
    policy = policyc.load(CROSS, limits=ONE_SECOND)
    result = returns(lambda: policy.evaluate({"A": values, "B": values, "C": values}))
    assert result.errored and result.errors[0].kind == "limit"
    assert "longer than 1 s" in result.errors[0].message
    denied_by_limit(result.decide("b"), "longer than 1 s")


def test_a_cross_product_stops_at_the_fact_limit_before_it_holds_the_facts() -> None:
    source = """
        .decl A(x: number)
        .decl B(x: number)
        .decl C(x: number)
        .input A, B, C
        P(x, y, z) :- A(x), B(y), C(z).
        .output P
    """
    values = [[i] for i in range(100)]  # a million facts
    policy = policyc.load(source, limits=Limits(max_facts=10_000))
    tracemalloc.start()
    try:
        result = policy.evaluate({"A": values, "B": values, "C": values})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.errored and "more than 10,000 facts" in result.errors[0].message
    assert peak < 20_000_000, f"the evaluation held {peak:,} bytes at its peak"


def test_a_non_linear_closure_stops_at_the_time_limit() -> None:
    source = """
        .decl E(x: number, y: number)
        .input E
        P(x, y) :- E(x, y).
        P(x, z) :- P(x, y), P(y, z).
        Deny("a") :- P(0, -1).
    """
    # a complete graph: the first round derives each of its 360,000 paths 600 times over, in
    # one call of one rule (200 million bindings)
    edges = [[i, j] for i in range(600) for j in range(600)]
    policy = policyc.load(source, limits=ONE_SECOND)
    result = returns(lambda: policy.evaluate({"E": edges}))
    assert result.errored and result.errors[0].kind == "limit"
    denied_by_limit(result.decide("b"))


SLOW = """
.functor slow(x: symbol): bool
.decl Call(a: symbol)
.input Call
Deny(a) :- Call(a), slow(a).
"""


def slow(seconds: float) -> Callable[[str], bool]:
    def slow(x: str) -> bool:  # a functor that takes too long, then says "no deny"
        time.sleep(seconds)
        return False

    return slow


def test_a_functor_returning_after_the_limit_stops_the_evaluation_and_denies() -> None:
    policy = policyc.load(SLOW, {"slow": slow(2)}, limits=ONE_SECOND)
    facts = {"Call": [[f"c{i}"] for i in range(12)]}  # 24 s of calls
    result = returns(lambda: policy.evaluate(facts))
    assert result.errored and result.errors[0].kind == "limit"
    assert "`slow`" in result.errors[0].message
    denied_by_limit(result.decide("c0"), "`slow`")


def test_a_functor_within_the_limit_allows() -> None:
    policy = policyc.load(SLOW, {"slow": slow(0)}, limits=ONE_SECOND)
    assert policy.decide({"Call": [["c0"]]}, "c0").allowed


# --------------------------------------------------------------------------------- sessions

SLOW_LABELS = """
.import events
.functor slow(x: symbol): bool
Flagged(e) :- Label(e, l), slow(l).
@id("flagged") Deny(a) :- Action(a), Flagged(a).
"""


def test_a_limit_hit_while_recording_refuses_that_event_alone() -> None:
    policy = policyc.load(SLOW_LABELS, {"slow": slow(2)}, limits=ONE_SECOND)
    session = policyc.Monitor(policy).session("s")
    with pytest.raises(policyc.EventRefused, match="`slow` returned after the time limit"):
        returns(lambda: session.record({"id": "r1", "kind": "tool_result", "labels": ["x"]}))
    assert "r1" not in session.events  # nothing of it was kept: its facts were taken back
    denied_by_limit(
        returns(lambda: session.authorize({"id": "a1", "kind": "tool_call", "tool": "t", "labels": ["y"]})),
        "`slow`",
    )
    assert session.authorize({"id": "a2", "kind": "tool_call", "tool": "t"}).allowed


def test_a_limit_hit_while_deciding_denies_that_decision() -> None:
    source = """
        .import events
        @id("triples") Deny(a) :- Action(a), Label(x, "n"), Label(y, "n"), Label(z, "n"),
            x != y, y != z, x = z, not Label(a, "ok").
    """
    policy = policyc.load(source, limits=ONE_SECOND)
    session = policyc.Monitor(policy).session("s")
    for i in range(700):  # 343 million bindings per decision
        session.record({"id": f"r{i}", "kind": "tool_result", "labels": ["n"]})
    decision = returns(lambda: session.authorize({"id": "a1", "kind": "tool_call", "tool": "t"}))
    denied_by_limit(decision, "1 s")


def test_a_backtracking_pattern_runs_in_linear_time_while_recording() -> None:
    source = """
        .import events
        @id("pattern") Deny(a) :- ToolCall(a, _), tool_arg(a, "u") = u, match("(a+)+b", u).
    """
    policy = policyc.load(source, limits=ONE_SECOND)
    session = policyc.Monitor(policy).session("s")

    def decide(u: str, n: int) -> Any:
        return session.authorize({"id": f"a{n}", "kind": "tool_call", "tool": "get", "args": {"u": u}})

    # a backtracking engine takes minutes on 30 characters; the result must also be right
    decision = returns(lambda: decide("a" * 30, 1))
    assert decision.allowed and not decision.errored
    assert not returns(lambda: decide("a" * 30 + "b", 2)).allowed
    assert returns(lambda: decide("a" * 100_000 + "c", 3)).allowed


def test_match_in_full_evaluation_is_linear_too() -> None:
    source = """
        .decl U(u: symbol)
        .input U
        Deny(u) :- U(u), match("(a|aa)*c", u).
    """
    policy = policyc.load(source, limits=ONE_SECOND)
    result = returns(lambda: policy.evaluate({"U": [["a" * 40], ["a" * 40 + "c"]]}))
    assert not result.errored and result.relation("Deny") == {("a" * 40 + "c",)}


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("(", ["`match`", "pattern"]),
        ("(a)\\1", ["`match`", "pattern"]),  # a backreference needs backtracking
        ("(?=a)a", ["`match`", "pattern"]),  # so does a lookahead
    ],
)
def test_a_pattern_that_is_invalid_or_needs_backtracking_fails_closed(pattern: str, words: list[str]) -> None:
    """A pattern that reaches `match` at run time; a constant one is an error of `check`."""
    source = """
        .decl U(u: symbol)
        .decl P(p: symbol)
        .input U, P
        Deny(u) :- U(u), P(p), match(p, u).
    """
    result = policyc.load(source).evaluate({"U": [["a"], ["aa"]], "P": [[pattern]]})
    assert result.errored
    message = result.errors[0].message
    for word in words:
        assert word in message, message
    refused = result.decide("a")
    assert not refused.allowed and refused.errored and "`match`" in refused.reasons[0].message
    assert result.decide("b").allowed  # no pattern decides a value no `U` fact holds
    constant = source.replace("P(p), match(p, u)", "match(" + json.dumps(pattern) + ", u)")
    with pytest.raises(PolicyError, match="invalid-pattern"):
        policyc.load(constant)


# ----------------------------------------------------------------------------------- Limits


@pytest.mark.parametrize(
    "options",
    [
        {"max_seconds": math.nan},
        {"max_seconds": -1},
        {"max_seconds": 0},
        {"max_seconds": "60"},
        {"max_seconds": True},
        {"max_facts": 0},
        {"max_facts": -5},
        {"max_facts": 1.5},
        {"max_facts": math.nan},
        {"max_facts": True},
        {"max_facts": None},
    ],
)
def test_limits_refuse_nonsense(options: dict) -> None:
    name = next(iter(options))
    with pytest.raises(ValueError, match=name):
        Limits(**options)


def test_limits_accept_what_makes_sense() -> None:
    assert Limits().max_seconds == 60.0 and Limits().max_facts == 10_000_000
    assert Limits(max_seconds=None).deadline() is None
    assert Limits(max_seconds=0.25, max_facts=1).max_facts == 1
    assert Limits(max_seconds=2).max_seconds == 2
    assert Limits(max_seconds=math.inf).max_seconds == math.inf  # no limit, as None
