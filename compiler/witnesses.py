"""Witnesses of ``min`` and ``max``: variables of an aggregate's body used outside it.

``o(x, m) :- m = max z : e(x, z).`` uses ``x``, which only the aggregate binds. Soufflé
grounds such a *witness* (src/ast/transform/GroundWitnesses.cpp): inside the aggregate the
witness is a variable of its own, and the rule gets the aggregate's body again, with its target
being the aggregate's value, which binds the witness to each tuple that reaches it:

    o(x, m) :- m = max z : e(_x@w, z), e(x, m).

so ``x`` is every ``x`` whose ``z`` is the largest. Soufflé does so for ``min`` and ``max``, whose
value some tuple reaches; a witness of ``count``, ``sum`` or ``mean`` stays an error (the witness
problem, ``unsafe-variable``), as in Soufflé.

>>> from .pipeline import compile_source
>>> text = ".decl e(x: symbol, z: number)\\ne(\\"a\\", 1). e(\\"b\\", 5). e(\\"c\\", 5).\\n"
>>> text += ".decl o(x: symbol, m: number)\\no(x, m) :- m = max z : e(x, z).\\n.output o"
>>> [d.message for d in compile_source(text, "p.dl").diagnostics]
[]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from . import ast
from .inlining import bound_by
from .loader import Program
from .symbols import Symbols

EXTREMA = ("min", "max")


def grounded(program: Program, symbols: Symbols) -> Program:
    """The program with the witnesses of each ``min`` and ``max`` grounded."""

    def binds(atom: ast.Atom) -> bool:
        return atom.name not in symbols.functors and not symbols.is_inline(atom.name)

    changed = False
    modules = []
    for module in program.modules:
        statements = []
        for statement in module.statements:
            if isinstance(statement, ast.Rule) and not program.is_library(module.path):
                rule = _grounded(statement, binds)
                changed = changed or rule is not statement
                statement = rule
            statements.append(statement)
        modules.append(replace(module, statements=tuple(statements)))
    return replace(program, modules=tuple(modules)) if changed else program


def _grounded(rule: ast.Rule, binds: Callable[[ast.Atom], bool]) -> ast.Rule:
    for position, literal in enumerate(rule.body):
        for aggregate in _aggregates(literal):
            witnesses = _witnesses(rule, literal, aggregate, binds)
            if witnesses:
                return _grounded(_ground(rule, position, aggregate, witnesses), binds)
    return rule


def _aggregates(literal: ast.Literal) -> list[ast.Aggregate]:
    if not isinstance(literal, ast.Comparison):
        return []
    found: list[ast.Aggregate] = []
    for side in (literal.left, literal.right):
        found.extend(t for t in ast.walk_term(side, into_aggregates=False) if isinstance(t, ast.Aggregate))
    return found


def _witnesses(
    rule: ast.Rule, literal: ast.Literal, aggregate: ast.Aggregate, binds: Callable[[ast.Atom], bool]
) -> list[str]:
    """The variables of a ``min``/``max`` body that the rule uses outside the aggregate and
    nothing outside it binds (its target's are its own)."""
    if aggregate.op not in EXTREMA or not isinstance(aggregate.target, ast.Var):
        return []
    inside = {v.name for lit in aggregate.body for t in ast.literal_terms(lit) for v in ast.term_vars(t)}
    inside.discard(aggregate.target.name)

    def used(term: ast.Term) -> set[str]:  # outside every aggregate
        return {t.name for t in ast.walk_term(term, into_aggregates=False) if isinstance(t, ast.Var)}

    outside: set[str] = set()
    for term in rule.head.args:
        outside |= used(term)
    rest = tuple(lit for lit in rule.body if lit is not literal)
    for lit in (*rest, literal):
        for term in ast.literal_terms(lit):
            outside |= used(term)
    bound = bound_by(rest, binds)
    return sorted(name for name in inside & outside if name not in bound and not name.startswith("_"))


def _ground(rule: ast.Rule, position: int, aggregate: ast.Aggregate, witnesses: list[str]) -> ast.Rule:
    renamed = {name: f"_{name}@w" for name in witnesses}  # `_`: it may occur once

    def rename(term: ast.Term) -> ast.Term:
        if isinstance(term, ast.Var) and term.name in renamed:
            return replace(term, name=renamed[term.name])
        return term

    inner = replace(
        aggregate,
        body=tuple(ast.map_literal(lit, lambda t: ast.map_deep(t, rename)) for lit in aggregate.body),
    )
    literal = rule.body[position]
    assert isinstance(literal, ast.Comparison)
    value: ast.Term = inner
    if literal.op == "=" and aggregate in (literal.left, literal.right):
        other = literal.right if literal.left is aggregate else literal.left
        if isinstance(other, ast.Var):
            value = other  # `m = max z : ...`: the value is `m`
    target = aggregate.target
    assert isinstance(target, ast.Var)

    def as_value(term: ast.Term) -> ast.Term:
        return value if isinstance(term, ast.Var) and term.name == target.name else term

    def swap(term: ast.Term) -> ast.Term:  # the aggregate, found before anything is rebuilt
        if term is aggregate:
            return inner
        return term if isinstance(term, ast.Aggregate) else ast.map_children(term, swap)

    again = tuple(ast.map_literal(lit, lambda t: ast.map_deep(t, as_value)) for lit in aggregate.body)
    body = list(rule.body)
    body[position] = ast.map_literal(literal, swap)
    return replace(rule, body=(*body, *again))
