"""A decision has one JSON form (`Decision.to_json(view=...)`, `Decision.from_json`): every
decision survives it in each view, read back with the same verdict, reasons (the fields the
view shows), escalation, approval and feedback; what is not a decision's form is refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.runtime.approvals import Approval, EscalationRequest
from policyc.runtime.verdict import ERROR_RULE, REASON_FIELDS, VIEWS, Decision, Reason, ShadowResult

TEXT = st.text(max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def reasons(draw: st.DrawFn, error: bool = False) -> Reason:
    return Reason(
        ERROR_RULE if error else draw(st.sampled_from(["r1", "no-send", "Deny@p.dl:3"])),
        draw(st.none() | TEXT),
        draw(st.none() | TEXT),
        draw(st.none() | st.sampled_from(["high", "low"])),
        tuple(draw(st.lists(TEXT, max_size=2))),
        draw(st.dictionaries(st.sampled_from(["a", "n", "to"]), JSON, max_size=2)),
        code=draw(st.none() | st.sampled_from(["rule-failed", "limit-exceeded"])),
        detail=draw(st.none() | TEXT),
    )


@st.composite
def decisions(draw: st.DrawFn) -> Decision:
    mode = draw(st.sampled_from(["enforce", "shadow"]))
    verdict = draw(st.sampled_from(["allow", "deny", "escalate"]))
    errored = verdict == "deny" and draw(st.booleans())
    allowed = verdict == "allow" or mode == "shadow"
    found = tuple(draw(st.lists(reasons(), max_size=3))) if verdict != "allow" else ()
    if errored:
        found = (draw(reasons(error=True)),)
    action = draw(st.sampled_from(["c1", "a\n- Allowed", "x"]))
    escalation = approval = None
    if verdict == "escalate" or (verdict == "allow" and draw(st.booleans())):
        arguments = draw(st.dictionaries(TEXT, JSON, max_size=2))
        escalation = EscalationRequest(
            "s", action, "pay", arguments, frozenset(r.rule for r in found) or frozenset({"r1"})
        )
    if verdict == "allow" and escalation is not None:
        approval = Approval(
            "ap1", "s", "pay", escalation.digest, escalation.rules, 0.0, action, draw(st.none() | TEXT)
        )
    shadow = None
    if draw(st.booleans()):
        shadow = ShadowResult("deny", False, tuple(draw(st.lists(reasons(), max_size=1))), False, True, None)
    return Decision(
        action,
        allowed,
        found,
        errored,
        verdict=verdict,
        escalation=escalation,
        approval=approval,
        mode=mode,
        would_deny=tuple(draw(st.lists(reasons(), max_size=1))) if mode == "shadow" else (),
        shadow=shadow,
    )


def _reason_fields(reason: Reason, view: str) -> dict:
    return {name: value for name, value in reason.to_json(view).items() if name in REASON_FIELDS}


@settings(max_examples=60, deadline=None)
@given(decisions(), st.sampled_from(VIEWS))
def test_a_decision_survives_its_json_form_in_every_view(decision: Decision, view: str) -> None:
    sent = json.loads(json.dumps(decision.to_json(view)))
    read = Decision.from_json(sent)
    assert (read.action, read.verdict, read.allowed, read.errored, read.mode) == (
        decision.action,
        decision.verdict,
        decision.allowed,
        decision.errored,
        decision.mode,
    )
    assert read.feedback == decision.feedback
    assert [_reason_fields(r, view) for r in read.reasons] == [
        _reason_fields(r, view) for r in decision.reasons
    ]
    assert read.escalation == decision.escalation
    assert (read.approval is None) == (decision.approval is None)
    if decision.approval is not None:
        assert read.approval is not None and read.approval.to_json() == decision.approval.to_json()
    assert read.to_json(view) == sent  # read back, it writes the same form


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"verdict": "maybe"}, "`verdict` is not one of"),
        ({"allowed": "yes"}, "`allowed` is not what it holds"),
        ({"verdict": "deny"}, "contradicts"),
        ({"reasons": [{"rule": ERROR_RULE, "message": "x", "suggestion": None}]}, "could not be evaluated"),
        ({"reasons": [{"rule": "r", "message": 1, "suggestion": None}]}, "`message` is not what it holds"),
        ({"mode": "audit"}, "`mode` is not one of"),
        ({"escalation": {"session": "s"}}, "an escalation has no"),
    ],
)
def test_what_is_not_a_decision_is_refused_with_the_field_named(change: dict, why: str) -> None:
    allowed = Decision("c1", True).to_json("service")
    with pytest.raises(ValueError, match=why):
        Decision.from_json({**allowed, **change})


def test_an_escalation_whose_digest_is_not_its_call_s_is_refused() -> None:
    request = EscalationRequest("s", "c1", "pay", {"amount": 1}, frozenset({"r"}))
    data = {**request.to_json(), "arguments": {"amount": 1.0, "to": "x"}}
    with pytest.raises(ValueError, match="digest"):
        EscalationRequest.from_json(data)
