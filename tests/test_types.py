"""The compiler, the runtime and the analyzer type-check: mypy, configured in pyproject.toml
(``[tool.mypy]``), reports nothing on them.

mypy reads a regular install (the ``installed`` fixture): the checkout maps folders to packages
(``package-dir``), which mypy cannot follow. What it reports is shown with the paths of the
checkout (``compiler/pipeline.py:12: error: ...``), not those of the install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGES = ("policyc.compiler", "policyc.runtime", "policyc.analyzer", "policyc.serve", "policyc.gateway")
FOLDERS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
    "package-dir"
]


def repository_paths(output: str, installed: Path) -> str:
    """mypy's output with every file of the install named by its path in the checkout."""
    prefix = re.escape(str(installed / "policyc"))

    def checkout(match: re.Match[str]) -> str:
        parts = ["policyc", *match.group(1).split("/")]
        for n in range(len(parts) - 1, 0, -1):  # the longest package the folders map
            folder = FOLDERS.get(".".join(parts[:n]))
            if folder is not None:
                return "/".join([folder, *parts[n:]])
        return match.group(0)

    return re.sub(prefix + r"/([\w/]+\.pyi?)", checkout, output)


def test_the_paths_are_the_checkout_s(tmp_path: Path) -> None:
    installed = tmp_path / "installed"
    output = (
        f"{installed}/policyc/compiler/checks/types.py:3: error: no\n"
        f"{installed}/policyc/runtime/facts.py:9: note: see {installed}/policyc/__init__.py\n"
    )
    assert repository_paths(output, installed) == (
        "compiler/checks/types.py:3: error: no\nruntime/facts.py:9: note: see facade/__init__.py\n"
    )


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_mypy_finds_nothing(installed: Path, tmp_path: Path) -> None:
    packages = [arg for package in PACKAGES for arg in ("-p", package)]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--show-absolute-path",
            "--no-color-output",
            *packages,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, MYPYPATH=str(installed)),
        timeout=600,
    )
    assert done.returncode == 0, repository_paths(done.stdout + done.stderr, installed)
