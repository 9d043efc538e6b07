"""Every module's doctests run: the examples in docstrings are part of the documentation, and
stay true."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import tomllib

import pytest

from .conftest import ROOT

PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"]


def modules() -> list[str]:
    found = []
    for package in PACKAGES:
        found.append(package)
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
            if not info.ispkg and not info.name.endswith("__main__"):
                found.append(info.name)
    return sorted(found)


MODULES = modules()


def test_the_doctests_are_many() -> None:
    """A guard against collecting nothing (a package left out of the list, say)."""
    examples = sum(
        len(test.examples)
        for name in MODULES
        for test in doctest.DocTestFinder().find(importlib.import_module(name))
    )
    assert examples >= 130, examples


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    shown: list[str] = []
    for test in doctest.DocTestFinder().find(module):
        runner.run(test, out=shown.append)
    assert runner.failures == 0, "".join(shown)
