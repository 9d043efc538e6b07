"""The outline of a document (``textDocument/documentSymbol``).

One entry per relation the document declares or defines, with its declaration and rules
inside (a rule is named by its ``@id`` when it has one, else by its head); one per functor and
role and tool argument (``.arg``) it declares, and one per library module it imports and file it includes. A component is
an entry with its contents inside (as written: its relations, rules, components and
instances), and an instance (``.init g = Graph<symbol>``) an entry of its own; the relations
of instances appear where the document itself writes them (``g.edge("a", "b").``).
"""

from __future__ import annotations

from lsprotocol import types

from policyc.compiler import ast
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile

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

    written = _written_components(snapshot)
    inside = [(c.span.start, c.span.end) for c in written if isinstance(c, ast.Component)]
    shown: set[tuple[object, object]] = set()  # the rules of one statement (`;`): one entry a head
    for statement in module.statements:
        if isinstance(statement, ast.Misplaced):
            statement = statement.statement
        if any(start <= statement.span.start < end for start, end in inside):
            continue  # an instance's copy of a component's statement: the component's entry shows it
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
    if written:
        out.extend(_component_entry(snapshot, entry, statement) for statement in written)
        out.sort(key=lambda symbol: (symbol.range.start.line, symbol.range.start.character))
    return out


def _written_components(snapshot: Snapshot) -> list[ast.Component | ast.Init]:
    """The components and instances at the top level of the document, as written."""
    if ".comp" not in snapshot.text and ".init" not in snapshot.text:
        return []
    module, _ = parse(SourceFile(snapshot.path, snapshot.text), surface=True)
    return [s for s in module.statements if isinstance(s, ast.Component | ast.Init)]


def _component_entry(snapshot: Snapshot, entry, statement: ast.Statement) -> types.DocumentSymbol:
    """The entry of a component (its contents inside), an instance, or a statement inside a
    component."""
    text = _text(snapshot, statement.span)
    if isinstance(statement, ast.Component):
        params = f"<{', '.join(p.name for p in statement.params)}>" if statement.params else ""
        found = entry(
            statement.name.name + params, types.SymbolKind.Module, statement.span, statement.name.span
        )
        found.detail = "component"
        for inner in statement.body:
            if isinstance(inner, ast.Misplaced):
                inner = inner.statement
            if isinstance(
                inner, ast.Component | ast.Init | ast.Decl | ast.Rule | ast.Compound | ast.TypeDecl
            ):
                found.children.append(_component_entry(snapshot, entry, inner))
        return found
    if isinstance(statement, ast.Init):
        ref = statement.component
        detail = ref.name.name + (f"<{', '.join(a.name for a in ref.args)}>" if ref.args else "")
        return entry(
            statement.name.name, types.SymbolKind.Object, statement.span, statement.name.span, detail
        )
    if isinstance(statement, ast.Decl):
        return entry(statement.name.name, types.SymbolKind.Class, statement.span, statement.name.span, text)
    if isinstance(statement, ast.TypeDecl):
        return entry(
            statement.name.name, types.SymbolKind.TypeParameter, statement.span, statement.name.span, text
        )
    head = statement.head if isinstance(statement, ast.Rule) else statement.heads[0]  # type: ignore[union-attr]
    fact = isinstance(statement, ast.Rule) and statement.is_fact
    kind = types.SymbolKind.Constant if fact else types.SymbolKind.Method
    return entry(_text(snapshot, head.span), kind, statement.span, head.name_span, "fact" if fact else "rule")


def _named(statement: ast.Statement) -> tuple[str, types.SymbolKind, object] | None:
    """The name, kind and name's span of a directive that gets an entry of its own."""
    if isinstance(statement, ast.Functor):
        return statement.name.name, types.SymbolKind.Function, statement.name.span
    if isinstance(statement, ast.Role):
        return statement.name.name, types.SymbolKind.Constant, statement.name.span
    if isinstance(statement, ast.ArgDecl) and statement.tool and statement.argument:
        return f"{statement.tool}.{statement.argument}", types.SymbolKind.Field, statement.path_span
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
