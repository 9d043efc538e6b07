"""Rules an agent can slip past (`check --deep`: `missing-argument`, `untyped-argument-comparison`,
`lenient-conversion`), through the installed command. Each finding's witness is checked here
against a monitor of the policy opened independently: it decides the witness's call as the
finding says, and the call the rule stops is really stopped. The planted and clean corpora of
tests/deep hold the other cases, the guarded versions among them (tests/test_analyzer.py)."""

from __future__ import annotations

import json
from pathlib import Path

import policyc

ISSUE = """.import events
Deny(a) :- ToolCall(a, "send_email"), to = tool_arg(a, "to"), !contains("@corp.example", to).
Deny(a) :- ToolCall(a, "pay"), n = leading_number(tool_arg(a, "amount")), n > 1000.
Deny(a) :- ToolCall(a, "wire"), ToolArg(a, "amount", v), v > "2000".
Deny(a) :- ToolCall(a, "delete"), tool_arg(a, "force") = "true".
"""
SLIPS = {"missing-argument", "untyped-argument-comparison", "lenient-conversion"}


def deep(cli, path: Path, fmt: str = "json") -> dict:
    """What `check --deep` reports, less the warnings that the policy's rules have no `@id`
    and `@message` (the policy is the issue's, as it was written)."""
    run = cli("check", "--deep", "--format", fmt, str(path))
    assert run.status == 0, run.stdout + run.stderr
    found = json.loads(run.stdout)
    if fmt == "json":
        found["diagnostics"] = [d for d in found["diagnostics"] if d["name"] != "missing-verdict-annotation"]
    else:
        found["runs"][0]["results"] = [r for r in found["runs"][0]["results"] if r["ruleId"] != "PC211"]
    return found


def decide(policy, event: dict):
    return policyc.Monitor(policy).session("s").authorize(event)


def test_each_slip_has_a_witness_the_monitor_decides_so(cli, tmp_path: Path) -> None:
    path = tmp_path / "p.dl"
    path.write_text(ISSUE, "utf-8")
    found = deep(cli, path)["diagnostics"]
    assert sorted((d["line"], d["name"]) for d in found) == [
        (2, "missing-argument"),
        (3, "lenient-conversion"),
        (3, "missing-argument"),
        (4, "missing-argument"),
        (4, "untyped-argument-comparison"),
    ]  # not line 5: a positive test rightly lets a call without `force` through
    policy = policyc.load(str(path))
    for d in found:
        assert d["strength"] == "witnessed" and d["fix"] is not None and not d["fix"]["safe"]
        witness = d["witness"]
        (event,) = witness["events"]
        assert decide(policy, event).allowed == (witness["verdict"] == "allow") is True
    by = {(d["line"], d["name"]): d["witness"]["events"][-1] for d in found}
    assert by[2, "missing-argument"]["args"] == {}
    stopped = dict(by[2, "missing-argument"], args={"to": "x@evil.example"})
    assert not decide(policy, stopped).allowed  # the rule stops the call that gives `to`
    lenient = by[3, "lenient-conversion"]
    assert lenient["args"] == {"amount": "1e9"}
    assert not decide(policy, dict(lenient, args={"amount": 1000000000})).allowed
    textual = by[4, "untyped-argument-comparison"]
    assert textual["args"]["amount"] > 2000  # a larger amount, allowed: as texts it is smaller


def test_json_and_sarif_carry_the_codes_and_witnesses(cli, tmp_path: Path) -> None:
    path = tmp_path / "p.dl"
    path.write_text(ISSUE, "utf-8")
    sarif = deep(cli, path, "sarif")
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"PC309", "PC310", "PC311"}
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert {rules[r["ruleIndex"]]["name"] for r in results} == SLIPS
    for r in results:
        witness = r["properties"]["witness"]
        assert witness["verdict"] == "allow" or r["ruleId"] == "PC310"
        assert witness["events"][-1]["kind"] == "tool_call" and r["fixes"]


def apply(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines) + 1)]

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    for e in sorted(edits, key=lambda e: (e["line"], e["column"]), reverse=True):
        start, end = offset(e["line"], e["column"]), offset(e["end_line"], e["end_column"])
        text = text[:start] + e["text"] + text[end:]
        lines = text.splitlines(keepends=True)
        starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines) + 1)]
    return text


def test_the_fixes_close_each_hole(cli, tmp_path: Path) -> None:
    for number, rule in enumerate(ISSUE.splitlines()[1:4], 1):
        path = tmp_path / f"p{number}.dl"
        path.write_text(f".import events\n{rule}\n", "utf-8")
        for _ in range(3):  # a fix may leave another finding (a declared type, then a comparison)
            found = [d for d in deep(cli, path)["diagnostics"] if d["name"] in SLIPS]
            if not found:
                break
            path.write_text(apply(path.read_text("utf-8"), found[0]["fix"]["edits"]), "utf-8")
        assert not found, (rule, path.read_text("utf-8"), found)
