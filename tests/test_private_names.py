"""A leading underscore means "of this module only": no module of the source packages reads a
private name of another module, whether as ``x._name`` (``x`` a module, an object or a class
of another module) or through ``from m import _name``.

A module's own private names are those it defines: functions, classes, names assigned at the
level of the module or of a class, and attributes it assigns (``x._name = ...``). ``self._name``
and ``cls._name`` are the object's own and always allowed; dunder names are not private. What
other modules offer, they offer under a public name (docs/runtime.md, "The evaluator's
interface", for the runtime's)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from .conftest import ROOT

SETUP = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
FOLDERS = sorted({ROOT / folder for folder in SETUP["package-dir"].values()})

# Private names of Python and of third-party libraries that modules may read, and why.
THIRD_PARTY = {
    "_replace": "a NamedTuple's method for a copy with some fields changed (Span._replace)",
    "_exit": "os._exit, the documented way to end a process whose threads cannot be stopped "
    "(the MCP gateway on SIGTERM, once its servers are stopped and its audit log closed)",
    "_connection": "the MCP SDK's per-client Connection behind a request's ServerSession: its "
    "exit stack, which the SDK closes when a streamable HTTP session ends, is the only end-of-session "
    "hook a low-level handler can reach (the gateway stops that session's servers with it; "
    "tests/test_gateway_sessions.py fails if the SDK changes it)",
}


def is_private(name: str) -> bool:
    return name.startswith("_") and len(name) > 1 and not (name.startswith("__") and name.endswith("__"))


def sources() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in folder.rglob("*.py"))


def defined(tree: ast.Module) -> set[str]:
    """The private names a module defines."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Tuple | ast.List):
            for element in node.elts:
                targets(element)

    def level(body: list[ast.stmt]) -> None:  # a module's or a class's body
        for statement in body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    targets(target)
            elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
                targets(statement.target)
            elif isinstance(statement, ast.If | ast.Try):
                level(statement.body)
                level(statement.orelse)

    level(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            level(node.body)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if is_private(name)}


def reaches(source: str, where: str) -> list[str]:
    """Where a module's source reads other modules' private names (``where:line: what``), in
    the order of the source."""
    tree = ast.parse(source, where)
    own = defined(tree)
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in own and node.attr not in THIRD_PARTY:
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if is_private(alias.name) and alias.name not in THIRD_PARTY:
                    found.append((node.lineno, node.col_offset, f"from {module} import {alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, node.col_offset, f"import {alias.name}"))
    return [f"{where}:{line}: {what}" for line, _, what in sorted(found)]


def test_the_sources_are_many() -> None:
    """A guard against checking nothing (the package folders are read from pyproject.toml)."""
    assert len(FOLDERS) >= 12, FOLDERS
    assert len(sources()) >= 100


def test_no_module_reads_another_modules_private_names() -> None:
    found = [
        line for path in sources() for line in reaches(path.read_text("utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "private names of other modules:\n" + "\n".join(found)


EXAMPLE = """\
from .codegen import _slots, FAIL
import policyc._hidden
class A:
    _kept = 1
    def _mine(self):
        self._state = 0
        return self._elsewhere, cls._also, other._mine, other._kept, span._replace
def f(state, codegen):
    state._stratum(); codegen._slots(); codegen.__doc__; state.__class__
    return other._state
"""


def test_the_check_finds_what_it_should() -> None:
    assert defined(ast.parse(EXAMPLE)) == {"_kept", "_mine", "_state"}
    assert reaches(EXAMPLE, "example.py") == [
        "example.py:1: from .codegen import _slots",
        "example.py:2: import policyc._hidden",
        "example.py:9: state._stratum",
        "example.py:9: codegen._slots",
    ]
