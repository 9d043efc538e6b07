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

import itertools
from dataclasses import dataclass

from . import codes
from .depgraph import Dependency, DependencyGraph
from .diagnostics import Diagnostic, Related
from .symbols import Symbols


@dataclass(frozen=True)
class Stratum:
    index: int
    relations: tuple[str, ...]
    recursive: bool
    computed: bool  # some relation of it has rules or facts (otherwise it is input only)


@dataclass(frozen=True)
class Strata:
    strata: tuple[Stratum, ...]
    of: dict[str, int]  # relation -> index of its stratum


def stratify(graph: DependencyGraph, symbols: Symbols) -> tuple[Strata, list[Diagnostic]]:
    import networkx as nx

    g = graph.graph
    components = [frozenset(c) for c in nx.strongly_connected_components(g)]
    condensed = nx.condensation(g, components)
    rank = graph.order

    def first(node: int) -> int:
        return min(rank.get(r, len(rank)) for r in condensed.nodes[node]["members"])

    ordered = list(nx.lexicographical_topological_sort(condensed.reverse(copy=False), key=first))
    strata: list[Stratum] = []
    of: dict[str, int] = {}
    diagnostics: list[Diagnostic] = []
    for index, node in enumerate(ordered):
        members = tuple(sorted(condensed.nodes[node]["members"], key=lambda r: rank.get(r, len(rank))))
        recursive = len(members) > 1 or g.has_edge(members[0], members[0])
        computed = any(m in symbols.defined for m in members)
        strata.append(Stratum(index, members, recursive, computed))
        for member in members:
            of[member] = index
        if recursive:
            diagnostics.extend(_negation_cycles(graph, set(members)))
            diagnostics.extend(_inline_recursion(graph, symbols, members))
    return Strata(tuple(strata), of), diagnostics


def _negation_cycles(graph: DependencyGraph, component: set[str]) -> list[Diagnostic]:
    import networkx as nx

    sub = graph.graph.subgraph(component)
    diagnostics = []
    for head, body, data in sorted(sub.edges(data=True), key=lambda e: e[2]["dependencies"][0].span):
        for dependency in data["dependencies"]:
            if dependency.monotone:
                continue
            back = nx.shortest_path(sub, body, head)  # body ... head, closing the cycle
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
        uses = [d for _, body, d in graph.edges() if d.head == name and body in members]
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


def _representative(graph: DependencyGraph, head: str, body: str) -> Dependency:
    dependencies = graph.dependencies(head, body)
    return next((d for d in dependencies if not d.monotone), dependencies[0])


def _arrow(step: Dependency) -> str:
    if step.kind == "negative":
        return f" → not `{step.body}`"
    if step.kind == "aggregate":
        return f" → aggregate of `{step.body}`"
    return f" → `{step.body}`"
