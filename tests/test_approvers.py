"""Approvers: the guard, tool_messages and the HTTP instrumentation run an escalated call only
after the approver says yes; a no, an approver that raises or hangs, or none at all deny, saying
which. The console approver, driven through streams and a pseudo-terminal. `policyc replay`,
`policyc test` and `policyc check --deep` with the third verdict.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import threading
import time

import pytest

import policyc
from policyc.runtime.approvers import (
    APPROVAL_REFUSED,
    APPROVAL_STALE,
    APPROVAL_TIMEOUT,
    APPROVER_FAILED,
    NO_APPROVER,
    ConsoleApprover,
    prompt,
    settle,
)

from .conftest import run_policyc

POLICY = """
.import events
@id("large-payment") @message("a payment of {n} needs approval")
Escalate(a) :- ToolCall(a, "pay"), n = tool_arg(a, "amount"), n > 100.
@id("no-mallory") @message("never pay mallory")
Deny(a) :- ToolCall(a, "pay"), tool_arg(a, "to") = "mallory".
"""


class Scripted:
    """An approver answering from a list, keeping the requests it was asked."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.asked = []

    def __call__(self, request):
        self.asked.append(request)
        return self.answers.pop(0)


def guarded(approver=None, asynchronous=False, **options):
    """A session and a guarded `pay` tool that logs the calls that ran."""
    monitor = policyc.Monitor(policyc.load_source(POLICY), approver=approver, **options)
    session = monitor.session("s1")
    ran = []
    if asynchronous:

        @policyc.guard(session=session)
        async def pay(to: str, amount: int) -> str:
            ran.append((to, amount))
            return "paid"

    else:

        @policyc.guard(session=session)
        def pay(to: str, amount: int) -> str:
            ran.append((to, amount))
            return "paid"

    return session, pay, ran


def call(pay, *args):
    result = pay(*args)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def refusal(pay, *args):
    with pytest.raises(policyc.PolicyDenied) as denied:
        call(pay, *args)
    return denied.value.decision


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_guard_runs_an_escalated_call_only_after_a_yes(asynchronous) -> None:
    approver = Scripted(False, True)
    session, pay, ran = guarded(approver, asynchronous)
    assert call(pay, "bob", 5) == "paid" and approver.asked == []  # not escalated: nobody asked
    decision = refusal(pay, "bob", 500)
    assert ran == [("bob", 5)]  # the no: it did not run
    assert decision.reasons[0].rule == APPROVAL_REFUSED and decision.reasons[1].rule == "large-payment"
    assert call(pay, "bob", 500) == "paid"  # the yes
    assert ran == [("bob", 5), ("bob", 500)]
    request = approver.asked[1]
    assert (request.session, request.tool, request.arguments) == ("s1", "pay", {"to": "bob", "amount": 500})
    assert request.rules == {"large-payment"} and request.messages == ("a payment of 500 needs approval",)
    assert "Needs approval" in request.feedback
    kinds = [session.events[e]["kind"] for e in session.order]
    assert kinds.count("approval") == 1
    assert refusal(pay, "mallory", 500).reasons[0].rule == "no-mallory"  # deny: nobody asked
    assert len(approver.asked) == 2


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_async_approver(asynchronous) -> None:
    async def approver(request):
        await asyncio.sleep(0)
        return request.arguments["to"] == "bob"

    _, pay, ran = guarded(approver, asynchronous)
    assert call(pay, "bob", 500) == "paid"
    assert refusal(pay, "eve", 500).reasons[0].rule == APPROVAL_REFUSED
    assert ran == [("bob", 500)]


def raises(request):
    raise RuntimeError("the approval service is down")


def hangs(request):
    time.sleep(5)
    return True


async def hangs_async(request):
    await asyncio.sleep(5)
    return True


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    ("approver", "rule", "says"),
    [
        (None, NO_APPROVER, "no approver is set"),
        (raises, APPROVER_FAILED, "RuntimeError: the approval service is down"),
        (hangs, APPROVAL_TIMEOUT, "within 0.2 s"),
        (hangs_async, APPROVAL_TIMEOUT, "within 0.2 s"),
        (lambda request: "yes", APPROVAL_REFUSED, "did not approve"),  # only True approves
    ],
)
def test_no_yes_denies_saying_why(approver, rule, says, asynchronous) -> None:
    _, pay, ran = guarded(approver, asynchronous, approval_timeout=0.2)
    started = time.monotonic()
    decision = refusal(pay, "bob", 500)
    assert time.monotonic() - started < 3
    assert (decision.verdict, decision.allowed) == ("deny", False)
    assert decision.reasons[0].rule == rule and says in decision.reasons[0].message
    assert decision.escalation is not None and ran == []


def test_an_approval_that_no_longer_fits_denies() -> None:
    """The approval event itself makes another rule escalate: the call's rules changed."""
    policy = policyc.load_source(
        POLICY + '@id("after-approval")\nEscalate(a) :- ToolCall(a, "pay"), Event(e, "approval").'
    )
    session = policyc.Monitor(policy, approver=lambda r: True).session("s1")
    decision = settle(
        session,
        session.authorize(
            {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"to": "bob", "amount": 500}}
        ),
    )
    assert decision.reasons[0].rule == APPROVAL_STALE and not decision.allowed
    assert session.approvals.pending == []


def test_tool_messages_ask_the_approver() -> None:
    approver = Scripted(True, False)
    session = policyc.Monitor(policyc.load_source(POLICY), approver=approver).session("s1")
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "t1", "function": {"name": "pay", "arguments": json.dumps({"to": "bob", "amount": 500})}},
            {"id": "t2", "function": {"name": "pay", "arguments": json.dumps({"to": "eve", "amount": 700})}},
        ],
    }
    replies = policyc.tool_messages(session, message, {"pay": lambda to, amount: f"paid {to}"})
    assert replies[0]["content"] == "paid bob"
    assert "the approver did not approve the call" in replies[1]["content"]
    assert [r.tool for r in approver.asked] == ["pay", "pay"]


def test_the_http_instrumentation_asks_the_approver() -> None:
    httpx = pytest.importorskip("httpx")
    policy = policyc.load_source(
        '.import events\n@id("post") Escalate(a) :- ToolCall(a, "http_request"), tool_arg(a, "method") = "POST".'
    )
    approver = Scripted(False)
    session = policyc.Monitor(policy, approver=approver).session("s1")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="ok"))
    with policyc.instrument_httpx(), policyc.use_session(session):
        client = httpx.Client(transport=transport)
        assert client.get("https://example.com/").text == "ok"
        with pytest.raises(policyc.PolicyDenied) as denied:
            client.post("https://example.com/", content=b"x")
    assert denied.value.decision.reasons[0].rule == APPROVAL_REFUSED
    assert [r.arguments["method"] for r in approver.asked] == ["POST"]


# ------------------------------------------------------------------------------ the console


def test_the_console_approver_shows_the_call_and_reads_yes() -> None:
    out = io.StringIO()
    approver = ConsoleApprover(io.StringIO("y\n"), out, interactive=True)
    _, pay, ran = guarded(approver)
    assert call(pay, "bob\x1b[2J", 500) == "paid" and ran == [("bob\x1b[2J", 500)]
    shown = out.getvalue()
    assert "tool: pay" in shown and "to: `bob\\u001b[2J`" in shown and "amount: 500" in shown
    assert "why: a payment of 500 needs approval" in shown and shown.endswith("[y/N] ")
    assert "\x1b" not in shown  # no argument writes to the terminal


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "yes please\n"])
def test_the_console_approver_says_no_unless_told_yes(answer) -> None:
    _, pay, ran = guarded(ConsoleApprover(io.StringIO(answer), io.StringIO(), interactive=True))
    assert refusal(pay, "bob", 500).reasons[0].rule == APPROVAL_REFUSED and ran == []


def test_the_console_approver_answers_no_without_a_terminal() -> None:
    out = io.StringIO()
    _, pay, ran = guarded(ConsoleApprover(io.StringIO("y\n"), out))
    assert refusal(pay, "bob", 500).reasons[0].rule == APPROVAL_REFUSED
    assert out.getvalue() == "" and ran == []


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_the_console_approver_on_a_pseudo_terminal() -> None:
    """The guarded call runs only once `y` is typed on the terminal."""
    import pty

    controller, terminal = pty.openpty()
    reader = os.fdopen(terminal, "r", encoding="utf-8", closefd=False)
    shown = io.StringIO()
    _, pay, ran = guarded(ConsoleApprover(reader, shown))
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", call(pay, "bob", 500)))
    worker.start()
    deadline = time.monotonic() + 10
    while "[y/N]" not in shown.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == [] and "[y/N]" in shown.getvalue()  # asked, not run yet
    os.write(controller, b"y\n")
    worker.join(10)
    assert result == {"value": "paid"} and ran == [("bob", 500)]
    reader.close()
    os.close(terminal)
    os.close(controller)


def test_the_prompt_delimits_every_value() -> None:
    from policyc.runtime.approvals import EscalationRequest

    request = EscalationRequest(
        "s\n1", "c1", "pay", {"x": {"k": [1, True]}, "y": None}, frozenset({"r"}), ("m",)
    )
    text = prompt(request)
    assert "session `s\\n1`" in text and 'x: `{"k": [1, true]}`' in text and "y: `null`" in text


# ------------------------------------------------------------------------------ the commands


def test_replay_and_test_report_the_three_verdicts(tmp_path) -> None:
    (tmp_path / "p.dl").write_text(POLICY, "utf-8")
    session = policyc.Monitor(policyc.load_source(POLICY)).session("s1")
    recorded = []
    record = session.record
    session.record = lambda event: (recorded.append(dict(event)), record(event))
    escalated = session.authorize(
        {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"to": "bob", "amount": 500}}
    )
    session.approve(escalated.escalation)
    session.authorize({"id": "c2", "kind": "tool_call", "tool": "pay", "args": {"to": "bob", "amount": 500}})
    session.authorize(
        {"id": "c3", "kind": "tool_call", "tool": "pay", "args": {"to": "mallory", "amount": 5}}
    )
    (tmp_path / "t.jsonl").write_text(json.dumps({"session": "s1", "events": recorded}) + "\n", "utf-8")
    run = run_policyc("replay", "--each", "p.dl", "t.jsonl", cwd=tmp_path)
    assert run.status == 0, run.stderr
    lines = [line.strip() for line in run.stdout.splitlines()]
    assert lines[1] == "c1 pay: ESCALATED (needs approval)"
    assert [line for line in lines if line.startswith("c")] == [
        "c1 pay: ESCALATED (needs approval)",
        f"c1 pay: allowed (approval {recorded[1]['id']})",
        "c2 pay: ESCALATED (needs approval)",  # the approval was used up
        "c3 pay: DENIED",
    ]
    data = run_policyc("replay", "--each", "p.dl", "t.jsonl", "--format", "json", cwd=tmp_path).json()
    assert [d["verdict"] for d in data["sessions"][0]["decisions"]] == [
        "escalate",
        "allow",
        "escalate",
        "deny",
    ]
    (tmp_path / "p_test.toml").write_text(
        'policy = "p.dl"\n[[test]]\nname = "verdicts"\ntrace = "t.jsonl"\n'
        'escalate = ["c2"]\ndeny = ["c3"]\nallow = ["c1"]\nreasons = { c2 = ["large-payment"] }\n'
        '[[test]]\nname = "wrong"\ntrace = "t.jsonl"\ndeny = ["c2"]\nescalate = ["c3"]\n',
        "utf-8",
    )
    run = run_policyc("test", "p_test.toml", cwd=tmp_path)
    assert run.status == 1
    assert "ok     verdicts" in run.stdout
    assert "deny c2: expected denied, got escalated by large-payment" in run.stdout
    assert "escalate c3: expected escalated, got denied by no-mallory" in run.stdout


def test_a_test_file_cannot_expect_two_verdicts(tmp_path) -> None:
    (tmp_path / "p.dl").write_text(POLICY, "utf-8")
    (tmp_path / "p_test.toml").write_text(
        'policy = "p.dl"\n[[test]]\nname = "x"\nevents = [{ id = "c1", kind = "tool_call", tool = "pay" }]\n'
        'deny = ["c1"]\nescalate = ["c1"]\n',
        "utf-8",
    )
    run = run_policyc("test", "p_test.toml", cwd=tmp_path)
    assert run.status != 0 and "is both in `deny` and in `escalate`" in run.stdout + run.stderr


def test_deep_check_counts_escalate_as_deny(tmp_path) -> None:
    (tmp_path / "p.dl").write_text(
        ".import events\n"
        'Escalate(a) :- ToolCall(a, "wire").\n'
        'Allow(a) :- ToolCall(a, "wire"), Label(a, "trusted").\n'
        'Escalate(a) :- ToolCall(a, "pay"), Label(a, "big").\n'
        'Deny(a) :- ToolCall(a, "pay").\n',
        "utf-8",
    )
    run = run_policyc("check", "--deep", "p.dl", "--format", "json", cwd=tmp_path)
    found = {(d["name"], d["line"]) for d in run.json()["diagnostics"]}
    assert ("shadowed-allow", 3) in found and ("shadowed-escalate", 4) in found, run.stdout


def test_an_approved_run_is_in_the_audit_log_and_the_log_verifies(tmp_path) -> None:
    """The guard runs the escalated call after the console's yes; the audit log has the
    escalation, the approval event and the allow that used it, verifies, and fails after an
    edit."""
    from policyc.runtime.audit import AuditLog, read_records, verify

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    approver = ConsoleApprover(io.StringIO("y\n"), io.StringIO(), interactive=True)
    monitor = policyc.Monitor(policyc.load_source(POLICY), approver=approver, audit=log)
    session = monitor.session("s1")
    ran = []

    @policyc.guard(session=session)
    def pay(to: str, amount: int) -> str:
        ran.append((to, amount))
        return "paid"

    assert pay("bob", 500) == "paid" and ran == [("bob", 500)]
    log.close()
    records = read_records(path)
    decisions = [r for r in records if r["type"] == "decision"]
    assert [d["verdict"] for d in decisions] == ["escalate", "allow"]
    approval = decisions[1]["approval"]
    assert approval["rules"] == ["large-payment"] and approval["tool"] == "pay"
    events = [r["event"] for r in records if r["type"] == "event"]
    assert [e["kind"] for e in events] == ["tool_call", "approval", "tool_result"]
    assert verify(path).ok
    lines = path.read_text("utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"approval"' in line and '"type":"event"' in line)
    lines[at] = lines[at].replace("large-payment", "small-payment")
    path.write_text("".join(lines), "utf-8")
    assert not verify(path).ok


def test_an_async_http_client_awaits_the_approver() -> None:
    httpx = pytest.importorskip("httpx")
    policy = policyc.load_source(
        '.import events\n@id("post") Escalate(a) :- ToolCall(a, "http_request"), tool_arg(a, "method") = "POST".'
    )

    async def approver(request):
        await asyncio.sleep(0)
        return request.arguments["url"].endswith("/ok")

    session = policyc.Monitor(policy, approver=approver).session("s1")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="sent"))

    async def run():
        async with httpx.AsyncClient(transport=transport) as client:
            sent = (await client.post("https://example.com/ok", content=b"x")).text
            with pytest.raises(policyc.PolicyDenied) as denied:
                await client.post("https://example.com/no", content=b"x")
            return sent, denied.value.decision.reasons[0].rule

    with policyc.instrument_httpx(), policyc.use_session(session):
        assert asyncio.run(run()) == ("sent", APPROVAL_REFUSED)
