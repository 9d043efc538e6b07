"""`policyc serve` as its users run it: the installed command on 127.0.0.1, driven over HTTP.

Every answer is checked against the OpenAPI document the service publishes; the crash test
kills the server with SIGKILL in the middle of a stream of events and checks, after a restart,
that every acknowledged event is there and that decisions are those of an in-process monitor.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

import policyc

from .support.commands import policyc_path
from .support.service import POLICY, Server, client, event, new_key, serve_command


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    return tmp_path


@pytest.fixture
def keys(folder: Path) -> dict[str, str]:
    found = {}
    tables = []
    for principal, roles in (("agent", ("agent",)), ("other", ())):
        key, table = new_key(principal, *roles)
        found[principal] = key
        tables.append(table)
    (folder / "keys.toml").write_text("\n".join(tables), "utf-8")
    return found


@pytest.fixture
def server(folder: Path, keys: dict[str, str]):
    running = Server(folder, "--wait", "0.3")
    yield running
    running.stop()


DOCUMENT: dict[str, Any] = {}


def conforms(response: httpx.Response, route: str, method: str) -> Any:
    """The JSON body, checked against the published document's schema for the answer."""
    if not DOCUMENT:
        DOCUMENT.update(_document())
    operation = DOCUMENT["paths"][route][method]
    answer = operation["responses"][str(response.status_code)]
    body = response.json()
    schema = dict(answer["content"]["application/json"]["schema"], components=DOCUMENT["components"])
    jsonschema.validate(body, schema)
    return body


def _document() -> dict[str, Any]:
    from policyc.serve.openapi import document

    return document()


def test_every_request_but_health_needs_a_known_key(server: Server, keys: dict[str, str]) -> None:
    with client(server, None) as anonymous:
        assert anonymous.get("/healthz").json()["status"] == "ok"
        for method, route in (("post", "/v1/sessions"), ("get", "/metrics"), ("get", "/openapi.json")):
            answer = anonymous.request(method.upper(), route, json={"session": "s"})
            assert answer.status_code == 401
            assert conforms(answer, route, method)["error"]["code"] == "unauthorized"
    with client(server, "pck_not-a-key") as stranger:
        answer = stranger.post("/v1/sessions", json={"session": "s"})
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


def test_a_principal_sees_its_own_sessions_only(server: Server, keys: dict[str, str]) -> None:
    with client(server, keys["agent"]) as agent, client(server, keys["other"]) as other:
        created = agent.post("/v1/sessions", json={"session": "s1"})
        assert created.status_code == 201
        body = conforms(created, "/v1/sessions", "post")
        assert (body["session"], body["seq"]) == ("s1", 0) and body["policy"].startswith("sha256:")
        again = agent.post("/v1/sessions", json={"session": "s1"})
        assert (
            again.status_code == 409
            and conforms(again, "/v1/sessions", "post")["error"]["code"] == "session-exists"
        )
        foreign = other.post("/v1/sessions/s1/events", json={"events": [event("e1")]})
        missing = other.post("/v1/sessions/nope/events", json={"events": [event("e1")]})
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"]["code"] == missing.json()["error"]["code"] == "not-found"
        assert other.post("/v1/sessions", json={"session": "s1"}).status_code == 201, "ids are per principal"
        role = other.post("/v1/sessions", json={"session": "s2", "roles": ["agent"]})
        assert role.status_code == 403 and role.json()["error"]["code"] == "role-not-held"


def test_a_batch_with_a_malformed_event_records_nothing(server: Server, keys: dict[str, str]) -> None:
    route = "/v1/sessions/{session}/events"
    with client(server, keys["agent"]) as agent:
        agent.post("/v1/sessions", json={"session": "s1"})
        bad = agent.post(
            "/v1/sessions/s1/events", json={"events": [event("e1"), event("e2", deps=["nowhere"])]}
        )
        assert bad.status_code == 422
        error = conforms(bad, route, "post")["error"]
        assert (
            error["code"] == "malformed-event"
            and "event 2" in error["message"]
            and "nowhere" in error["message"]
        )
        good = agent.post("/v1/sessions/s1/events", json={"events": [event("e1"), event("e2", deps=["e1"])]})
        assert good.status_code == 200 and conforms(good, route, "post") == {"seq": 2}, (
            "e1 was not recorded before"
        )
        assert agent.post("/v1/sessions/s1/events", content=b"{not json").status_code == 400
        big = agent.post(
            "/v1/sessions/s1/events", content=b" " * (2 << 20), headers={"content-type": "application/json"}
        )
        assert big.status_code == 413 and big.json()["error"]["code"] == "too-large"


def test_decisions_are_those_of_the_policy_and_explained(server: Server, keys: dict[str, str]) -> None:
    route = "/v1/sessions/{session}/authorize"
    with client(server, keys["agent"]) as agent:
        agent.post("/v1/sessions", json={"session": "s1"})
        agent.post(
            "/v1/sessions/s1/events",
            json={
                "events": [
                    event("r1", tool="fetch", text="page", labels=["untrusted"], deps=[]),
                    event("r2", tool="read", deps=[]),
                ]
            },
        )
        allowed = conforms(
            agent.post(
                "/v1/sessions/s1/authorize",
                json={"event": event("a1", "tool_call", tool="send_email", deps=["r2"])},
            ),
            route,
            "post",
        )
        assert allowed["verdict"] == "allow" and allowed["allowed"] is True and allowed["seq"] == 3
        denied = conforms(
            agent.post(
                "/v1/sessions/s1/authorize",
                json={"event": event("a2", "tool_call", tool="send_email", deps=["r1"]), "after_seq": 3},
            ),
            route,
            "post",
        )
        assert denied["verdict"] == "deny" and denied["allowed"] is False
        assert [r["rule"] for r in denied["reasons"]] == ["untrusted-send"]
        assert "send_email() sends what an untrusted result influenced" in denied["feedback"]
        shown = agent.get(f"/v1/sessions/s1/decisions/{denied['decision_id']}")
        assert shown.status_code == 200
        body = conforms(shown, "/v1/sessions/{session}/decisions/{decision_id}", "get")
        assert body["decision_id"] == denied["decision_id"] and "untrusted" in json.dumps(body["explanation"])
        metrics = agent.get("/metrics").text
        assert 'policyc_decisions_total{verdict="deny"} 1.0' in metrics
        assert 'policyc_decisions_total{verdict="allow"} 1.0' in metrics


def test_given_facts_are_checked_durable_and_decide(folder: Path, keys: dict[str, str]) -> None:
    route = "/v1/sessions/{session}/facts"
    server = Server(folder)
    try:
        with client(server, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
            agent.post("/v1/sessions/s1/events", json={"events": [event("r1", tool="read", deps=[])]})
            for bad in ({"Nope": [["r1"]]}, {"Label": [["r1"]]}, {"Label": "r1"}, [["r1", "untrusted"]]):
                refused = agent.post("/v1/sessions/s1/facts", json={"facts": bad})
                assert refused.status_code == 422, bad
                assert conforms(refused, route, "post")["error"]["code"] in (
                    "malformed-facts",
                    "malformed-request",
                )
            given = agent.post("/v1/sessions/s1/facts", json={"facts": {"Label": [["r1", "untrusted"]]}})
            assert conforms(given, route, "post") == {"seq": 2}, "the refused facts were not recorded"
            call = {"event": event("a1", "tool_call", tool="send_email", deps=["r1"]), "after_seq": 2}
            before = agent.post("/v1/sessions/s1/authorize", json=call).json()
        assert before["verdict"] == "deny" and [r["rule"] for r in before["reasons"]] == ["untrusted-send"]
        server.kill()
        server = Server(folder)
        with client(server, keys["agent"]) as agent:  # the facts were replayed from the database
            call = {"event": event("a2", "tool_call", tool="send_email", deps=["r1"]), "after_seq": 3}
            after = agent.post("/v1/sessions/s1/authorize", json=call).json()
        assert after["verdict"] == "deny" and after["seq"] == 4
    finally:
        server.stop()


def test_an_authorization_ahead_of_the_graph_waits_then_denies(server: Server, keys: dict[str, str]) -> None:
    with client(server, keys["agent"]) as agent:
        agent.post("/v1/sessions", json={"session": "s1"})
        started = time.monotonic()
        answer = agent.post(
            "/v1/sessions/s1/authorize", json={"event": event("a1", "tool_call", tool="read"), "after_seq": 5}
        )
        body = conforms(answer, "/v1/sessions/{session}/authorize", "post")
        assert time.monotonic() - started >= 0.3
        assert body["verdict"] == "deny" and "behind the 5" in body["reasons"][0]["message"]
        assert body["seq"] == 0, "the candidate was not recorded"


def test_a_killed_server_loses_no_acknowledged_event(folder: Path, keys: dict[str, str]) -> None:
    """SIGKILL while a client streams events and authorizations from another thread: after a
    restart every acknowledged event is there, and the decisions are an in-process monitor's."""
    # two chains of results: one from an untrusted page (even), one from a file (odd)
    events = [event("r0", tool="fetch", labels=["untrusted"], deps=[]), event("r1", tool="read", deps=[])] + [
        event(f"e{i}", tool="read", deps=[f"e{i - 2}" if i > 1 else f"r{i}"]) for i in range(200)
    ]
    calls = {
        n: event(f"a{n}", "tool_call", tool="send_email", deps=[events[n]["id"]]) for n in range(5, 202, 5)
    }
    acknowledged: list[int] = []
    decisions: dict[str, bool] = {}
    first = Server(folder)

    def stream() -> None:
        with client(first, keys["agent"]) as agent:
            agent.post("/v1/sessions", json={"session": "s1"})
            try:
                for n, one in enumerate(events):
                    assert agent.post("/v1/sessions/s1/events", json={"events": [one]}).status_code == 200
                    acknowledged.append(n)
                    if n in calls:
                        answer = agent.post("/v1/sessions/s1/authorize", json={"event": calls[n]})
                        decisions[calls[n]["id"]] = answer.json()["allowed"]
            except httpx.TransportError:
                return  # the server is gone: what was not answered was not acknowledged

    import threading

    streaming = threading.Thread(target=stream)
    streaming.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 60 and time.monotonic() < deadline and streaming.is_alive():
        time.sleep(0.001)
    first.kill()
    streaming.join(timeout=30)
    assert 60 <= len(acknowledged) < len(events), "killed in the middle of the stream"
    second = Server(folder)
    present = []
    try:
        with client(second, keys["agent"]) as agent:
            for n, one in enumerate(events):
                answer = agent.post("/v1/sessions/s1/events", json={"events": [one]})
                if answer.status_code == 422:
                    assert "already" in answer.json()["error"]["message"]
                    present.append(n)
                else:
                    assert answer.status_code == 200, answer.text
            final = agent.post(
                "/v1/sessions/s1/authorize",
                json={"event": event("last", "tool_call", tool="send_email", deps=["e198"])},
            ).json()
    finally:
        second.stop()
    assert set(acknowledged) <= set(present), "every acknowledged event is in the restarted service"
    assert present == list(range(len(present))), "the events it holds are a prefix of the stream"
    # an in-process monitor on the same events decides the same
    session = policyc.Monitor(policyc.load(POLICY)).session("s1", principal="agent", roles=("agent",))
    expected = {}
    for n, one in enumerate(events[: len(present)]):
        session.record(one)
        if n in calls and calls[n]["id"] in decisions:
            expected[calls[n]["id"]] = session.authorize(calls[n]).allowed
    assert decisions == expected
    assert set(expected.values()) == {True, False}, "both verdicts are among the decisions compared"
    for one in events[len(present) :]:
        session.record(one)
    assert (
        final["allowed"]
        is session.authorize(event("last", "tool_call", tool="send_email", deps=["e198"])).allowed
    )
    assert final["verdict"] == "deny"


def test_bad_keys_files_are_refused_before_it_listens(folder: Path) -> None:
    (folder / "keys.toml").write_text('[principals.a]\nroles = ["x"]\nkeys = ["not-a-hash"]\n', "utf-8")
    done = subprocess.run(
        [
            policyc_path(),
            "serve",
            str(folder / "policy.dl"),
            "--keys",
            str(folder / "keys.toml"),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=folder,
    )
    assert done.returncode == 2
    assert "keys.toml: [principals.a]: `not-a-hash` is not a SHA-256" in done.stderr
    assert not (folder / "policyc-serve.db").exists(), "the database is not opened before the keys are read"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_port_in_use_is_one_line_and_status_2(folder: Path, keys: dict[str, str], processes: str) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        done = subprocess.run(
            [
                policyc_path(),
                "serve",
                str(folder / "policy.dl"),
                "--keys",
                str(folder / "keys.toml"),
                "--port",
                str(port),
                "--processes",
                processes,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=folder,
        )
    finally:
        taken.close()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"policyc: error: 127.0.0.1:{port} is in use (another policyc serve?); choose --port"
    ]


CLIENT = r"""
import json, sys, httpx
url, key, session, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
out = {}
with httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30) as c:
    if c.post("/v1/sessions", json={"session": session}).status_code not in (201, 409):
        sys.exit(3)
    for i in range(n):
        label = ["untrusted"] if i % 3 == 0 else []
        r = c.post(f"/v1/sessions/{session}/events", json={"events": [
            {"id": f"{prefix}r{i}", "kind": "tool_result", "tool": "fetch", "labels": label, "deps": []}]})
        assert r.status_code == 200, r.text
        d = c.post(f"/v1/sessions/{session}/authorize", json={"event": {
            "id": f"{prefix}a{i}", "kind": "tool_call", "tool": "send_email", "deps": [f"{prefix}r{i}"]}}).json()
        out[f"{prefix}a{i}"] = d["allowed"]
print(json.dumps(out))
"""


def test_client_processes_on_the_same_and_on_other_sessions(server: Server, keys: dict[str, str]) -> None:
    """Four client processes at once: two on one session (independent chains of events), two on
    sessions of their own; every decision is the policy's on the events it depends on."""
    runs = [("shared", "p"), ("shared", "q"), ("own1", "x"), ("own2", "y")]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, server.url, keys["agent"], session, prefix, "25"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for session, prefix in runs
    ]
    decided: dict[str, bool] = {}
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        decided.update(json.loads(out))
    assert len(decided) == 100
    for name, allowed in decided.items():
        i = int(name.split("a")[1])
        assert allowed is (i % 3 != 0), name  # denied exactly when its result is untrusted


ESCALATING = """
.import events
@id("pay-needs-a-person")
@message("{a} pays: a person must approve it")
Escalate(a) :- ToolCall(a, "pay").
"""


def test_an_escalated_call_runs_once_after_a_person_approves_it(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(ESCALATING, "utf-8")
    agent_key, agent_table = new_key("agent", "agent")
    approver_key, approver_table = new_key("oncall", "approver")
    (tmp_path / "keys.toml").write_text(agent_table + "\n" + approver_table, "utf-8")
    server = Server(tmp_path)
    pay = event("p1", "tool_call", tool="pay", args={"to": "bob", "amount": 5}, deps=[])
    try:
        with client(server, agent_key) as agent, client(server, approver_key) as oncall:
            agent.post("/v1/sessions", json={"session": "s1"})
            escalated = conforms(
                agent.post("/v1/sessions/s1/authorize", json={"event": pay}),
                "/v1/sessions/{session}/authorize",
                "post",
            )
            assert (escalated["verdict"], escalated["allowed"]) == ("escalate", False)
            assert escalated["escalation"]["rules"] == ["pay-needs-a-person"]
            assert escalated["escalation"]["arguments"] == {"to": "bob", "amount": 5}
            assert agent.get("/v1/approvals").status_code == 403, "an agent's key cannot approve"
            pending = conforms(oncall.get("/v1/approvals"), "/v1/approvals", "get")["pending"]
            assert [p["approval_id"] for p in pending] == [escalated["decision_id"]]
            approved = oncall.post(
                f"/v1/approvals/{escalated['decision_id']}", json={"approve": True, "ttl": 60}
            )
            body = conforms(approved, "/v1/approvals/{approval_id}", "post")
            assert body["approved"] is True and body["approval"]["rules"] == ["pay-needs-a-person"]
            again = oncall.post(f"/v1/approvals/{escalated['decision_id']}", json={"approve": True})
            assert again.status_code == 409 and again.json()["error"]["code"] == "already-answered"
            assert oncall.get("/v1/approvals").json()["pending"] == []
            allowed = conforms(
                agent.post("/v1/sessions/s1/decide", json={"action": "p1"}),
                "/v1/sessions/{session}/decide",
                "post",
            )
            assert (allowed["verdict"], allowed["allowed"]) == ("allow", True)
            assert allowed["approval"]["id"] == body["approval"]["id"]
            once = agent.post("/v1/sessions/s1/decide", json={"action": "p1"}).json()
            assert (once["verdict"], once["allowed"]) == ("escalate", False), "an approval is used once"
    finally:
        server.stop()
    restarted = Server(tmp_path)
    try:
        with client(restarted, agent_key) as agent, client(restarted, approver_key) as oncall:
            assert [p["approval_id"] for p in oncall.get("/v1/approvals").json()["pending"]] == [
                once["decision_id"]
            ]
            after = agent.post("/v1/sessions/s1/decide", json={"action": "p1"}).json()
            assert (after["verdict"], after["allowed"]) == ("escalate", False), "the used approval stays used"
    finally:
        restarted.stop()


STRICTER = (
    POLICY
    + """
@id("no-mail")
Deny(a) :- ToolCall(a, "send_email").
"""
)


def test_a_reload_gives_new_sessions_the_new_policy_and_keeps_the_old_ones(
    folder: Path, keys: dict[str, str]
) -> None:
    server = Server(folder)
    clean = event("c1", tool="read", deps=[])
    mail = event("m1", "tool_call", tool="send_email", deps=["c1"])

    def allowed(agent: httpx.Client, session: str) -> bool:
        agent.post(f"/v1/sessions/{session}/events", json={"events": [clean]})
        return bool(agent.post(f"/v1/sessions/{session}/authorize", json={"event": mail}).json()["allowed"])

    reload = [policyc_path(), "serve", "reload", "--db", str(folder / "monitor.db")]
    try:
        with client(server, keys["agent"]) as agent:
            first = agent.post("/v1/sessions", json={"session": "old"}).json()["policy"]
            (folder / "policy.dl").write_text(STRICTER, "utf-8")
            done = subprocess.run(reload, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert "new sessions run sha256:" in done.stdout and "1 existing session keep" in done.stdout
            second = agent.post("/v1/sessions", json={"session": "new"}).json()["policy"]
            assert first != second
            assert allowed(agent, "old") is True, "an existing session keeps the policy it was created with"
            assert allowed(agent, "new") is False, "a new session runs the reloaded policy"
            (folder / "policy.dl").write_text("Deny(a) :- Nowhere(a", "utf-8")
            broken = subprocess.run(reload, capture_output=True, text=True, timeout=60)
            assert broken.returncode == 1 and "not reloaded" in broken.stdout
            assert agent.post("/v1/sessions", json={"session": "third"}).json()["policy"] == second
    finally:
        server.stop()
    (folder / "policy.dl").write_text(STRICTER, "utf-8")
    again = Server(folder)
    try:
        with client(again, keys["agent"]) as agent:
            mail2 = event("m2", "tool_call", tool="send_email", deps=["c1"])
            assert agent.post("/v1/sessions/old/authorize", json={"event": mail2}).json()["allowed"] is True
            assert agent.post("/v1/sessions/new/authorize", json={"event": mail2}).json()["allowed"] is False
    finally:
        again.stop()
    stopped = subprocess.run(reload, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 2 and "no policyc serve runs on this database" in stopped.stderr


def test_the_audit_log_in_the_database_exports_and_verifies(folder: Path, keys: dict[str, str]) -> None:
    server = Server(folder)
    try:
        with client(server, keys["agent"]) as agent:
            for name in ("s1", "s2", "s3"):
                agent.post("/v1/sessions", json={"session": name})
                agent.post(
                    f"/v1/sessions/{name}/events",
                    json={"events": [event("r1", tool="fetch", labels=["untrusted"], deps=[])]},
                )
                agent.post(
                    f"/v1/sessions/{name}/authorize",
                    json={"event": event("a1", "tool_call", tool="send_email", deps=["r1"])},
                )
    finally:
        server.stop()
    log = folder / "audit.jsonl"
    command = policyc_path()
    exported = subprocess.run(
        [command, "audit", "export", str(folder / "monitor.db"), "-o", str(log)],
        capture_output=True,
        text=True,
    )
    assert exported.returncode == 0, exported.stderr
    verified = subprocess.run([command, "audit", "verify", str(log)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    records = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    decisions = [r for r in records if r["type"] == "decision"]
    assert sorted(r["session"] for r in decisions) == ["s1", "s2", "s3"]
    assert {r["verdict"] for r in decisions} == {"deny"} and decisions[0]["rules"] == ["untrusted-send"]
    assert len([r for r in records if r["type"] == "event"]) == 6, (
        "each result and candidate once: no replay logged"
    )
    shown = subprocess.run(
        [command, "audit", "show", str(log), "--verdict", "deny"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and shown.stdout.count("untrusted-send") == 3
    # a record changed in the database is found in the export
    import sqlite3

    db = sqlite3.connect(folder / "monitor.db")
    line = db.execute("SELECT line FROM audit WHERE seq = 3").fetchone()[0]
    db.execute("UPDATE audit SET line = ? WHERE seq = 3", (bytes(line).replace(b'"s', b'"S', 1),))
    db.commit()
    db.close()
    subprocess.run([command, "audit", "export", str(folder / "monitor.db"), "-o", str(log)], check=True)
    broken = subprocess.run([command, "audit", "verify", str(log)], capture_output=True, text=True)
    assert broken.returncode == 1 and ":5:" in broken.stderr and "[chain-broken]" in broken.stderr


def test_a_key_appended_to_a_running_service_s_file_works_after_a_reload(
    folder: Path, keys: dict[str, str]
) -> None:
    keygen = [policyc_path(), "serve", "keygen", "--append", str(folder / "keys.toml")]
    reload = [policyc_path(), "serve", "reload", "--db", str(folder / "monitor.db")]
    before = (folder / "keys.toml").read_text("utf-8")
    (folder / "keys.toml").chmod(0o640)
    refused = subprocess.run([*keygen, "--principal", "agent"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "`agent` already has a table (--force replaces it)" in refused.stderr
    assert (folder / "keys.toml").read_text("utf-8") == before, "a refused key leaves the file as it was"
    server = Server(folder)
    try:
        made = subprocess.run(
            [*keygen, "--principal", "carol", "--role", "agent"], capture_output=True, text=True, timeout=60
        )
        assert made.returncode == 0, made.stderr
        carol = made.stdout.strip()
        assert carol.startswith("pck_") and len(made.stdout.splitlines()) == 1, "only the key on stdout"
        assert (folder / "keys.toml").stat().st_mode & 0o777 == 0o640, "the file keeps its permissions"
        with client(server, carol) as agent:
            assert agent.post("/v1/sessions", json={"session": "c"}).status_code == 401, (
                "not before the reload"
            )
            done = subprocess.run(reload, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0 and "keys reloaded" in done.stdout, done.stdout + done.stderr
            assert agent.post("/v1/sessions", json={"session": "c"}).status_code == 201
            # a file that is not a keys file: the keys in force stay, and the reload says why
            (folder / "keys.toml").write_text("[principals.x]\nroles = 3\n", "utf-8")
            server.process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30
            seen = ""
            while "keys not reloaded" not in seen and time.monotonic() < deadline:
                seen += server.process.stdout.readline() if server.process.stdout else ""
            assert "keys not reloaded, the old ones still hold" in seen
            assert agent.post("/v1/sessions", json={"session": "c2"}).status_code == 201
        with client(server, keys["agent"]) as first:
            assert first.post("/v1/sessions", json={"session": "a"}).status_code == 201
    finally:
        server.stop()


def test_workers_is_the_deprecated_name_of_processes(folder: Path, keys: dict[str, str]) -> None:
    """`--workers N` starts N full service processes (its evaluator processes are gone), saying
    so; given with `--processes` it is refused before anything starts."""
    both = subprocess.run(
        serve_command(folder, "--workers", "2", "--processes", "2"), capture_output=True, text=True
    )
    assert both.returncode == 2 and "deprecated name of --processes" in both.stderr
    assert not (folder / "monitor.db").exists()
    process = subprocess.Popen(
        serve_command(folder, "--workers", "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        said = process.stderr.readline()
        listening = process.stdout.readline()
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "--workers is deprecated" in said and "--processes 1" in said
    assert listening.startswith("policyc serve: listening on http://127.0.0.1:")
