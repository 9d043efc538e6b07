"""What a rule contains, gathered in one walk so that each check need not walk it again.

>>> from policyc.compiler.parser import parse
>>> from policyc.compiler.source import SourceFile
>>> module, _ = parse(SourceFile("p.dl", 'D(a) :- S(a), n = count : { T(a, x) }, f(a) > n.'))
>>> s = summarize(module.statements[0])
>>> [(atom.name, negated, inside) for atom, negated, inside in s.atoms]
[('S', False, False), ('T', False, True)]
>>> [c.name for c in s.calls], sorted(s.outer_variables)
(['f'], ['a', 'n'])
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ast


@dataclass(frozen=True, slots=True)
class RuleSummary:
    """What the checks ask of a rule, collected in one walk over it."""

    atoms: tuple[tuple[ast.Atom, bool, bool], ...]  # body atoms: (atom, negated, inside an aggregate)
    calls: tuple[ast.Call, ...]  # every function call, in the head, the body and aggregates
    variables: tuple[ast.Var, ...]  # every variable occurrence, in source order
    outer_variables: frozenset[str]  # names occurring outside every aggregate
    aggregates: tuple[ast.Aggregate, ...]  # outermost aggregates of the body


def summarize(rule: ast.Rule) -> RuleSummary:
    atoms: list[tuple[ast.Atom, bool, bool]] = []
    calls: list[ast.Call] = []
    variables: list[ast.Var] = []
    outer: set[str] = set()
    aggregates: list[ast.Aggregate] = []

    def term(t: ast.Term, depth: int) -> None:
        kind = type(t)
        if kind is ast.Var:
            variables.append(t)  # type: ignore[arg-type]
            if depth == 0:
                outer.add(t.name)  # type: ignore[union-attr]
        elif kind is ast.Call:
            calls.append(t)  # type: ignore[arg-type]
            for arg in t.args:  # type: ignore[union-attr]
                term(arg, depth)
        elif kind is ast.BinOp:
            term(t.left, depth)  # type: ignore[union-attr]
            term(t.right, depth)  # type: ignore[union-attr]
        elif kind is ast.Negate or kind is ast.UnaryOp:
            term(t.operand, depth)  # type: ignore[union-attr]
        elif kind is ast.Record or kind is ast.Constructor:
            for arg in t.args:  # type: ignore[union-attr]
                term(arg, depth)
        elif kind is ast.Aggregate:
            if depth == 0:
                aggregates.append(t)  # type: ignore[arg-type]
            if t.target is not None:  # type: ignore[union-attr]
                term(t.target, depth + 1)  # type: ignore[union-attr]
            literals(t.body, depth + 1)  # type: ignore[union-attr]

    def literals(body: tuple[ast.Literal, ...], depth: int) -> None:
        for literal in body:
            kind = type(literal)
            if kind is ast.Atom:
                atoms.append((literal, False, depth > 0))  # type: ignore[arg-type]
                for arg in literal.args:  # type: ignore[union-attr]
                    term(arg, depth)
            elif kind is ast.Negation:
                atoms.append((literal.atom, True, depth > 0))  # type: ignore[union-attr]
                for arg in literal.atom.args:  # type: ignore[union-attr]
                    term(arg, depth)
            else:
                term(literal.left, depth)  # type: ignore[union-attr]
                term(literal.right, depth)  # type: ignore[union-attr]

    for arg in rule.head.args:
        term(arg, 0)
    literals(rule.body, 0)
    return RuleSummary(tuple(atoms), tuple(calls), tuple(variables), frozenset(outer), tuple(aggregates))
