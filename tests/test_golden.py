"""Golden files: for every diagnostic code, a policy that triggers it and the exact text that
`policyc check` prints for it (`tests/golden/<name>.dl` and `<name>.txt`; `check --deep` for
the deep findings, PC3xx).

After a deliberate change to messages, regenerate with `POLICYC_UPDATE_GOLDEN=1 pytest
tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from policyc.compiler.codes import CATALOG

from .conftest import run_policyc

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.dl"))


def test_every_code_has_a_golden_file() -> None:
    assert sorted(c.name for c in CATALOG) == CASES


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    code = next(c for c in CATALOG if c.name == name)
    deep = ["--deep"] if code.code.startswith("PC3") else []  # the findings of `check --deep`
    run = run_policyc("check", *deep, f"{name}.dl", cwd=GOLDEN)
    expected_file = GOLDEN / f"{name}.txt"
    if os.environ.get("POLICYC_UPDATE_GOLDEN"):
        expected_file.write_text(run.stdout, "utf-8")
    assert run.stderr == ""
    assert run.stdout == expected_file.read_text("utf-8")
    assert f"[{code.code}]" in run.stdout and f"[{name}]" in run.stdout
    assert run.status == (1 if code.severity.value == "error" else 0)
