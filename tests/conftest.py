"""Shared helpers: the installed `policyc` command, and policies checked from text."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .support.commands import policyc_path
from .support.postgres import postgres_dsn, postgres_server  # noqa: F401 (fixtures the tests ask for)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _keep_byte_code() -> None:
    """Where the environment forbids writing byte code (``PYTHONDONTWRITEBYTECODE``), every
    `policyc` a test starts, and every test worker, would compile policyc and the tests again:
    the test run keeps byte code in a folder of its own instead (``PYTHONPYCACHEPREFIX``, outside
    the checkout, which stays untouched), for itself and the processes it starts."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    prefix = os.path.join(tempfile.gettempdir(), f"policyc-tests-pycache-{key}")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


_keep_byte_code()


@dataclass(frozen=True)
class Run:
    status: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def policyc_command() -> list[str]:
    """The console script a user runs, as the arguments that start it."""
    return [policyc_path()]


def run_policyc(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None, env: dict | None = None
) -> Run:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    env.pop("POLICYC_DEBUG", None)
    done = subprocess.run(
        [*policyc_command(), *args], input=stdin, capture_output=True, cwd=cwd or ROOT, env=env, timeout=120
    )
    return Run(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))


@pytest.fixture
def policyc():
    return run_policyc


def examples(short: int, long: int) -> pytest.MarkDecorator:
    """Run a property test with ``short`` random examples, and with ``long`` in the slow suite
    (`pytest -m slow`)."""
    return pytest.mark.parametrize(
        "examples", [pytest.param(short, id="short"), pytest.param(long, id="long", marks=pytest.mark.slow)]
    )


@pytest.fixture
def cli():
    """The `policyc` command (for tests that also import the `policyc` module)."""
    return run_policyc


@pytest.fixture(scope="session")
def agentdojo_traces(request, tmp_path_factory) -> Path:
    """A folder with the AgentDojo traces (`benign.jsonl`, every suite without attack, and
    `attacked.jsonl`, the banking and slack suites attacked), exported from the installed
    `agentdojo` package by `examples/agentdojo/export.py` as its README says.

    Exported once and kept in pytest's cache, under the exporter's hash and the package's
    version; test workers share it (a lock, and a folder that appears whole)."""
    exporter = EXAMPLES / "agentdojo" / "export.py"
    version = importlib.metadata.version("agentdojo")
    key = hashlib.sha256(exporter.read_bytes() + version.encode()).hexdigest()[:16]
    cache = getattr(request.config, "cache", None)
    home = cache.mkdir("agentdojo") if cache is not None else tmp_path_factory.getbasetemp() / "agentdojo"
    home.mkdir(parents=True, exist_ok=True)
    folder = home / key
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "attacked.jsonl").exists():
            staging = Path(tempfile.mkdtemp(dir=home))
            done = subprocess.run(
                [sys.executable, str(exporter), str(staging), "--attacked", "banking,slack"],
                capture_output=True,
                text=True,
                env=dict(os.environ, PYTHONHASHSEED="0"),
                timeout=600,
            )
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                pytest.fail(f"exporting the AgentDojo traces failed:\n{done.stderr}")
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
    return folder


def shared_folder(tmp_path_factory) -> Path:
    """The folder of this test run that every test worker sees (for locks and what is built once)."""
    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = folder.parent  # the workers' folders are beside each other
    return folder


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """A folder holding policyc installed from the checkout the way `pip install .` installs it
    (a wheel built in isolation, no editable finder): put it on ``PYTHONPATH`` to run against it.

    The wheel is built from a copy of the files it is made of (``pyproject.toml``, the README and
    the folders ``package-dir`` maps), so that building writes nothing into the checkout and a
    `build/` folder left there by an older layout cannot add stale modules. Installed once per
    test run; test workers share it (a lock, and a folder that appears whole)."""
    shared = shared_folder(tmp_path_factory)
    target = shared / "installed"
    with open(shared / "installed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_dir():
            staging = Path(tempfile.mkdtemp(dir=shared))
            source = staging / "source"
            project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            for folder in sorted(set(project["tool"]["setuptools"]["package-dir"].values())):
                shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
            for name in ("pyproject.toml", project["project"]["readme"]):
                shutil.copy2(ROOT / name, source / name)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--no-deps",
                    "--quiet",
                    "--target",
                    str(staging / "installed"),
                    str(source),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                pytest.fail(f"installing policyc failed:\n{done.stdout}{done.stderr}")
            (staging / "installed").rename(target)
            shutil.rmtree(staging, ignore_errors=True)
    return target


def json_difference(found: Any, expected: Any, where: str = "$", rel: float = 1e-9) -> str | None:
    """Where two JSON values differ (None if they agree), numbers compared within ``rel``: a
    learned artefact's last digits depend on the numeric libraries' versions."""
    if isinstance(expected, float) or isinstance(found, float):
        if isinstance(found, int | float) and isinstance(expected, int | float):
            if math.isclose(found, expected, rel_tol=rel, abs_tol=rel * 1e-3):
                return None
        return f"{where}: {found!r} != {expected!r}"
    if isinstance(expected, dict) and isinstance(found, dict):
        if found.keys() != expected.keys():
            return f"{where}: keys {sorted(found)} != {sorted(expected)}"
        for key in expected:
            if (problem := json_difference(found[key], expected[key], f"{where}.{key}", rel)) is not None:
                return problem
        return None
    if isinstance(expected, list) and isinstance(found, list):
        if len(found) != len(expected):
            return f"{where}: {len(found)} items != {len(expected)}"
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            if (problem := json_difference(a, b, f"{where}[{i}]", rel)) is not None:
                return problem
        return None
    return (
        None if found == expected and type(found) is type(expected) else f"{where}: {found!r} != {expected!r}"
    )


@pytest.fixture(scope="session")
def forecast_model():
    """The forecast example's model and learning summary, learned from its recorded sessions."""
    import policyc
    from policyc.forecast.build import Settings, learn_model
    from policyc.forecast.patterns import parse_predicate, parse_predicates
    from policyc.runtime.session import Monitor

    folder = EXAMPLES / "forecast"
    monitor = Monitor(policyc.load(folder / "copilot_forecast.dl"))
    predicates = "Edit,Unscanned,Unchecked,Tested,Committed,OpenFinding"
    settings = Settings(tuple(parse_predicates(predicates)), parse_predicate("Deny"))
    return learn_model(
        monitor, [str(folder / "train.jsonl")], settings, "examples/forecast/copilot_forecast.dl"
    )
