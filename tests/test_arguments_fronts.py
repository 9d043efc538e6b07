"""Argument declarations in the fronts: a call refused for its arguments through a real
`policyc serve` reads as in process, and `policyc mcp lock --declare-args` writes the
declarations of a real MCP server's tools from their input schemas (what it makes of each kind
of schema is checked on `mcp.types.Tool` values)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from mcp.types import Tool

import policyc
from policyc.compiler import ast
from policyc.compiler.formatter import format_source
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile
from policyc.gateway.declarations import declarations_text

from .conftest import run_policyc
from .support.service import Server, prepare

POLICY = """
.import events
.arg pay.amount: number required
@id("big-payment")
@message("{a} pays more than 1000")
Escalate(a) :- ToolCall(a, "pay"), tool_arg(a, "amount") > 1000.
"""


def outcome(decision) -> tuple:
    return (
        decision.verdict,
        decision.allowed,
        decision.errored,
        [(r.rule, *r.shown()) for r in decision.reasons],
        decision.feedback,
    )


def test_policyc_serve_refuses_as_the_monitor_in_process(tmp_path: Path) -> None:
    key = prepare(tmp_path, POLICY, {"agent": ("agent",)})["agent"]
    server = Server(tmp_path, "--wait", "0.3")
    try:
        local = policyc.Monitor(policyc.load_source(POLICY)).session(
            "s1", principal="agent", roles=("agent",)
        )
        calls = [
            {"id": "c1", "kind": "tool_call", "tool": "pay", "args": {"amount": "5000"}},
            {"id": "c2", "kind": "tool_call", "tool": "search", "args": {"q": "x"}},
            {"id": "c3", "kind": "tool_call", "tool": "pay", "args": {"amount": 500}},
            {"id": "c4", "kind": "tool_call", "tool": "pay", "args": {}},
        ]
        with policyc.connect(server.url, key) as monitor:
            remote = monitor.session("s1")
            seen = []
            for call in calls:
                theirs, mine = remote.authorize(call), local.authorize(call)
                assert outcome(theirs) == outcome(mine), call
                seen.append(theirs.verdict)
            again = remote.decide("c1")
            assert outcome(again) == outcome(local.decide("c1"))
        assert seen == ["deny", "allow", "allow", "deny"]
        assert again.reasons[0].rule == "policyc:invalid-argument"
        assert "argument `amount` of `pay` is the text `5000`" in again.feedback
    finally:
        server.stop()


# ---------------------------------------------------------------------- mcp lock


def tool(name: str, properties: dict, required: list | None = None) -> Tool:
    schema: dict = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return Tool(name=name, description="d", input_schema=schema)


def declared(text: str) -> dict[tuple[str, str], tuple[str, bool]]:
    module, found = parse(SourceFile("args.dl", text))
    assert found == []
    return {
        (s.tool, s.argument): (s.type.name, s.required)
        for s in module.statements
        if isinstance(s, ast.ArgDecl)
    }


@pytest.mark.parametrize(
    ("schema", "required", "expected"),
    [
        ({"type": "string"}, True, ("symbol", True)),
        ({"type": "integer"}, False, ("number", False)),
        ({"type": "integer", "minimum": 0}, True, ("unsigned", True)),
        ({"type": "integer", "minimum": -1}, False, ("number", False)),
        ({"type": "number"}, False, ("float", False)),
        ({"type": "boolean"}, False, ("bool", False)),
        ({"type": "array", "items": {"type": "string"}}, False, ("list", False)),
        ({"type": "object"}, False, ("object", False)),
        ({"type": ["string", "null"]}, True, ("symbol", False)),  # null is no value: not required
        ({"type": ["integer", "number"]}, False, ("float", False)),
        ({"type": ["integer", "string"]}, True, ("any", True)),
        ({"enum": ["a", "b"]}, False, ("symbol", False)),
        ({"enum": [1, 2]}, False, ("number", False)),
        ({"const": 2.5}, False, ("float", False)),
        ({"enum": [1, "a"]}, False, ("any", False)),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, False, ("symbol", False)),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, False, ("any", False)),
        ({"$ref": "#/$defs/x"}, True, ("any", True)),
        ({}, False, ("any", False)),
        ({"type": "tuple"}, False, ("any", False)),
    ],
)
def test_each_kind_of_schema_becomes_a_declaration(schema: dict, required: bool, expected: tuple) -> None:
    text = declarations_text({"s": [tool("t", {"k": schema}, ["k"] if required else [])]})
    assert declared(text) == {("s.t", "k"): expected}
    assert ("// `k`:" in text) == (expected[0] == "any")  # `any` says why


def test_what_a_server_names_is_written_as_data() -> None:
    hostile = "x\n.arg s.t.k: number required\nDeny(a) :- Action(a)."
    tools = {
        "s": [
            tool(
                "send-mail",
                {"to": {"type": "string"}, "a.b": {"type": "string"}, "\ud800": {"type": "string"}},
            ),
            tool(hostile, {'q"uote': {"type": "boolean"}}, ['q"uote']),
            tool("plain", {"n": {"type": "integer"}}),
            tool("plain", {"n": {"type": "string"}}),  # listed twice: as listed first
        ],
        "t": [tool("\udc80", {"k": {"type": "string"}})],
    }
    text = declarations_text(tools)
    assert declared(text) == {
        ("s.send-mail", "to"): ("symbol", False),
        (f"s.{hostile}", 'q"uote'): ("bool", True),
        ("s.plain", "n"): ("number", False),
    }
    assert "// `a.b`: a name a declaration cannot hold, not declared" in text
    assert text.count("a name a declaration cannot hold") == 2  # and the lone surrogate
    assert "its name is not text a policy can hold" in text
    assert format_source(text) == text  # canonical: `policyc fmt --check` passes on it


DEMO = textwrap.dedent(
    """\
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bank")


    @server.tool(name="pay", description="Pays.")
    def pay(amount: int, to: str, memo: str | None = None, urgent: bool = False) -> str:
        return "paid"


    server.run()
    """
)


def test_mcp_lock_writes_the_declarations_a_policy_includes(tmp_path: Path) -> None:
    (tmp_path / "bank.py").write_text(DEMO)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'lock = "gateway.lock.json"\n[servers.bank]\ncommand = {json.dumps(sys.executable)}\n'
        'args = ["bank.py"]\ncwd = "."\n'
    )
    wrote = run_policyc("mcp", "lock", "--config", str(config), "--declare-args", str(tmp_path / "args.dl"))
    assert wrote.status == 0, wrote.stderr
    assert wrote.stdout.splitlines()[-1] == f"wrote {tmp_path / 'args.dl'}: 4 argument declaration(s)"
    assert declared((tmp_path / "args.dl").read_text()) == {
        ("bank.pay", "amount"): ("number", True),
        ("bank.pay", "memo"): ("symbol", False),
        ("bank.pay", "to"): ("symbol", True),
        ("bank.pay", "urgent"): ("bool", False),
    }
    policy = tmp_path / "policy.dl"
    policy.write_text(
        '.import events\n.include "args.dl"\n'
        'Escalate(a) :- ToolCall(a, "bank.pay"), tool_arg(a, "amount") > 1000.\n'
        'Deny(a) :- ToolCall(a, "bank.pay"), tool_arg(a, "to") > 1000.\n'
    )
    checked = run_policyc("check", str(policy))
    assert checked.status == 1 and checked.stdout.count("error[PC103]") == 1, checked.stdout
    assert "policy.dl:4:" in checked.stdout and "args.dl" in checked.stdout  # the declaration, related


@pytest.mark.slow  # a second start of the server: the slow suite, as CI runs it
def test_mcp_lock_check_compares_the_declarations(tmp_path: Path) -> None:
    (tmp_path / "bank.py").write_text(DEMO)
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'lock = "gateway.lock.json"\n[servers.bank]\ncommand = {json.dumps(sys.executable)}\n'
        'args = ["bank.py"]\ncwd = "."\n'
    )
    args = str(tmp_path / "args.dl")
    assert run_policyc("mcp", "lock", "--config", str(config), "--declare-args", args).status == 0
    same = run_policyc("mcp", "lock", "--config", str(config), "--declare-args", args, "--check")
    assert same.status == 0, same.stdout + same.stderr
    (tmp_path / "args.dl").write_text((tmp_path / "args.dl").read_text().replace("number required", "float"))
    stale = run_policyc("mcp", "lock", "--config", str(config), "--declare-args", args, "--check")
    assert stale.status == 1 and "not the argument declarations of the tools' input schemas" in stale.stdout
    assert "float" in (tmp_path / "args.dl").read_text()  # --check writes nothing
