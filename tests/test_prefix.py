"""An event without `deps` depends on every earlier event: the session keeps that implicitly, so
a long session holds facts in proportion to its length and decides as if every dependency
were written out."""

from __future__ import annotations

import random

import policyc
from policyc.runtime.prefix import Prefix

TOXIC = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).
HasSecret(e) :- Label(e, "sensitive").
HasSecret(e) :- DependsOn(e, d), HasSecret(d).
@id("toxic-flow") Deny(a) :- is_tool(a, "send"), Tainted(a), HasSecret(a).
@id("after-untrusted") Deny(a) :- is_tool(a, "upload"), DependsOn(a, d), Label(d, "untrusted").
"""


def stream(size: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    events = []
    for i in range(size):
        if rng.random() < 0.5:
            event = {"id": f"c{i}", "kind": "tool_call", "tool": rng.choice(["send", "read", "upload"])}
        else:
            event = {"id": f"r{i}", "kind": "tool_result", "text": "x"}
            draw = rng.random()
            if draw < 0.02:
                event["labels"] = ["untrusted"]
            elif draw < 0.04:
                event["labels"] = ["sensitive"]
        if i and rng.random() < 0.1:  # a few events say what they depend on
            event["deps"] = rng.sample(ids(events), 1)
        events.append(event)
    return events


def ids(events: list[dict]) -> list[str]:
    return [e["id"] for e in events]


def test_a_long_session_holds_facts_in_proportion_to_its_length() -> None:
    monitor = policyc.Monitor(policyc.load(TOXIC))
    sizes = {}
    for size in (500, 4000):
        session = monitor.session("s")
        for event in stream(size, 1):
            session.record(event)
        sizes[size] = session.state.facts
        depends = session.state.relations[monitor.prepared.plan.relation_index()["DependsOn"]]
        assert isinstance(depends, Prefix)
        assert len(depends.base.tuples) <= size  # only the `deps` given are stored
    # a few facts per event (written out, the dependencies alone would be 8 million)
    assert sizes[500] < 5 * 500 and sizes[4000] < 5 * 4000


def test_decisions_equal_those_with_every_dependency_written_out() -> None:
    """The same events with `deps` listing every earlier event give the same decisions and
    reasons (a session given `deps` stores them as facts)."""
    policy = policyc.load(TOXIC)
    monitor = policyc.Monitor(policy)
    for seed in range(4):
        events = stream(300, seed)
        implicit, written = monitor.session("a"), monitor.session("b")
        for i, event in enumerate(events):
            spelled = event if "deps" in event else {**event, "deps": ids(events[:i])}
            if event["kind"] == "tool_call":
                mine, theirs = implicit.authorize(event), written.authorize(spelled)
                assert mine.allowed == theirs.allowed, (seed, i)
                assert sorted(r.facts for r in mine.reasons) == sorted(r.facts for r in theirs.reasons)
            else:
                implicit.record(event)
                written.record(spelled)
        last = [e["id"] for e in events if e["kind"] == "tool_call"][-1]
        assert implicit.decide(last).explain().summary == written.decide(last).explain().summary


def test_dependencies_a_host_adds_are_kept_once() -> None:
    policy = policyc.load(
        ".import events\n"
        '@id("after") Deny(a) :- is_tool(a, "send"), DependsOn(a, d), Label(d, "untrusted").\n'
        "Count(n) :- n = count : { DependsOn(_, _) }.\n"
    )
    session = policyc.Monitor(policy).session("s")
    session.record({"id": "u", "kind": "user_message", "text": "hi"})
    session.record({"id": "c", "kind": "tool_call", "tool": "send"})
    session.add_facts({"DependsOn": [["c", "u"], ["u", "later"]]})  # one implied, one not
    session.record({"id": "later", "kind": "tool_result", "text": "x", "labels": ["untrusted"]})
    assert session.decide("u").allowed  # `u` is no send
    depends = session.state.relations[policy.plan.relation_index()["DependsOn"]]
    assert sorted(depends.tuples) == [("c", "u"), ("later", "c"), ("later", "u"), ("u", "later")]
    assert len(depends) == 4
    explained = session.explanation()
    assert explained.relations[policy.plan.relation_index()["Count"]].as_tuples() == {(4,)}
