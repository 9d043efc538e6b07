"""The documentation says what the code does: every code documented with an example that
triggers it, every language example parses, the README's Quickstart has exactly two commands."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from policyc.compiler.codes import CATALOG
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_source
from policyc.compiler.source import SourceFile

from .conftest import ROOT

DIAGNOSTICS = (ROOT / "docs" / "diagnostics.md").read_text("utf-8")
LANGUAGE = (ROOT / "docs" / "language.md").read_text("utf-8")
README = (ROOT / "README.md").read_text("utf-8")


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("code", CATALOG, ids=lambda c: c.name)
def test_every_code_is_documented(code) -> None:
    section = sections(DIAGNOSTICS).get(f"{code.code} {code.name}")
    assert section is not None, f"docs/diagnostics.md has no section `## {code.code} {code.name}`"
    for part in ("**What it does.**", "**Why.**", "**Example.**", "**Fix.**"):
        assert part in section, (code.name, part)
    examples = blocks(section, "datalog")
    if code.name == "invalid-encoding":
        assert blocks(section, "text")
        return
    assert len(examples) == 1, code.name
    compilation = compile_source(examples[0], "example.dl")
    found = {d.name for d in compilation.diagnostics}
    if code.code.startswith("PC3"):  # deep findings
        from policyc.analyzer.deep import deep_findings

        found |= {d.name for d in deep_findings(compilation)}
    assert code.name in found, (code.name, found)


def test_no_section_documents_an_unknown_code() -> None:
    known = {f"{c.code} {c.name}" for c in CATALOG}
    assert set(sections(DIAGNOSTICS)) <= known


def test_language_examples_parse() -> None:
    examples = blocks(LANGUAGE, "datalog")
    assert len(examples) >= 15
    for example in examples:
        _, diagnostics = parse(SourceFile("example.dl", example))
        assert diagnostics == [], (example, [d.message for d in diagnostics])


def test_quickstart_has_two_commands() -> None:
    quickstart = sections(README)["Quickstart"]
    (commands,) = blocks(quickstart, "sh")
    lines = [line for line in commands.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "policyc check examples/" in lines[0] and "pytest" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert lines[1] in ci, "`.ci/run` runs the README's test command"


def test_readme_guard_example_runs_as_shown(tmp_path) -> None:
    """The README's "Guard an agent" example runs and prints the feedback the README shows."""
    section = sections(README)["Guard an agent"]
    fences = re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.S | re.M)
    (code,) = [body for language, body in fences if language == "python"]
    (shown,) = [body for language, body in fences if language == ""]
    script = tmp_path / "guard.py"
    script.write_text(code, "utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown.strip()


def test_monitor_docs_python_examples_compile() -> None:
    for name in ("monitor.md", "events.md"):
        for example in blocks((ROOT / "docs" / name).read_text("utf-8"), "python"):
            compile(example, name, "exec")
    for example in blocks((ROOT / "docs" / "events.md").read_text("utf-8"), "datalog"):
        assert compile_source(example, "events.dl").ok, example


ANALYZER = (ROOT / "docs" / "analyzer.md").read_text("utf-8")


@pytest.mark.parametrize("block", blocks(ANALYZER, "console"), ids=lambda b: b.split("\n", 1)[0][2:60])
def test_analyzer_docs_commands_print_what_is_shown(policyc, block: str) -> None:
    command, shown = block.split("\n", 1)
    assert command.startswith("$ policyc ")
    run = policyc(*shlex.split(command)[2:])
    assert run.status == 0, run.stderr
    assert run.stdout.rstrip("\n") == shown.rstrip("\n")


def test_analyzer_docs_list_every_deep_finding() -> None:
    deep = {c.name for c in CATALOG if c.code.startswith("PC3")}
    assert deep == set(re.findall(r"^\| PC3\d\d \| `([a-z-]+)` \|", ANALYZER, flags=re.M))
