"""`verdict-not-action` (PC312): a `Deny`, `Allow` or `Escalate` rule whose argument is never an
event id decides no call. The finding's witness is checked here by replaying it through a real
monitor, independently of the analyzer's own replay; rules whose argument can be an event id get
no finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policyc
from policyc.analyzer import deep_findings
from policyc.compiler.pipeline import compile_source
from policyc.runtime.facts import parse_fact

ADDRESS = """\
.import events
.decl Blocked(to: symbol)
.input Blocked
@id("blocked") @message("mail to {to} is blocked") Deny(to) :- ToolCall(a, "send_email"), to = tool_arg(a, "to"), Blocked(to).
"""
GUARDED = ADDRESS.replace("Deny(to)", "Deny(a)")


def _check(cli, tmp_path: Path, source: str) -> list[dict]:
    policy = tmp_path / "policy.dl"
    policy.write_text(source, "utf-8")
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert run.status == 0, run.stdout + run.stderr
    return json.loads(run.stdout)["diagnostics"]


def _replay(source: str, witness: dict) -> policyc.runtime.Decision:
    """The decision a fresh monitor makes on the witness's session."""
    session = policyc.Monitor(policyc.load_source(source)).session("replayed")
    facts: dict[str, list] = {}
    for text in witness["facts"]:
        name, row = parse_fact(text)
        facts.setdefault(name, []).append(list(row))
    if facts:
        session.add_facts(facts)
    *earlier, last = witness["events"]
    for event in earlier:
        session.record(event)
    assert last["id"] == witness["action"]
    return session.authorize(last)


def test_a_deny_of_an_address_is_found_with_a_session_a_monitor_allows(cli, tmp_path: Path) -> None:
    (found,) = _check(cli, tmp_path, ADDRESS)
    assert (found["code"], found["name"], found["line"]) == ("PC312", "verdict-not-action", 4)
    assert "denies `to`, which is never an action" in found["message"]
    assert '`to = tool_arg(a, "to")`' in found["message"]
    assert "Deny(a) :- ..." in found["help"]
    assert found["fix"]["edits"][0]["text"] == "a" and found["fix"]["safe"] is False
    witness = found["witness"]
    assert witness["verdict"] == "allow"
    decision = _replay(ADDRESS, witness)
    assert decision.allowed and not decision.errored
    # the rule fired there: it denied the address, which the call sends to
    (call,) = [e for e in witness["events"] if e["id"] == witness["action"]]
    (address,) = [parse_fact(f)[1][0] for f in witness["facts"] if f.startswith("Blocked(")]
    assert call["tool"] == "send_email" and call["args"]["to"] == address
    assert witness["derived"] == [f'Deny("{address}")']
    # the guarded rule denies that very call
    assert not _replay(GUARDED, witness).allowed


def test_the_guarded_rule_gets_no_finding(cli, tmp_path: Path) -> None:
    assert _check(cli, tmp_path, GUARDED) == []


def test_the_text_output_shows_the_witness(cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.dl"
    policy.write_text(ADDRESS, "utf-8")
    run = cli("check", "--deep", str(policy))
    assert "= witness: replayed through a monitor:" in run.stdout
    assert "decide  `" in run.stdout and "`: allow\n" in run.stdout


def _found(source: str) -> list[tuple[int, str]]:
    compiled = compile_source(source, "policy.dl")
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    return sorted((d.span.line, d.name) for d in deep_findings(compiled, timeout=20) if d.code == "PC312")


@pytest.mark.parametrize(
    "rule",
    [
        'Deny(t) :- ToolCall(a, t), t = "rm".',  # a tool's name
        'Deny(x) :- ToolCall(a, "pay"), x = text_of(a).',  # a text
        'Deny(l) :- Action(a), Label(a, l), l = "secret".',  # a label
        'Deny(r) :- Message(m, r), r = "user".',  # a role
        'Deny(v) :- ToolArg(a, "to", v), Label(a, "x").',  # an argument's value through `ToolArg`
        'Deny(n) :- ToolCall(a, "pay"), n = to_number(tool_arg(a, "amount")) + 1.',  # arithmetic
        'Deny(x) :- Candidate(a), x = "c1".',  # a constant
        'Deny(n) :- ToolCall(a, "pay"), n = count : { DependsOn(a, _) }.',  # an aggregate
        'Deny(v) :- Shown(v).\nShown(v) :- ToolArg(_, "to", v).',  # through a relation of its own
    ],
)
def test_verdicts_about_values_are_found(rule: str) -> None:
    assert _found(f".import events\n{rule}\n") == [(2, "verdict-not-action")]


@pytest.mark.parametrize(
    "rule",
    [
        'Deny(d) :- ToolCall(a, "send"), DependsOn(a, d).',  # an event it depends on
        'Deny(c) :- ToolResult(r, c, _), Label(r, "untrusted").',  # the call a result answers
        "Deny(x) :- Flagged(x).\n.decl Flagged(x: symbol)\n.input Flagged",  # a value given facts name
        'Deny(c) :- ToolCall(a, "cancel"), c = tool_arg(a, "call"), ToolCall(c, _).',  # an id, also an argument
        'Deny(a) :- Calls(a).\nCalls(a) :- ToolCall(a, "rm").\nCalls(t) :- ToolCall(_, t), t = "rm".',  # either
        "Deny(e) :- Reaches(a, e), Action(a).\nReaches(a, e) :- DependsOn(a, e).\nReaches(a, e) :- DependsOn(a, m), Reaches(m, e).",
    ],
)
def test_verdicts_about_what_can_be_an_event_are_not_found(rule: str) -> None:
    assert _found(f".import events\n{rule}\n") == []


def test_an_allow_of_a_value_under_default_deny_has_a_session_that_denies_the_call() -> None:
    source = '.import events\n.default deny\nAllow(t) :- ToolCall(a, t), t = "read".\n'
    compiled = compile_source(source, "policy.dl")
    (found,) = [d for d in deep_findings(compiled, timeout=20) if d.code == "PC312"]
    assert found.witness is not None and found.witness.verdict == "deny"
    assert found.witness.derived == ('Allow("read")',)
    assert not _replay(source, found.witness.to_json()).allowed
