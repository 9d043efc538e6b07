"""Sessions fed events decide exactly as a from-scratch evaluation of the events' facts.

Random event streams (dependencies given or implied, labels, tool calls and results) through
policies whose verdict is read from maintained relations and policies whose verdict is
computed per decision; each action is authorized as it arrives and compared, verdict and
reasons, with an evaluation of every fact so far. Also: the quick check of plain events agrees
with the detailed one, and given facts of a derived input relation are maintained.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.evaluator import Limits
from policyc.stdlib.events import RELATIONS, EventError, _check, check_event, event_facts

TOXIC = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, e'), Tainted(e').
HasSecret(e) :- Label(e, "sensitive").
HasSecret(e) :- DependsOn(e, e'), HasSecret(e').
@id("toxic-flow") @message("{a} mixes secrets and untrusted input")
Deny(a) :- Action(a), Label(a, "external"), Tainted(a), HasSecret(a).
"""

POLICIES = {
    "maintained deny": TOXIC,
    "maintained allow": TOXIC + '.default deny\nAllow(a) :- Action(a), Label(a, "ok").\n',
    "computed deny": TOXIC
    + 'Reviewed(e) :- Label(e, "reviewed").\n'
    + '@id("unreviewed") Deny(a) :- ToolCall(a, "send"), Tainted(a), !Reviewed(a).\n',
    "results": TOXIC + '@id("result-of-tainted") Deny(a) :- ToolResult(r, a, _), Tainted(r), Action(a).\n',
    # an input relation that rules also derive, with negation: recomputed per decision from its facts
    "mixed input": TOXIC
    + 'Message(e, "flagged") :- ToolResult(e, _, _), !Label(e, "reviewed").\n'
    + '@id("after-user") Deny(a) :- ToolCall(a, "send"), DependsOn(a, m), Message(m, "user").\n'
    + '@id("after-flagged") Deny(a) :- ToolCall(a, "read"), DependsOn(a, m), Message(m, "flagged").\n',
    # the ways a rule reads `DependsOn` (kept implicitly for events without `deps`): one hop,
    # either argument known, `_`, a constant, both arguments the same, the other direction,
    # negated, counted, joined twice
    "dependency shapes": TOXIC
    + '@id("hop") Deny(a) :- ToolCall(a, "read"), DependsOn(a, d), Label(d, "untrusted"), Label(a, "ok").\n'
    + 'Fed(d) :- DependsOn(e, d), ToolCall(e, "send").\n'
    + '@id("fed") Deny(a) :- Action(a), DependsOn(a, r), Fed(r), Label(a, "reviewed").\n'
    + "Busy(e) :- DependsOn(e, _).\n"
    + '@id("fresh") Deny(a) :- ToolCall(a, "send"), !Busy(a), Label(a, "ok").\n'
    + '@id("after-first") Deny(a) :- Action(a), DependsOn(a, "e0"), Label(a, "external").\n'
    + '@id("self") Deny(a) :- Action(a), DependsOn(a, a).\n'
    + '@id("long") Deny(a) :- ToolCall(a, "read"), n = count : { DependsOn(a, _) }, n > 6.\n'
    + '@id("two-hops") Deny(a) :- ToolCall(a, "send"), DependsOn(a, b), DependsOn(b, c), Label(c, "sensitive"),'
    + ' Label(a, "reviewed").\n'
    + '@id("unrelated") Deny(a) :- ToolCall(a, "read"), Label(a, "external"), Action(b), b != a, !DependsOn(a, b).\n',
    # a generator, an existence check and an aggregate's own variable
    "generators and checks": TOXIC
    + '@id("few-deps") Deny(a) :- ToolCall(a, "send"), k = range(1, 3), k = count : { DependsOn(a, _) },'
    + ' Label(a, "ok").\n'
    + '@id("any-untrusted") Deny(a) :- ToolCall(a, "read"), Label(_, "untrusted"), Label(a, "external").\n'
    + '@id("own-max") Deny(a) :- ToolCall(a, "read"), Label(a, "reviewed"), d = count : { DependsOn(a, d) },'
    + " d > 1.\n",
}

LABELS = ["untrusted", "sensitive", "external", "ok", "reviewed"]


@st.composite
def streams(draw):
    events = []
    for i in range(draw(st.integers(1, 14))):
        event: dict = {
            "id": f"e{i}",
            "kind": draw(st.sampled_from(["tool_call", "tool_result", "user_message"])),
        }
        if event["kind"] == "tool_call":
            event["tool"] = draw(st.sampled_from(["send", "read"]))
        earlier = [e["id"] for e in events]
        if earlier and draw(st.booleans()):
            event["deps"] = draw(st.lists(st.sampled_from(earlier), max_size=3, unique=True))
        if event["kind"] == "tool_result" and earlier and draw(st.booleans()):
            event["of"] = draw(st.sampled_from(earlier))
        labels = draw(st.lists(st.sampled_from(LABELS), max_size=2, unique=True))
        if labels:
            event["labels"] = labels
        events.append(event)
    return draw(st.sampled_from(sorted(POLICIES))), events


def scratch_facts(events: list[dict]) -> dict[str, list]:
    facts: dict[str, list] = {}
    order: list[str] = []
    for event in events:
        for name, rows in event_facts(event, len(order), order).items():
            facts.setdefault(name, []).extend(list(row) for row in rows)
        order.append(event["id"])
    return facts


def reasons(decision) -> list:
    # the bindings, not the message: a session shows `{a}` as the call, facts alone have no calls
    return sorted(
        (r.rule, repr(sorted(r.bindings.items(), key=lambda kv: kv[0])), r.facts) for r in decision.reasons
    )


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams())
def test_event_sessions_decide_as_from_scratch(drawn) -> None:
    name, events = drawn
    policy = policyc.load(POLICIES[name])
    session = policyc.Monitor(policy).session("s")
    for n, event in enumerate(events):
        if event["kind"] != "tool_call":
            session.record(event)
            continue
        mine = session.authorize(event)
        theirs = policy.evaluate(scratch_facts(events[: n + 1])).decide(event["id"])
        assert (mine.allowed, mine.errored) == (theirs.allowed, theirs.errored), (name, events, n)
        assert reasons(mine) == reasons(theirs), (name, events, n)
    for event in events:  # decided again at the end, against everything recorded
        if event["kind"] == "tool_call":
            theirs = policy.evaluate(scratch_facts(events)).decide(event["id"])
            assert session.decide(event["id"]).allowed == theirs.allowed


def test_denials_are_explained() -> None:
    session = policyc.Monitor(policyc.load(TOXIC)).session("s")
    session.record({"id": "u", "kind": "tool_result", "labels": ["untrusted"]})
    session.record({"id": "s", "kind": "tool_result", "labels": ["sensitive"]})
    decision = session.authorize({"id": "a", "kind": "tool_call", "tool": "send", "labels": ["external"]})
    assert not decision.allowed and decision.reasons[0].message == "send() mixes secrets and untrusted input"
    assert "Tainted" in decision.explain().text()
    assert session.authorize({"id": "b", "kind": "tool_call", "tool": "read", "deps": []}).allowed


values = st.one_of(
    st.none(),
    st.integers(0, 2),
    st.sampled_from(["", "e0", "e1", "x", "tool_call", "tool_result"]),
    st.lists(st.sampled_from(["e0", "e1", "x", 3]), max_size=3),
    st.dictionaries(st.sampled_from(["to", "n"]), st.integers(0, 3), max_size=2),
)
events = st.dictionaries(
    st.sampled_from(
        ["id", "kind", "text", "tool", "args", "of", "deps", "agent", "labels", "role", "colour"]
    ),
    values,
    max_size=6,
)


@settings(max_examples=500, deadline=None)
@given(events)
def test_quick_event_check_agrees_with_the_detailed_one(event) -> None:
    known = {"e0": {}, "e1": {}}

    def outcome(check) -> str:
        try:
            return repr(check(event, known))
        except EventError as error:
            return f"error: {error}"

    assert outcome(check_event) == outcome(_check)


def test_wanted_event_facts_are_a_selection() -> None:
    event = {"id": "c", "kind": "tool_call", "tool": "t", "args": {"a": 1}, "labels": ["x"], "text": "hi"}
    every = event_facts(event, 2, ["u", "v"])
    assert set(every) <= set(RELATIONS)
    wanted = {"DependsOn": 0, "Label": 1, "ToolArg": 2}
    assert event_facts(event, 2, ["u", "v"], wanted) == {wanted[name]: every[name] for name in wanted}
    assert event_facts(event, 2, ["u", "v"], {}) == {}


def test_given_facts_of_a_derived_input_are_maintained() -> None:
    policy = policyc.load(
        """
        .decl G(a: number, b: number)
        .input G
        .decl T(a: number)
        .input T
        T(y) :- G(x, y), T(x).
        Deny(x) :- T(x).
        """
    )
    session = policyc.Monitor(policy).session("s")
    session.add_facts({"G": [[1, 2], [2, 3]]})
    session.add_facts({"T": [[1]]})
    assert [session.decide(x).allowed for x in (1, 2, 3)] == [False, False, False]
    assert session.decide(4).reasons[0].rule == "policyc:unknown-action"  # no fact names 4


def test_the_fact_limit_refuses_the_event_that_passes_it() -> None:
    policy = policyc.load(TOXIC, limits=Limits(max_facts=40))
    session = policyc.Monitor(policy).session("s")
    session.record({"id": "e0", "kind": "tool_result", "labels": ["untrusted"]})
    refused = []
    for i in range(1, 30):
        try:
            session.record({"id": f"e{i}", "kind": "tool_result", "deps": [f"e{i - 1}"]})
        except policyc.EventRefused as error:
            refused.append((i, str(error)))
            break
    assert refused and "more than 40 facts" in refused[0][1]
    assert f"e{refused[0][0]}" not in session.events and session.state.facts <= 40
    # the session is full: a call that does not fit is refused with the limit, and what was
    # recorded before is decided as before
    full = session.authorize({"id": "a", "kind": "tool_call", "tool": "read", "deps": ["e0"]})
    assert not full.allowed and full.reasons[0].code == "limit-exceeded"
    assert "max_facts" in full.feedback and "a" not in session.events
    assert session.decide("e3").allowed and not session.decide("e3").errored


def test_given_facts_of_an_input_derived_with_negation_count() -> None:
    policy = policyc.load(
        """
        .input Blocked, Seen, Ok
        .decl Blocked(x: symbol)
        Blocked(x) :- Seen(x), not Ok(x).
        Deny(a) :- Blocked(a).
        """
    )
    session = policyc.Monitor(policy).session("s")
    session.add_facts({"Blocked": [["a1"]], "Seen": [["a2"], ["a3"]], "Ok": [["a3"]]})
    assert [session.decide(a).allowed for a in ("a1", "a2", "a3")] == [False, False, True]
    session.add_facts({"Ok": [["a1"], ["a2"]]})
    assert [session.decide(a).allowed for a in ("a1", "a2", "a3")] == [False, True, True]


def test_a_result_without_its_tool_has_its_calls() -> None:
    policy = policyc.load(
        """
        .import events
        @id("after-fetch") Deny(a) :- Action(a), DependsOn(a, r), ToolResult(r, _, "fetch").
        """
    )
    session = policyc.Monitor(policy).session("s")
    session.record({"id": "c", "kind": "tool_call", "tool": "fetch"})
    session.record({"id": "r", "kind": "tool_result", "of": "c", "text": "page"})
    assert not session.authorize({"id": "a", "kind": "tool_call", "tool": "send"}).allowed
    assert check_event({"id": "r2", "kind": "tool_result", "of": "c"}, session.events)["tool"] == "fetch"


def test_a_decision_explains_the_session_as_it_was() -> None:
    policy = policyc.load(
        """
        .import events
        .input Blocked
        .decl Blocked(a: symbol)
        @id("blocked") Deny(a) :- Candidate(a), Blocked(a).
        """
    )
    session = policyc.Monitor(policy).session("s")
    first = session.authorize({"id": "a", "kind": "tool_call", "tool": "send"})
    session.add_facts({"Blocked": [["a"]]})
    again = session.decide("a")
    other = session.authorize({"id": "b", "kind": "tool_call", "tool": "send"})
    assert first.allowed and not again.allowed and other.allowed
    assert "Blocked(a)" in first.explain().text()  # where Deny("a") failed, then
    assert first.explain().summary.startswith("allowed")
    assert again.explain().summary.startswith("denied")
    assert again.explain().summary == session.decide("a").explain().summary
