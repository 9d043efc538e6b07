"""Starting the gateway from its settings (gateway/launch.py): what cannot start says why,
before any server is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyc.gateway.config import ConfigError
from policyc.gateway.launch import Settings, StartError, build
from policyc.runtime.errors import PolicyError
from policyc.runtime.session import Monitor

POLICY = """.import events
.default deny
Allow(a) :- ToolCall(a, "files.delete"), Label(a, "reviewed").
Deny(a) :- ToolCall(a, "files.delete"), not Label(a, "approved").
Deny(a) :- ToolCall(a, "files.delete"), Label(a, "approved").
"""


@pytest.fixture
def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.dl"
    path.write_text(POLICY)
    return str(path)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"name": "files", "config": "gateway.toml"}, "one of them"),
        ({"config": "gateway.toml", "command": ("x",)}, "a command goes with --name"),
        (
            {"name": "files", "labels": ("a",), "monitor": "http://127.0.0.1:1"},
            "--monitor and --key go together",
        ),
        ({"name": "files", "monitor": "http://x", "key": "k", "audit": "a.log"}, "keeps its own audit log"),
        ({"name": "files", "listen": "8765"}, "expected HOST:PORT"),
        ({"name": "files", "command": ("true",), "functors": "no_such_module_here"}, "cannot load functors"),
    ],
)
def test_settings_that_cannot_start_say_why(policy: str, settings: dict, says: str) -> None:
    with pytest.raises(StartError, match=says):
        build(Settings(policy, **settings))


def test_a_configuration_that_cannot_be_read_is_a_config_error(policy: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        build(Settings(policy, config=str(tmp_path / "missing.toml")))


def test_a_policy_with_errors_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "bad.dl"
    bad.write_text("Deny(a) :- Nowhere(a).\n")
    with pytest.raises(PolicyError) as raised:
        build(Settings(str(bad), name="files", command=("true",), analysis_timeout=0))
    assert raised.value.diagnostics


def test_built_gateway_decides_in_process_and_hides_the_always_denied_tool(
    policy: str, tmp_path: Path
) -> None:
    log = tmp_path / "audit.log"
    prepared = build(
        Settings(policy, name="files", command=("true",), audit=str(log), listen="127.0.0.1:0", no_auth=True)
    )
    try:
        assert isinstance(prepared.monitor, Monitor)
        assert prepared.address == ("127.0.0.1", 0)
        assert set(prepared.hidden) == {"files.delete"}
        assert [s.name for s in prepared.config.servers] == ["files"]
    finally:
        assert prepared.closing is not None
        prepared.closing()
    assert log.exists()


def test_a_tool_one_unconditional_rule_denies_is_hidden_and_check_deep_stays_quiet(tmp_path: Path) -> None:
    from policyc.analyzer.deep import deep_findings
    from policyc.compiler import compile_source

    text = '.import events\n.default allow\nDeny(a) :- ToolCall(a, "files.delete").\n'
    path = tmp_path / "p.dl"
    path.write_text(text)
    prepared = build(Settings(str(path), name="files", command=("true",)))
    assert set(prepared.hidden) == {"files.delete"} and "PC305" in prepared.hidden["files.delete"]
    # the finding carries the tool as its subject; `check --deep` does not warn of a deliberate rule
    found = deep_findings(compile_source(text), deliberate=True)
    assert [(d.code, d.strength, d.tool) for d in found] == [("PC305", "proved", "files.delete")]
    assert [d for d in deep_findings(compile_source(text)) if d.code == "PC305"] == []
