"""The standard library modules: each documented, each tested by a policy that imports it
(`tests/stdlib/*_test.toml`, run by the installed `policyc test`), every Deny rule of those
policies exercised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import ROOT

MODULES = sorted(p.stem for p in (ROOT / "stdlib").glob("*.dl") if p.stem != "builtins")
STDLIB_DOC = (ROOT / "docs" / "stdlib.md").read_text("utf-8")


def test_the_module_tests_pass_and_exercise_every_deny_rule(policyc) -> None:
    run = policyc("test", "--coverage", "--format", "json", str(ROOT / "tests" / "stdlib"))
    assert run.status == 0, run.stdout
    result = run.json()
    assert result["summary"]["failed"] == 0 and result["summary"]["errors"] == 0
    assert result["coverage"]["unexercised_deny_rules"] == []
    assert all(rule["fired"] for rule in result["coverage"]["rules"])


@pytest.mark.parametrize("module", MODULES)
def test_every_module_is_documented_and_tested(module: str) -> None:
    assert re.search(rf"^## `{module}`", STDLIB_DOC, flags=re.M), (
        f"docs/stdlib.md has no section for `{module}`"
    )
    declared = re.findall(r"^\.decl (\w+)", (ROOT / "stdlib" / f"{module}.dl").read_text("utf-8"), flags=re.M)
    section = STDLIB_DOC.split(f"## `{module}`", 1)[1].split("\n## ", 1)[0]
    undocumented = [name for name in declared if f"`{name}" not in section]
    assert not undocumented, f"docs/stdlib.md does not describe {undocumented} of `{module}`"
    if module != "events":
        users = [p for p in (ROOT / "tests" / "stdlib").glob("*.dl") if f".import {module}" in p.read_text()]
        assert users, f"no policy in tests/stdlib imports `{module}`"


def test_documented_examples_check_clean(policyc, tmp_path: Path) -> None:
    examples = re.findall(r"```datalog\n(.*?)```", STDLIB_DOC, flags=re.S)
    assert len(examples) >= len(MODULES) - 1
    for n, example in enumerate(examples):
        path = tmp_path / f"example{n}.dl"
        path.write_text(example)
        run = policyc("check", "--fail-on", "warning", str(path))
        assert run.status == 0, (example, run.stdout)


def test_every_library_file_checks_without_errors(policyc) -> None:
    """Checking the library itself, the prelude included, finds no errors: the prelude is
    not loaded a second time on top of itself."""
    run = policyc("check", str(ROOT / "stdlib"))
    assert run.status == 0, run.stdout
    assert "error[" not in run.stdout
