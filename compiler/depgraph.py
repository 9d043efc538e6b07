"""The signed dependency graph of a program (Soufflé's precedence graph).

One node per relation; an edge ``H → B`` when a rule for ``H`` uses ``B`` in its body,
labelled with how: ``positive``, ``negative`` (under ``not``) or ``aggregate`` (inside the
braces of an aggregate). Negative and aggregate edges are the non-monotone ones that
stratification must not put inside a cycle. Each edge keeps the literal that created it,
so that a cycle can be reported literal by literal.

>>> from policyc.compiler.pipeline import compile_source
>>> graph = compile_source("A(x) :- B(x), not C(x).\\n.input B, C").graph
>>> sorted((h, b, e.kind) for h, b, e in graph.edges())
[('A', 'B', 'positive'), ('A', 'C', 'negative')]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .loader import Program
from .source import Span
from .symbols import Symbols

if TYPE_CHECKING:
    import networkx


@dataclass(frozen=True)
class Dependency:
    head: str
    body: str
    kind: str  # positive | negative | aggregate
    span: Span  # the literal

    @property
    def monotone(self) -> bool:
        return self.kind == "positive"


@dataclass(frozen=True)
class DependencyGraph:
    graph: networkx.DiGraph  # edge data: "dependencies" (list of Dependency), "monotone" (bool)
    order: dict[str, int]  # relation -> rank of its first appearance in the program

    def edges(self) -> Iterator[tuple[str, str, Dependency]]:
        for head, body, data in self.graph.edges(data=True):
            yield head, body, data["dependencies"][0]

    def dependencies(self, head: str, body: str) -> list[Dependency]:
        return self.graph.edges[head, body]["dependencies"]

    def reachable_from(self, roots: set[str]) -> set[str]:
        """Every relation the given relations depend on, transitively, and themselves."""
        seen = {r for r in roots if r in self.graph}
        stack = list(seen)
        successors = self.graph.succ
        while stack:
            for nxt in successors[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


def build(program: Program, symbols: Symbols) -> DependencyGraph:
    import networkx as nx

    graph = nx.DiGraph()
    order: dict[str, int] = {}
    # modules in load order, not by path: the order must not depend on where the files are
    rank = {module.path: i for i, module in enumerate(program.modules)}
    for name, _relation in sorted(
        symbols.relations.items(),
        key=lambda kv: (rank.get(kv[1].span.file, len(rank)), kv[1].span.start, kv[0]),
    ):
        graph.add_node(name)
        order[name] = len(order)
    for _, rule in program.rules():
        head = rule.head.name
        if head in symbols.functors:
            continue
        for atom, negated, in_aggregate in program.summary(rule).atoms:
            if atom.name in symbols.functors:
                continue
            kind = "negative" if negated else "aggregate" if in_aggregate else "positive"
            literal_span = atom.span
            dependency = Dependency(head, atom.name, kind, literal_span)
            if graph.has_edge(head, atom.name):
                data = graph.edges[head, atom.name]
                data["dependencies"].append(dependency)
                data["monotone"] = data["monotone"] and dependency.monotone
            else:
                graph.add_edge(head, atom.name, dependencies=[dependency], monotone=dependency.monotone)
    return DependencyGraph(graph, order)
