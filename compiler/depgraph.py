"""The signed dependency graph of a program (Soufflé's precedence graph).

One node per relation; an edge ``H → B`` when a rule for ``H`` uses ``B`` in its body,
labelled with how: ``positive``, ``negative`` (under ``not``) or ``aggregate`` (inside the
braces of an aggregate). Negative and aggregate edges are the non-monotone ones that
stratification must not put inside a cycle. Each edge keeps the literals that created it,
so that a cycle can be reported literal by literal.

The graph is plain dictionaries (successors in the order the program first uses them), so
building it costs one pass over the rules' literals and no graph library.

>>> from policyc.compiler.pipeline import compile_source
>>> graph = compile_source("A(x) :- B(x), not C(x).\\n.input B, C").graph
>>> sorted((h, b, e.kind) for h, b, e in graph.edges())
[('A', 'B', 'positive'), ('A', 'C', 'negative')]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .loader import Program
from .source import Span
from .symbols import Symbols


@dataclass(frozen=True)
class Dependency:
    """A rule's head depends on a relation of its body: positively, through a negation, or
    through an aggregate."""

    head: str
    body: str
    kind: str  # positive | negative | aggregate
    span: Span  # the literal

    @property
    def monotone(self) -> bool:
        return self.kind == "positive"


@dataclass(frozen=True)
class DependencyGraph:
    """The relations (``successors``' keys, declared ones in program order, then those only
    used) and, per head, the relations its rules use with the literals that use them;
    ``predecessors`` is the same edges by body, each head in the order its edge was made."""

    successors: dict[str, dict[str, list[Dependency]]]  # head -> body -> its dependencies, in order
    predecessors: dict[str, dict[str, list[Dependency]]]  # body -> head -> the same list
    order: dict[str, int]  # relation -> rank of its first appearance in the program

    def edges(self) -> Iterator[tuple[str, str, Dependency]]:
        """Each edge once, with the first literal that made it."""
        for head, bodies in self.successors.items():
            for body, dependencies in bodies.items():
                yield head, body, dependencies[0]

    def dependencies(self, head: str, body: str) -> list[Dependency]:
        return self.successors[head][body]

    def has_edge(self, head: str, body: str) -> bool:
        return body in self.successors.get(head, ())

    def reachable_from(self, roots: set[str]) -> set[str]:
        """Every relation the given relations depend on, transitively, and themselves."""
        successors = self.successors
        seen = {r for r in roots if r in successors}
        stack = list(seen)
        while stack:
            for nxt in successors[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


def build(program: Program, symbols: Symbols) -> DependencyGraph:
    successors: dict[str, dict[str, list[Dependency]]] = {}
    predecessors: dict[str, dict[str, list[Dependency]]] = {}
    order: dict[str, int] = {}
    # modules in load order, not by path: the order must not depend on where the files are
    rank = {module.path: i for i, module in enumerate(program.modules)}
    for name, _relation in sorted(
        symbols.relations.items(),
        key=lambda kv: (rank.get(kv[1].span.file, len(rank)), kv[1].span.start, kv[0]),
    ):
        successors[name] = {}
        predecessors[name] = {}
        order[name] = len(order)
    functors = symbols.functors
    for _, rule in program.rules():
        head = rule.head.name
        if head in functors:
            continue
        # a subsumption rule's two atoms are the relation's own tuples compared, not a
        # dependency (as in Soufflé's precedence graph): its conditions are
        compared = rule.body[:2] if rule.is_subsumption else ()
        for atom, negated, in_aggregate in program.summary(rule).atoms:
            if any(atom is own for own in compared):
                continue
            body = atom.name
            if body in functors:
                continue
            kind = "negative" if negated else "aggregate" if in_aggregate else "positive"
            bodies = successors.get(head)
            if bodies is None:
                bodies = successors[head] = {}
                predecessors[head] = {}
            if body not in successors:
                successors[body] = {}
                predecessors[body] = {}
            dependency = Dependency(head, body, kind, atom.span)
            found = bodies.get(body)
            if found is None:
                bodies[body] = predecessors[body][head] = [dependency]
            else:
                found.append(dependency)
    return DependencyGraph(successors, predecessors, order)
