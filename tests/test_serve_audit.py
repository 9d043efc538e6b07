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

from policyc.runtime.bundle import generate_keys

from .test_serve import Server, client, event, new_key, policyc_command

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
    return subprocess.run([policyc_command(), *args], capture_output=True, text=True, timeout=120)


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


def test_every_answer_the_service_gives_is_in_its_export(tmp_path: Path) -> None:
    keys = setup(tmp_path)
    server = Server(tmp_path, "--wait", "0.2")
    answered: dict[str, str] = {}  # decision id -> verdict, as the service answered
    try:
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
            # refused requests: a malformed event, a malformed candidate
            bad = agent.post("/v1/sessions/s1/events", json={"events": [{"id": "x", "kind": 5}]})
            assert bad.status_code == 422
            bad_call = agent.post("/v1/sessions/s1/authorize", json={"event": {"id": "y", "kind": 5}})
            assert bad_call.status_code == 422
            # an explanation decides nothing
            explained = agent.get(f"/v1/sessions/s1/decisions/{list(answered)[1]}")
            assert explained.status_code == 200
            # the head, to any key the service knows
            assert agent.get("/v1/audit/head").status_code == 200
            with client(server, None) as anonymous:
                assert anonymous.get("/v1/audit/head").status_code == 401
    finally:
        server.stop()
    done, log = export(tmp_path)
    assert done.returncode == 0, done.stderr
    assert policyc("audit", "verify", str(log)).returncode == 0
    records = records_of(log)
    decisions = {r["decision"]: r for r in records if r["type"] == "decision"}
    assert {k: r["verdict"] for k, r in decisions.items()} == answered, "every decision answered, only those"
    assert all(r["principal"] == "agent" for r in decisions.values())
    errored = [r for r in decisions.values() if r["action"] == "a3"]
    assert errored[0]["errored"] is True
    assert [
        r["action"] for r in decisions.values() if r["reasons"] and "behind" in r["reasons"][0]["message"]
    ] == ["b1", "a1"]
    outcomes = [(r["decision"], r["outcome"], r["approver"]) for r in records if r["type"] == "outcome"]
    assert outcomes == [
        (escalated["decision_id"], "refused", "oncall"),
        (second["decision_id"], "approved", "oncall"),
    ]
    refusals = [(r["what"], r["code"]) for r in records if r["type"] == "refusal"]
    assert refusals == [("events", "malformed-event"), ("event", "malformed-event")]
    # the database holds credential values in clear; the log holds their hash
    assert b"hunter2-secret" not in log.read_bytes()
    db = sqlite3.connect(tmp_path / "monitor.db")
    try:
        assert db.execute("SELECT count(*) FROM events WHERE body LIKE '%hunter2-secret%'").fetchone() == (1,)
        # a decision changed in the database is named by the export
        denied = next(k for k, v in answered.items() if v == "deny")
        body = json.loads(db.execute("SELECT body FROM decisions WHERE id = ?", (denied,)).fetchone()[0])
        body.update(verdict="allow", allowed=True, reasons=[])
        db.execute(
            "UPDATE decisions SET verdict = 'allow', body = ? WHERE id = ?", (json.dumps(body), denied)
        )
        db.commit()
        changed, _ = export(tmp_path, "changed.jsonl")
        assert changed.returncode == 1 and denied in changed.stderr and "[decision-differs]" in changed.stderr
        # one deleted from the table, one added to it
        db.execute("DELETE FROM decisions WHERE id = ?", (denied,))
        db.commit()
        gone, _ = export(tmp_path, "gone.jsonl")
        assert gone.returncode == 1 and denied in gone.stderr and "[decision-not-stored]" in gone.stderr
        db.execute(
            "INSERT INTO decisions SELECT 'd-forged', principal, session, seq, verdict, body, created "
            "FROM decisions LIMIT 1"
        )
        db.execute("DELETE FROM decisions WHERE id != 'd-forged'")
        db.commit()
        forged, _ = export(tmp_path, "forged.jsonl")
        assert (
            forged.returncode == 1
            and "d-forged" in forged.stderr
            and "[decision-not-logged]" in forged.stderr
        )
    finally:
        db.close()


def test_a_cut_service_log_is_truncated_against_the_published_head(tmp_path: Path) -> None:
    keys = setup(tmp_path)
    private, public = generate_keys(str(tmp_path / "audit"))
    published = tmp_path / "head.json"
    options = ("--audit-key", str(private), "--audit-head", str(published))
    heads = []
    for run in range(2):  # two runs of the service: two segments of its log
        server = Server(tmp_path, *options)
        try:
            with client(server, keys["agent"]) as agent:
                if run == 0:
                    agent.post("/v1/sessions", json={"session": "s1"})
                authorize(agent, event(f"a{run}", "tool_call", tool="send_email", deps=[]))
                heads.append(agent.get("/v1/audit/head").json())
        finally:
            server.stop()
        heads.append(json.loads(published.read_text("utf-8")))  # published at the closing checkpoint
    done, log = export(tmp_path)
    assert done.returncode == 0, done.stderr
    whole = policyc("audit", "verify", str(log), "--key", str(public), "--expect", str(published))
    assert whole.returncode == 0 and "head reached" in whole.stdout, whole.stderr
    for head in heads:  # every head the service published is reached by the whole log
        assert policyc("audit", "verify", str(log), "--expect", json.dumps(head)).returncode == 0
    assert heads[1]["heads"][0]["final"] is True and heads[3]["heads"][0]["final"] is True
    # the export cut after the first run's closing checkpoint: signed, intact, and truncated
    lines = log.read_bytes().split(b"\n")[:-1]
    first_close = heads[1]["heads"][0]["seq"]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(line + b"\n" for line in lines[: first_close + 1]))
    alone = policyc("audit", "verify", str(cut), "--key", str(public))
    assert alone.returncode == 0 and "[unanchored]" in alone.stderr, alone.stderr
    truncated = policyc("audit", "verify", str(cut), "--key", str(public), "--expect", str(published))
    assert truncated.returncode == 1 and "[truncated]" in truncated.stderr
    # the same cut made in the database (log and decisions alike): the export is truncated too
    db = sqlite3.connect(tmp_path / "monitor.db")
    try:
        db.execute("DELETE FROM audit WHERE seq > ?", (first_close,))
        db.execute("DELETE FROM decisions WHERE seq > 1")
        db.commit()
    finally:
        db.close()
    done, cut_export = export(tmp_path, "cut-export.jsonl")
    assert done.returncode == 0, done.stderr  # the two tables agree: only the head tells
    truncated = policyc("audit", "verify", str(cut_export), "--key", str(public), "--expect", str(published))
    assert truncated.returncode == 1 and "[truncated]" in truncated.stderr
    # and the service does not go on writing the cut log (over the head that shows the cut)
    before = published.read_bytes()
    refused = policyc(
        "serve", str(tmp_path / "policy.dl"), "--keys", str(tmp_path / "keys.toml"),
        "--db", str(tmp_path / "monitor.db"), "--port", "0", *options,
    )  # fmt: skip
    assert refused.returncode == 2 and "does not reach the head published" in refused.stderr
    assert published.read_bytes() == before


def test_the_database_files_are_the_owners_only(tmp_path: Path) -> None:
    keys = setup(tmp_path)
    before = os.umask(0)
    try:
        server = Server(tmp_path, "--workers", "1", "--audit-head", "-")
    finally:
        os.umask(before)
    try:
        with client(server, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
            authorize(agent, event("a1", "tool_call", tool="read", deps=[]))
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.glob("monitor.db*")}
        assert set(files) == {"monitor.db", "monitor.db-wal", "monitor.db-shm"}
        assert set(files.values()) == {0o600}, files
    finally:
        server.stop()
    assert server.process.stdout is not None
    said = server.process.stdout.read()
    heads = [line for line in said.splitlines() if "policyc-audit-head/1" in line]
    assert heads, said  # `--audit-head -`: a line at every checkpoint (here: the closing one)
    done, log = export(tmp_path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert policyc("audit", "verify", str(log), "--expect", heads[-1]).returncode == 0
