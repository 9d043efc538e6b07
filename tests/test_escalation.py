"""The `escalate` verdict and approvals bound to one call.

Property tests on random sessions: a session decides `Escalate` exactly as a from-scratch
evaluation does; an approval never authorizes a call that differs in tool, arguments, session
or escalating rule set, never after its ttl, never twice, never over a `Deny`.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.approvals import Approvals, EscalationRequest, approval_of_event, call_digest
from policyc.runtime.verdict import Decision, decide

# maintained verdicts (the session reads them straight from its relations) ...
DIRECT = """
.import events
@id("big") @message("{a} pays a lot")
Escalate(a) :- Action(a), is_tool(a, "pay"), tool_arg(a, "amount") > 100.
@id("external") @message("{a} writes outside")
Escalate(a) :- Action(a), is_tool(a, "send"), Label(a, "external").
@id("blocked") @message("{a} is blocked")
Deny(a) :- Action(a), Label(a, "blocked").
"""
# ... and verdicts computed per decision (negation over what the session may still learn)
VOLATILE = (
    DIRECT
    + """
@id("unreviewed") @message("{a} was not reviewed")
Escalate(a) :- Action(a), is_tool(a, "send"), not Reviewed(a).
Reviewed(a) :- Action(a), Label(a, "reviewed").
.default deny
Allow(a) :- Action(a), is_tool(a, "read").
Allow(a) :- Action(a), is_tool(a, "pay").
"""
)
POLICIES = {name: policyc.load_source(text) for name, text in (("direct", DIRECT), ("volatile", VOLATILE))}

TOOLS = ("pay", "send", "read")
LABELS = ("blocked", "external", "reviewed")


@st.composite
def calls(draw):
    """A tool call's tool, arguments and labels."""
    tool = draw(st.sampled_from(TOOLS))
    args = {"amount": draw(st.sampled_from([5, 500, 1000]))}
    if draw(st.booleans()):
        args["to"] = draw(st.sampled_from(["bob", "eve"]))
    labels = draw(st.lists(st.sampled_from(LABELS), max_size=2, unique=True))
    return tool, args, labels


def event(n: int, call) -> dict:
    tool, args, labels = call
    return {"id": f"c{n}", "kind": "tool_call", "tool": tool, "args": dict(args), "labels": list(labels)}


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def monitor(name: str, clock: Clock | None = None, **options) -> policyc.Monitor:
    return policyc.Monitor(POLICIES[name], approval_clock=clock or Clock(), **options)


def key(decision: Decision) -> tuple:
    """What an approval binds to, as the decision's request names it."""
    request = decision.escalation
    return request.session, request.tool, request.digest, request.rules


# ------------------------------------------------------------------------------ the verdict


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(POLICIES)), session=st.lists(calls(), min_size=1, max_size=8))
def test_a_session_decides_escalate_as_an_evaluation_from_scratch(name, session) -> None:
    s = monitor(name).session("s1")
    for n, call in enumerate(session):
        decision = s.authorize(event(n, call))
        scratch = decide(s.explanation(), f"c{n}")
        assert decision.verdict == scratch.verdict
        assert decision.allowed == scratch.allowed
        assert [r.rule for r in decision.reasons] == [r.rule for r in scratch.reasons]
        tool, args, labels = call
        if "blocked" in labels:
            assert decision.verdict == "deny"  # deny wins over escalate
        if decision.verdict == "escalate":
            assert not decision.allowed
            assert decision.escalation.tool == tool and decision.escalation.arguments == args
            assert decision.escalation.rules == frozenset(r.rule for r in decision.reasons)
            assert decision.escalation.digest == call_digest(tool, args)
        else:
            assert decision.escalation is None


def test_escalate_wins_over_allow_and_loses_to_deny() -> None:
    s = monitor("volatile").session("s1")
    paid = s.authorize(event(1, ("pay", {"amount": 500}, [])))
    assert (paid.verdict, paid.allowed) == ("escalate", False)
    assert [r.message for r in paid.reasons] == ["pay(amount=500) pays a lot"]
    assert paid.feedback == "Authorization issues encountered:\n- Needs approval: pay(amount=500) pays a lot"
    data = paid.to_json()
    assert data["verdict"] == "escalate" and data["escalation"]["rules"] == ["big"]
    blocked = s.authorize(event(2, ("pay", {"amount": 500}, ["blocked"])))
    assert (blocked.verdict, blocked.to_json()["verdict"]) == ("deny", "deny")
    read = s.authorize(event(3, ("read", {"amount": 5}, [])))
    assert (read.verdict, read.allowed, read.to_json()["verdict"]) == ("allow", True, "allow")


def test_a_policy_without_escalate_keeps_its_decisions() -> None:
    policy = policyc.load_source('.import events\nDeny(a) :- Action(a), is_tool(a, "rm").')
    s = policyc.Monitor(policy).session("s1")
    assert s.authorize({"id": "c1", "kind": "tool_call", "tool": "rm"}).verdict == "deny"
    assert s.authorize({"id": "c2", "kind": "tool_call", "tool": "ls"}).verdict == "allow"
    assert "Escalate" not in {r.name for r in policy.plan.relations}


def test_the_risk_librarys_binary_escalate_is_no_verdict() -> None:
    policy = policyc.load_source(
        '.import events\n.decl Escalate(a: symbol, why: symbol)\nEscalate(a, "x") :- Action(a).\n'
        "Deny(a) :- Escalate(a, _)."
    )
    s = policyc.Monitor(policy).session("s1")
    assert s.authorize({"id": "c1", "kind": "tool_call", "tool": "rm"}).verdict == "deny"


def test_a_decision_refuses_an_allowed_escalation() -> None:
    with pytest.raises(ValueError):
        Decision("a", True, verdict="escalate")
    with pytest.raises(ValueError):
        Decision("a", False, verdict="maybe")
    assert Decision("a", False).verdict == "deny" and Decision("a", True).verdict == "allow"


def test_a_failing_escalation_denies() -> None:
    policy = policyc.load_source(
        ".import events\n.functor boom(x: symbol): number\nEscalate(a) :- Action(a), boom(a) > 1.",
        functors={"boom": lambda x: 1 / 0},
    )
    decision = policyc.Monitor(policy).session("s1").authorize({"id": "c1", "kind": "tool_call", "tool": "t"})
    assert (decision.verdict, decision.errored) == ("deny", True)


# ------------------------------------------------------------------------------ approvals


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(POLICIES)),
    first=st.one_of(
        calls(), st.just(("pay", {"amount": 500}, [])), st.just(("send", {"amount": 5}, ["external"]))
    ),
    later=st.lists(st.one_of(st.none(), calls()), min_size=1, max_size=8),  # None: the first call again
    session=st.sampled_from(["s1", "s2"]),
)
def test_an_approval_authorizes_only_its_own_call_once(name, first, later, session) -> None:
    later = [first if call is None else call for call in later]
    m = monitor(name)
    s1 = m.session("s1")
    decision = s1.authorize(event(0, first))
    if decision.verdict != "escalate":
        return
    approval = s1.approve(decision.escalation)
    assert s1.events[approval.id]["kind"] == "approval" and "approval" in s1.events[approval.id]["labels"]
    target = m.session(session) if session == "s2" else s1
    used = False
    for n, call in enumerate(later, 1):
        decided = target.authorize(event(n, call))
        scratch = decide(target.explanation(), f"c{n}")
        if decided.approval is not None:
            # exactly the approved call, in its session, escalated by the same rules, once
            assert not used and session == "s1"
            assert decided.allowed and decided.verdict == "allow" and decided.approval == approval
            assert scratch.verdict == "escalate"
            assert key(decided) == key(decision)
            used = True
        else:
            assert decided.verdict == scratch.verdict  # as without any approval
            if decided.verdict == "escalate":
                same = key(decided) == key(decision)
                assert used or not same or session == "s2"
    if not used and session == "s1":  # still there for exactly that call
        assert [a.id for a in s1.approvals.pending] == [approval.id]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(POLICIES)), ttl=st.floats(1, 1000), wait=st.floats(0, 2000))
def test_an_approval_expires_after_its_ttl(name, ttl, wait) -> None:
    clock = Clock()
    s = monitor(name, clock, approval_ttl=ttl).session("s1")
    decision = s.authorize(event(0, ("pay", {"amount": 500}, [])))
    s.approve(decision.escalation)
    clock.now += wait
    again = s.decide("c0")
    assert again.allowed == (wait < ttl)
    assert again.verdict == ("allow" if wait < ttl else "escalate")


def test_an_approval_is_used_once() -> None:
    s = monitor("direct").session("s1")
    decision = s.authorize(event(0, ("pay", {"amount": 500}, [])))
    s.approve(decision.escalation)
    assert s.decide("c0").allowed
    assert s.decide("c0").verdict == "escalate"
    assert s.authorize(event(1, ("pay", {"amount": 500}, []))).verdict == "escalate"


def test_an_approval_never_overrides_a_deny() -> None:
    s = monitor("direct").session("s1")
    decision = s.authorize(event(0, ("pay", {"amount": 500}, [])))
    approval = s.approve(decision.escalation)
    denied = s.authorize(event(1, ("pay", {"amount": 500}, ["blocked"])))
    assert (denied.verdict, denied.approval) == ("deny", None)
    assert s.approvals.pending == [approval]  # not used up by the denial


@pytest.mark.parametrize(
    "other",
    [
        ("pay", {"amount": 1000}, []),  # another argument value
        ("pay", {"amount": 500, "to": "bob"}, []),  # another argument
        ("send", {"amount": 500}, ["external"]),  # another tool
    ],
)
def test_an_approval_does_not_cover_another_call(other) -> None:
    s = monitor("direct").session("s1")
    s.approve(s.authorize(event(0, ("pay", {"amount": 500}, []))).escalation)
    assert s.authorize(event(1, other)).verdict == "escalate"


def test_a_new_escalating_rule_needs_a_new_approval() -> None:
    s = monitor("volatile").session("s1")
    first = s.authorize(event(0, ("send", {"amount": 5}, ["external", "reviewed"])))
    assert first.escalation.rules == {"external"}
    s.approve(first.escalation)
    second = s.authorize(event(1, ("send", {"amount": 5}, ["external"])))  # not reviewed too
    assert second.escalation.rules == {"external", "unreviewed"} and second.verdict == "escalate"


def test_an_approval_of_another_session_is_refused() -> None:
    m = monitor("direct")
    s1, s2 = m.session("s1"), m.session("s2")
    request = s1.authorize(event(0, ("pay", {"amount": 500}, []))).escalation
    with pytest.raises(ValueError):
        s2.approve(request)
    approval = s1.approve(request)
    s2.approvals.add(approval)  # kept only by its own session
    assert s2.approvals.pending == []
    assert s2.authorize(event(0, ("pay", {"amount": 500}, []))).verdict == "escalate"


def test_approval_rules_see_the_approval_event() -> None:
    policy = policyc.load_source(
        ".import approvals\n"
        '@id("big") Escalate(a) :- Action(a), is_tool(a, "pay").\n'
        "Seen(e) :- Approval(e).\n.output Seen"
    )
    s = policyc.Monitor(policy).session("s1")
    approval = s.approve(s.authorize({"id": "c1", "kind": "tool_call", "tool": "pay"}).escalation)
    index = s.plan.relation_index()
    assert s.explanation().holds(index["Seen"], (approval.id,))


def test_the_digest_is_of_canonical_json() -> None:
    import hashlib

    text = json.dumps(
        {"args": {"a": 1, "b": [1, "é"]}, "tool": "t"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert call_digest("t", {"b": [1, "é"], "a": 1}) == hashlib.sha256(text.encode()).hexdigest()


def test_an_approval_event_reads_back() -> None:
    ledger = Approvals("s1", clock=lambda: 0.0)
    request = EscalationRequest("s1", "c1", "pay", {"amount": 5}, frozenset({"big"}))
    approval = ledger.grant(request, ttl=10, approver="alice")
    event = approval.event(["c1"])
    assert event["labels"] == ["approval", "approved-by:alice"] and event["deps"] == ["c1"]
    again = approval_of_event(event, "s1", 10.0)
    assert again == approval
    assert approval_of_event(event, "s2", 10.0) is None
    assert approval_of_event({**event, "text": "nonsense"}, "s1", 10.0) is None


def test_an_escalated_decision_explains_itself() -> None:
    s = monitor("direct").session("s1")
    decision = s.authorize(event(0, ("pay", {"amount": 500}, [])))
    explained = decision.explain()
    assert explained.summary == 'needs approval: Escalate("c0") holds and no Deny' and not explained.allowed
    approval = s.approve(decision.escalation)
    again = s.decide("c0").explain()
    assert again.allowed and again.summary.endswith(f"approval {approval.id} approved the call")


def test_an_approval_of_an_action_no_event_names_covers_that_action_only() -> None:
    policy = policyc.load_source('.decl Send(a: symbol)\n.input Send\n@id("send") Escalate(a) :- Send(a).')
    s = policyc.Monitor(policy).session("s1")
    s.add_facts({"Send": [["x"], ["y"]]})
    s.approve(s.decide("x").escalation)
    assert s.decide("y").verdict == "escalate"
    assert s.decide("x").allowed
