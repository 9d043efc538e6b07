"""The outline of a document (``textDocument/documentSymbol``).

One entry per relation the document declares or defines, with its declaration and rules
inside (a rule is named by its ``@id`` when it has one, else by its head); one per functor and
role it declares, and one per library module it imports and file it includes.
"""

from __future__ import annotations

from lsprotocol import types

from policyc.compiler import ast

from .diagnostics import lsp_range
from .document import Snapshot


def outline(snapshot: Snapshot) -> list[types.DocumentSymbol]:
    module = snapshot.module
    if module is None:
        return []
    relations: dict[str, types.DocumentSymbol] = {}
    out: list[types.DocumentSymbol] = []

    def entry(name: str, kind: types.SymbolKind, span, selection, detail: str | None = None):
        return types.DocumentSymbol(
            name=name,
            kind=kind,
            range=lsp_range(snapshot, span),
            selection_range=lsp_range(snapshot, selection),
            detail=detail,
            children=[],
        )

    def relation(name: str, span, selection) -> types.DocumentSymbol:
        if name not in relations:
            relations[name] = entry(name, types.SymbolKind.Class, span, selection)
            out.append(relations[name])
        return relations[name]

    shown: set[tuple[object, object]] = set()  # the rules of one statement (`;`): one entry a head
    for statement in module.statements:
        if isinstance(statement, ast.Misplaced):
            statement = statement.statement
        text = _text(snapshot, statement.span)
        if isinstance(statement, ast.Rule):
            if (statement.span, statement.head.span) in shown:
                continue
            shown.add((statement.span, statement.head.span))
            parent = relation(statement.head.name, statement.span, statement.head.name_span)
            rule_id = statement.annotation("id")
            name = (
                rule_id.args[0].value
                if rule_id and rule_id.args and isinstance(rule_id.args[0], ast.String)
                else _text(snapshot, statement.head.span)
            )
            kind = types.SymbolKind.Constant if statement.is_fact else types.SymbolKind.Method
            child = entry(name or statement.head.name, kind, statement.span, statement.head.name_span)
            child.detail = (
                "fact" if statement.is_fact else "subsumption" if statement.is_subsumption else "rule"
            )
            parent.children.append(child)
        elif isinstance(statement, ast.Decl):
            parent = relation(statement.name.name, statement.span, statement.name.span)
            parent.detail = text
            parent.children.append(
                entry(".decl", types.SymbolKind.Interface, statement.span, statement.name.span, text)
            )
        else:
            named = _named(statement)
            if named is not None:
                name, kind, selection = named
                out.append(entry(name, kind, statement.span, selection, text))
    for symbol in relations.values():
        first, last = symbol.children[0].range, symbol.children[-1].range
        symbol.range = types.Range(first.start, last.end)
        symbol.selection_range = symbol.children[0].selection_range
    return out


def _named(statement: ast.Statement) -> tuple[str, types.SymbolKind, object] | None:
    """The name, kind and name's span of a directive that gets an entry of its own."""
    if isinstance(statement, ast.Functor):
        return statement.name.name, types.SymbolKind.Function, statement.name.span
    if isinstance(statement, ast.Role):
        return statement.name.name, types.SymbolKind.Constant, statement.name.span
    if isinstance(statement, ast.TypeDecl):
        kind = (
            types.SymbolKind.Struct if statement.kind in ("record", "adt") else types.SymbolKind.TypeParameter
        )
        return statement.name.name, kind, statement.name.span
    if isinstance(statement, ast.Import):
        return statement.module.name, types.SymbolKind.Module, statement.module.span
    if isinstance(statement, ast.Include):
        return statement.path.value, types.SymbolKind.File, statement.path.span
    return None


def _text(snapshot: Snapshot, span) -> str:
    return " ".join(snapshot.text[span.start : span.end].split())
