"""What a package offers: the names of its ``__all__``, each imported with its module on first
use (PEP 562), so that importing a package costs nothing until a name is read.

A package's ``__init__.py`` says::

    __all__, __getattr__ = exports(__name__, {"Policy": ".policy", "load": ".policy"})

Every module named is inside the package (a name starting with one dot): a package offers
its own names, never those of a package beside or above it (the facade ``policyc`` offers
names of its subpackages, which are inside it). ``".model:load"`` offers the
module's ``load`` under the table's name.

>>> names, get = exports("policyc.compiler", {"SourceFile": ".source"})
>>> names
['SourceFile']
>>> get("SourceFile").__module__
'policyc.compiler.source'
>>> exports("policyc.compiler", {"decode_source": ".loader:decode"})[1]("decode_source").__name__
'decode'
>>> get("Missing")
Traceback (most recent call last):
...
AttributeError: module 'policyc.compiler' has no attribute 'Missing'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, table: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` and ``__getattr__`` of ``package``, offering each name of
    ``table`` from the module of the package it maps to (relative: ``".policy"``)."""
    for name, module in table.items():
        if not module.startswith(".") or module.startswith(".."):
            raise ValueError(f"{package}.{name}: {module!r} is not a module of the package")

    def get(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = module.partition(":")
        return getattr(importlib.import_module(module, package), attribute or name)

    return sorted(table), get
