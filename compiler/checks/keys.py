"""``invalid-key``: a ``.key`` that does not say something true of a relation's given facts.

``.key ToolCall(a)`` says that the attributes named determine the others: no two facts of the
relation agree on them and differ elsewhere (``.key Candidate()``: at most one fact). The
runtime refuses facts given to a session or to ``eval`` that break a key, so the analyzer and
the planner may rely on it. A key must therefore name attributes of a declared relation (each
once, not all of them: a key of every attribute says nothing), of an ``.input`` (whose facts
are given), not ``eqrel`` (whose closure relates a value to several), and be written in the
file that declares the relation (the library's keys are the library's: a policy cannot make
the facts events give break one).

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source('.decl R(a: symbol, b: symbol)\\n.input R\\n.key R(c)') if d.name == "invalid-key"]
['`c` is not an attribute of `R`']
"""

from __future__ import annotations

from pathlib import Path

from .. import ast, codes
from ..diagnostics import Diagnostic, Related, replace_name
from ..symbols import Relation, key_position
from ..syntax_errors import did_you_mean
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    seen: dict[tuple[str, tuple[int, ...]], ast.Key] = {}
    decls = {
        statement.name.name: statement
        for _, statement in context.program.statements()
        if isinstance(statement, ast.Decl)
    }
    for _, statement in context.program.statements():
        if isinstance(statement, ast.Misplaced):
            statement = statement.statement
        if not isinstance(statement, ast.Key):
            continue
        name = statement.relation.name
        relation = context.symbols.relations.get(name)
        decl = decls.get(name)
        if relation is None or decl is None or not relation.declared:
            diagnostics.append(
                codes.INVALID_KEY(
                    statement.relation.span,
                    f"`.key` names `{name}`, which no `.decl` declares",
                    help=f"declare `{name}` with its attributes, then name the ones that determine the others",
                )
            )
            continue
        problems = _attributes(statement, relation)
        if problems:
            diagnostics.extend(problems)
            continue
        position = key_position(decl, statement)
        if position is None:
            diagnostics.append(
                codes.INVALID_KEY(
                    statement.span,
                    f"a key of every attribute of `{name}` says nothing: a relation holds each fact once",
                    help="name the attributes that determine the others, or remove the key",
                )
            )
            continue
        if (name, position) in seen:
            diagnostics.append(
                codes.INVALID_KEY(
                    statement.span,
                    f"`{name}` has this key already",
                    related=[Related(seen[name, position].span, "declared here")],
                    help="remove one of them",
                )
            )
            continue
        seen[name, position] = statement
        diagnostics.extend(_relation(statement, relation))
    return diagnostics


def _attributes(statement: ast.Key, relation: Relation) -> list[Diagnostic]:
    """Each name a key gives is an attribute of its relation, named once."""
    found = []
    named: set[str] = set()
    for ident in statement.attributes:
        if ident.name not in relation.attributes:
            close = did_you_mean(ident.name, relation.attributes)
            found.append(
                codes.INVALID_KEY(
                    ident.span,
                    f"`{ident.name}` is not an attribute of `{relation.name}`",
                    help=(f"did you mean `{close}`? " if close else "")
                    + f"the attributes of `{relation.name}` are "
                    + ", ".join(f"`{a}`" for a in relation.attributes),
                    fix=replace_name(ident.span, ident.name, close),
                )
            )
        elif ident.name in named:
            found.append(codes.INVALID_KEY(ident.span, f"`{ident.name}` is named twice in this key"))
        named.add(ident.name)
    return found


def _relation(statement: ast.Key, relation: Relation) -> list[Diagnostic]:
    """A key is about the given facts of a relation declared in its file."""
    name = relation.name
    if statement.span.file != relation.home:
        return [
            codes.INVALID_KEY(
                statement.span,
                f"the keys of `{name}` are declared with it, in {Path(relation.home).name}",
                related=[Related(relation.span, "declared here")],
                help="a relation's keys are declared beside it (the facts its events give keep them); remove this one",
            )
        ]
    if relation.eqrel:
        return [
            codes.INVALID_KEY(
                statement.span,
                f"`eqrel` relation `{name}` cannot have a key: its closure relates a value to several",
            )
        ]
    if not relation.is_input:
        return [
            codes.INVALID_KEY(
                statement.span,
                f"`{name}` is not an `.input`: a key is a promise about the facts given for a relation, "
                "which the runtime checks as they are given",
                help=f"declare `.input {name}`, or remove the key",
            )
        ]
    return []
