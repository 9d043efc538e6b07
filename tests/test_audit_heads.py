"""Heads of audit logs (runtime/audit.py): a log cut after a closing checkpoint verifies on its
own (its prefix was written by the key's holder), and is reported `truncated` against the head
the log published (`AuditLog(head_to=...)`) or `policyc audit head` printed; a log rewritten
from some record on no longer holds its head (`head-mismatch`); without a head, verify says what
it cannot see. The log's files are the owner's only (0600) whatever the umask. An escalation's
outcome and a refused event are records of the log."""

from __future__ import annotations

import io
import json
import logging
import os
import stat
from pathlib import Path

import pytest

import policyc
from policyc.runtime.audit import (
    CODES,
    AuditError,
    AuditLog,
    Head,
    head_of,
    parse_head,
    read_records,
    verify,
)
from policyc.runtime.bundle import generate_keys

from .conftest import run_policyc

POLICY = """
.import events
@id("no-rm") @message("{a} removes files")
Deny(a) :- ToolCall(a, "rm").
@id("pay-needs-a-person") @message("{a} pays")
Escalate(a) :- ToolCall(a, "pay").
"""


@pytest.fixture(scope="module")
def signing(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    private, public = generate_keys(str(folder / "audit"))
    return Path(private), Path(public)


def segment(path: Path, name: str, key: Path | None = None, head_to=None) -> None:
    """One segment of a log: a monitor's session, two calls, closed."""
    with AuditLog(path, key=key, checkpoint_every=2, head_to=head_to) as log:
        session = policyc.Monitor(policyc.load(source=POLICY), audit=log).session(name)
        session.authorize({"id": "c1", "kind": "tool_call", "tool": "ls"})
        session.authorize({"id": "c2", "kind": "tool_call", "tool": "rm"})
    assert log.head() == head_of(path) and log.head().entries[0].final


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    path.chmod(0o600)
    return path


def closing_checkpoints(path: Path) -> list[int]:
    """The 0-based places of the closing checkpoints."""
    return [
        i
        for i, line in enumerate(lines_of(path))
        if json.loads(line)["type"] == "checkpoint" and json.loads(line)["final"]
    ]


def test_a_signed_log_cut_after_a_closing_checkpoint_is_truncated_against_its_published_head(
    tmp_path, signing
) -> None:
    private, public = signing
    log, published = tmp_path / "audit.jsonl", tmp_path / "head.json"
    for name in ("s1", "s2", "s3"):  # three segments: three runs of a monitor
        segment(log, name, private, head_to=published)
    closes = closing_checkpoints(log)
    assert len(closes) == 3
    cut = write_lines(tmp_path / "cut.jsonl", lines_of(log)[: closes[1] + 1])  # the last segment gone
    # the hole: the cut log verifies, signatures and all
    alone = run_policyc("audit", "verify", str(cut), "--key", str(public))
    assert alone.status == 0, alone.stderr
    assert "ok:" not in alone.stdout, "without a head, verify never says plain ok"
    assert "intact" in alone.stdout and "[unanchored]" in alone.stderr
    # against the head the log published at its last checkpoint: truncated
    done = run_policyc("audit", "verify", str(cut), "--key", str(public), "--expect", str(published))
    assert done.status == 1, done.stdout
    assert "[truncated]" in done.stderr and f":{closes[1] + 2}:" in done.stderr
    as_json = run_policyc("audit", "verify", str(cut), "--expect", str(published), "--format", "json")
    assert as_json.status == 1 and as_json.json()["problem"]["code"] == "truncated"
    # the whole log reaches it
    whole = run_policyc("audit", "verify", str(log), "--key", str(public), "--expect", str(published))
    assert whole.status == 0 and "ok:" in whole.stdout and "head reached" in whole.stdout, whole.stderr
    # and so does a log that went on after the head was taken
    segment(log, "s4", private)
    assert verify(log, public, expect=parse_head(published.read_text("utf-8"))).ok


def test_the_head_policyc_audit_head_prints_is_what_verify_expects(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    segment(log, "s1")
    segment(log, "s2")
    text = run_policyc("audit", "head", str(log))
    assert text.status == 0, text.stderr
    as_json = run_policyc("audit", "head", str(log), "--format", "json")
    assert as_json.status == 0
    head = as_json.json()
    assert head["format"] == "policyc-audit-head/1" and len(head["heads"]) == 1
    (entry,) = head["heads"]
    records = read_records(log)
    assert entry["seq"] == records[-1]["seq"] == len(records) - 1 and entry["final"] is True
    assert parse_head(text.stdout) == parse_head(json.dumps(head)) == head_of(log)
    closes = closing_checkpoints(log)
    cut = write_lines(tmp_path / "cut.jsonl", lines_of(log)[: closes[0] + 1])
    for expected in (text.stdout, json.dumps(head)):  # as printed, given as the argument itself
        done = run_policyc("audit", "verify", str(cut), "--expect", expected)
        assert done.status == 1 and "[truncated]" in done.stderr, done.stderr
        assert run_policyc("audit", "verify", str(log), "--expect", expected).status == 0
    # an earlier head is reached by the later log; the later head is not by the earlier one
    early = run_policyc("audit", "head", str(cut)).stdout
    assert run_policyc("audit", "verify", str(log), "--expect", early).status == 0
    # a log rewritten from some record on does not hold the head
    rewritten = tmp_path / "rewritten.jsonl"
    lines = lines_of(cut)
    write_lines(rewritten, lines)
    segment(rewritten, "other")  # the same first segment, then another second one
    done = run_policyc("audit", "verify", str(rewritten), "--expect", text.stdout)
    assert done.status == 1 and "[head-mismatch]" in done.stderr, done.stderr
    # another log altogether
    other = tmp_path / "other.jsonl"
    segment(other, "s1")
    done = run_policyc("audit", "verify", str(other), "--expect", text.stdout)
    assert done.status == 1 and "[head-mismatch]" in done.stderr
    assert {"truncated", "head-mismatch"} <= set(CODES)


def test_a_log_cut_within_a_segment_is_open_without_a_head_and_truncated_against_it(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    segment(log, "s1")
    head = head_of(log)
    lines = lines_of(log)
    for keep in range(1, len(lines)):
        cut = write_lines(tmp_path / f"cut{keep}.jsonl", lines[:keep])
        assert verify(cut).problem.code == "open-segment"  # a cut, or a log still being written
        assert verify(cut, expect=head).problem.code == "truncated"
        # the head of the cut log itself: reached, the log passes, reported open
        reached = verify(cut, expect=head_of(cut))
        assert reached.ok and reached.open and reached.anchored


def test_bad_heads_and_logs_without_a_head_are_refused_clearly(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    segment(log, "s1")
    for bad in ("", "not a head", '{"format": "policyc-audit-head/1", "heads": [{"seq": -1}]}', "ab 1 cd"):
        done = run_policyc("audit", "verify", str(log), "--expect", bad)
        assert done.status == 2 and "--expect" in done.stderr and "Traceback" not in done.stderr, bad
    broken = write_lines(tmp_path / "broken.jsonl", [lines_of(log)[1], *lines_of(log)[1:]])
    done = run_policyc("audit", "head", str(broken))
    assert done.status == 1 and "does not verify" in done.stderr
    assert run_policyc("audit", "head", str(tmp_path / "missing.jsonl")).status == 2
    with pytest.raises(ValueError):
        parse_head("0" * 64 + " 3")


def test_a_log_publishes_its_head_at_every_checkpoint(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    seen: list[str] = []
    segment(log, "s1", head_to=seen.append)
    records = read_records(log)
    checkpoints = [r for r in records if r["type"] == "checkpoint"]
    assert len(seen) == len(checkpoints) > 2
    assert [parse_head(line).entries[0].seq for line in seen] == [r["seq"] for r in checkpoints]
    assert parse_head(seen[-1]) == head_of(log)
    # an empty head (a log that held nothing when it was taken) anchors nothing
    assert not verify(log, expect=Head(())).anchored and verify(log, expect=head_of(log)).anchored
    # to a logger: a line an operator's log collects; the latest line of a file of them wins
    logger = logging.getLogger("test.audit.heads")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        segment(log, "s2", head_to=logger)
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue().count("policyc-audit-head/1") > 2
    assert parse_head(stream.getvalue()) == head_of(log)
    with pytest.raises(TypeError, match="head_to"):
        AuditLog(tmp_path / "x.jsonl", head_to=42)


def test_a_head_that_cannot_be_published_refuses_like_a_record_that_cannot_be_written(tmp_path) -> None:
    nowhere = tmp_path / "missing" / "head.json"
    log = AuditLog(tmp_path / "audit.jsonl", checkpoint_every=3, head_to=nowhere)
    session = policyc.Monitor(policyc.load(source=POLICY), audit=log).session("s")
    decision = session.authorize({"id": "c1", "kind": "tool_call", "tool": "ls"})  # a checkpoint after it
    assert not decision.allowed and decision.reasons[0].code == "audit-failed"
    with pytest.raises(AuditError, match="cannot publish the head"):
        log.close()
    at_once = AuditLog(tmp_path / "b.jsonl", checkpoint_every=1, head_to=nowhere)
    with pytest.raises(AuditError, match="cannot publish the head"):  # a checkpoint after the header
        policyc.Monitor(policyc.load(source=POLICY), audit=at_once)
    with pytest.raises(AuditError, match="cannot publish the head"):
        at_once.close()


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_the_log_and_its_head_are_the_owners_only(tmp_path, umask) -> None:
    before = os.umask(umask)
    try:
        segment(tmp_path / "audit.jsonl", "s1", head_to=tmp_path / "head.json")
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "audit.jsonl").stat().st_mode) == 0o600
    # an existing log readable by others is made the owner's when it is continued
    wide = tmp_path / "wide.jsonl"
    segment(wide, "s1")
    wide.chmod(0o644)
    with pytest.warns(UserWarning, match="0644"):
        segment(wide, "s2")
    assert stat.S_IMODE(wide.stat().st_mode) == 0o600
    assert verify(wide).ok


def test_a_refused_approval_and_a_refused_event_are_in_the_log(tmp_path) -> None:
    from policyc.runtime.approvers import ConsoleApprover

    log = tmp_path / "audit.jsonl"
    answers = io.StringIO("n\ny\n")
    approver = ConsoleApprover(input=answers, output=io.StringIO(), interactive=True)

    @policyc.guard
    def pay(amount: int) -> str:
        return "paid"

    with AuditLog(log) as audit:
        monitor = policyc.Monitor(policyc.load(source=POLICY), approver=approver, audit=audit)
        session = monitor.session("s")
        with policyc.use_session(session):
            with pytest.raises(policyc.PolicyDenied):
                pay(5)  # refused by the person
            assert pay(6) == "paid"  # approved
        with pytest.raises(policyc.EventRefused):
            session.record({"id": "bad", "kind": "tool_call", "tool": 5})
        assert session.authorize({"id": "also-bad", "kind": "tool_call", "tool": 5}).allowed is False
    assert verify(log).ok
    records = read_records(log)
    outcomes = [r for r in records if r["type"] == "outcome"]
    assert [(r["outcome"], r["rules"]) for r in outcomes] == [
        ("refused", ["pay-needs-a-person"]),
        ("approved", ["pay-needs-a-person"]),
    ]
    refusals = [r for r in records if r["type"] == "refusal"]
    assert [(r["event"], r["code"]) for r in refusals] == [
        ("bad", "malformed-event"),
        ("also-bad", "malformed-event"),
    ]
    decisions = [r for r in records if r["type"] == "decision"]
    assert decisions[-1]["action"] == "also-bad" and decisions[-1]["verdict"] == "deny"


def test_head_values_round_trip() -> None:
    head = Head.of([("a" * 64, 3, "b" * 64, True)])
    assert parse_head(head.text()) == parse_head(json.dumps(head.to_json())) == head


def test_a_log_cut_while_no_one_wrote_it_is_not_continued_over_its_head(tmp_path) -> None:
    log, published = tmp_path / "audit.jsonl", tmp_path / "head.json"
    segment(log, "s1", head_to=published)
    segment(log, "s2", head_to=published)
    before = published.read_bytes()
    closes = closing_checkpoints(log)
    write_lines(log, lines_of(log)[: closes[0] + 1])
    with pytest.raises(AuditError, match="does not reach the head published"):
        segment(log, "s3", head_to=published)
    assert published.read_bytes() == before, "the head is not overwritten by the cut log's"
    log.unlink()  # the whole log gone: the same
    with pytest.raises(AuditError, match="does not reach the head published"):
        segment(log, "s3", head_to=published)
    published.unlink()  # starting anew on purpose
    segment(log, "s3", head_to=published)
    assert verify(log, expect=parse_head(published.read_text("utf-8"))).ok
