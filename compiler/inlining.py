"""Inline relations used with arguments their callers do not bind.

A relation declared ``inline`` is evaluated where it is used, for the values the using rule
gives it. Soufflé inlines it instead (src/ast/transform/InlineRelations.cpp puts its rules'
bodies in place of each use), so a use may pass ``_`` or a variable only the inline
relation's body binds: ``o(x) :- i(x, _).`` with ``i(x, y) :- e(x, y).`` is
``o(x) :- e(x, _).``. The answer is the relation's own facts either way, so such a relation,
when each of its rules binds its head, is stored here instead, which needs nothing more of
the planner or the runtime. One whose rules leave head variables to the caller (``small(x)
:- x <= 3.``) cannot be stored, and such a use is refused (``unsafe-variable``), as Soufflé
refuses the rule inlining makes.

>>> from .pipeline import compile_source
>>> text = ".decl e(x: number, y: number)\\ne(1, 2).\\n.decl i(x: number, y: number) inline\\n"
>>> text += "i(x, y) :- e(x, y).\\no(x) :- i(x, _).\\n.output o"
>>> compile_source(text, "p.dl", upto="resolve").symbols.is_inline("i")
False
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from . import ast
from .loader import Program
from .symbols import Symbols


def materialized(program: Program, symbols: Symbols) -> Symbols:
    """The symbol table with each inline relation stored that some use calls with an argument
    the caller does not bind, and whose rules each bind its head."""
    inline = {name for name, relation in symbols.relations.items() if relation.inline}
    if not inline:
        return symbols

    def binds(atom: ast.Atom) -> bool:
        return atom.name not in symbols.functors and atom.name not in inline

    wanted = set()
    for _, rule in program.rules():
        for literals in _scopes(rule.body):
            bound = bound_by(literals, binds)
            for literal in literals:
                atom = literal.atom if isinstance(literal, ast.Negation) else literal
                if isinstance(atom, ast.Atom) and atom.name in inline and not _given(atom, bound):
                    wanted.add(atom.name)
    stored = {name for name in wanted if all(_binds_head(rule, binds) for rule in program.rules_of(name))}
    if not stored:
        return symbols
    relations = {
        name: replace(relation, inline=False) if name in stored else relation
        for name, relation in symbols.relations.items()
    }
    return replace(symbols, relations=relations)


def _scopes(body: tuple[ast.Literal, ...]) -> list[tuple[ast.Literal, ...]]:
    """A body and the bodies of the aggregates inside it (each a scope of its own, which also
    sees what the body around it binds: :func:`bound_by` is generous, as it should be here)."""
    found = [body]
    for literal in body:
        for term in ast.literal_terms(literal):
            for inner in ast.walk_term(term):
                if isinstance(inner, ast.Aggregate):
                    found.append(tuple(inner.body) + body)
    return found


def _given(atom: ast.Atom, bound: set[str]) -> bool:
    """Whether every argument of a use is known: no `_`, every variable bound."""
    for arg in atom.args:
        for term in ast.walk_term(arg, into_aggregates=False):
            if isinstance(term, ast.Wildcard) or (isinstance(term, ast.Var) and term.name not in bound):
                return False
    return True


def _binds_head(rule: ast.Rule, binds: Callable[[ast.Atom], bool]) -> bool:
    bound = bound_by(rule.body, binds)
    return all(v.name in bound for arg in rule.head.args for v in ast.term_vars(arg))


def bound_by(literals: tuple[ast.Literal, ...], binds: Callable[[ast.Atom], bool]) -> set[str]:
    """The variables positive atoms of stored relations bind, and assignments from them."""
    bound: set[str] = set()
    for literal in literals:
        if isinstance(literal, ast.Atom) and binds(literal):
            bound.update(v.name for arg in literal.args for v in ast.pattern_vars(arg))

    def known(term: ast.Term) -> bool:
        return all(
            (isinstance(t, ast.Var) and t.name in bound) or not isinstance(t, ast.Var | ast.Wildcard)
            for t in ast.walk_term(term, into_aggregates=False)
        )

    changed = True
    while changed:
        changed = False
        for literal in literals:
            if isinstance(literal, ast.Comparison) and literal.op == "=":
                for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                    new = {v.name for v in ast.pattern_vars(side)} - bound
                    if new and known(other):
                        bound |= new
                        changed = True
    return bound
