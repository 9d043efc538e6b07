"""Which relations can never hold, on any database.

A relation can hold when it is an input, or has a rule whose body may hold: no positive literal
on a relation that can never hold, and no contradiction in the body (:mod:`unsat`). The least
fixpoint of "can hold" (computed in time linear in the rules) gives the rest, each with the
reason it can never hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified

from .unsat import contradiction


def body_relations(rule: ast.Rule, functors: Any) -> list[str]:
    """The relations a rule's body needs to hold (positive literals, outside aggregates)."""
    return [lit.name for lit in rule.body if isinstance(lit, ast.Atom) and lit.name not in functors]


def never_holds(
    compilation: Stratified, contradictions: Mapping[int, object] | None = None
) -> dict[str, str]:
    """Relations that no database makes hold, with why. ``contradictions`` maps ``id(rule)``
    to what :func:`contradiction` found (computed when not given); only its keys are read."""
    symbols = compilation.symbols
    functors = symbols.functors
    rules: dict[str, list[ast.Rule]] = {}
    for _, rule in compilation.program.rules():
        rules.setdefault(rule.head.name, []).append(rule)
    if contradictions is None:
        contradictions = {
            id(rule): found
            for group in rules.values()
            for rule in group
            if (found := contradiction(compilation, rule)) is not None
        }
    # the least fixpoint, each rule counting the relations it needs that may not hold yet
    possible = {name for name in symbols.relations if name in symbols.inputs}
    ready = list(possible)
    waiting: dict[str, list[tuple[int, str]]] = {}  # relation -> the rules that need it, with their heads
    missing: dict[int, int] = {}
    for name, group in rules.items():
        for rule in group:
            if id(rule) in contradictions:
                continue
            needs = set(body_relations(rule, functors)) - possible
            if not needs and name not in possible:
                possible.add(name)
                ready.append(name)
            missing[id(rule)] = len(needs)
            for need in needs:
                waiting.setdefault(need, []).append((id(rule), name))
    while ready:
        for waiter, name in waiting.pop(ready.pop(), ()):
            missing[waiter] -= 1
            if not missing[waiter] and name not in possible:
                possible.add(name)
                ready.append(name)
    never: dict[str, str] = {}
    for name in symbols.relations:
        if name in possible:
            continue
        group = rules.get(name, [])
        if not group:
            never[name] = f"`{name}` is not an input and has no rules"
        elif all(id(r) in contradictions for r in group):
            never[name] = f"every rule of `{name}` has a contradictory body"
        else:
            blocked = sorted(
                {r for rule in group for r in body_relations(rule, functors) if r not in possible}
            )
            never[name] = (
                f"every rule of `{name}` needs a relation that can never hold ({', '.join(f'`{b}`' for b in blocked)})"
            )
    return never
