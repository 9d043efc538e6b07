"""The retry of an escalated call on a 2026-07-28 connection (the gateway's `resumed`): only
the call the user was asked about, compared as canonical JSON (`1`, `1.0` and `true` differ),
is approved, and the arguments sent are the ones the user saw; the calls waiting for their
retry expire and are bounded. With a real monitor, session and the SDK's own types."""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as mt
import pytest

import policyc
from policyc.gateway import approval
from policyc.gateway.approval import Pending, input_required, resumed
from policyc.gateway.config import SessionOptions
from policyc.gateway.decide import Approvers, Gate

POLICY = """.import events
@id("pay-needs-approval") @message("paying needs the user's approval")
Escalate(a) :- ToolCall(a, "up.pay"), tool_arg(a, "amount") = 1.
"""


def _escalated(pending: dict[str, Pending], arguments: dict[str, Any]) -> tuple[Gate, str]:
    monitor = policyc.Monitor(policyc.load(source=POLICY), approver=Approvers())  # as `policyc mcp` builds it
    gate = Gate(monitor, "s", SessionOptions())

    async def ask() -> str:
        verdict = await gate.decide("up.pay", arguments)
        assert verdict.decision is not None and verdict.decision.escalated
        result = input_required(pending, "conn", "up.pay", arguments, verdict)
        assert isinstance(result, mt.InputRequiredResult) and result.request_state in pending
        return result.request_state

    return gate, anyio.run(ask)


def _retry(
    gate: Gate, pending: dict[str, Pending], state: str, arguments: dict[str, Any]
) -> tuple[Any, dict]:
    answer = mt.ElicitResult(action="accept", content={"approve": True})
    params = mt.CallToolRequestParams(
        name="up.pay", arguments=arguments, request_state=state, input_responses={"approval": answer}
    )

    async def retry() -> tuple[Any, dict]:
        return await resumed(pending, "conn", gate, "up.pay", arguments, params, 60.0)

    return anyio.run(retry)


@pytest.mark.parametrize("changed", [1.0, True, "1"])
def test_a_retry_with_an_equal_but_different_value_is_not_the_approved_call(changed: Any) -> None:
    pending: dict[str, Pending] = {}
    gate, state = _escalated(pending, {"amount": 1})
    verdict, _ = _retry(gate, pending, state, {"amount": changed})
    assert not verdict.forward and "not the call the user was asked about" in verdict.text


def test_the_approved_retry_sends_the_arguments_the_user_saw() -> None:
    pending: dict[str, Pending] = {}
    gate, state = _escalated(pending, {"amount": 1})
    verdict, sent = _retry(gate, pending, state, {"amount": 1})
    assert verdict.forward, verdict.text
    assert sent == {"amount": 1} and type(sent["amount"]) is int
    again, _ = _retry(gate, pending, state, {"amount": 1})  # the state is used up
    assert not again.forward and "unknown, used, expired" in again.text


def test_calls_waiting_for_their_retry_expire_and_are_bounded(monkeypatch) -> None:
    pending: dict[str, Pending] = {}
    gate, first = _escalated(pending, {"amount": 1})
    monkeypatch.setattr(approval, "MAX_PENDING", 3)
    waiting = pending[first]
    for n in range(5):  # more than the table holds: the oldest go first
        input_required(pending, "conn", "up.pay", {"amount": 1, "n": n}, waiting.verdict)
    assert len(pending) == 3 and first not in pending
    verdict, _ = _retry(gate, pending, first, {"amount": 1})
    assert not verdict.forward and "unknown, used, expired" in verdict.text
    # a call asked about longer ago than the time to live is forgotten at the next escalation
    stale = next(iter(pending))
    pending[stale] = Pending(**{**pending[stale].__dict__, "asked": pending[stale].asked - 1000})
    input_required(pending, "conn", "up.pay", {"amount": 1}, waiting.verdict, ttl=300)
    assert stale not in pending


def test_every_end_of_a_gateway_escalation_is_an_outcome_record_in_the_log(tmp_path) -> None:
    """Approved and refused retries, a retry past the time limit, and a client that cannot be
    asked: each escalation of the gateway ends with its `outcome` record."""
    from policyc.runtime.audit import AuditLog, read_records, verify

    log = tmp_path / "audit.jsonl"
    with AuditLog(log) as audit:
        monitor = policyc.Monitor(policyc.load(source=POLICY), approver=Approvers(), audit=audit)
        gate = Gate(monitor, "s", SessionOptions())
        pending: dict[str, Pending] = {}

        def retried(approve: bool, limit: float, asked_ago: float = 0.0) -> Any:
            async def run() -> Any:
                verdict = await gate.decide("up.pay", {"amount": 1})
                result = input_required(pending, "conn", "up.pay", {"amount": 1}, verdict)
                state = result.request_state
                pending[state] = Pending(
                    **{**pending[state].__dict__, "asked": pending[state].asked - asked_ago}
                )
                answer = mt.ElicitResult(action="accept", content={"approve": approve})
                params = mt.CallToolRequestParams(
                    name="up.pay",
                    arguments={"amount": 1},
                    request_state=state,
                    input_responses={"approval": answer},
                )
                return (await resumed(pending, "conn", gate, "up.pay", {"amount": 1}, params, limit))[0]

            return anyio.run(run)

        assert retried(True, 60.0).forward
        assert not retried(False, 60.0).forward
        late = retried(True, 5.0, asked_ago=10.0)
        assert not late.forward and "no approval came within 5 s" in late.text

        async def unaskable() -> Any:
            return await gate.call("up.pay", {"amount": 1}, None)

        assert not anyio.run(unaskable).forward
    assert verify(log).ok
    outcomes = [(r["outcome"], r["rules"]) for r in read_records(log) if r["type"] == "outcome"]
    assert outcomes == [
        ("approved", ["pay-needs-approval"]),
        ("refused", ["pay-needs-approval"]),
        ("timed-out", ["pay-needs-approval"]),
        ("no-approver", ["pay-needs-approval"]),
    ]
