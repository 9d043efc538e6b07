"""The audit log (runtime/audit.py): an untouched log verifies; every single-record
modification, deletion, insertion, swap and tail truncation of a generated log is found, the
first bad record named by its line with a stable code; checkpoints signed with one key fail
with another; redacted values never appear in clear; a decision that cannot be logged is
denied; `policyc audit verify/show` as installed, with their exit statuses."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.audit import (
    CODES,
    GENESIS,
    AuditError,
    AuditLog,
    canonical,
    read_records,
    verify,
    verify_bytes,
)
from policyc.runtime.bundle import generate_keys

from .conftest import run_policyc

POLICY = """
.import events
.role credential budget 0.005
.field login.password : credential
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, e'), Tainted(e').
@id("no-tainted-send") @message("{a} sends after untrusted input")
Deny(a) :- ToolCall(a, "send"), Tainted(a).
@id("login-check") @message("{a} logs in with {p}")
Deny(a) :- ToolCall(a, "login"), ToolArg(a, "password", p), p = "hunter2-secret".
"""

EVENTS = [
    {"id": "u1", "kind": "user_message", "text": "hello"},
    {"id": "c1", "kind": "tool_call", "tool": "send", "args": {"to": "bob"}},
    {"id": "r1", "kind": "tool_result", "text": "...", "labels": ["untrusted"]},
    {"id": "c2", "kind": "tool_call", "tool": "send", "args": {"to": "eve"}},
    {
        "id": "c3",
        "kind": "tool_call",
        "tool": "login",
        "args": {"password": "hunter2-secret", "token": "tok-42"},
    },
    {"id": "c4", "kind": "tool_call", "tool": "read"},
]


def write_log(path: Path, key: Path | None = None, every: int = 3, sessions: int = 2) -> Path:
    policy = policyc.load(source=POLICY)
    with AuditLog(path, key=key, checkpoint_every=every, redact=("token",)) as log:
        monitor = policyc.Monitor(policy, audit=log)
        for n in range(sessions):
            session = monitor.session(f"s{n}")
            for event in EVENTS:
                if event["kind"] == "tool_call":
                    session.authorize(event)
                else:
                    session.record(event)
            session.add_facts({"Label": [("c4", "reviewed")]})
    return path


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> bytes:
    return write_log(tmp_path_factory.mktemp("audit") / "audit.jsonl").read_bytes()


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    private, public = generate_keys(str(folder / "audit"))
    _, other = generate_keys(str(folder / "other"))
    return private, public, other


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def test_an_untouched_log_verifies(generated) -> None:
    verified = verify_bytes(generated)
    assert verified.ok, verified.problem
    records = [json.loads(line) for line in lines_of(generated)]
    assert records[0]["type"] == "header" and records[0]["prev"] == GENESIS
    assert records[0]["policy"].startswith("sha256:") and records[0]["format"] == "policyc-audit/1"
    assert records[-1]["type"] == "checkpoint" and records[-1]["final"] is True
    assert verified.checkpoints == sum(r["type"] == "checkpoint" for r in records) > 2
    assert {r["type"] for r in records} == {"header", "session", "event", "facts", "decision", "checkpoint"}
    decisions = [r for r in records if r["type"] == "decision"]
    assert [r["verdict"] for r in decisions[:4]] == ["allow", "deny", "deny", "allow"]
    assert decisions[1]["rules"] == ["no-tainted-send"]
    assert decisions[1]["reasons"][0]["message"] == "send(to=`eve`) sends after untrusted input"
    assert all(r["policy"] == records[0]["policy"] for r in decisions)
    for before, after in itertools.pairwise(records):
        assert after["prev"] == hashlib.sha256(canonical(before)).hexdigest()


def test_credentials_and_redacted_arguments_are_hashes(generated) -> None:
    assert b"hunter2-secret" not in generated and b"tok-42" not in generated
    records = [json.loads(line) for line in lines_of(generated)]
    (login, *_) = [r for r in records if r["type"] == "event" and r["event"].get("tool") == "login"]
    assert login["event"]["args"]["password"].startswith("sha256:")
    assert login["event"]["args"]["token"].startswith("sha256:")
    decision = next(r for r in records if r["type"] == "decision" and r["rules"] == ["login-check"])
    assert "sha256:" in decision["reasons"][0]["message"]  # the secret in the message, hashed


EDITS = ("modify", "flip", "delete", "insert", "duplicate", "swap", "truncate")


def edited(data: bytes, edit: str, position: int, other: int, byte: int) -> bytes:
    lines = lines_of(data)
    n = len(lines)
    i = position % n
    if edit == "modify":  # a value changed, the record written canonically again
        record = json.loads(lines[i])
        key = sorted(k for k in record if k not in ("seq", "prev"))[other % (len(record) - 2)]
        value = record[key]
        record[key] = (
            (value + "x")
            if isinstance(value, str)
            else (not value)
            if isinstance(value, bool)
            else (value + 1 if isinstance(value, int | float) else [value])
        )
        lines[i] = canonical(record)
    elif edit == "flip":  # one byte of the line changed
        line = bytearray(lines[i])
        at = byte % len(line)
        line[at] = (line[at] + 1 + other % 200) % 256 or 1
        if bytes(line) == lines[i]:
            line[at] ^= 1
        lines[i] = bytes(line)
    elif edit == "delete":
        del lines[i]
    elif edit == "insert":  # a forged record, well formed
        lines.insert(
            i, canonical({"type": "event", "session": "s0", "event": {"id": "x"}, "seq": i, "prev": GENESIS})
        )
    elif edit == "duplicate":  # a copy of another record, anywhere
        lines.insert(position % (n + 1), lines[other % n])
    elif edit == "swap":
        j = (i + 1 + other % (n - 1)) % n
        if lines[i] == lines[j]:
            j = (i + 1) % n
        lines[i], lines[j] = lines[j], lines[i]
    elif edit == "truncate":  # the tail cut at a line, or within one
        keep = position % n
        data = joined(lines[:keep])
        return data + (lines[keep][: byte % len(lines[keep])] if other % 2 else b"")
    return joined(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    edit=st.sampled_from(EDITS),
    position=st.integers(0, 10_000),
    other=st.integers(0, 10_000),
    byte=st.integers(0, 10_000),
)
def test_every_single_record_edit_is_found(generated, edit, position, other, byte) -> None:
    changed = edited(generated, edit, position, other, byte)
    if changed == generated:  # an edit that changed nothing (a flip that made the same byte)
        return
    verified = verify_bytes(changed)
    assert not verified.ok, (edit, position)
    assert verified.problem.code in CODES
    # the first bad line is at or before the edit (truncation: at the end)
    assert 1 <= verified.problem.line <= len(lines_of(changed)) + 1


@pytest.mark.parametrize("edit", EDITS)
def test_each_edit_at_every_position_is_found(generated, edit) -> None:
    n = len(lines_of(generated))
    for position in range(n):
        changed = edited(generated, edit, position, position * 7 + 1, position * 13 + 5)
        if changed != generated:
            assert not verify_bytes(changed).ok, (edit, position)


def test_the_first_bad_record_is_named_by_its_line_and_code(generated) -> None:
    lines = lines_of(generated)
    assert verify_bytes(joined(lines[:3] + lines[4:])).problem.line == 4  # deleted: the next is bad
    assert verify_bytes(joined(lines[:3] + lines[4:])).problem.code == "chain-broken"
    swapped = lines[:]
    swapped[5], swapped[6] = swapped[6], swapped[5]
    assert (verify_bytes(joined(swapped)).problem.line, verify_bytes(joined(swapped)).problem.code) == (
        6,
        "chain-broken",
    )
    cut = verify_bytes(joined(lines[:-1])).problem
    assert (cut.code, cut.line) == ("open-segment", len(lines))  # without a head: cut, or still written
    whitespace = lines[:]
    whitespace[-1] = whitespace[-1].replace(b",", b", ", 1)
    assert verify_bytes(joined(whitespace)).problem.code == "not-canonical"
    assert verify_bytes(b"").problem.code == "empty-log"
    assert verify_bytes(b"not json\n").problem.code == "malformed-record"


def test_signed_checkpoints_verify_with_their_key_only(tmp_path, keys) -> None:
    private, public, other = keys
    path = write_log(tmp_path / "signed.jsonl", key=private)
    records = read_records(path)
    assert all(r["signature"]["algorithm"] == "ed25519" for r in records if r["type"] == "checkpoint")
    good = verify(path, public)
    assert good.ok and good.signed == good.checkpoints > 1
    wrong = verify(path, other)
    assert wrong.problem.code == "bad-signature"
    assert records[wrong.problem.line - 1]["type"] == "checkpoint"
    unsigned = write_log(tmp_path / "unsigned.jsonl")
    assert verify(unsigned, public).problem.code == "unsigned-checkpoint"
    # the closing checkpoint with the signature of an earlier one: found with the key
    lines = lines_of(path.read_bytes())
    checkpoints = [json.loads(line) for line in lines if json.loads(line)["type"] == "checkpoint"]
    last = checkpoints[-1]
    last["signature"] = checkpoints[0]["signature"]
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(joined([*lines[:-1], canonical(last)]))
    assert verify(forged, public).problem.code == "bad-signature"


def test_a_log_is_continued_and_a_cut_segment_is_found(tmp_path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path, sessions=1)
    write_log(path, sessions=1)
    assert verify(path).ok
    headers = [r for r in read_records(path) if r["type"] == "header"]
    assert len(headers) == 2
    lines = lines_of(path.read_bytes())
    second = next(i for i, line in enumerate(lines) if i and json.loads(line)["type"] == "header")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(joined(lines[: second - 1]))  # the first segment without its closing checkpoint
    cut.chmod(0o600)
    with AuditLog(cut) as log:
        log.append({"type": "header", "format": "policyc-audit/1", "policy": "sha256:0", "mode": "enforce"})
    assert verify(cut).problem.code == "unclosed-segment"


def test_a_decision_that_cannot_be_logged_is_denied(tmp_path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    monitor = policyc.Monitor(policyc.load(source=POLICY), audit=log)
    session = monitor.session("s")
    assert session.authorize({"id": "c1", "kind": "tool_call", "tool": "read"}).allowed
    log.close()
    decision = monitor.session("t").authorize({"id": "c1", "kind": "tool_call", "tool": "read"})
    assert not decision.allowed and decision.errored and decision.verdict == "deny"
    assert "audit-failed" in decision.reasons[0].code
    assert "audit" in decision.feedback
    assert verify(tmp_path / "audit.jsonl").ok


def test_a_log_that_cannot_be_opened_refuses_the_monitor(tmp_path) -> None:
    with pytest.raises(AuditError, match="cannot open"):
        policyc.Monitor(policyc.load(source=POLICY), audit=str(tmp_path / "missing" / "audit.jsonl"))
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"seq": 0')
    broken.chmod(0o600)
    with pytest.raises(AuditError, match="does not end with a whole record"):
        policyc.Monitor(policyc.load(source=POLICY), audit=AuditLog(broken))
    with pytest.raises(ValueError, match="checkpoint_every"):
        AuditLog(tmp_path / "x.jsonl", checkpoint_every=0)


def test_a_path_is_a_log(tmp_path) -> None:
    path = tmp_path / "audit.jsonl"
    monitor = policyc.Monitor(policyc.load(source=POLICY), audit=str(path))
    monitor.session("s").authorize({"id": "c1", "kind": "tool_call", "tool": "read"})
    monitor.watch.audit.close()
    assert verify(path).ok


# ------------------------------------------------------------------------------ the command


def test_policyc_audit_verify_and_show(tmp_path, keys) -> None:
    private, public, other = keys
    path = write_log(tmp_path / "audit.jsonl", key=private)
    done = run_policyc("audit", "verify", str(path))
    assert done.status == 0 and "intact:" in done.stdout and "[unanchored]" in done.stderr, done.stderr
    done = run_policyc("audit", "verify", str(path), "--key", str(public))
    assert done.status == 0 and "signatures verified" in done.stdout
    done = run_policyc("audit", "verify", str(path), "--key", str(other))
    assert done.status == 1 and "[bad-signature]" in done.stderr and not done.stdout
    lines = lines_of(path.read_bytes())
    edited_path = tmp_path / "edited.jsonl"
    edited_path.write_bytes(joined([*lines[:4], lines[4].replace(b'"s0"', b'"s9"'), *lines[5:]]))
    done = run_policyc("audit", "verify", str(edited_path), "--format", "json")
    assert done.status == 1
    assert done.json()["problem"]["code"] in ("chain-broken", "not-canonical")
    assert done.json()["problem"]["line"] in (5, 6)
    done = run_policyc("audit", "verify", str(tmp_path / "missing.jsonl"))
    assert done.status == 2 and "cannot read" in done.stderr
    shown = run_policyc("audit", "show", str(path), "--session", "s1", "--verdict", "deny")
    assert shown.status == 0
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["time", "session", "tool", "verdict", "rule", "approval"]
    assert [row.split()[2:] for row in rows] == [
        ["s1", "send", "deny", "no-tainted-send"],
        ["s1", "login", "deny", "login-check"],
    ]
    as_json = run_policyc("audit", "show", str(path), "--format", "json")
    assert as_json.status == 0
    assert {r["session"] for r in json.loads(as_json.stdout)} == {"s0", "s1"}
    assert "hunter2-secret" not in as_json.stdout


# ------------------------------------------------------------------------------ end to end

ROLLOUT = """
.import events
@id("needs-approval") @message("{a} pays money")
Escalate(a) :- ToolCall(a, "pay").
@id("new-no-read") @mode("shadow") @message("{a} reads a file")
Deny(a) :- ToolCall(a, "read").
"""


def test_an_approved_call_and_a_would_deny_run_and_their_log_verifies(tmp_path, keys) -> None:
    import io

    from policyc.runtime.approvers import ConsoleApprover

    private, public, _ = keys
    path = tmp_path / "audit.jsonl"
    asked = io.StringIO()
    approver = ConsoleApprover(input=io.StringIO("y\n"), output=asked, interactive=True)
    ran: list[str] = []

    @policyc.guard
    def pay(amount: int) -> str:
        ran.append(f"pay {amount}")
        return "paid"

    @policyc.guard
    def read(name: str) -> str:
        ran.append(f"read {name}")
        return "text"

    with AuditLog(path, key=private, checkpoint_every=4) as log:
        monitor = policyc.Monitor(policyc.load(source=ROLLOUT), approver=approver, audit=log)
        with policyc.use_session(monitor.session("s")):
            assert pay(5) == "paid"  # escalated, approved on the console, run
            assert read("notes.txt") == "text"  # a would-deny of the rule in shadow mode: run
    assert ran == ["pay 5", "read notes.txt"]
    assert "Approve this call?" in asked.getvalue()
    assert verify(path, public).ok
    records = read_records(path)
    decisions = [r for r in records if r["type"] == "decision"]
    assert [(r["verdict"], r["allowed"]) for r in decisions] == [
        ("escalate", False),
        ("allow", True),
        ("allow", True),
    ]
    assert decisions[1]["approval"]["rules"] == ["needs-approval"]
    assert [r["rule"] for r in decisions[2]["would_deny"]] == ["new-no-read"]
    assert any(r["type"] == "event" and r["event"].get("kind") == "approval" for r in records)
    # any edit of any record is found
    lines = lines_of(path.read_bytes())
    for i in range(len(lines)):
        changed = lines[:]
        changed[i] = changed[i].replace(b'"', b"'", 1)
        assert not verify_bytes(joined(changed)).ok, i
        assert not verify_bytes(joined(lines[:i] + lines[i + 1 :])).ok, i


def test_audit_show_is_a_table_with_each_escalation_s_end_readable_on_a_narrow_terminal(tmp_path) -> None:
    import io

    from policyc.runtime.approvers import ConsoleApprover

    path = tmp_path / "audit.jsonl"
    approver = ConsoleApprover(input=io.StringIO("n\ny\n"), output=io.StringIO(), interactive=True)

    @policyc.guard
    def pay(amount: int) -> str:
        return "paid"

    with AuditLog(path) as log:
        monitor = policyc.Monitor(policyc.load(source=ROLLOUT), approver=approver, audit=log)
        with policyc.use_session(monitor.session("a-rather-long-session-name")):
            with pytest.raises(policyc.PolicyDenied):
                pay(1)  # refused
            assert pay(2) == "paid"  # approved
    from policyc.runtime.audit_rows import decision_rows

    rows = decision_rows(read_records(path))
    assert [(r.tool, r.verdict, r.rules, r.outcome) for r in rows] == [
        ("pay", "escalate", ("needs-approval",), "refused"),
        ("pay", "escalate", ("needs-approval",), "approved"),
        ("pay", "allow", (), rows[2].outcome),
    ]
    assert rows[2].outcome.startswith("with approval ")
    wide = run_policyc("audit", "show", str(path))
    assert wide.status == 0 and "refused" in wide.stdout and "approved" in wide.stdout
    narrow = run_policyc("audit", "show", str(path), env={"COLUMNS": "40"})
    assert narrow.status == 0
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 40 for line in lines), lines
    text = "".join(narrow.stdout.split())
    for value in ("a-rather-long-session-name", "needs-approval", "refused", "approved"):
        assert value in text, value  # folded, never cut
    as_json = run_policyc("audit", "show", str(path), "--format", "json")
    assert [r["verdict"] for r in json.loads(as_json.stdout)] == ["escalate", "escalate", "allow"]
