"""Demand-driven evaluation: the magic-set transformation the planner applies where it pays.

A recursive relation that only ever is read with some arguments known (``sg(q, y)`` with ``q``
bound by ``Ask(q)``) need not be computed in full: only its facts whose known arguments are
*demanded*. The planner then evaluates it *demand-driven*:

* its **adornment** says which arguments are known at every use (``bf``: the first bound, the
  second free). It is the intersection, over all the relation's uses, of the arguments bound
  where the planner's own join order reaches the atom (sideways information passing); its own
  rules bind their head's bound arguments first, which is what makes the uses inside them
  bound in turn;
* a **magic relation** ``magic@sg@bf`` (a name no source can spell) holds the demanded values
  of the bound arguments: for each use of ``sg`` in a rule, a *magic rule* derives them from the
  literals the rule evaluates before that use (and from the rule's own magic atom, when its head
  is demand-driven too);
* each rule of the relation is *guarded* by its magic atom, evaluated first: it derives only
  demanded facts.

The planner applies it to a relation (``where it pays``) when the relation is recursive, has
rules and two arguments or more (a unary relation holds no more values than the demand for
it would: demanding them costs as much as computing them), is neither an input, an output,
inline, nor a decision relation, every use of it is a
positive atom of a stored rule (not under ``!``, not inside an aggregate, not in an inline
relation's rule) and every use binds at least one argument in common, where each of its rules
has a variable or a constant in its head (not an expression). When the transformed
program would have recursion through negation or an aggregate, the relations involved are
evaluated in full instead.

Every fact a demand-driven relation holds is one the plain evaluation derives, and it holds
all of them whose bound arguments are demanded: each rule reading it gets exactly the
bindings it gets from the full relation, so every other relation is the same.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from . import ast
from .source import Span
from .stratify import components as strongly_connected
from .summary import summarize

MAGIC_PREFIX = "magic@"


@dataclass(frozen=True)
class Options:
    """Which relations the planner may evaluate demand-driven: none unless ``enabled``; never
    the ``observed`` ones (evaluated in full, as outputs are: something prints them whole)."""

    enabled: bool = True
    observed: frozenset[str] = frozenset()


NO_MAGIC = Options(enabled=False)


def is_magic(name: str) -> bool:
    """Whether a relation name is a magic relation's (no source relation is named so)."""
    return name.startswith(MAGIC_PREFIX)


def adornment_text(arity: int, bound: Iterable[int]) -> str:
    """``bf`` for a binary relation whose first argument is bound."""
    known = set(bound)
    return "".join("b" if i in known else "f" for i in range(arity))


def magic_name(relation: str, arity: int, bound: Iterable[int]) -> str:
    return f"{MAGIC_PREFIX}{relation}@{adornment_text(arity, bound)}"


@dataclass(frozen=True)
class MagicRule:
    """A rule deriving demanded values: from rule ``origin``, for the use at body ``literal``."""

    origin: int
    literal: int
    rule: ast.Rule


@dataclass(frozen=True)
class Demand:
    """The transformation: each demand-driven relation's bound argument positions, the rules
    guarded by their magic atom (by rule index: the guard is their literal 0), and the magic
    rules."""

    bound: dict[str, tuple[int, ...]]
    magic: dict[str, str]  # demand-driven relation -> its magic relation
    guarded: dict[int, ast.Rule]
    rules: tuple[MagicRule, ...]


Order = Callable[[ast.Rule, frozenset[str]], list[int]]


def transform(
    rules: list[ast.Rule],
    heads: list[str],
    candidates: set[str],
    arity: Callable[[str], int],
    order: Order,
    skipped: set[int],
) -> Demand:
    """The transformation of ``rules`` (whose relations are ``heads``) for those of the
    ``candidates`` it pays for. ``order`` gives the literals of a rule in the order the planner
    evaluates them with the given variables bound first; rules in ``skipped`` (those of inline
    relations) read a candidate only with values no bottom-up evaluation knows."""
    wanted = set(candidates)
    for i, rule in enumerate(rules):
        top = {id(lit) for lit in rule.body if isinstance(lit, ast.Atom)}
        for atom, negated, inside in summarize(rule).atoms:
            if atom.name in wanted and (negated or inside or id(atom) not in top or i in skipped):
                wanted.discard(atom.name)
    # a rule's head binds a bound argument for its guard when it is a variable or a constant
    # (not an expression of variables its body binds)
    plain = {c: set(range(arity(c))) for c in wanted}
    for i, rule in enumerate(rules):
        if heads[i] in plain:
            plain[heads[i]] &= {
                j
                for j, arg in enumerate(rule.head.args)
                if isinstance(arg, ast.Var | ast.String | ast.Integer | ast.Float)
            }
    while True:
        bound = {c: set(plain[c]) for c in wanted}
        while True:
            uses = _uses(rules, heads, bound, order, skipped)
            new = {c: set.intersection(plain[c], *uses[c]) if uses.get(c) else set() for c in bound}
            if new == bound:
                break
            bound = new
        empty = {c for c, b in bound.items() if not b}
        wanted -= empty | _unasked(rules, heads, wanted - empty, skipped)
        if not empty and wanted == set(bound):
            break
    frozen = {c: tuple(sorted(b)) for c, b in bound.items()}
    magic = {c: magic_name(c, arity(c), b) for c, b in frozen.items()}

    def guard(name: str, args: tuple[ast.Term, ...], span: Span) -> ast.Atom:
        return ast.Atom(magic[name], tuple(args[j] for j in frozen[name]), span=span, name_span=span)

    guarded: dict[int, ast.Rule] = {}
    found: list[MagicRule] = []
    for i, rule in enumerate(rules):
        if i in skipped:
            continue
        head = heads[i]
        own = guard(head, rule.head.args, rule.head.span) if head in frozen else None
        if own is not None:
            guarded[i] = replace(rule, body=(own, *rule.body))
        if not any(isinstance(lit, ast.Atom) and lit.name in frozen for lit in rule.body):
            continue
        given = _given(rule, frozen.get(head, ()))
        prefix: list[ast.Literal] = [own] if own is not None else []
        for k in order(rule, given):
            lit = rule.body[k]
            if isinstance(lit, ast.Atom) and lit.name in frozen:
                seed = guard(lit.name, lit.args, lit.span)
                if not (
                    own is not None and len(prefix) == 1 and seed.name == own.name and seed.args == own.args
                ):
                    body = tuple(prefix)
                    found.append(MagicRule(i, k, ast.Rule(seed, body, span=rule.span)))
            prefix.append(lit)
    return Demand(frozen, magic, guarded, tuple(found))


def _unasked(rules: list[ast.Rule], heads: list[str], wanted: set[str], skipped: set[int]) -> set[str]:
    """The candidates no other relation asks for, even through other candidates (only their
    own rules read them: demand-driven, they would hold nothing)."""
    users: dict[str, set[str]] = {c: set() for c in wanted}
    for i, rule in enumerate(rules):
        if i in skipped:
            continue
        for lit in rule.body:
            if isinstance(lit, ast.Atom) and lit.name in wanted and lit.name != heads[i]:
                users[lit.name].add(heads[i])
    asked = {c for c, by in users.items() if by - wanted}
    while True:
        more = {c for c, by in users.items() if c not in asked and by & asked}
        if not more:
            return wanted - asked
        asked |= more


def _given(rule: ast.Rule, positions: Iterable[int]) -> frozenset[str]:
    return frozenset(
        v.name for j in positions for v in ast.walk_term(rule.head.args[j], False) if isinstance(v, ast.Var)
    )


def _uses(
    rules: list[ast.Rule], heads: list[str], bound: dict[str, set[int]], order: Order, skipped: set[int]
) -> dict[str, list[set[int]]]:
    """For each candidate, the argument positions known at each of its uses."""
    uses: dict[str, list[set[int]]] = {}
    for i, rule in enumerate(rules):
        if i in skipped or not any(isinstance(lit, ast.Atom) and lit.name in bound for lit in rule.body):
            continue
        known = set(_given(rule, bound.get(heads[i], ())))
        for k in order(rule, frozenset(known)):
            lit = rule.body[k]
            if isinstance(lit, ast.Atom) and lit.name in bound:
                uses.setdefault(lit.name, []).append(
                    {j for j, arg in enumerate(lit.args) if _known(arg, known)}
                )
            if isinstance(lit, ast.Atom | ast.Comparison):
                terms = lit.args if isinstance(lit, ast.Atom) else (lit.left, lit.right)
                for term in terms:
                    known.update(v.name for v in ast.walk_term(term, False) if isinstance(v, ast.Var))
    return uses


def _known(term: ast.Term, known: set[str]) -> bool:
    for t in ast.walk_term(term, into_aggregates=False):
        if isinstance(t, ast.Wildcard | ast.Aggregate):
            return False
        if isinstance(t, ast.Var) and t.name not in known:
            return False
    return True


# -------------------------------------------------------------------------------- strata


@dataclass(frozen=True)
class Component:
    relations: tuple[str, ...]
    recursive: bool
    monotone: bool  # no negation or aggregate inside it


def components(
    nodes: list[str], edges: Iterable[tuple[str, str, bool]], rank: Callable[[str], float]
) -> list[Component]:
    """The strongly connected components of a dependency graph (``edges``: head, body,
    monotone), each after those it depends on; of those ready at once, the one whose first
    relation ranks first."""
    successors: dict[str, dict[str, bool]] = {n: {} for n in nodes}
    for head, body, monotone in edges:
        if head in successors and body in successors:
            successors[head][body] = successors[head].get(body, True) and monotone
    found = [sorted(c, key=rank) for c in strongly_connected(successors)]
    of = {n: i for i, c in enumerate(found) for n in c}
    waiting = [0] * len(found)
    dependents: list[list[int]] = [[] for _ in found]
    for i, component in enumerate(found):
        used = {of[b] for n in component for b in successors[n]} - {i}
        waiting[i] = len(used)
        for u in used:
            dependents[u].append(i)
    ready = [(min(rank(n) for n in c), i) for i, c in enumerate(found) if not waiting[i]]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, i = heapq.heappop(ready)
        members = tuple(sorted(found[i], key=rank))
        inside = set(members)
        recursive = len(members) > 1 or members[0] in successors[members[0]]
        monotone = all(m for n in members for b, m in successors[n].items() if b in inside)
        ordered.append(Component(members, recursive, monotone))
        for d in dependents[i]:
            waiting[d] -= 1
            if not waiting[d]:
                heapq.heappush(ready, (min(rank(n) for n in found[d]), d))
    return ordered
