"""What a host hands a session cannot walk around it: non-finite numbers, values that are not
JSON, failures inside `record`, and actions that were never recorded all end in refusals that
say why, of that event alone: the session decides every later call as it would have."""

from __future__ import annotations

import math
import pathlib

import pytest

import policyc
from policyc.runtime.evaluator import Limits

LIMIT = """
.import events
@id("amount-limit") @message("{a} pays more than 1000")
Deny(a) :- Action(a), n = tool_arg(a, "amount"), n > 1000.
"""
# the same limit through ToolArg facts: whether a policy reads ToolArg must not change what
# happens to a malformed event
LIMIT_FACTS = """
.import events
@id("amount-limit") Deny(a) :- ToolArg(a, "amount", s), n = to_number(s), n > 1000.
"""
OPEN = """
.import events
@id("never-send") Deny(a) :- Action(a), is_tool(a, "send").
"""


def session(text: str = LIMIT, **options) -> policyc.runtime.session.Session:
    return policyc.Monitor(policyc.load(text, **options)).session("s")


def denied_for(decision, *words: str) -> None:
    assert not decision.allowed
    text = " ".join(r.message or "" for r in decision.reasons)
    for word in words:
        assert word in text, (word, text)


# --------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize("policy", [LIMIT, LIMIT_FACTS], ids=["tool_arg", "ToolArg"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_a_non_finite_argument_is_a_malformed_event(policy, value) -> None:
    s = session(policy)
    decision = s.authorize({"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": value}})
    denied_for(decision, "malformed event", "not a finite number")
    assert decision.errored and "c1" not in s.events
    later = s.authorize({"id": "c2", "kind": "tool_call", "tool": "pay", "args": {"amount": 5}})
    big = s.authorize({"id": "c3", "kind": "tool_call", "tool": "pay", "args": {"amount": 5000}})
    assert later.allowed and not big.allowed and not big.errored  # decided as if c1 never came


def test_non_finite_numbers_nested_in_arguments() -> None:
    s = session()
    args = {"amount": 5, "items": [{"price": 2.5}, {"price": math.nan}]}
    denied_for(s.authorize({"id": "c1", "kind": "tool_call", "tool": "pay", "args": args}), "items")


def test_non_finite_numbers_in_facts() -> None:
    policy = policyc.load(
        ".decl Amount(a: symbol, n: float)\n.input Amount\nDeny(a) :- Amount(a, n), n > 10."
    )
    for value in (math.nan, math.inf):
        s = policyc.Monitor(policy).session("s")
        s.add_facts({"Amount": [["a", value]]})
        denied_for(s.decide("a"), "not a finite number")
        result = policy.evaluate({"Amount": [["a", value], ["b", 1.0]]})
        assert result.errored and "not a finite number" in result.errors[0].message
    untyped = policyc.load(".input Amount\nDeny(a) :- Amount(a, n), n > 10.")
    assert untyped.evaluate({"Amount": [["a", math.nan]]}).errored


# --------------------------------------------------------------- values that are not JSON


def _cycle() -> dict:
    loop: dict = {}
    loop["self"] = loop
    return loop


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = {
    "path": pathlib.Path("/etc/passwd"),
    "bytes": b"\x00\x01",
    "set": {1, 2},
    "cycle": _cycle(),
    "deep": _deep(100_000),
    "object": object(),
    "key": {1: "x"},
    "big": 10**5000,
}


@pytest.mark.parametrize("policy", [LIMIT, LIMIT_FACTS, OPEN], ids=["tool_arg", "ToolArg", "no-args"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_an_argument_that_is_not_a_json_value_refuses_its_call_alone(policy, name) -> None:
    s = session(policy)
    decision = s.authorize(
        {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": HOSTILE[name]}}
    )
    denied_for(decision, "malformed event")
    assert decision.errored
    assert s.order == [] and "c1" not in s.events  # nothing of the bad event was kept
    assert s.authorize({"id": "c2", "kind": "tool_call", "tool": "read", "args": {}}).allowed


def test_an_event_that_is_not_a_mapping_and_odd_payloads() -> None:
    for event in (
        None,
        5,
        "x",
        ["id"],
        {"id": "c1", "kind": "tool_call", "tool": "t", "labels": "untrusted"},
    ):
        s = session(OPEN)
        with pytest.raises(policyc.EventRefused, match="malformed event"):
            s.record(event)
        assert s.order == [] and s.authorize({"id": "c9", "kind": "tool_call", "tool": "read"}).allowed


def test_any_failure_inside_record_refuses_the_event_alone(monkeypatch) -> None:
    """A failure nobody foresaw (injected here into turning the event into facts) refuses the
    event, saying why, and keeps nothing of it."""
    import policyc.runtime.session as module

    s = session(OPEN)
    s.record({"id": "u", "kind": "user_message", "text": "hi"})

    def broken(*args, **kwargs):
        raise RuntimeError("the vocabulary broke")

    monkeypatch.setattr(module, "event_facts", broken)
    with pytest.raises(
        policyc.EventRefused, match="recording event 'c1' failed: RuntimeError: the vocabulary broke"
    ):
        s.record({"id": "c1", "kind": "tool_call", "tool": "read"})
    refused = s.authorize({"id": "c1", "kind": "tool_call", "tool": "read"})
    denied_for(refused, "recording event 'c1' failed")
    assert "c1" not in s.events and s.order == ["u"]
    monkeypatch.undo()
    assert s.authorize({"id": "c2", "kind": "tool_call", "tool": "read"}).allowed


# ------------------------------------------------------------------- unrecorded actions


@pytest.mark.parametrize("action", [None, "never-recorded", 17, ("a", "b"), ["unhashable"]])
def test_deciding_an_action_that_was_never_recorded_is_a_denial(action) -> None:
    s = session(OPEN)  # default allow: a host bug must not fail open
    s.record({"id": "u", "kind": "user_message", "text": "hi"})
    decision = s.decide(action)
    assert not decision.allowed and decision.errored
    assert decision.reasons[0].rule == "policyc:unknown-action"
    assert "never recorded" in decision.reasons[0].message


def test_an_action_named_by_given_facts_can_be_decided() -> None:
    policy = policyc.load(".input Send, Untrusted\nDeny(a) :- Send(a), Untrusted(a).")
    s = policyc.Monitor(policy).session("s")
    s.add_facts({"Send": [["e1"], ["e2"]], "Untrusted": [["e2"]]})
    assert s.decide("e1").allowed and not s.decide("e2").allowed
    assert s.decide("e3").reasons[0].rule == "policyc:unknown-action"


def test_a_recorded_event_is_decided_as_before() -> None:
    s = session(OPEN)
    s.record({"id": "c1", "kind": "tool_call", "tool": "read"})
    assert s.decide("c1").allowed
    assert not s.authorize({"id": "c2", "kind": "tool_call", "tool": "send"}).allowed


def test_limits_refuse_nothing_here() -> None:
    """The checks above hold whatever the limits (a generous limit changes none of them)."""
    s = session(OPEN, limits=Limits(max_facts=10_000_000, max_seconds=60))
    assert s.decide(None).reasons[0].rule == "policyc:unknown-action"
