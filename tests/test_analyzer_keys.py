"""What `check --deep` knows from the keys (`.key`): a rule that needs two values of a key's
relation for one key never fires (`unsatisfiable-rule`, not `redundant-rule`), the tools it names
are still reported, the proofs and searches read the declarations (a policy's own keys too) and
use none a rule could break."""

from __future__ import annotations

import json
from pathlib import Path

import policyc
from policyc.analyzer import deep_findings
from policyc.compiler.pipeline import compile_source

TWO_TOOLS = """\
.import events
Deny(a) :- ToolCall(a, "rm").
Deny(a) :- ToolCall(a, "send_email"), ToolCall(a, "upload").
"""


def _findings(cli, tmp_path: Path, source: str) -> list[tuple[int, str, str]]:
    """The deep findings (PC3xx) of ``source``."""
    policy = tmp_path / "policy.dl"
    policy.write_text(source, "utf-8")
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert run.status == 0, run.stdout + run.stderr
    found = json.loads(run.stdout)["diagnostics"]
    return sorted((d["line"], d["name"], d["message"]) for d in found if d["code"].startswith("PC3"))


def test_a_rule_naming_two_tools_for_one_call_never_fires(cli, tmp_path: Path) -> None:
    found = _findings(cli, tmp_path, TWO_TOOLS)
    assert [(line, name) for line, name, _ in found] == [
        (3, "always-allow"),
        (3, "always-allow"),
        (3, "unsatisfiable-rule"),
    ]
    message = found[2][2]
    assert "`.key ToolCall(a)` (events.dl)" in message and "two values of `tool` for one `a`" in message
    assert {m.split("`")[1] for _, name, m in found if name == "always-allow"} == {"send_email", "upload"}


def test_the_rule_that_never_fires_has_a_call_it_was_meant_to_stop_replayed(cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.dl"
    policy.write_text(TWO_TOOLS, "utf-8")
    run = cli("check", "--deep", "--format", "json", str(policy))
    (found,) = [d for d in json.loads(run.stdout)["diagnostics"] if d["name"] == "unsatisfiable-rule"]
    witness = found["witness"]
    (event,) = witness["events"]
    assert witness["verdict"] == "allow" and event["tool"] in {"send_email", "upload"}
    session = policyc.Monitor(policyc.load(str(policy))).session("s")
    assert session.authorize(event).allowed  # a monitor of its own allows it
    # the rule as two rules, one per tool, stops that very call
    meant = policyc.load(source=TWO_TOOLS.replace('"), ToolCall(a, "', '").\nDeny(a) :- ToolCall(a, "'))
    assert not policyc.Monitor(meant).session("s").authorize(event).allowed


def test_one_rule_per_tool_is_what_it_meant_and_gets_no_finding(cli, tmp_path: Path) -> None:
    source = '.import events\nDeny(a) :- ToolCall(a, "send_email").\nDeny(a) :- ToolCall(a, "upload").\n'
    assert _findings(cli, tmp_path, source) == []


def _names(source: str) -> list[tuple[int, str]]:
    compiled = compile_source(source, "policy.dl")
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    return sorted((d.span.line, d.name) for d in deep_findings(compiled, timeout=20))


def test_the_keys_are_read_from_the_declarations() -> None:
    own = (
        ".decl Called(call: symbol, tool: symbol)\n.input Called\n{key}"
        'Deny(a) :- Called(a, "x"), Called(a, y), y != "x".\n'
    )
    assert _names(own.format(key=".key Called(call)\n")) == [(4, "unsatisfiable-rule")]
    assert _names(own.format(key="")) == []
    # through comparisons and `_`: the rest of two facts with one key is equal
    assert (6, "unsatisfiable-rule") in _names(
        ".decl Seat(flight: symbol, row: number, who: symbol)\n.input Seat\n.key Seat(flight, row)\n"
        ".decl Ask(a: symbol)\n.input Ask\n"
        "Deny(a) :- Ask(a), Seat(f, r, a), Seat(g, s, b), f = g, r = s, a != b.\n"
    )
    assert _names(
        ".import events\n.decl Pick(a: symbol)\n.input Pick\n"
        "Deny(a) :- Pick(a), Candidate(a), Candidate(b), a != b.\n"
    ) == [(4, "unsatisfiable-rule")]


def test_a_key_of_a_relation_rules_derive_into_is_not_relied_on() -> None:
    # a rule derives more `Message` facts: an event may have a role and be flagged
    assert (
        _names(
            '.import events\nMessage(e, "flagged") :- ToolResult(e, _, _).\n'
            'Deny(a) :- Action(a), DependsOn(a, m), Message(m, "user"), Message(m, "flagged").\n'
        )
        == []
    )
    assert _names(
        '.import events\nDeny(a) :- Action(a), DependsOn(a, m), Message(m, "user"), Message(m, "flagged").\n'
    ) == [(2, "unsatisfiable-rule")]


def test_a_relation_of_tools_keyed_by_its_call_names_one_tool_per_call() -> None:
    own = (
        ".decl Tool(a: symbol, t: symbol)\n.input Tool\n{key}"
        'Risky(a) :- Tool(a, "read").\nDeny(a) :- Tool(a, "rm"), Risky(a).\n'
    )
    assert (5, "always-allow") in _names(own.format(key=".key Tool(a)\n"))
    assert (5, "always-allow") not in _names(own.format(key=""))


def test_a_witness_keeps_the_keys(cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.dl"
    policy.write_text(
        ".decl Called(call: symbol, tool: symbol)\n.input Called\n.key Called(call)\n"
        "Uses(a, t) :- Called(a, t).\nTwo(a) :- Uses(a, t), Uses(a, u), t < u.\n"
        'Deny(a) :- Called(a, "rm").\n',
        "utf-8",
    )
    run = cli("witness", "--format", "json", str(policy), "Two(a)")  # the search's own constraints
    assert (json.loads(run.stdout)["status"], json.loads(run.stdout)["strength"]) == ("none", "bounded"), (
        run.stdout
    )
    run = cli("witness", "--format", "json", str(policy), 'Called(a, "rm"), Called(b, "ls")')
    found = json.loads(run.stdout)
    assert found["status"] == "found" and len({row[0] for row in found["facts"]["Called"]}) == 2
