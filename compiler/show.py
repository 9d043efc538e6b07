"""Dumps of intermediate forms for ``policyc check --show STAGE`` (text or JSON).

``ast``: the syntax tree of the files the user wrote (library modules are left out);
``strata``: the evaluation order, one stratum per strongly connected component.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import ast
from .pipeline import Compilation
from .source import Span

SHOWABLE = ("ast", "strata")


def show_json(what: str, compilation: Compilation) -> Any:
    if what == "ast":
        return [_node_json(m) for m in _user_modules(compilation)]
    if compilation.strata is None:
        return None
    symbols = compilation.symbols
    assert symbols is not None
    return [
        {
            "index": s.index,
            "relations": list(s.relations),
            "recursive": s.recursive,
            "input": all(r in symbols.inputs for r in s.relations),
            "rules": s.computed,
        }
        for s in compilation.strata.strata
    ]


def show_text(what: str, compilation: Compilation) -> str:
    if what == "ast":
        lines: list[str] = []
        for module in _user_modules(compilation):
            lines.append(f"Module {module.path}")
            for statement in module.statements:
                _node_text(statement, 1, lines)
        return "\n".join(lines)
    if compilation.strata is None:
        return "(no strata: the policy did not parse)"
    symbols = compilation.symbols
    assert symbols is not None
    lines = []
    for s in compilation.strata.strata:
        flags = []
        if all(r in symbols.inputs for r in s.relations):
            flags.append("input")
        elif not s.computed:
            flags.append("no rules")
        if s.recursive:
            flags.append("recursive")
        suffix = f"  ({', '.join(flags)})" if flags else ""
        lines.append(f"stratum {s.index}: {', '.join(s.relations)}{suffix}")
    return "\n".join(lines)


def _user_modules(compilation: Compilation) -> list[ast.Module]:
    program = compilation.program
    return [m for m in program.modules if not program.is_library(m.path)]


def _fields(node: Any) -> list[tuple[str, Any]]:
    return [
        (f.name, getattr(node, f.name)) for f in dataclasses.fields(node) if f.compare and f.name != "path"
    ]


def _span_text(span: Span) -> str:
    return f"{span.line}:{span.column}-{span.end_line}:{span.end_column}"


def _node_text(node: Any, depth: int, lines: list[str]) -> None:
    indent = "  " * depth
    scalars = []
    children = []
    for name, value in _fields(node):
        if isinstance(value, ast.Ident):
            scalars.append(f"{name}={value.name}")
        elif value is False:
            continue
        elif dataclasses.is_dataclass(value) or (
            isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0])
        ):
            children.append((name, value))
        elif isinstance(value, tuple) and not value:
            continue
        elif value is not None:
            scalars.append(f"{name}={value!r}")
    span = getattr(node, "span", None)
    where = f" @{_span_text(span)}" if span is not None and span != ast.NO_SPAN else ""
    lines.append(f"{indent}{type(node).__name__}{where}" + (" " + " ".join(scalars) if scalars else ""))
    for name, value in children:
        items = value if isinstance(value, tuple) else (value,)
        lines.append(f"{indent}  {name}:")
        for item in items:
            _node_text(item, depth + 2, lines)


def _node_json(node: Any) -> Any:
    if isinstance(node, tuple):
        return [_node_json(n) for n in node]
    if not dataclasses.is_dataclass(node):
        return node
    out: dict[str, Any] = {"type": type(node).__name__}
    for name, value in _fields(node):
        out[name] = _node_json(value)
    span = getattr(node, "span", None)
    if isinstance(span, Span) and span != ast.NO_SPAN:
        out["span"] = {
            "line": span.line,
            "column": span.column,
            "end_line": span.end_line,
            "end_column": span.end_column,
        }
    if isinstance(node, ast.Module):
        out["path"] = node.path
    return out
