"""tests/README.md lists every test file once, under a package the project installs."""

from __future__ import annotations

import re
import tomllib

from .conftest import ROOT

TESTS = ROOT / "tests"


def test_every_test_file_is_listed_once_under_a_package() -> None:
    rows = [line for line in (TESTS / "README.md").read_text("utf-8").splitlines() if line.startswith("| `")]
    listed: list[str] = []
    packages = set()
    for row in rows:
        package, _, files = (cell.strip() for cell in row.strip("|").split("|"))
        packages.add(package.strip("`"))
        listed += re.findall(r"`(test_[a-z0-9_]+\.py)`", files)
    on_disk = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert sorted(set(listed)) == on_disk, "tests/README.md does not list the test files as they are"
    assert len(listed) == len(set(listed)), "a test file is listed twice"
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    installed = {name.split(".")[1] for name in setup["packages"] if name.count(".") == 1} | {"facade"}
    assert packages == installed, packages ^ installed
