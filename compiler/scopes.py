"""Which variables of an aggregate are its own, and which it shares with the rule around it.

The rule is Soufflé's. A variable of an aggregate is

* *injected* (it groups the aggregate, its value comes from outside) when it is grounded outside
  the aggregate — by a positive atom, or an assignment of grounded values, in the enclosing
  scopes, where the aggregate itself gives no value and every other aggregate gives one — and
  it does not occur in the aggregate's target;
* a *witness* when it also occurs outside the aggregate, not grounded there, and is not
  injected: the aggregate would have to bind it for the outside, which it does not (an error
  the safety check reports);
* *local* otherwise: in particular every variable of the target (``m(a) :- a = max a : r(a).``
  takes the largest ``a`` of ``r`` whatever the head's ``a`` is), and a variable two aggregates
  of a rule both use but nothing outside grounds (``lo = min z : a(n, z), hi = max z : a(n, z)``).

:func:`localized` renames the local variables that also occur elsewhere in the rule to names
no source can spell (``a@1``), so that evaluation and translation can treat one name as one
variable:

>>> from policyc.compiler.parser import parse
>>> from policyc.compiler.source import SourceFile
>>> module, _ = parse(SourceFile("p.dl", "m(a) :- a = max a : r(a)."))
>>> rule = localized(module.statements[0])
>>> rule.head.args[0].name, rule.body[0].left.name, sorted(v.name for v in ast.term_vars(rule.body[0].right))
('a', 'a', ['a@1', 'a@1'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from . import ast

Binds = Callable[[ast.Atom], bool]
"""Whether a positive atom grounds its variables (a stored relation's does; a foreign
predicate's or an inline relation's does not)."""

RENAMED = "@"  # separates a local variable's source name from the number that tells it apart


def source_name(name: str) -> str:
    """The name a variable has in the source (``a@1`` is the aggregate's own ``a``)."""
    return name.split(RENAMED, 1)[0]


def _all_binds(atom: ast.Atom) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Scope:
    """How an aggregate's variables divide (names)."""

    injected: frozenset[str]
    witnesses: frozenset[str]
    local: frozenset[str]

    @property
    def grouping(self) -> frozenset[str]:
        """The variables whose value the aggregate needs from outside."""
        return self.injected | self.witnesses


def _names(term: ast.Term) -> set[str]:
    return {v.name for v in ast.term_vars(term)}


def _literal_names(literal: ast.Literal) -> set[str]:
    found: set[str] = set()
    for term in ast.literal_terms(literal):
        found |= _names(term)
    return found


def _aggregates(literal: ast.Literal) -> Iterator[ast.Aggregate]:
    """The aggregates of a literal not inside another one."""
    for term in ast.literal_terms(literal):
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Aggregate):
                yield t


def _shallow_names(term: ast.Term) -> set[str]:
    """Variables of a term outside its aggregates."""
    return {t.name for t in ast.walk_term(term, into_aggregates=False) if isinstance(t, ast.Var)}


def grounded(
    literals: tuple[ast.Literal, ...],
    given: set[str],
    binds: Binds,
    without: ast.Aggregate | None = None,
) -> set[str]:
    """The variables grounded in a scope: by its positive atoms, and by assignments whose other
    side is grounded; an aggregate counts as a grounded value, except ``without``."""
    found = set(given)
    for literal in literals:
        if isinstance(literal, ast.Atom) and binds(literal):
            found.update(a.name for a in literal.args if isinstance(a, ast.Var))

    def known(term: ast.Term) -> bool:
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Wildcard) or (isinstance(t, ast.Var) and t.name not in found):
                return False
            if isinstance(t, ast.Aggregate) and t is without:
                return False
        return True

    assignments = [lit for lit in literals if isinstance(lit, ast.Comparison) and lit.op == "="]
    changed = True
    while changed:
        changed = False
        for literal in assignments:
            for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                if isinstance(side, ast.Var) and side.name not in found and known(other):
                    found.add(side.name)
                    changed = True
    return found


def scope_of(
    aggregate: ast.Aggregate,
    literals: tuple[ast.Literal, ...],
    given: set[str],
    outside: set[str],
    binds: Binds = _all_binds,
) -> Scope:
    """How the variables of ``aggregate`` (an aggregate of one of ``literals``, the scope it is
    in) divide; ``given``: the variables grounded around that scope, ``outside``: the names
    occurring around it (the head, enclosing scopes)."""
    names = _names(aggregate)
    target = _names(aggregate.target) if aggregate.target is not None else set()
    without = grounded(literals, given, binds, without=aggregate)
    injected = (names & without) - target
    with_value = grounded(literals, given, binds)
    around = set(outside)
    for literal in literals:
        for term in ast.literal_terms(literal):
            around |= _shallow_names(term)  # not inside any aggregate of the scope
    witnesses = (names & around) - with_value - injected
    return Scope(frozenset(injected), frozenset(witnesses), frozenset(names - injected - witnesses))


def scopes(rule: ast.Rule, binds: Binds = _all_binds, given: set[str] | None = None) -> dict[int, Scope]:
    """The scope of every aggregate of a rule (nested ones too), by ``id`` of the aggregate."""
    found: dict[int, Scope] = {}
    head = set().union(*(_shallow_names(a) for a in rule.head.args)) if rule.head.args else set()
    _visit(rule.body, set(given or ()), head, binds, found)
    return found


def _visit(
    literals: tuple[ast.Literal, ...],
    given: set[str],
    outside: set[str],
    binds: Binds,
    found: dict[int, Scope],
) -> None:
    inside_given = grounded(literals, given, binds)
    level = set(outside)
    for literal in literals:
        for term in ast.literal_terms(literal):
            level |= _shallow_names(term)
    for literal in literals:
        for aggregate in _aggregates(literal):
            found[id(aggregate)] = scope_of(aggregate, literals, given, outside, binds)
            inner_outside = level | (_names(aggregate.target) if aggregate.target is not None else set())
            _visit(aggregate.body, inside_given, inner_outside, binds, found)


# ---------------------------------------------------------------------------- renaming


def localized(rule: ast.Rule, binds: Binds = _all_binds, given: set[str] | None = None) -> ast.Rule:
    """The rule with each aggregate's local variables that also occur elsewhere in the rule
    renamed apart (``a`` becomes ``a@1``); the rule itself when there are none."""
    if not any(True for literal in rule.body for _ in _aggregates(literal)):
        return rule
    taken = {v.name for term in _rule_terms(rule) for v in ast.term_vars(term)}
    counter = [0]

    def fresh(name: str) -> str:
        while True:
            counter[0] += 1
            candidate = f"{source_name(name)}{RENAMED}{counter[0]}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate

    head = set().union(*(_shallow_names(a) for a in rule.head.args)) if rule.head.args else set()
    body = _localize(rule.body, set(given or ()), head, binds, fresh)
    return rule if _same(body, rule.body) else replace(rule, body=body)


def _same(a: tuple[ast.Literal, ...], b: tuple[ast.Literal, ...]) -> bool:
    return all(x is y for x, y in zip(a, b, strict=True))


def _rule_terms(rule: ast.Rule) -> Iterator[ast.Term]:
    yield from rule.head.args
    for literal in rule.body:
        yield from ast.literal_terms(literal)


def _localize(
    literals: tuple[ast.Literal, ...],
    given: set[str],
    outside: set[str],
    binds: Binds,
    fresh: Callable[[str], str],
) -> tuple[ast.Literal, ...]:
    inside_given = grounded(literals, given, binds)
    result = list(literals)
    for index, literal in enumerate(literals):
        aggregates = list(_aggregates(literal))
        if not aggregates:
            continue
        # names used outside each aggregate, in this scope and around it
        elsewhere: dict[int, set[str]] = {}
        for aggregate in aggregates:
            names = set(outside)
            for other_index, other in enumerate(literals):
                for term in ast.literal_terms(other):
                    names |= _names_except(term, aggregate) if other_index == index else _names(term)
            elsewhere[id(aggregate)] = names
        mapping: dict[int, ast.Aggregate] = {}
        for aggregate in aggregates:
            scope = scope_of(aggregate, literals, given, outside, binds)
            renames = {n: fresh(n) for n in sorted(scope.local & elsewhere[id(aggregate)])}
            renamed = _rename_aggregate(aggregate, renames) if renames else aggregate
            level = set(outside)
            for other in literals:
                for term in ast.literal_terms(other):
                    level |= _shallow_names(term)
            if renamed.target is not None:
                level |= _names(renamed.target)
            body = _localize(renamed.body, inside_given, level, binds, fresh)
            if not _same(body, renamed.body):
                renamed = replace(renamed, body=body)
            if renamed is not aggregate:
                mapping[id(aggregate)] = renamed
        if mapping:
            result[index] = _replace_aggregates(literal, mapping)
    return tuple(result)


def _names_except(term: ast.Term, aggregate: ast.Aggregate) -> set[str]:
    """Variables of a term, leaving out those inside ``aggregate``."""
    found: set[str] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if t is aggregate:
            continue
        if isinstance(t, ast.Var):
            found.add(t.name)
        elif isinstance(t, ast.Aggregate):
            found |= _names(t)
        else:
            stack.extend(ast.term_children(t))
    return found


def _rename_term(term: ast.Term, renames: dict[str, str]) -> ast.Term:
    if isinstance(term, ast.Var):
        return replace(term, name=renames[term.name]) if term.name in renames else term
    if isinstance(term, ast.Aggregate):
        return _rename_aggregate(term, renames)
    return ast.map_children(term, lambda t: _rename_term(t, renames))


def _rename_aggregate(aggregate: ast.Aggregate, renames: dict[str, str]) -> ast.Aggregate:
    target = None if aggregate.target is None else _rename_term(aggregate.target, renames)
    return replace(
        aggregate,
        target=target,
        body=tuple(ast.map_literal(lit, lambda t: _rename_term(t, renames)) for lit in aggregate.body),
    )


def _replace_term(term: ast.Term, mapping: dict[int, ast.Aggregate]) -> ast.Term:
    if id(term) in mapping:
        return mapping[id(term)]
    return ast.map_children(term, lambda t: _replace_term(t, mapping))


def _replace_aggregates(literal: ast.Literal, mapping: dict[int, ast.Aggregate]) -> ast.Literal:
    return ast.map_literal(literal, lambda t: _replace_term(t, mapping))
