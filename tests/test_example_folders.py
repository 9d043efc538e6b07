"""The example folders: every example's tests pass with every `Deny` rule exercised, and the
scenario each README shows replays with the output it shows."""

from __future__ import annotations

import re
import shlex

import pytest

from .conftest import EXAMPLES, ROOT

FOLDERS = sorted(p.parent for p in EXAMPLES.glob("*/*_test.toml"))
READMES = sorted(EXAMPLES.glob("*/README.md"))


def replays(readme) -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", readme.read_text("utf-8"), flags=re.S)
    return [b for b in blocks if b.startswith("$ policyc replay ")]


def test_every_example_is_tested_with_every_deny_rule_exercised(policyc) -> None:
    assert len(FOLDERS) >= 8
    run = policyc("test", "--coverage", "--format", "json", str(EXAMPLES))
    result = run.json()
    failed = [
        (f["file"], c["name"], c["failures"]) for f in result["files"] for c in f["cases"] if not c["passed"]
    ]
    errors = [(f["file"], f["error"]) for f in result["files"] if f["error"]]
    assert run.status == 0 and not failed and not errors, (failed, errors)
    assert result["coverage"]["unexercised_deny_rules"] == []


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_each_example_folder_has_its_parts(folder) -> None:
    """A README that replays recorded sessions of the folder (`scenario.jsonl` for a case study,
    `trace.jsonl` for the quickstart files)."""
    readme = folder / "README.md"
    assert readme.exists(), f"{folder} has no README.md"
    commands = [shlex.split(block.split("\n", 1)[0]) for block in replays(readme)]
    traces = [ROOT / word for command in commands for word in command[3:] if word.endswith(".jsonl")]
    assert any(trace.parent == folder and trace.is_file() for trace in traces), (
        f"{readme} shows no `policyc replay` of sessions recorded in its folder"
    )


@pytest.mark.parametrize("readme", [r for r in READMES if replays(r)], ids=lambda p: p.parent.name)
def test_readme_scenarios_replay_as_shown(policyc, readme) -> None:
    for block in replays(readme):
        command, shown = block.split("\n", 1)
        run = policyc(*shlex.split(command)[2:])
        assert run.status == 0, run.stderr
        assert run.stdout.rstrip("\n") == shown.rstrip("\n")
