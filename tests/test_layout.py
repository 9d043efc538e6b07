"""Installed without `-e`, policyc is the installed package even where the checkout is the
current folder: no folder at the root of the repository is named `policyc`, so a script run from
there does not import a part of the package instead of the whole (README "Layout")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT


def _run(installed: Path, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in the root of the checkout, with the installed package on the path."""
    env = dict(os.environ, PYTHONPATH=str(installed), NO_COLOR="1", COLUMNS="200")
    env.pop("POLICYC_DEBUG", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_no_root_folder_is_named_like_the_package() -> None:
    assert not (ROOT / "policyc").exists()


def test_the_readme_example_runs_from_the_root_against_the_install(installed: Path) -> None:
    section = re.split(r"^## ", (ROOT / "README.md").read_text("utf-8"), flags=re.M)
    (evaluate,) = [part for part in section if part.startswith("Compile, evaluate, explain\n")]
    (example,) = re.findall(r"```python\n(.*?)```", evaluate, flags=re.S)
    done = _run(
        installed,
        "-c",
        example + "import policyc.compiler, policyc.cli\n"
        "print(policyc.__file__, policyc.compiler.__file__, policyc.cli.__file__)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False ["), done.stdout  # the README's action is denied
    for module in done.stdout.splitlines()[-1].split():
        assert Path(module).is_relative_to(installed), module


def test_the_command_runs_from_the_root_against_the_install(installed: Path) -> None:
    done = _run(installed, "-m", "policyc", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: python -m policyc [OPTIONS] COMMAND [ARGS]..."), done.stdout
    assert "Compile, check and enforce Datalog security policies" in done.stdout
    check = _run(installed, "-m", "policyc", "check", "examples/quickstart/")
    assert check.returncode == 0, check.stderr
