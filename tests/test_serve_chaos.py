"""Chaos against three `policyc serve` instances on one real PostgreSQL database, while clients
stream to whichever instance is up: an owner killed mid-stream, an owner frozen past its lease
then thawed, PostgreSQL killed and started again. Afterwards every acknowledged event and
decision is in the database exactly once, every decision is the in-process monitor's on the
events the database holds, every instance's audit chain verifies, and `policyc audit export` of
the database merges them into a log `policyc audit verify` passes. The slow suite."""

from __future__ import annotations

import json
import random
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

import policyc
from policyc.runtime.audit import verify_bytes
from policyc.serve.pgstore import PostgresStore

from .conftest import run_policyc
from .support import postgres
from .support.service import POLICY, Server, event, prepare

pytestmark = pytest.mark.slow

SESSIONS = [f"s{n}" for n in range(6)]
STEPS = 30


def _step(i: int) -> tuple[dict, dict]:
    label = ["untrusted"] if i % 4 == 0 else []
    result = event(f"r{i}", tool="fetch", labels=label, deps=[f"a{i - 1}"] if i else [])
    call = event(f"a{i}", "tool_call", tool="send_email" if i % 2 else "read", deps=[f"r{i}"])
    return result, call


class Stream:
    """One session's client: each request sent to an instance that is up, again until it has a
    definite answer (done now, or done before: its event's id is taken)."""

    def __init__(self, servers: list[Server], key: str, session: str) -> None:
        self.servers = servers
        self.key = key
        self.session = session
        self.acknowledged: list[tuple[str, str | None]] = []  # (event id, decision id of a call)
        self.failures: list[str] = []

    def send(self, path: str, body: dict) -> dict | None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            server = random.choice(self.servers)
            try:
                with httpx.Client(base_url=server.url, timeout=10) as http:
                    answer = http.post(path, json=body, headers={"authorization": f"Bearer {self.key}"})
            except httpx.HTTPError:
                time.sleep(0.05)
                continue
            if answer.status_code == 200 or answer.status_code == 201:
                return dict(answer.json())
            text = answer.text
            if answer.status_code in (409, 422) and ("exists" in text or "already" in text or "used" in text):
                return None  # done by an earlier attempt whose answer was lost
            if answer.status_code in (503, 404):
                time.sleep(0.05)
                continue
            self.failures.append(f"{self.session} {path}: {answer.status_code} {text[:200]}")
            return None
        self.failures.append(f"{self.session} {path}: no definite answer in 90 s")
        return None

    def run(self, progress: list[int]) -> None:
        self.send("/v1/sessions", {"session": self.session})
        for i in range(STEPS):
            result, call = _step(i)
            if self.send(f"/v1/sessions/{self.session}/events", {"events": [result]}) is not None:
                self.acknowledged.append((result["id"], None))
            decided = self.send(f"/v1/sessions/{self.session}/authorize", {"event": call})
            if decided is not None:
                self.acknowledged.append((call["id"], decided["decision_id"]))
            progress[0] += 1
            if self.failures:
                return


def test_three_instances_lose_nothing_acknowledged_through_kills_freezes_and_a_database_restart(
    tmp_path: Path,
) -> None:
    database = postgres.start()
    keys = prepare(tmp_path, POLICY, {"agent": ("agent",)})
    url = database.dsn()
    servers = [Server(tmp_path, "--db", url, "--instance", name, "--lease-ttl", "1") for name in "abc"]
    progress = [0]
    streams = [Stream(servers, keys["agent"], name) for name in SESSIONS]
    threads = [threading.Thread(target=s.run, args=(progress,)) for s in streams]
    try:
        for thread in threads:
            thread.start()

        def reach(n: int) -> None:
            deadline = time.monotonic() + 60
            while progress[0] < n and time.monotonic() < deadline:
                time.sleep(0.01)

        reach(30)
        servers[0].kill()  # an owner dies mid-stream
        reach(60)
        servers[1].process.send_signal(signal.SIGSTOP)  # frozen past its lease
        time.sleep(2.0)
        servers[1].process.send_signal(signal.SIGCONT)
        reach(100)
        database.kill()  # the database goes away, and comes back
        time.sleep(0.5)
        database.start()
        for thread in threads:
            thread.join(timeout=240)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        for server in servers:
            server.stop()
    try:
        assert [f for s in streams for f in s.failures] == []
        assert progress[0] == len(SESSIONS) * STEPS
        with psycopg.connect(database.dsn()) as connection:
            for stream in streams:
                rows = connection.execute(
                    "SELECT seq, how, body FROM events WHERE principal = 'agent' AND session = %s ORDER BY seq",
                    (stream.session.encode(),),
                ).fetchall()
                decisions = dict(
                    connection.execute(
                        "SELECT seq, verdict FROM decisions WHERE principal = 'agent' AND session = %s",
                        (stream.session.encode(),),
                    ).fetchall()
                )
                ids = [json.loads(body)["id"] for _, _, body in rows]
                assert len(ids) == len(set(ids)), f"{stream.session}: an event twice"
                assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))
                assert {i for i, _ in stream.acknowledged} <= set(ids), "every acknowledged event is kept"
                decided_ids = {
                    row[0]
                    for row in connection.execute(
                        "SELECT id FROM decisions WHERE session = %s", (stream.session.encode(),)
                    ).fetchall()
                }
                assert {d for _, d in stream.acknowledged if d} <= decided_ids, "every acknowledged decision"
                # the decisions are the in-process monitor's on the events the database holds
                monitor = policyc.Monitor(policyc.load(POLICY))
                session = monitor.session(stream.session, principal="agent", roles=("agent",))
                for seq, how, body in rows:
                    if how == "record":
                        session.record(json.loads(body))
                    else:
                        verdict = session.authorize(json.loads(body)).verdict
                        assert decisions[seq] == verdict, (stream.session, seq)
        store = PostgresStore(database.dsn(), instance="checker")
        try:
            chains = store.chains()
        finally:
            store.close()
        assert chains and set(chains) <= {"a", "b", "c"}
        for writer, chain in chains.items():
            problem = verify_bytes(chain).problem
            # a killed instance's chain ends without its closing checkpoint: that, and nothing else
            assert problem is None or problem.code == "open-segment", (writer, problem)
        _exported_log_verifies(database, tmp_path, chains)
    finally:
        database.stop()


def _exported_log_verifies(database: postgres.PostgresServer, folder: Path, chains: dict[str, bytes]) -> None:
    """`policyc audit export` of the database (the password in PGPASSFILE) merges every
    instance's chain, and `policyc audit verify` passes it against the head the export wrote:
    the killed instance's chain is open (its segment never closed), the others are closed."""
    env = {"PGPASSFILE": str(database.passfile)}
    log, head = folder / "merged.jsonl", folder / "merged.head"
    url = database.dsn(password=False)
    exported = run_policyc("audit", "export", url, "-o", str(log), "--head", str(head), env=env)
    assert exported.status == 0, exported.stderr
    said_open = re.findall(
        r"^instance (\w+): the chain at line \d+ ends in an open segment", exported.stderr, re.M
    )
    # the killed instance's chain is open — when it wrote one: killed before it owned a session,
    # it has none; b (frozen, thawed) and c stopped cleanly
    killed = "a" in chains
    assert said_open == (["a"] if killed else []), exported.stderr
    anchored = run_policyc("audit", "verify", str(log), "--expect", str(head), "--format", "json")
    assert anchored.status == 0, anchored.stderr
    verified = anchored.json()
    expected = ("open" if killed else "ok", killed, len(chains))
    assert (verified["status"], verified["open"], verified["chains"]) == expected
    assert verified["problem"] is None
    assert verified["records"] == sum(chain.count(b"\n") for chain in chains.values())
    # without a head to reach, an open segment is not `ok`: a warning, and not a pass
    alone = run_policyc("audit", "verify", str(log), "--format", "json")
    if killed:
        assert alone.status != 0 and alone.json()["problem"]["code"] == "open-segment"
    else:
        assert alone.status == 0 and alone.json()["problem"] is None
    # chain by chain, each against its own head: the killed instance's open, the others ok
    for writer, chain in chains.items():
        path = folder / f"chain-{writer}.jsonl"
        path.write_bytes(chain)
        own = run_policyc("audit", "head", str(path))
        assert own.status == 0, own.stderr
        status = run_policyc("audit", "verify", str(path), "--expect", own.stdout, "--format", "json")
        assert status.status == 0, status.stderr
        assert status.json()["status"] == ("open" if writer == "a" else "ok"), writer
