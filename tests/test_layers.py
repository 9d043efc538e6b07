"""The packages import one way (docs/architecture.md, "Layers"): the import-linter contract of
pyproject.toml holds for the installed package, imports inside functions included, and no
package imports the facade ``policyc`` (the top of the stack).

The contract is checked against a regular install (the ``installed`` fixture): the checkout maps
folders to packages (``package-dir``), which the import graph builder cannot follow."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from .conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(target: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contract, importing policyc from ``target``."""
    env = dict(os.environ, PYTHONPATH=str(target), NO_COLOR="1")
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_the_layers_contract_holds(installed: Path, tmp_path: Path) -> None:
    done = _lint(installed, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    assert f"{len(contracts)} kept, 0 broken" in done.stdout


def test_an_import_inside_a_function_against_the_layers_breaks_it(installed: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    shutil.copytree(installed / "policyc", target / "policyc")
    (target / "policyc" / "runtime" / "upward.py").write_text(
        "def budgets():\n    from policyc.risk import declarations\n\n    return declarations\n", "utf-8"
    )
    done = _lint(target, tmp_path)
    assert done.returncode == 1
    assert "policyc.runtime.upward -> policyc.risk.declarations (l.2)" in done.stdout


def test_an_import_inside_a_function_that_closes_a_cycle_in_the_runtime_breaks_it(
    installed: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    shutil.copytree(installed / "policyc", target / "policyc")
    functors = target / "policyc" / "runtime" / "functors.py"  # the evaluator imports it
    text = functors.read_text("utf-8")
    functors.write_text(
        text + "\n\ndef back():\n    from .evaluator import Evaluation\n\n    return Evaluation\n"
    )
    done = _lint(target, tmp_path)
    assert done.returncode == 1
    assert "No cycles are allowed in policyc.runtime" in done.stdout
    assert "1 broken" in done.stdout


def test_no_package_imports_the_facade(installed: Path, tmp_path: Path) -> None:
    script = (
        "import grimp\n"
        "graph = grimp.build_graph('policyc', cache_dir=None)\n"
        "for m in sorted(graph.find_modules_that_directly_import('policyc')):\n"
        "    for d in graph.get_import_details(importer=m, imported='policyc'):\n"
        "        print(f\"{m}:{d['line_number']}: {d['line_contents']}\")\n"
    )
    env = dict(os.environ, PYTHONPATH=str(installed))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_says_what_it_offers(name: str) -> None:
    package = importlib.import_module(name)
    offered = package.__all__
    assert isinstance(offered, list) and offered == sorted(set(offered), key=offered.index)
    for export in offered:
        value = getattr(package, export)
        if (
            isinstance(value, type | types.FunctionType) and name != "policyc"
        ):  # the facade offers the layers'
            defined = value.__module__
            assert defined == name or defined.startswith(name + "."), (export, defined)
        # a name that is also a submodule would be the module once that is imported
        assert importlib.util.find_spec(f"{name}.{export}") is None, export


def test_the_architecture_page_lists_what_each_package_offers() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    section = page.split("## What each package exports", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(policyc[a-z.0-9]*)` \| (.*) \|$", section, flags=re.M))
    assert set(rows) == set(PACKAGES) - {"policyc.compiler.checks"}
    for name, listed in rows.items():
        offered = importlib.import_module(name).__all__
        assert sorted(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", listed)) == sorted(offered), name
