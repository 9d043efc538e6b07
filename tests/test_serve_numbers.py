"""Numbers an agent sends reach a real `policyc serve` as it sent them: an integer past 64 bits
is read exactly (orjson would read it as a float), kept and answered exactly, and decided as the
in-process monitor decides it; a number no JSON value holds exactly is refused (422)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import policyc

from .support.service import Server, client, prepare

POLICY = """.import events
@id("pay-needs-approval") Escalate(a) :- ToolCall(a, "pay").
@id("huge") Deny(a) :- ToolCall(a, "pay"), n = tool_arg(a, "amount"), n != to_number(tool_arg(a, "said")).
"""
HUGE = 2**64 + 1  # 18446744073709551617: orjson reads 1.8446744073709552e19


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    folder = tmp_path_factory.mktemp("numbers")
    key = prepare(folder, POLICY, {"agent": ("agent",)})["agent"]
    running = Server(folder)
    yield running, key
    running.stop()


def _authorize(served: tuple[Server, str], body: bytes, session: str) -> tuple[int, dict]:
    server, key = served
    with client(server, key) as http:
        assert http.post("/v1/sessions", json={"session": session}).status_code in (200, 201)
        answer = http.post(
            f"/v1/sessions/{session}/authorize", content=body, headers={"content-type": "application/json"}
        )
        return answer.status_code, json.loads(answer.text)


@pytest.mark.parametrize("amount", [HUGE, -(2**63) - 1, 2**70])
def test_an_integer_past_64_bits_is_read_kept_and_decided_exactly(served, amount: int) -> None:
    call = {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": amount, "said": str(amount)}}
    status, answer = _authorize(served, json.dumps({"event": call, "after_seq": 0}).encode(), f"s{amount}")
    assert status == 200, answer
    local = policyc.Monitor(policyc.load(source=POLICY)).session("s").authorize(call)
    assert (answer["verdict"], local.verdict) == ("escalate", "escalate")  # `huge` did not fire
    assert answer["escalation"]["arguments"]["amount"] == amount  # exactly, as sent


@pytest.mark.parametrize("number", [b"1e999", b"NaN", b"-Infinity"])
def test_a_number_no_json_value_holds_is_refused(served, number: bytes) -> None:
    body = b'{"event": {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": ' + number + b"}}}"
    status, answer = _authorize(served, body, f"n{number.decode()}")
    assert status == 422 and answer["error"]["code"] == "unrepresentable-number", answer


def test_text_that_is_not_json_is_still_a_bad_request(served) -> None:
    status, answer = _authorize(served, b'{"event": 12345678901234567890123,', "bad")
    assert status == 400 and answer["error"]["code"] == "malformed-json"
