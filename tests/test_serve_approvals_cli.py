"""`policyc serve approvals list|approve|refuse`: the whole approval loop from the command line
against a real `policyc serve` on 127.0.0.1 — an agent's call escalates, an approver lists it
(age, session, the call as people read it, rule, message), approves it, and the agent's call is
then allowed once; a refused call stays denied; an unknown id, a call already answered and an
agent's key are one line and status 1, a missing key status 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from .support.commands import policyc_path
from .support.service import Server, client, event, keys_file

POLICY = """
.import events
@id("pay-needs-a-person")
@message("paying needs a person")
Escalate(a) :- ToolCall(a, "pay").
"""


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    return keys_file(tmp_path, {"agent": ("agent",), "oncall": ("approver",)})


def approvals(server: Server, key: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("POLICYC_KEY", "POLICYC_URL")}
    environment["POLICYC_URL"] = server.url  # the URL from the environment, the key as an option
    command = [policyc_path(), "serve", "approvals", *args, *(["--key", key] if key else [])]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)


def test_the_approval_loop_from_the_command_line(tmp_path: Path, keys: dict[str, str]) -> None:
    server = Server(tmp_path)
    try:
        with client(server, keys["agent"]) as agent:
            decisions = {}
            for name, to in (("s1", "bob"), ("s2", "eve\u001b[2J")):
                agent.post("/v1/sessions", json={"session": name})
                pay = event("p1", "tool_call", tool="pay", args={"to": to}, deps=[])
                decisions[name] = agent.post(f"/v1/sessions/{name}/authorize", json={"event": pay}).json()
            assert all(d["verdict"] == "escalate" for d in decisions.values())

            listed = approvals(server, keys["oncall"], "list")
            assert listed.returncode == 0, listed.stderr
            lines = listed.stdout.splitlines()
            assert lines[0].split() == ["ID", "AGE", "SESSION", "CALL", "RULE", "MESSAGE"]
            assert len(lines) == 3 and "pay(to=`bob`)" in lines[1] and "agent/s1" in lines[1]
            assert "pay-needs-a-person" in lines[1] and "paying needs a person" in lines[1]
            assert "\\u001b" in lines[2] and "\u001b" not in listed.stdout, "control characters made visible"
            as_json = json.loads(approvals(server, keys["oncall"], "list", "--format", "json").stdout)
            assert [p["approval_id"] for p in as_json["pending"]] == [
                d["decision_id"] for d in decisions.values()
            ]
            assert all(isinstance(p["asked"], float) for p in as_json["pending"])

            watching = subprocess.Popen(
                [
                    policyc_path(),
                    "serve",
                    "approvals",
                    "list",
                    "--watch",
                    "--interval",
                    "0.2",
                    "--url",
                    server.url,
                    "--key",
                    keys["oncall"],
                ],
                stdout=subprocess.PIPE,
                text=True,
                # as at a terminal: a shell's background job (CI) would start it with Ctrl-C ignored
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            assert watching.stdout is not None
            seen = [watching.stdout.readline() for _ in range(8)]  # drawn, then drawn again
            watching.send_signal(signal.SIGINT)
            assert watching.wait(timeout=30) == 0, "Ctrl-C ends the watch quietly"
            assert sum("2 waiting at" in line for line in seen) >= 2
            first, second = decisions["s1"]["decision_id"], decisions["s2"]["decision_id"]
            approved = approvals(server, keys["oncall"], "approve", first)
            assert approved.returncode == 0 and approved.stdout.strip() == f"{first}: approved (once)"
            refused = approvals(server, keys["oncall"], "refuse", second)
            assert refused.returncode == 0 and refused.stdout.strip() == f"{second}: refused"
            assert agent.post("/v1/sessions/s1/decide", json={"action": "p1"}).json()["allowed"] is True
            assert agent.post("/v1/sessions/s2/decide", json={"action": "p1"}).json()["allowed"] is False
            after = approvals(server, keys["oncall"], "list").stdout
            assert first not in after and second not in after, "an answered call is no longer listed"

            again = approvals(server, keys["oncall"], "approve", first)
            unknown = approvals(server, keys["oncall"], "refuse", "d-nothing")
            not_an_approver = approvals(server, keys["agent"], "list")
            no_key = approvals(server, None, "list")
    finally:
        server.stop()
    for failed, said in (
        (again, "409"),
        (unknown, "404"),
        (not_an_approver, "403 (not-an-approver"),
    ):
        assert failed.returncode == 1 and said in failed.stderr, failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1 and "Traceback" not in failed.stderr
    assert no_key.returncode == 2 and "no key" in no_key.stderr
