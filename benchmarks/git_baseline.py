"""A commit of policyc installed into a virtual environment of its own, so that a benchmark runs
that commit's commands beside the working tree's in the same run.

The environment is cached by commit (``$POLICYC_BENCH_CACHE``, else
``$XDG_CACHE_HOME/policyc/baselines``, else ``~/.cache/policyc/baselines``): the first run
installs it, later runs reuse it. The commit's files come from ``git archive`` (nothing of the
working tree), and its dependencies are pinned to the versions installed beside the running
Python, so that the two differ by policyc's own code only (if the commit cannot be installed with
those versions, it is installed with what pip resolves, and the run says so).

    from git_baseline import default_ref, installed, resolve

    commit = resolve(default_ref())
    policyc = installed(commit, extras="serve")  # that environment's `policyc` command
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, root: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def default_ref(root: Path = ROOT) -> str:
    """The commit the current branch started from: where ``HEAD`` leaves ``main`` (or
    ``origin/main``), which is ``HEAD`` itself on ``main``; ``HEAD`` when neither exists."""
    for trunk in ("main", "origin/main"):
        try:
            return git("merge-base", "HEAD", trunk, root=root)
        except subprocess.CalledProcessError:
            continue
    return "HEAD"


def resolve(ref: str, root: Path = ROOT) -> str:
    """The full hash of the commit ``ref`` names; a ``ValueError`` naming it if there is none."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", root=root)
    except subprocess.CalledProcessError:
        raise ValueError(f"`{ref}` names no commit of {root}") from None


def describe(commit: str, root: Path = ROOT) -> str:
    """``abc1234 subject`` of a commit."""
    return git("log", "-1", "--format=%h %s", commit, root=root)


def tree_state(root: Path = ROOT) -> str:
    """``abc1234`` of ``HEAD``, with ``+ uncommitted changes`` when the working tree differs."""
    head = git("rev-parse", "--short", "HEAD", root=root)
    dirty = git("status", "--porcelain", "--untracked-files=no", root=root)
    return f"{head} + uncommitted changes" if dirty else head


def cache_root() -> Path:
    if os.environ.get("POLICYC_BENCH_CACHE"):
        return Path(os.environ["POLICYC_BENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "policyc", "baselines")


def installed(commit: str, *, extras: str = "", root: Path = ROOT, cache: Path | None = None) -> Path:
    """The ``policyc`` command of ``commit`` installed (with ``extras``) in a cached environment."""
    folder = (cache or cache_root()) / (f"{commit}-{extras}" if extras else commit)
    command = folder / "venv" / "bin" / "policyc"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once install it once
        if (folder / "ready").exists() and command.exists():
            return command
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        _install(commit, extras, root, folder)
        (folder / "ready").write_text(f"{commit}\n", "utf-8")
    return command


def _install(commit: str, extras: str, root: Path, folder: Path) -> None:
    print(f"installing {describe(commit, root)} into {folder} (once for this commit)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True, timeout=300)
    python = str(folder / "venv" / "bin" / "python")
    pins = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.splitlines()
    constraints = folder / "constraints.txt"
    constraints.write_text(
        "".join(f"{line}\n" for line in pins if not line.lower().startswith("policyc==")), "utf-8"
    )
    with tempfile.TemporaryDirectory() as source:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit], cwd=root, capture_output=True, check=True, timeout=300
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            if hasattr(tarfile, "data_filter"):  # the safe extraction filter, from Python 3.11.4 on
                tar.extractall(source, filter="data")
            else:
                tar.extractall(source)
        target = f"{source}[{extras}]" if extras else source
        install = [python, "-m", "pip", "install", "--quiet", "--no-input"]
        pinned = subprocess.run([*install, "-c", str(constraints), target], timeout=1800)
        if pinned.returncode:
            print(
                "the commit does not install with this environment's versions: installing it with "
                "the versions pip resolves",
                file=sys.stderr,
            )
            subprocess.run([*install, target], check=True, timeout=1800)
