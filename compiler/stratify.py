"""Stratification: the order in which relations are computed.

The strongly connected components of the dependency graph, ordered so that every component
comes after the components it depends on (ties broken by position in the source). Each
component is a stratum, evaluated to a fixpoint before the next; a component with more than
one relation, or a relation that uses itself, is recursive.

A negative or aggregate dependency inside a component makes the program unstratifiable:
the relation would depend on the negation (or the total) of itself. Each such dependency is
reported as a ``negation-cycle`` with the cycle spelled out, literal by literal.

>>> from policyc.compiler.pipeline import compile_source
>>> result = compile_source("T(e) :- U(e).\\nT(e) :- D(e, f), T(f).\\n.input U, D")
>>> [(s.relations, s.recursive) for s in result.strata.strata]
[(('U',), False), (('D',), False), (('T',), True), (('Allow',), False), (('Deny',), False)]
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from . import codes
from .depgraph import Dependency, DependencyGraph
from .diagnostics import Diagnostic, Related
from .symbols import Symbols


@dataclass(frozen=True)
class Stratum:
    """Relations evaluated together (a recursive component), in dependency order."""

    index: int
    relations: tuple[str, ...]
    recursive: bool
    computed: bool  # some relation of it has rules or facts (otherwise it is input only)


@dataclass(frozen=True)
class Strata:
    """The strata in evaluation order, and each relation's stratum."""

    strata: tuple[Stratum, ...]
    of: dict[str, int]  # relation -> index of its stratum


def stratify(graph: DependencyGraph, symbols: Symbols) -> tuple[Strata, list[Diagnostic]]:
    rank = graph.order
    unranked = len(rank)
    strata: list[Stratum] = []
    of: dict[str, int] = {}
    diagnostics: list[Diagnostic] = []
    for index, component in enumerate(_ordered(graph)):
        members = tuple(sorted(component, key=lambda r: rank.get(r, unranked)))
        recursive = len(members) > 1 or graph.has_edge(members[0], members[0])
        computed = any(m in symbols.defined for m in members)
        strata.append(Stratum(index, members, recursive, computed))
        for member in members:
            of[member] = index
        if recursive:
            diagnostics.extend(_negation_cycles(graph, members))
            diagnostics.extend(_inline_recursion(graph, symbols, members))
    return Strata(tuple(strata), of), diagnostics


def _ordered(graph: DependencyGraph) -> list[set[str]]:
    """The strongly connected components, each after those it depends on; of those ready at
    once, first the one whose first relation comes first in the program, then the one found
    first (linear, but for the heap of ready components)."""
    components = _components(graph.successors)
    rank, unranked = graph.order, len(graph.order)
    of = {name: i for i, component in enumerate(components) for name in component}
    waiting = [0] * len(components)  # per component: the components it depends on not yet placed
    dependents: list[list[int]] = [[] for _ in components]
    for i, component in enumerate(components):
        uses = {of[body] for name in component for body in graph.successors[name]}
        uses.discard(i)
        waiting[i] = len(uses)
        for used in uses:
            dependents[used].append(i)
    ready = [(min(rank.get(r, unranked) for r in c), i) for i, c in enumerate(components) if not waiting[i]]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, i = heapq.heappop(ready)
        ordered.append(components[i])
        for dependent in dependents[i]:
            waiting[dependent] -= 1
            if not waiting[dependent]:
                first = min(rank.get(r, unranked) for r in components[dependent])
                heapq.heappush(ready, (first, dependent))
    return ordered


def components(successors: Mapping[str, Mapping[str, object]]) -> list[set[str]]:
    """The strongly connected components of a graph given as each node's successors (as the
    keys of a mapping; every successor is a node), in the order Tarjan's algorithm completes
    them: each after those it reaches."""
    return _components(successors)


def _components(successors: Mapping[str, Mapping[str, object]]) -> list[set[str]]:
    """The strongly connected components, in the order Tarjan's algorithm (with Nuutila's
    changes, without recursion) completes them, visiting relations and edges in order."""
    preorder: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    found: set[str] = set()
    pending: list[str] = []
    components: list[set[str]] = []
    counter = 0
    neighbours = {v: iter(bodies) for v, bodies in successors.items()}
    for source in successors:
        if source in found:
            continue
        queue = [source]
        while queue:
            v = queue[-1]
            if v not in preorder:
                counter += 1
                preorder[v] = counter
            done = True
            for w in neighbours[v]:
                if w not in preorder:
                    queue.append(w)
                    done = False
                    break
            if not done:
                continue
            low = preorder[v]
            for w in successors[v]:
                if w not in found:
                    low = min(low, lowlink[w] if preorder[w] > preorder[v] else preorder[w])
            lowlink[v] = low
            queue.pop()
            if low == preorder[v]:
                component = {v}
                while pending and preorder[pending[-1]] > preorder[v]:
                    component.add(pending.pop())
                found.update(component)
                components.append(component)
            else:
                pending.append(v)
    return components


def _negation_cycles(graph: DependencyGraph, members: tuple[str, ...]) -> list[Diagnostic]:
    component = set(members)
    edges = [
        (head, body, dependencies)
        for head in members
        for body, dependencies in graph.successors[head].items()
        if body in component
    ]  # each literal makes one edge: sorted by their first literals, the edges are in one order
    diagnostics = []
    for head, body, dependencies in sorted(edges, key=lambda e: e[2][0].span):
        for dependency in dependencies:
            if dependency.monotone:
                continue
            back = _shortest_path(graph, component, body, head)  # body ... head, closing the cycle
            steps = [dependency] + [_representative(graph, a, b) for a, b in itertools.pairwise(back)]
            chain = f"`{head}`" + "".join(_arrow(step) for step in steps)
            how = "negation" if dependency.kind == "negative" else "an aggregate"
            if head == body:
                message = f"`{head}` depends on itself through {how}: {chain}"
            else:
                message = f"recursion through {how}: {chain}"
            related = [
                Related(step.span, f"`{step.head}` depends on `{step.body}` here") for step in steps[1:]
            ]
            diagnostics.append(
                codes.NEGATION_CYCLE(
                    dependency.span,
                    message,
                    related=related,
                    help="a relation cannot depend on the negation or an aggregate of itself, because its facts "
                    "would decide whether it has them; compute the negated relation from other relations only",
                )
            )
    return diagnostics


def _inline_recursion(graph: DependencyGraph, symbols: Symbols, members: tuple[str, ...]) -> list[Diagnostic]:
    found = []
    for name in members:
        if not symbols.is_inline(name):
            continue
        relation = symbols.relations[name]
        uses = [found[0] for body, found in graph.successors[name].items() if body in members]
        found.append(
            codes.INVALID_DIRECTIVE(
                relation.span,
                f"inline relation `{name}` is recursive",
                related=[Related(d.span, f"`{d.head}` depends on `{d.body}` here") for d in uses[:1]],
                help="an inline relation is expanded where it is used, so it cannot depend on itself; "
                "remove `inline` to compute it as a stored relation",
            )
        )
    return found


def _shortest_path(graph: DependencyGraph, component: set[str], source: str, target: str) -> list[str]:
    """A shortest path from ``source`` to ``target`` inside ``component``: a breadth-first
    search from both ends, a level at a time from the end with the smaller fringe."""
    if source == target:
        return [source]
    forward: dict[str, str | None] = {source: None}  # relation -> the one before it on the path
    backward: dict[str, str | None] = {target: None}  # relation -> the one after it
    forward_fringe, backward_fringe = [source], [target]
    meet = None
    while meet is None and forward_fringe and backward_fringe:
        if len(forward_fringe) <= len(backward_fringe):
            meet = _step(graph.successors, component, forward_fringe, forward, backward)
        else:
            meet = _step(graph.predecessors, component, backward_fringe, backward, forward)
    assert meet is not None, "a strongly connected component holds a path between any two relations"
    path: list[str] = []
    at: str | None = meet
    while at is not None:
        path.append(at)
        at = forward[at]
    path.reverse()
    at = backward[path[-1]]
    while at is not None:
        path.append(at)
        at = backward[at]
    return path


def _step(
    edges: dict[str, dict[str, list[Dependency]]],
    component: set[str],
    fringe: list[str],
    reached: dict[str, str | None],
    other: dict[str, str | None],
) -> str | None:
    """Extend one side of the search by a level (``fringe`` becomes the next level); the
    relation where it meets the other side, if it does."""
    level = fringe[:]
    fringe.clear()
    for at in level:
        for nxt in edges[at]:
            if nxt not in component:
                continue
            if nxt not in reached:
                fringe.append(nxt)
                reached[nxt] = at
            if nxt in other:
                return nxt
    return None


def _representative(graph: DependencyGraph, head: str, body: str) -> Dependency:
    dependencies = graph.dependencies(head, body)
    return next((d for d in dependencies if not d.monotone), dependencies[0])


def _arrow(step: Dependency) -> str:
    if step.kind == "negative":
        return f" → not `{step.body}`"
    if step.kind == "aggregate":
        return f" → aggregate of `{step.body}`"
    return f" → `{step.body}`"
