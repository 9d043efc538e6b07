"""Shared helpers: the installed `policyc` command, and policies checked from text."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"


@dataclass(frozen=True)
class Run:
    status: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def policyc_command() -> list[str]:
    """The console script a user runs (it must be installed, as a user would have it)."""
    found = shutil.which(
        "policyc", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    if found is None:
        pytest.fail("the `policyc` command is not installed; run `pip install -e '.[test]'` first")
    return [found]


def run_policyc(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None, env: dict | None = None
) -> Run:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", **(env or {}))
    env.pop("POLICYC_DEBUG", None)
    done = subprocess.run(
        [*policyc_command(), *args], input=stdin, capture_output=True, cwd=cwd or ROOT, env=env, timeout=120
    )
    return Run(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))


@pytest.fixture
def policyc():
    return run_policyc


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run the long versions of the property tests (thousands of random programs)",
    )


@pytest.fixture
def runslow(request) -> bool:
    return bool(request.config.getoption("--runslow"))


@pytest.fixture
def cli():
    """The `policyc` command (for tests that also import the `policyc` module)."""
    return run_policyc
