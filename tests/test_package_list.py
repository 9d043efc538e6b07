"""Every folder of Python code the checkout maps to a package is installed: a subpackage
left out of pyproject.toml's `packages` list works in the checkout and is missing from the
wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    found = set()
    for package, folder in SETUP["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if "__pycache__" in parts or "node_modules" in parts:
                continue
            found.add(".".join((package, *parts)))
    return found


def test_every_package_folder_is_listed_and_every_listed_package_exists() -> None:
    listed = set(SETUP["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), "folders with an __init__.py that pyproject.toml does not install"
    assert listed - on_disk == set(), "packages pyproject.toml lists that have no folder"


def test_every_top_level_folder_of_python_code_is_mapped() -> None:
    mapped = {ROOT / folder for folder in SETUP["package-dir"].values()}
    unmapped = sorted(
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and (path / "__init__.py").exists() and path not in mapped and path.name != "tests"
    )
    assert unmapped == []
