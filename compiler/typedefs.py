"""The types a policy declares with ``.type``, as Soufflé has them.

* a **subtype** ``.type Id <: symbol``: its values are values of the base type, usable where
  the base is expected; two different subtypes of one base do not mix;
* an **alias** ``.type N = number``: another name of the same type;
* a **union** ``.type U = A | B``: a value of any member (the members share one base);
* a **record type** ``.type P = [x: number, y: symbol]``, possibly recursive
  (``.type L = [head: number, tail: L]``, a list ending in ``nil``);
* an **algebraic data type** ``.type T = A {x: number} | B {}``: a value of one branch, made
  with a constructor ``$A(1)``, ``$B``. Branch names are unique in a policy.

:func:`collect` reads the declarations into a :class:`TypeTable` and reports the malformed
ones (``invalid-directive``). The type checker works with :meth:`TypeTable.leaves`: the set
of the most specific types a value of a type may have, so that "usable where expected" is a
subset test and "the types a variable may still have" an intersection.

>>> from policyc.compiler.parser import parse
>>> from policyc.compiler.source import SourceFile
>>> module, _ = parse(SourceFile("p.dl", ".type Id <: symbol\\n.type P = [a: Id, b: number]"))
>>> table, problems = collect(module.statements)
>>> sorted(table.leaves("symbol")), table.representation("Id"), table.representation("P"), problems
(['Id', 'symbol'], 'symbol', 'record', [])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from . import ast, codes
from .diagnostics import Diagnostic, Related, replace_name
from .syntax_errors import did_you_mean

PRIMITIVES = ("symbol", "number", "unsigned", "float")
NUMERIC_PRIMITIVES = ("number", "unsigned", "float")


@dataclass(frozen=True)
class TypeDef:
    """A declared type: its kind, and its base (subtype, alias), members (union), fields
    (record) or branches (ADT: branch name to fields)."""

    name: str
    kind: str  # "subtype", "alias", "union", "record" or "adt"
    base: str | None = None
    members: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    branches: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    span: ast.Span = ast.NO_SPAN


@dataclass(frozen=True)
class Branch:
    """A constructor of an ADT: its type, its name and its fields."""

    adt: str
    name: str
    fields: tuple[tuple[str, str], ...]
    span: ast.Span


@dataclass
class TypeTable:
    """The declared types of a policy (the primitives are always there)."""

    types: dict[str, TypeDef] = field(default_factory=dict)
    constructors: dict[str, Branch] = field(default_factory=dict)

    def known(self, name: str) -> bool:
        return name in PRIMITIVES or name in self.types

    def canonical(self, name: str) -> str:
        """The type an alias names (aliases followed), else the name itself."""
        seen = set()
        while name in self.types and self.types[name].kind == "alias" and name not in seen:
            seen.add(name)
            name = self.types[name].base or name
        return name

    def representation(self, name: str | None) -> str | None:
        """How values of a type are kept: ``symbol``, ``number``, ``unsigned``, ``float`` or
        ``record`` (records and ADTs); None for an unknown type."""
        seen: set[str] = set()
        while name is not None and name not in PRIMITIVES:
            if name in seen or name not in self.types:
                return None
            seen.add(name)
            found = self.types[name]
            if found.kind in ("record", "adt"):
                return "record"
            name = found.members[0] if found.kind == "union" and found.members else found.base
        return name

    def leaves(self, name: str) -> frozenset[str]:
        """The most specific types a value of this type may have: the type itself and every
        type declared below it (a union: its members')."""
        name = self.canonical(name)
        found = self.types.get(name)
        if found is not None and found.kind == "union":
            out: set[str] = set()
            for member in found.members:
                if self.canonical(member) != name:
                    out |= self.leaves(member)
            return frozenset(out)
        out = {name}
        for other in self.types.values():
            if other.kind == "subtype" and other.base is not None and self.canonical(other.base) == name:
                if other.name != name:
                    out |= self.leaves(other.name)
        return frozenset(out)

    def field_types(self, name: str) -> tuple[str, ...] | None:
        """The field types of a record type (None: not a record type)."""
        found = self.types.get(self.canonical(name))
        if found is None or found.kind != "record":
            return None
        return tuple(t for _, t in found.fields)

    def records(self) -> frozenset[str]:
        return frozenset(n for n, t in self.types.items() if t.kind == "record")

    def structured(self) -> frozenset[str]:
        """The record types and ADTs (whose values ``nil`` is not, for ADTs)."""
        return frozenset(n for n, t in self.types.items() if t.kind in ("record", "adt"))


def collect(statements: Iterable[ast.Statement]) -> tuple[TypeTable, list[Diagnostic]]:
    """The type table of a program's ``.type`` declarations, and what is wrong with them."""
    table = TypeTable()
    problems: list[Diagnostic] = []
    nodes: dict[str, ast.TypeDecl] = {}
    for statement in statements:
        if isinstance(statement, ast.Misplaced):
            statement = statement.statement
        if not isinstance(statement, ast.TypeDecl):
            continue
        name = statement.name.name
        if name in PRIMITIVES or name in nodes:
            first = nodes.get(name)
            problems.append(
                codes.INVALID_DIRECTIVE(
                    statement.name.span,
                    f"`{name}` is a primitive type" if first is None else f"type `{name}` is declared twice",
                    related=[Related(first.name.span, "first declared here")] if first else [],
                )
            )
            continue
        nodes[name] = statement
        table.types[name] = _definition(statement)
        for branch in statement.branches:
            other = table.constructors.get(branch.name.name)
            if other is not None:
                problems.append(
                    codes.INVALID_DIRECTIVE(
                        branch.name.span,
                        f"`{branch.name.name}` is already a branch of `{other.adt}`",
                        related=[Related(other.span, "first declared here")],
                        help="the branches of the ADTs of a policy have different names",
                    )
                )
                continue
            table.constructors[branch.name.name] = Branch(
                name,
                branch.name.name,
                tuple((a.name, a.type.name) for a in branch.fields),
                branch.name.span,
            )
    for node in nodes.values():
        problems.extend(_check(table, node))
    return table, problems


def _definition(statement: ast.TypeDecl) -> TypeDef:
    name = statement.name.name
    if statement.kind == "subtype":
        return TypeDef(name, "subtype", base=statement.members[0].name, span=statement.name.span)
    if statement.kind == "union" and len(statement.members) == 1:
        return TypeDef(name, "alias", base=statement.members[0].name, span=statement.name.span)
    if statement.kind == "union":
        return TypeDef(
            name, "union", members=tuple(m.name for m in statement.members), span=statement.name.span
        )
    if statement.kind == "record":
        return TypeDef(
            name,
            "record",
            fields=tuple((a.name, a.type.name) for a in statement.fields),
            span=statement.name.span,
        )
    branches = tuple(
        (b.name.name, tuple((a.name, a.type.name) for a in b.fields)) for b in statement.branches
    )
    return TypeDef(name, "adt", branches=branches, span=statement.name.span)


def unknown_type(table: TypeTable, ident: ast.Ident, extra: tuple[str, ...] = ()) -> Diagnostic | None:
    """``invalid-directive`` for a type name that is neither primitive nor declared."""
    if table.known(ident.name) or ident.name in extra:
        return None
    allowed = (*PRIMITIVES, *extra, *sorted(table.types))
    close = did_you_mean(ident.name, allowed)
    return codes.INVALID_DIRECTIVE(
        ident.span,
        f"unknown type `{ident.name}`",
        help=(f"did you mean `{close}`? " if close else "")
        + "the types are "
        + ", ".join(f"`{t}`" for t in allowed)
        + " (declare one with `.type`)",
        fix=replace_name(ident.span, ident.name, close),
    )


def _check(table: TypeTable, node: ast.TypeDecl) -> list[Diagnostic]:
    problems: list[Diagnostic] = []
    names: list[ast.Ident] = list(node.members)
    names += [a.type for a in node.fields]
    names += [a.type for b in node.branches for a in b.fields]
    for ident in names:
        problem = unknown_type(table, ident)
        if problem is not None:
            problems.append(problem)
    if problems:
        return problems
    name = node.name.name
    if node.kind in ("subtype", "union"):
        if table.representation(name) is None:
            problems.append(
                codes.INVALID_DIRECTIVE(node.name.span, f"type `{name}` is defined in terms of itself")
            )
        elif node.kind == "subtype" and table.representation(node.members[0].name) == "record":
            problems.append(
                codes.INVALID_DIRECTIVE(
                    node.members[0].span,
                    f"`{node.members[0].name}` is a record type or an ADT: it has no subtypes",
                    help="a subtype's base is `symbol`, `number`, `unsigned`, `float` or a subtype of one",
                )
            )
        elif len(node.members) > 1:
            bases = {m.name: table.representation(m.name) for m in node.members}
            if len(set(bases.values())) > 1 or "record" in bases.values():
                shown = ", ".join(f"`{m}` is a `{b}`" for m, b in bases.items())
                problems.append(
                    codes.INVALID_DIRECTIVE(
                        node.span,
                        f"the members of union `{name}` are not all of one primitive type: {shown}",
                        help="a union's members are subtypes of one primitive type",
                    )
                )
    seen: dict[str, ast.Attribute] = {}
    for attribute in node.fields:
        if attribute.name in seen:
            problems.append(
                codes.INVALID_DIRECTIVE(
                    attribute.span,
                    f"field `{attribute.name}` appears twice in `{name}`",
                    related=[Related(seen[attribute.name].span, "first here")],
                )
            )
        seen[attribute.name] = attribute
    return problems
