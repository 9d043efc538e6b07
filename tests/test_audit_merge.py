"""`policyc audit export` of a service with several writers: the SQLite files of `--processes N`
(`NAME.db`, `NAME.p1.db`, ...) and a PostgreSQL database several instances write, each writer
with its own chain. The export holds the chains one after the other; `audit verify` checks them
chain by chain (heads as a set: `audit head` prints one entry per chain), names the chain a
record was removed from, and the database's decisions are held against the log."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from policyc.runtime.audit import FORMAT, head_of_bytes, parse_head, verify_bytes
from policyc.serve.store import Store

from .conftest import run_policyc

HEADER = {"type": "header", "format": FORMAT, "policy": "sha256:p", "mode": "enforce"}
CLOSE = {"type": "checkpoint", "final": True}


def decide(store: Any, session: str, verdict: str = "allow") -> str:
    """A decision of ``session`` as the service commits one: its row and its audit record."""
    allowed = verdict == "allow"
    action = f"call-{session}"
    body = {"verdict": verdict, "allowed": allowed, "action": action, "reasons": []}
    record = {
        "type": "decision",
        "session": session,
        "verdict": verdict,
        "allowed": allowed,
        "action": action,
        "rules": [],
        "reasons": [],
    }
    decision = f"d-{session}"
    store.decided(decision, "agent", session, 1, verdict, json.dumps(body), audit=[record])
    return decision


def process_database(path: Path, sessions: list[str], close: bool = True) -> list[str]:
    """The database of one process of a `--processes N` service, with a decision per session."""
    store = Store(str(path))
    try:
        store.record_audit([HEADER])
        decided = []
        for session in sessions:
            assert store.create_session("agent", session, (), "sha256:p")
            decided.append(decide(store, session))
        if close:
            store.record_audit([CLOSE])
    finally:
        store.close()
    return decided


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_the_files_of_several_processes_are_merged_and_verified_chain_by_chain(tmp_path: Path) -> None:
    first = process_database(tmp_path / "monitor.db", ["s1", "s2"])
    second = process_database(tmp_path / "monitor.p1.db", ["s3"])
    log, head = tmp_path / "merged.jsonl", tmp_path / "merged.head"
    done = run_policyc("audit", "export", str(tmp_path / "monitor.db"), "-o", str(log), "--head", str(head))
    assert done.status == 0, done.stderr
    records = [json.loads(line) for line in lines_of(log)]
    assert [r["decision"] for r in records if r["type"] == "decision"] == first + second
    assert [r["seq"] for r in records].count(0) == 2, "two chains, each whole from its first record"
    # `audit head`: one entry per chain, and the same as the export's
    printed = run_policyc("audit", "head", str(log))
    assert printed.status == 0 and len(printed.stdout.splitlines()) == 2
    assert (
        parse_head(printed.stdout) == parse_head(head.read_text("utf-8")) == head_of_bytes(log.read_bytes())
    )
    verified = run_policyc("audit", "verify", str(log), "--expect", str(head))
    assert verified.status == 0 and verified.stdout.split(": ")[1] == "ok", verified.stderr
    assert "2 chains" in verified.stdout and "(2 chains)" in verified.stdout
    # a record removed from the second chain: found, naming that chain
    lines = lines_of(log)
    second_start = next(i for i, line in enumerate(lines) if i and b'"seq":0' in line)
    removed = tmp_path / "removed.jsonl"
    removed.write_bytes(b"".join(lines[: second_start + 1] + lines[second_start + 2 :]))  # its decision
    broken = run_policyc("audit", "verify", str(removed), "--format", "json")
    problem = broken.json()["problem"]
    assert broken.status == 1 and problem["code"] == "chain-broken"
    assert problem["message"].startswith("chain 2 of 2 (") and problem["line"] == second_start + 2
    chain = head_of_bytes(log.read_bytes()).entries
    named = [e.chain for e in chain if e.chain[:12] in problem["message"]]
    assert len(named) == 1 and named[0] == head_of_bytes(b"".join(lines[second_start:])).entries[0].chain
    # a chain left out altogether: the head names it
    alone = tmp_path / "first-only.jsonl"
    alone.write_bytes(b"".join(lines[:second_start]))
    missing = run_policyc("audit", "verify", str(alone), "--expect", str(head))
    assert missing.status == 1 and "[head-mismatch]" in missing.stderr


def test_each_process_s_tables_are_held_against_its_own_chain(tmp_path: Path) -> None:
    process_database(tmp_path / "monitor.db", ["s1"])
    process_database(tmp_path / "monitor.p1.db", ["s2"])
    with sqlite3.connect(tmp_path / "monitor.p1.db") as db:
        db.execute("UPDATE decisions SET verdict = 'deny' WHERE id = 'd-s2'")
    done = run_policyc("audit", "export", str(tmp_path / "monitor.db"), "-o", str(tmp_path / "x.jsonl"))
    assert done.status == 1 and "[decision-differs]" in done.stderr
    assert "monitor.p1.db" in done.stderr and "d-s2" in done.stderr


def test_a_process_still_writing_is_reported_open(tmp_path: Path) -> None:
    process_database(tmp_path / "monitor.db", ["s1"])
    process_database(tmp_path / "monitor.p1.db", ["s2"], close=False)
    log, head = tmp_path / "merged.jsonl", tmp_path / "merged.head"
    done = run_policyc("audit", "export", str(tmp_path / "monitor.db"), "-o", str(log), "--head", str(head))
    assert done.status == 0 and "monitor.p1.db" in done.stderr and "open segment" in done.stderr
    assert "monitor.db:" not in done.stderr.replace("monitor.p1.db", "")
    assert verify_bytes(log.read_bytes()).problem.code == "open-segment"
    passed = run_policyc("audit", "verify", str(log), "--expect", str(head))
    assert passed.status == 0 and passed.stdout.split(": ")[1] == "open", passed.stderr


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture
def database(postgres_server: Any) -> str:
    return postgres_server.create_schema(f"t_{uuid.uuid4().hex[:16]}")


def test_two_instances_chains_on_postgresql_are_merged_and_a_removed_record_names_its_chain(
    postgres_server: Any, database: str, tmp_path: Path
) -> None:
    from policyc.serve.pgstore import PostgresStore

    a, b = PostgresStore(database, instance="a"), PostgresStore(database, instance="b")
    try:
        decided = []
        for store, sessions in ((a, ["s1", "s2"]), (b, ["s3", "s4"])):
            store.record_audit([HEADER])
            for session in sessions:
                assert store.acquire("agent", session, 60) is not None
                assert store.create_session("agent", session, (), "sha256:p")
                decided.append(decide(store, session))
        a.record_audit([CLOSE])  # b is still running: its segment is open
    finally:
        a.close()
    bare = database.replace(f":{postgres_server.password}@", "@")
    env = {"PGPASSFILE": str(postgres_server.passfile), "PGPASSWORD": ""}
    with_password = run_policyc("audit", "export", database, env=env)
    assert with_password.status == 2 and "PGPASSWORD" in with_password.stderr
    assert postgres_server.password not in with_password.stderr
    log, head = tmp_path / "pg.jsonl", tmp_path / "pg.head"
    try:
        done = run_policyc("audit", "export", bare, "-o", str(log), "--head", str(head), env=env)
        assert done.status == 0, done.stderr
        assert "instance b" in done.stderr and "open segment" in done.stderr
        records = [json.loads(line) for line in lines_of(log)]
        assert sorted(r["decision"] for r in records if r["type"] == "decision") == sorted(decided)
        published = json.dumps(b.audit_head().to_json())
        assert parse_head(published) == parse_head(head.read_text("utf-8"))
        assert len(parse_head(published).entries) == 2
        verified = run_policyc("audit", "verify", str(log), "--expect", published)
        assert verified.status == 0 and verified.stdout.split(": ")[1] == "open", verified.stderr
        # a record removed from instance b's chain (the second: chains follow the instances' names)
        lines = lines_of(log)
        start = next(i for i, line in enumerate(lines) if i and b'"seq":0' in line)
        removed = tmp_path / "removed.jsonl"
        removed.write_bytes(b"".join(lines[: start + 1] + lines[start + 2 :]))
        broken = run_policyc("audit", "verify", str(removed), "--expect", published, "--format", "json")
        problem = broken.json()["problem"]
        b_chain = next(e.chain for e in b.audit_head().entries if e.chain == _chain_of(lines[start]))
        assert broken.status == 1 and problem["code"] == "chain-broken"
        assert problem["message"].startswith("chain 2 of 2 (" + b_chain[:12])
        # the decisions table held against the merged log
        import psycopg

        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("DELETE FROM decisions WHERE id = 'd-s3'")
        differs = run_policyc("audit", "export", bare, "-o", str(tmp_path / "again.jsonl"), env=env)
        assert differs.status == 1 and "[decision-not-stored]" in differs.stderr and "d-s3" in differs.stderr
        assert postgres_server.password not in differs.stderr
    finally:
        b.close()


def _chain_of(first_line: bytes) -> str:
    import hashlib

    return hashlib.sha256(first_line.rstrip(b"\n")).hexdigest()
