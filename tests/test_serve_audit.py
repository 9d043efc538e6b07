"""The audit log of `policyc serve`, run as its users run it: every answer the service gives is
in its log (decisions of every path, the "behind" denial, an approver's answers, refused
requests), `policyc audit export` holds the decisions table against the log and names the
first difference, the service signs its log and publishes its head, so that an export cut after
a closing checkpoint is `truncated` against that head, and its database files are the owner's
only."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from policyc.runtime.audit import parse_head, verify
from policyc.runtime.bundle import generate_keys
from policyc.serve.audit import differences

from .support.commands import policyc_path
from .support.service import Server, client, event, new_key

POLICY = """
.import events
.role credential budget 0.005
.field login.password : credential
@id("untrusted-send") @message("{a} sends what an untrusted result influenced")
Deny(a) :- ToolCall(a, "send_email"), DependsOn(a, d), Label(d, "untrusted").
@id("pay-needs-a-person") @message("{a} pays")
Escalate(a) :- ToolCall(a, "pay").
@id("big-wire") @message("{a} wires too much")
Deny(a) :- ToolCall(a, "wire"), n = to_number(tool_arg(a, "amount")), n > 100.
"""


def setup(folder: Path) -> dict[str, str]:
    (folder / "policy.dl").write_text(POLICY, "utf-8")
    agent, agent_table = new_key("agent", "agent")
    oncall, oncall_table = new_key("oncall", "approver")
    (folder / "keys.toml").write_text(agent_table + "\n" + oncall_table, "utf-8")
    return {"agent": agent, "oncall": oncall}


def policyc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([policyc_path(), *args], capture_output=True, text=True, timeout=120)


def export(folder: Path, name: str = "audit.jsonl") -> tuple[subprocess.CompletedProcess[str], Path]:
    log = folder / name
    done = policyc("audit", "export", str(folder / "monitor.db"), "-o", str(log))
    return done, log


def records_of(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def authorize(agent: httpx.Client, call: dict[str, Any], after: int = 0) -> dict[str, Any]:
    answer = agent.post("/v1/sessions/s1/authorize", json={"event": call, "after_seq": after})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


# every route of the service, and what it answers: the test below takes each route that answers
# a decision (or a person's answer to one) and finds what it answered in the export
ROUTES = {
    ("get", "/healthz"): "no decision",
    ("get", "/metrics"): "no decision",
    ("get", "/openapi.json"): "no decision",
    ("get", "/v1/audit/head"): "no decision",
    ("post", "/v1/sessions"): "a session record",
    ("post", "/v1/sessions/{session}/events"): "event records, or a refusal",
    ("post", "/v1/sessions/{session}/facts"): "a facts record, or a refusal",
    ("post", "/v1/sessions/{session}/authorize"): "a decision (allow, deny, escalate, errored, behind)",
    ("post", "/v1/sessions/{session}/decide"): "a decision (again, behind, with an approval)",
    ("get", "/v1/approvals"): "no decision",
    ("post", "/v1/approvals/{approval_id}"): "an outcome (approved, refused)",
    ("get", "/v1/sessions/{session}/decisions/{decision_id}"): "no decision (an explanation)",
}


def test_the_routes_are_those_the_export_test_takes() -> None:
    from policyc.serve.openapi import document

    routes = {(method, path) for path, operations in document()["paths"].items() for method in operations}
    assert routes == set(ROUTES), "a route was added: say what it answers, and test its log below"


def answer_every_route(server: Server, keys: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Ask every route that answers a decision, every way it answers one; the decisions
    answered (id -> verdict) and the ids of the escalations a person answered."""
    answered: dict[str, str] = {}
    with client(server, keys["agent"]) as agent, client(server, keys["oncall"]) as oncall:
        agent.post("/v1/sessions", json={"session": "s1"})
        fetched = event("r1", tool="fetch", labels=["untrusted"], deps=[])
        assert agent.post("/v1/sessions/s1/events", json={"events": [fetched]}).status_code == 200
        calls = [
            event("a1", "tool_call", tool="read", deps=[]),  # allowed
            event("a2", "tool_call", tool="send_email", deps=["r1"]),  # denied
            event("a3", "tool_call", tool="wire", args={"amount": "2000abc"}, deps=[]),  # errored
            event("a4", "tool_call", tool="login", args={"password": "hunter2-secret"}, deps=[]),
        ]
        for call in calls:
            body = authorize(agent, call)
            answered[body["decision_id"]] = body["verdict"]
        assert list(answered.values()) == ["allow", "deny", "deny", "allow"]
        # the graph behind `after_seq`: a denial, for an authorization and for a decision
        behind = authorize(agent, event("b1", "tool_call", tool="read", deps=[]), after=99)
        assert "behind the 99" in behind["reasons"][0]["message"]
        answered[behind["decision_id"]] = behind["verdict"]
        again = agent.post("/v1/sessions/s1/decide", json={"action": "a1", "after_seq": 99}).json()
        assert again["verdict"] == "deny"
        answered[again["decision_id"]] = again["verdict"]
        # escalated, refused by a person, decided again, approved, decided again: allowed
        escalated = authorize(agent, event("p1", "tool_call", tool="pay", deps=[]))
        answered[escalated["decision_id"]] = escalated["verdict"]
        refused = oncall.post(f"/v1/approvals/{escalated['decision_id']}", json={"approve": False})
        assert refused.status_code == 200 and refused.json()["approved"] is False
        second = agent.post("/v1/sessions/s1/decide", json={"action": "p1"}).json()
        answered[second["decision_id"]] = second["verdict"]
        approved = oncall.post(f"/v1/approvals/{second['decision_id']}", json={"approve": True})
        assert approved.status_code == 200
        allowed = agent.post("/v1/sessions/s1/decide", json={"action": "p1"}).json()
        assert allowed["verdict"] == "allow"
        answered[allowed["decision_id"]] = allowed["verdict"]
        # refused requests: a malformed event, a malformed candidate, malformed facts
        bad = agent.post("/v1/sessions/s1/events", json={"events": [{"id": "x", "kind": 5}]})
        assert bad.status_code == 422
        bad_call = agent.post("/v1/sessions/s1/authorize", json={"event": {"id": "y", "kind": 5}})
        assert bad_call.status_code == 422
        assert agent.post("/v1/sessions/s1/facts", json={"facts": {"Nope": [["x"]]}}).status_code == 422
        # an explanation decides nothing
        assert agent.get(f"/v1/sessions/s1/decisions/{list(answered)[1]}").status_code == 200
        # the head, to any key the service knows
        assert agent.get("/v1/audit/head").json()["heads"][0]["seq"] > 0
        with client(server, None) as anonymous:
            assert anonymous.get("/v1/audit/head").status_code == 401
    return answered, {"refused": escalated["decision_id"], "approved": second["decision_id"]}


def checked_export(tmp_path: Path, answered: dict[str, str], people: dict[str, Any]) -> Path:
    """The export of the database, which must hold every answer the service gave, and only those."""
    done, log = export(tmp_path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    records = records_of(log)
    decisions = {r["decision"]: r for r in records if r["type"] == "decision"}
    assert {k: r["verdict"] for k, r in decisions.items()} == answered, "every decision answered, only those"
    assert all(r["principal"] == "agent" for r in decisions.values())
    assert [r["errored"] for r in decisions.values() if r["action"] == "a3"] == [True]
    behind = [r["action"] for r in decisions.values() if r["rules"] == ["<service>"]]
    assert behind == ["b1", "a1"]
    outcomes = [(r["decision"], r["outcome"], r["approver"]) for r in records if r["type"] == "outcome"]
    assert outcomes == [(people["refused"], "refused", "oncall"), (people["approved"], "approved", "oncall")]
    refusals = [(r["what"], r["code"]) for r in records if r["type"] == "refusal"]
    assert refusals == [
        ("events", "malformed-event"),
        ("event", "malformed-event"),
        ("facts", "malformed-facts"),
    ]
    # the database holds credential values in clear; the log holds their hash
    assert b"hunter2-secret" not in log.read_bytes()
    return log


def test_every_answer_is_in_the_export_and_a_cut_is_truncated_against_the_published_head(
    tmp_path: Path,
) -> None:
    """The service as an operator runs it: its log signed and its head
    published to a file, started twice (two segments), under a umask that lets anyone read."""
    keys = setup(tmp_path)
    private, public = generate_keys(str(tmp_path / "audit"))
    published = tmp_path / "head.json"
    options = ("--wait", "0.1", "--audit-key", str(private), "--audit-head", str(published))
    before = os.umask(0)
    try:
        server = Server(tmp_path, *options)
    finally:
        os.umask(before)
    try:
        answered, people = answer_every_route(server, keys)
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.glob("monitor.db*")}
        assert files == {"monitor.db": 0o600, "monitor.db-wal": 0o600, "monitor.db-shm": 0o600}
    finally:
        server.stop()
    first_close = json.loads(published.read_text("utf-8"))  # published at the closing checkpoint
    assert first_close["heads"][0]["final"] is True
    server = Server(tmp_path, *options)  # a second run: a second segment
    try:
        with client(server, keys["agent"]) as agent:
            late = authorize(agent, event("late", "tool_call", tool="read", deps=[]))
            answered[late["decision_id"]] = late["verdict"]
            running = agent.get("/v1/audit/head").json()
    finally:
        server.stop()
    log = checked_export(tmp_path, answered, people)
    whole = policyc("audit", "verify", str(log), "--key", str(public), "--expect", str(published))
    assert whole.returncode == 0 and "head reached" in whole.stdout, whole.stderr
    for head in (first_close, running):  # every head the service published is reached
        assert verify(log, expect=parse_head(json.dumps(head))).ok
    # the export cut after the first run's closing checkpoint: signed, intact, and truncated
    lines = log.read_bytes().split(b"\n")[:-1]
    cut_at = first_close["heads"][0]["seq"]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(line + b"\n" for line in lines[: cut_at + 1]))
    assert verify(cut, public).ok, "signatures and all: nothing inside the log shows the cut"
    truncated = policyc("audit", "verify", str(cut), "--key", str(public), "--expect", str(published))
    assert truncated.returncode == 1 and "[truncated]" in truncated.stderr
    # tables changed in the database are named by the export
    db = sqlite3.connect(tmp_path / "monitor.db")
    try:
        denied = next(k for k, v in answered.items() if v == "deny")
        stored = db.execute("SELECT verdict, body FROM decisions WHERE id = ?", (denied,)).fetchone()
        body = json.loads(stored[1])
        body.update(verdict="allow", allowed=True, reasons=[])
        db.execute(
            "UPDATE decisions SET verdict = 'allow', body = ? WHERE id = ?", (json.dumps(body), denied)
        )
        db.commit()
        changed, _ = export(tmp_path, "changed.jsonl")
        assert changed.returncode == 1 and denied in changed.stderr and "[decision-differs]" in changed.stderr
        db.execute("UPDATE decisions SET verdict = ?, body = ? WHERE id = ?", (*stored, denied))
        data = log.read_bytes()
        where = str(tmp_path / "monitor.db")
        db.execute("UPDATE answers SET approved = 1 WHERE decision = ?", (people["refused"],))
        db.commit()
        assert differences(where, data).code == "answer-differs"
        db.execute("UPDATE answers SET approved = 0 WHERE decision = ?", (people["refused"],))
        row = db.execute("SELECT * FROM decisions WHERE id = ?", (denied,)).fetchone()
        db.execute("DELETE FROM decisions WHERE id = ?", (denied,))
        db.commit()
        assert differences(where, data).code == "decision-not-stored"
        db.execute(
            "INSERT INTO decisions SELECT 'd-forged', principal, session, seq, verdict, body, created "
            "FROM decisions LIMIT 1"
        )
        db.commit()
        forged = differences(where, data)
        assert forged.code == "decision-not-logged" and "d-forged" in forged.message
        db.execute("DELETE FROM decisions WHERE id = 'd-forged'")
        db.execute("INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        # the cut made in the database, log and tables alike: only the head tells
        db.execute("DELETE FROM audit WHERE seq > ?", (cut_at,))
        db.execute("DELETE FROM decisions WHERE id = ?", (late["decision_id"],))
        db.commit()
    finally:
        db.close()
    done, cut_export = export(tmp_path, "cut-export.jsonl")
    assert done.returncode == 0, done.stderr
    assert verify(cut_export, public).ok
    assert verify(cut_export, public, parse_head(published.read_text("utf-8"))).problem.code == "truncated"
    # and the service does not go on writing the cut log (over the head that shows the cut)
    kept = published.read_bytes()
    refused = policyc(
        "serve", str(tmp_path / "policy.dl"), "--keys", str(tmp_path / "keys.toml"),
        "--db", str(tmp_path / "monitor.db"), "--port", "0", *options,
    )  # fmt: skip
    assert refused.returncode == 2 and "does not reach the head published" in refused.stderr
    assert published.read_bytes() == kept


@pytest.mark.slow
def test_every_answer_is_in_the_export_when_the_server_process_decides(tmp_path: Path) -> None:
    keys = setup(tmp_path)
    server = Server(tmp_path, "--wait", "0.1", "--audit-head", "-")
    try:
        answered, people = answer_every_route(server, keys)
    finally:
        server.stop()
    assert server.process.stdout is not None
    said = server.process.stdout.read()
    heads = [line for line in said.splitlines() if "policyc-audit-head/1" in line]
    assert heads, said  # `--audit-head -`: a line at every checkpoint (here: the closing one)
    log = checked_export(tmp_path, answered, people)
    assert policyc("audit", "verify", str(log), "--expect", heads[-1]).returncode == 0


def test_a_database_others_could_read_is_made_the_owners(tmp_path: Path) -> None:
    from policyc.serve.store import Store

    path = str(tmp_path / "wide.db")
    made = sqlite3.connect(path)
    made.execute("PRAGMA journal_mode=WAL")
    made.execute("CREATE TABLE t (x)")
    made.execute("INSERT INTO t VALUES (1)")
    made.commit()
    for name in ("wide.db", "wide.db-wal", "wide.db-shm"):
        (tmp_path / name).chmod(0o644)
    store = Store(path)
    try:
        assert sorted((Path(p).name, mode) for p, mode in store.widened) == [
            ("wide.db", 0o644),
            ("wide.db-shm", 0o644),
            ("wide.db-wal", 0o644),
        ]
        assert {stat.S_IMODE(p.stat().st_mode) for p in tmp_path.glob("wide.db*")} == {0o600}
    finally:
        store.close()
        made.close()


def test_the_export_of_a_running_service_is_open_and_passes_against_the_head_it_published(
    tmp_path: Path,
) -> None:
    """SQLite in WAL mode, the service running: the export holds what is committed, its last
    segment open; `verify` says `open` as a warning (exit 1) without a head, and passes with the
    head the service publishes, never saying plain `ok` until the service closed its log."""
    keys = setup(tmp_path)
    server = Server(tmp_path, "--wait", "0.1")
    try:
        with client(server, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
            decided = [
                authorize(agent, event(f"c{n}", "tool_call", tool=tool, deps=[]))["decision_id"]
                for n, tool in enumerate(("read", "pay", "read"))
            ]
            running = json.dumps(agent.get("/v1/audit/head").json())
        done = policyc(
            "audit", "export", str(tmp_path / "monitor.db"), "-o", str(tmp_path / "live.jsonl"),
            "--head", str(tmp_path / "live.head"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "open segment" in done.stderr
        log = tmp_path / "live.jsonl"
        assert [r["decision"] for r in records_of(log) if r["type"] == "decision"] == decided
        shown = policyc("audit", "show", str(log))  # the escalated payment: nobody answered it yet
        assert shown.returncode == 0 and shown.stdout.count("pending") == 1 and "pay" in shown.stdout
        alone = policyc("audit", "verify", str(log))
        assert alone.returncode == 1 and "warning:" in alone.stderr and "[open-segment]" in alone.stderr
        assert "truncated" not in alone.stderr
        as_json = policyc("audit", "verify", str(log), "--format", "json")
        assert json.loads(as_json.stdout)["status"] == "open" and as_json.returncode == 1
        for head in (running, str(tmp_path / "live.head")):
            anchored = policyc("audit", "verify", str(log), "--expect", head)
            assert anchored.returncode == 0, anchored.stderr
            assert anchored.stdout.split(": ")[1] == "open" and "[open-segment]" in anchored.stderr
        status = policyc("audit", "verify", str(log), "--expect", running, "--format", "json")
        assert json.loads(status.stdout)["status"] == "open"
        # a cut of the committed records is still found against that head
        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:-1]))
        cut_done = policyc("audit", "verify", str(cut), "--expect", running)
        assert cut_done.returncode == 1 and "[truncated]" in cut_done.stderr
    finally:
        server.stop()
    closed, log = export(tmp_path, "closed.jsonl")
    assert closed.returncode == 0 and "open segment" not in closed.stderr
    done = policyc("audit", "verify", str(log), "--expect", running)
    assert done.returncode == 0 and done.stdout.split(": ")[1] == "ok", done.stdout
