"""`policyc serve --processes N`: full service processes on one port, each owning a share of the
sessions in a database of its own, requests forwarded to the owner (serve/fleet.py,
serve/routing.py). Real processes of the installed command: the slow suite."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import policyc
from policyc.serve.routing import owner_of

from .support.commands import policyc_path
from .support.service import POLICY as SERVE_POLICY
from .support.service import Server, client, event, keys_file

pytestmark = pytest.mark.slow

POLICY = (
    SERVE_POLICY
    + """@id("pay-needs-a-person")
@message("{a} pays: a person must approve it")
Escalate(a) :- ToolCall(a, "pay").
"""
)
SESSIONS = [f"s{n}" for n in range(8)]


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    return keys_file(tmp_path, {"agent": ("agent",), "oncall": ("approver",)})


def _steps(n: int) -> list[tuple[dict, dict]]:
    out = []
    for i in range(n):
        label = ["untrusted"] if i % 4 == 0 else []
        result = event(f"r{i}", tool="fetch", labels=label, deps=[f"a{i - 1}"] if i else [])
        call = event(f"a{i}", "tool_call", tool="send_email" if i % 2 else "read", deps=[f"r{i}"])
        out.append((result, call))
    return out


def _expected(n: int) -> list[bool]:
    session = policyc.Monitor(policyc.load(POLICY)).session("x", principal="agent", roles=("agent",))
    allowed = []
    for result, call in _steps(n):
        session.record(result)
        allowed.append(session.authorize(call).allowed)
    return allowed


def _stored(db: Path) -> set[str]:
    with sqlite3.connect(db) as connection:
        return {row[0] for row in connection.execute("SELECT session FROM sessions")}


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return sorted(int(p) for p in found)


def test_sessions_are_owned_by_one_process_and_reached_through_any(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    server = Server(tmp_path, "--processes", "2")
    try:
        steps = _steps(12)
        answers: dict[str, list[bool]] = {name: [] for name in SESSIONS}
        # a new connection per request: the kernel hands them to either process, so requests
        # reach the owner directly or through the other one
        for name in SESSIONS:
            with client(server, keys["agent"]) as agent:
                assert agent.post("/v1/sessions", json={"session": name}).status_code == 201
        for result, call in steps:
            for name in SESSIONS:
                with client(server, keys["agent"]) as agent:
                    assert (
                        agent.post(f"/v1/sessions/{name}/events", json={"events": [result]}).status_code
                        == 200
                    )
                    decided = agent.post(f"/v1/sessions/{name}/authorize", json={"event": call})
                    assert decided.status_code == 200, decided.text
                    answers[name].append(decided.json()["allowed"])
        with client(server, keys["agent"]) as agent:
            again = agent.post("/v1/sessions", json={"session": SESSIONS[0]})
            assert again.status_code == 409 and again.json()["error"]["code"] == "session-exists"
            missing = agent.post("/v1/sessions/nowhere/events", json={"events": [steps[0][0]]})
            assert missing.status_code == 404
        with client(server, None) as anonymous:
            # what one process tells another is trusted only on its own Unix socket, never over TCP
            posed = anonymous.post(
                f"/v1/sessions/{SESSIONS[1]}/events",
                json={"events": [steps[0][0]]},
                headers={"x-policyc-client-cert": "CN=agent"},
            )
            assert posed.status_code == 401
            assert (
                anonymous.post(f"/v1/sessions/{SESSIONS[1]}/events", json={"events": []}).status_code == 401
            )
        with client(server, keys["oncall"]) as oncall:
            head = oncall.get("/v1/audit/head").json()
            assert len(head["heads"]) == 2, "one head per process's chain"
    finally:
        server.stop()
    assert all(answers[name] == _expected(12) for name in SESSIONS)
    first, second = _stored(tmp_path / "monitor.db"), _stored(tmp_path / "monitor.p1.db")
    assert first | second == set(SESSIONS) and not first & second
    assert first == {s for s in SESSIONS if owner_of("agent", s, 2) == 0}
    assert first and second, "both processes own sessions"


def test_escalations_of_every_process_are_listed_and_answered(tmp_path: Path, keys: dict[str, str]) -> None:
    server = Server(tmp_path, "--processes", "2")
    pay = event("p1", "tool_call", tool="pay", args={"to": "bob"}, deps=[])
    try:
        escalated = {}
        with client(server, keys["agent"]) as agent:
            for name in SESSIONS[:4]:
                agent.post("/v1/sessions", json={"session": name})
                escalated[name] = agent.post(f"/v1/sessions/{name}/authorize", json={"event": pay}).json()
        assert {owner_of("agent", name, 2) for name in escalated} == {0, 1}
        with client(server, keys["oncall"]) as oncall:
            pending = oncall.get("/v1/approvals").json()["pending"]
            assert sorted(p["approval_id"] for p in pending) == sorted(
                d["decision_id"] for d in escalated.values()
            )
            for name, decision in escalated.items():
                approved = oncall.post(f"/v1/approvals/{decision['decision_id']}", json={"approve": True})
                assert approved.status_code == 200 and approved.json()["approved"] is True, name
            assert oncall.get("/v1/approvals").json()["pending"] == []
            unknown = oncall.post("/v1/approvals/d-nothing", json={"approve": True})
            assert unknown.status_code == 404
        with client(server, keys["agent"]) as agent:
            for name in escalated:
                allowed = agent.post(f"/v1/sessions/{name}/decide", json={"action": "p1"}).json()
                assert allowed["allowed"] is True, name
    finally:
        server.stop()


def test_a_killed_process_is_started_again_with_its_sessions(tmp_path: Path, keys: dict[str, str]) -> None:
    server = Server(tmp_path, "--processes", "2")
    steps = _steps(10)
    answers: dict[str, list[bool]] = {name: [] for name in SESSIONS}
    try:
        with client(server, keys["agent"]) as agent:
            for name in SESSIONS:
                agent.post("/v1/sessions", json={"session": name})
            for result, call in steps[:5]:
                for name in SESSIONS:
                    agent.post(f"/v1/sessions/{name}/events", json={"events": [result]})
                    answers[name].append(
                        agent.post(f"/v1/sessions/{name}/authorize", json={"event": call}).json()["allowed"]
                    )
        before = _children(server.process.pid)
        assert len(before) == 2, before
        os.kill(before[1], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = _children(server.process.pid)
            if len(now) == 2 and before[1] not in now:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        for result, call in steps[5:]:
            for name in SESSIONS:
                for _attempt in range(50):  # until the new process listens on its socket
                    with client(server, keys["agent"]) as agent:
                        recorded = agent.post(f"/v1/sessions/{name}/events", json={"events": [result]})
                        if recorded.status_code == 503:
                            time.sleep(0.1)
                            continue
                        assert recorded.status_code == 200, recorded.text
                        decided = agent.post(f"/v1/sessions/{name}/authorize", json={"event": call})
                        answers[name].append(decided.json()["allowed"])
                        break
    finally:
        server.stop()
    assert all(answers[name] == _expected(10) for name in SESSIONS)


def test_reload_reaches_every_process_and_the_number_of_processes_is_kept(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    server = Server(tmp_path, "--processes", "2")
    try:
        (tmp_path / "policy.dl").write_text(POLICY + '\n@id("no-read")\nDeny(a) :- ToolCall(a, "read").\n')
        reloaded = subprocess.run(
            [policyc_path(), "serve", "reload", "--db", str(tmp_path / "monitor.db")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert reloaded.returncode == 0, reloaded.stderr
        read = event("c1", "tool_call", tool="read", deps=[])
        with client(server, keys["agent"]) as agent:
            for name in SESSIONS:  # sessions of both processes run the new policy
                agent.post("/v1/sessions", json={"session": name})
                assert (
                    agent.post(f"/v1/sessions/{name}/authorize", json={"event": read}).json()["allowed"]
                    is False
                )
    finally:
        server.stop()
    started = subprocess.run(
        [
            policyc_path(),
            "serve",
            str(tmp_path / "policy.dl"),
            "--keys",
            str(tmp_path / "keys.toml"),
            "--db",
            str(tmp_path / "monitor.db"),
            "--port",
            "0",
            "--processes",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert "shared out over 2 processes: start with --processes 2" in started.stderr


def test_an_httpx_client_with_keep_alive_sees_one_service(tmp_path: Path, keys: dict[str, str]) -> None:
    server = Server(tmp_path, "--processes", "2")
    try:
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {keys['agent']}"}) as agent:
            for name in SESSIONS:
                assert agent.post("/v1/sessions", json={"session": name}).status_code == 201
                decided = agent.post(
                    f"/v1/sessions/{name}/authorize",
                    json={"event": event("a0", "tool_call", tool="read", deps=[])},
                )
                assert decided.status_code == 200 and "decide;dur=" in decided.headers["server-timing"]
    finally:
        server.stop()


def test_the_export_of_every_process_s_chain_verifies_running_and_stopped(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    """`policyc audit export monitor.db` of a `--processes 2` service: both files' chains merged,
    open while the service runs (passing against the head it answers), closed once it stopped."""
    import json

    server = Server(tmp_path, "--processes", "2")
    decided: set[str] = set()
    try:
        call = event("c1", "tool_call", tool="read", deps=[])
        for name in SESSIONS:
            with client(server, keys["agent"]) as agent:
                assert agent.post("/v1/sessions", json={"session": name}).status_code == 201
                answer = agent.post(f"/v1/sessions/{name}/authorize", json={"event": call})
                decided.add(answer.json()["decision_id"])
        with client(server, keys["agent"]) as agent:
            running = json.dumps(agent.get("/v1/audit/head").json())
        assert len(json.loads(running)["heads"]) == 2
        live = tmp_path / "live.jsonl"
        done = _policyc("audit", "export", str(tmp_path / "monitor.db"), "-o", str(live))
        assert done.returncode == 0 and "open segment" in done.stderr, done.stderr
        verified = _policyc("audit", "verify", str(live), "--expect", running)
        assert verified.returncode == 0 and verified.stdout.split(": ")[1] == "open", verified.stderr
    finally:
        server.stop()
    closed = tmp_path / "closed.jsonl"
    done = _policyc("audit", "export", str(tmp_path / "monitor.db"), "-o", str(closed))
    assert done.returncode == 0 and "open segment" not in done.stderr, done.stderr
    records = [json.loads(line) for line in closed.read_text("utf-8").splitlines()]
    assert {r["decision"] for r in records if r["type"] == "decision"} == decided
    verified = _policyc("audit", "verify", str(closed), "--expect", running)
    assert verified.returncode == 0 and verified.stdout.split(": ")[1] == "ok", verified.stderr
    assert "2 chains" in verified.stdout


def _policyc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([policyc_path(), *args], capture_output=True, text=True, timeout=120)


def test_a_connection_reaches_the_owner_of_its_first_session_without_a_hop(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    """A connection whose first request names a session (here: creates it) is handed to the
    process that owns it, which serves it from then on: with the other process stopped
    (SIGSTOP), the requests on it are still answered; a connection served through the other
    process would wait for it."""
    from concurrent.futures import ThreadPoolExecutor

    server = Server(tmp_path, "--processes", "2")
    agents = [
        httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {keys['agent']}"}, timeout=10)
        for _ in SESSIONS
    ]

    def asks(pair: tuple[httpx.Client, str]) -> str | None:
        agent, name = pair
        try:
            reply = agent.get(f"/v1/sessions/{name}/decisions/d-none")
        except httpx.TimeoutException:
            return None
        assert reply.status_code == 404, reply.text
        return name

    try:
        for agent, name in zip(agents, SESSIONS, strict=True):
            assert agent.post("/v1/sessions", json={"session": name}).status_code == 201
        children = _children(server.process.pid)
        assert len(children) == 2
        with ThreadPoolExecutor(len(SESSIONS)) as pool:
            for stopped in children:
                # every connection used just now, with both processes running (none is closed
                # for being idle meanwhile; one closed after a timeout is opened again, and handed)
                assert list(pool.map(asks, zip(agents, SESSIONS, strict=True))) == SESSIONS
                os.kill(stopped, signal.SIGSTOP)
                try:
                    answered = {n for n in pool.map(asks, zip(agents, SESSIONS, strict=True)) if n}
                finally:
                    os.kill(stopped, signal.SIGCONT)
                # exactly the running process's sessions: each on a connection that process serves
                owned = [{s for s in SESSIONS if owner_of("agent", s, 2) == i} for i in (0, 1)]
                assert answered in owned, answered
    finally:
        for agent in agents:
            agent.close()
        server.stop()


def _metrics(text: str) -> dict[str, float]:
    """The samples of a /metrics answer, by name and labels (``name{label="value"}``)."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


def test_metrics_count_every_process_and_show_each_connection_handed_to_its_owner(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    """``GET /metrics`` is one service's counters whichever process answers it: every process's,
    summed. A connection per session, each request written in one piece (http.client): each
    connection is handed to the process owning its first request's session, so no request is
    forwarded, and every connection passed on is received."""
    import http.client
    import json

    server = Server(tmp_path, "--processes", "2")
    headers = {"authorization": f"Bearer {keys['agent']}", "content-type": "application/json"}
    host, port = server.url.removeprefix("http://").split(":")
    connections = [http.client.HTTPConnection(host, int(port), timeout=10) for _ in SESSIONS]

    def post(connection: http.client.HTTPConnection, path: str, body: dict) -> dict:
        connection.request("POST", path, json.dumps(body).encode(), headers)
        answer = connection.getresponse()
        payload = json.loads(answer.read())
        assert answer.status in (200, 201), payload
        return payload

    try:
        steps = _steps(3)
        for connection, name in zip(connections, SESSIONS, strict=True):
            post(connection, "/v1/sessions", {"session": name})
            for result, call in steps:
                post(connection, f"/v1/sessions/{name}/events", {"events": [result]})
                post(connection, f"/v1/sessions/{name}/authorize", {"event": call})
        with client(server, keys["agent"]) as agent:
            scraped = [_metrics(agent.get("/metrics").text) for _ in range(4)]
    finally:
        for connection in connections:
            connection.close()
        server.stop()
    for found in scraped:  # the same whichever process took the scrape's connection
        verdicts = {k: v for k, v in found.items() if k.startswith("policyc_decisions_total")}
        assert sum(verdicts.values()) == len(SESSIONS) * len(steps), verdicts
        assert found["policyc_decision_seconds_count"] == len(SESSIONS) * len(steps)
        assert found["policyc_sessions"] == len(SESSIONS)
        assert found["policyc_forwarded_requests_total"] == 0, found
        handed = {how: found.get(f'policyc_connections_total{{how="{how}"}}', 0) for how in HOW}
        assert handed["passed"] == handed["received"], handed
        # the eight agents' connections, each served by its owner, and the scrapes' one
        assert handed["kept"] + handed["received"] == len(SESSIONS), handed
        assert handed["unrouted"] == 1, handed


HOW = ("kept", "passed", "received", "unrouted")
