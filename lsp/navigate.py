"""Go to definition, find references, rename and the outline of a document.

* **definition** of a relation: its ``.decl`` and the heads of the rules that define it (its
  ``.input`` when it has neither); of a functor: its ``.functor``; of a variable: where the
  rule binds it (its first occurrence in a positive atom, else its first occurrence); of a
  library module or an included file: the file; of a role: its ``.role``; of a tool's
  argument: its ``.arg``.
* **references**: every occurrence of the symbol in the files the document loads (itself,
  what it includes and the library modules it imports).
* **rename** of a relation (in every file the document loads, but never one the shipped
  library declares or defines) or of a variable (in its rule only, ``{var}`` placeholders
  included). The new name must be a name of the language, and not one the relation or the
  variable would be confused with.
"""

from __future__ import annotations

from dataclasses import dataclass

from policyc.compiler import ast
from policyc.compiler.loader import library_path
from policyc.compiler.symbols import VERDICTS
from policyc.compiler.syntax_errors import RESERVED

from .document import Snapshot, real_path
from .index import (
    ARGUMENT,
    CONSTRUCTOR,
    DECLARATION,
    DEFINITION,
    DIRECTIVE,
    FILE,
    FUNCTOR,
    MODULE,
    NAME,
    RELATION,
    ROLE,
    TYPE,
    VARIABLE,
    Occurrence,
)

KEYWORDS = frozenset(RESERVED.values())  # `not` and the aggregates


class RenameError(Exception):
    """A rename that cannot be done, and why (the editor shows the message)."""


@dataclass(frozen=True)
class Target:
    """A place to go: a span of a program file, or the start of a whole file."""

    path: str
    span: object | None  # a Span, or None for the start of the file


def definition(snapshot: Snapshot, occurrence: Occurrence) -> list[Target]:
    symbol = occurrence.symbol
    occurrences = snapshot.index.of(symbol)
    if symbol.kind in (MODULE, FILE):
        if symbol.kind == MODULE:
            path = real_path(library_path(symbol.name))
        else:
            path = symbol.name
        return [Target(path, None)]
    if symbol.kind == VARIABLE:
        binding = _binding(snapshot, occurrence)
        return [Target(binding.span.file, binding.span)] if binding else []
    declared = [o for o in occurrences if o.role == DECLARATION]
    if symbol.kind == RELATION:
        declared += [o for o in occurrences if o.role == DEFINITION]
    if not declared:
        declared = [o for o in occurrences if o.role == DIRECTIVE]
    return [Target(o.span.file, o.span) for o in _distinct(declared)]


def references(snapshot: Snapshot, occurrence: Occurrence, include_declaration: bool) -> list[Occurrence]:
    found = _distinct(snapshot.index.of(occurrence.symbol))
    if not include_declaration:
        found = [o for o in found if o.role != DECLARATION]
    return found


def _distinct(occurrences: list[Occurrence]) -> list[Occurrence]:
    """One occurrence per place (the instances of a component share the places it writes)."""
    seen: set[object] = set()
    out = []
    for o in occurrences:
        if o.span not in seen:
            seen.add(o.span)
            out.append(o)
    return out


def _binding(snapshot: Snapshot, occurrence: Occurrence) -> Occurrence | None:
    _, rule = snapshot.index.rules[occurrence.symbol.scope]
    name = occurrence.symbol.name
    for literal in rule.body:
        if isinstance(literal, ast.Atom):
            for arg in literal.args:
                if isinstance(arg, ast.Var) and arg.name == name:
                    return next(o for o in snapshot.index.of(occurrence.symbol) if o.span == arg.span)
    found = snapshot.index.of(occurrence.symbol)
    return found[0] if found else None


def renamable(snapshot: Snapshot, occurrence: Occurrence) -> None:
    """Raise :class:`RenameError` unless the symbol can be renamed."""
    symbol = occurrence.symbol
    if symbol.kind == VARIABLE:
        return
    if symbol.kind != RELATION:
        what = {
            FUNCTOR: "a functor",
            MODULE: "a library module",
            FILE: "a file",
            ROLE: "a role",
            TYPE: "a type",
            CONSTRUCTOR: "a constructor",
            ARGUMENT: "a tool's argument",
        }[symbol.kind]
        reason = " (the host binds functors by name)" if symbol.kind == FUNCTOR else ""
        raise RenameError(
            f"`{_shown(symbol.name)}` is {what}; only relations and variables can be renamed{reason}"
        )
    if symbol.name in VERDICTS:
        raise RenameError(f"`{symbol.name}` is a verdict relation; its name means something to the monitor")
    if "." in symbol.name:
        raise RenameError(
            f"`{symbol.name}` is a relation of a component instance; rename it in the component, "
            "where every instance takes its name from"
        )
    program = snapshot.model.program
    for o in snapshot.index.of(symbol):
        if program.is_library(o.span.file) and o.role in (DECLARATION, DEFINITION, DIRECTIVE):
            raise RenameError(f"`{symbol.name}` belongs to the standard library; it cannot be renamed here")


def rename(snapshot: Snapshot, occurrence: Occurrence, new_name: str) -> list[Occurrence]:
    """The occurrences to rewrite to ``new_name`` (:class:`RenameError` if it cannot be)."""
    renamable(snapshot, occurrence)
    symbol = occurrence.symbol
    if not NAME.fullmatch(new_name) or new_name in KEYWORDS or new_name == "_":
        raise RenameError(f"`{new_name}` is not a valid name")
    if new_name == symbol.name:
        return []
    if symbol.kind == VARIABLE:
        if new_name in snapshot.index.variables(symbol.scope):
            raise RenameError(f"the rule already has a variable `{new_name}`")
    else:
        symbols = snapshot.model.symbols
        taken = set(symbols.relations) | set(symbols.functors) if symbols else set()
        taken |= {o.symbol.name for o in snapshot.index.occurrences if o.symbol.kind in (RELATION, FUNCTOR)}
        if new_name in taken:
            raise RenameError(f"`{new_name}` is already the name of a relation or functor")
    found = _distinct(snapshot.index.of(symbol))
    return [o for o in found if not snapshot.model.program.is_library(o.span.file)]


def _shown(name: str) -> str:
    return name.rsplit("/", 1)[-1]
