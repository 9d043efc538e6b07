"""Several `policyc serve` instances on one real PostgreSQL database: each session owned by one
instance through a lease, its requests at another instance forwarded to the owner, taken over by
another instance once its owner stopped (killed, or frozen past its lease: its late writes are
refused). The installed command against a server the test extra installs: the slow suite."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

import pytest

import policyc

from .support.postgres import PostgresServer
from .support.service import POLICY, Server, client, event, prepare

pytestmark = pytest.mark.slow

_names = itertools.count()


def _steps(n: int) -> list[tuple[dict, dict]]:
    out = []
    for i in range(n):
        label = ["untrusted"] if i % 4 == 0 else []
        result = event(f"r{i}", tool="fetch", labels=label, deps=[f"a{i - 1}"] if i else [])
        call = event(f"a{i}", "tool_call", tool="send_email" if i % 2 else "read", deps=[f"r{i}"])
        out.append((result, call))
    return out


def _expected(n: int) -> list[bool]:
    session = policyc.Monitor(policyc.load(POLICY)).session("s", principal="agent", roles=("agent",))
    allowed = []
    for result, call in _steps(n):
        session.record(result)
        allowed.append(session.authorize(call).allowed)
    return allowed


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database(f"instances{next(_names)}")


def _instance(folder: Path, url: str, name: str) -> Server:
    return Server(folder, "--db", url, "--instance", name, "--lease-ttl", "1")


def _step(server: Server, key: str, session: str, result: dict, call: dict) -> tuple[int, bool | None, str]:
    with client(server, key) as agent:
        recorded = agent.post(f"/v1/sessions/{session}/events", json={"events": [result]})
        if recorded.status_code != 200:
            return recorded.status_code, None, recorded.text
        decided = agent.post(f"/v1/sessions/{session}/authorize", json={"event": call})
        return decided.status_code, decided.json().get("allowed"), decided.text


def test_a_session_is_refused_elsewhere_and_taken_over_when_its_owner_dies(
    tmp_path: Path, database: str
) -> None:
    keys = prepare(tmp_path, POLICY, {"agent": ("agent",)})
    steps = _steps(8)
    a, b = _instance(tmp_path, database, "a"), _instance(tmp_path, database, "b")
    allowed: list[bool | None] = []
    try:
        with client(a, keys["agent"]) as agent:
            assert agent.post("/v1/sessions", json={"session": "s1"}).status_code == 201
        with client(b, keys["agent"]) as agent:
            again = agent.post("/v1/sessions", json={"session": "s1"})
            assert again.status_code == 409 and again.json()["error"]["code"] == "session-exists"
        for result, call in steps[:4]:
            status, verdict, text = _step(a, keys["agent"], "s1", result, call)
            assert status == 200, text
            allowed.append(verdict)
        status, verdict, text = _step(b, keys["agent"], "s1", *steps[4])
        assert status == 200, text  # forwarded to a, which owns the session
        allowed.append(verdict)
        a.kill()
        time.sleep(1.5)  # past the lease: b takes the session over on its next request
        for result, call in steps[5:]:
            status, verdict, text = _step(b, keys["agent"], "s1", result, call)
            assert status == 200, text
            allowed.append(verdict)
    finally:
        a.stop()
        b.stop()
    assert allowed == _expected(8)


def test_an_owner_frozen_past_its_lease_writes_nothing_after_the_take_over(
    tmp_path: Path, database: str
) -> None:
    keys = prepare(tmp_path, POLICY, {"agent": ("agent",)})
    steps = _steps(6)
    a, b = _instance(tmp_path, database, "a"), _instance(tmp_path, database, "b")
    try:
        with client(a, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
        assert _step(a, keys["agent"], "s1", *steps[0])[0] == 200
        a.process.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        assert _step(b, keys["agent"], "s1", *steps[1])[0] == 200, "b took the session over"
        a.process.send_signal(signal.SIGCONT)
        # a's lease's epoch is no longer current: refused there, or (once a saw it lost the
        # lease) forwarded to b; never written by a
        late = _step(a, keys["agent"], "s1", *steps[2])
        assert late[0] in (200, 503), late
        for result, call in steps[2 if late[0] == 503 else 3 :]:
            assert _step(b, keys["agent"], "s1", result, call)[0] == 200
        with client(b, keys["agent"]) as agent:
            head = agent.get("/v1/audit/head").json()
    finally:
        a.stop()
        b.stop()
    assert len(head["heads"]) == 2, "one audit chain per instance"
    import psycopg

    with psycopg.connect(database) as connection:
        rows = connection.execute(
            "SELECT seq, how, body FROM events WHERE principal = 'agent' ORDER BY seq"
        ).fetchall()
        verdicts = [
            row[0] for row in connection.execute("SELECT verdict FROM decisions ORDER BY seq").fetchall()
        ]
    ids = [json_id(body) for _, _, body in rows]
    assert ids == [e["id"] for pair in steps for e in pair], "every event once, in order"
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))
    assert [v == "allow" for v in verdicts] == _expected(6)


def json_id(body: str) -> str:
    import json

    return str(json.loads(body)["id"])


def test_reload_reaches_the_instance_it_names(tmp_path: Path, database: str) -> None:
    import subprocess

    from .support.commands import policyc_path

    keys = prepare(tmp_path, POLICY, {"agent": ("agent",)})
    a = _instance(tmp_path, database, "a")
    try:
        (tmp_path / "policy.dl").write_text(POLICY + '\n@id("no-read")\nDeny(a) :- ToolCall(a, "read").\n')
        unnamed = subprocess.run(
            [policyc_path(), "serve", "reload", "--db", database], capture_output=True, text=True, timeout=60
        )
        assert unnamed.returncode == 2 and "--instance NAME" in unnamed.stderr
        reloaded = subprocess.run(
            [policyc_path(), "serve", "reload", "--db", database, "--instance", "a"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert reloaded.returncode == 0, reloaded.stderr
        assert "reloaded" in reloaded.stdout
        with client(a, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
            read = event("c1", "tool_call", tool="read", deps=[])
            assert agent.post("/v1/sessions/s1/authorize", json={"event": read}).json()["allowed"] is False
    finally:
        a.stop()
