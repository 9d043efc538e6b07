"""The installed `policyc` command, as a user has it, and a free port of 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import sys

import pytest


def policyc_path() -> str:
    """The console script a user runs (it must be installed, as a user would have it)."""
    found = shutil.which(
        "policyc", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    if found is None:
        pytest.fail("the `policyc` command is not installed; run `pip install -e '.[test]'` first")
    return found


def free_port() -> int:
    """A port of 127.0.0.1 no one listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
