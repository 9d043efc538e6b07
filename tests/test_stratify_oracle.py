"""Stratification against networkx: the strata of random programs are networkx's strongly
connected components of the dependency graph, in an order where every relation comes after
those it depends on, recursive exactly when networkx finds a cycle, and with a negation cycle
reported exactly when a negated dependency lies inside a component.

The compiler finds components itself (Tarjan's algorithm; importing networkx would cost every
`policyc check` more than the check of a small policy), so networkx is the oracle here."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.compiler.pipeline import compile_source
from policyc.compiler.stages import Stratified

RELATIONS = 8


@st.composite
def programs(draw) -> str:
    """Rules ``Ri(x) :- Rj(x)[, not Rk(x)].`` over relations R0..R7, R0 the input."""
    lines = [f".decl R{i}(x: symbol)" for i in range(RELATIONS)] + [".input R0"]
    for _ in range(draw(st.integers(0, 20))):
        head = draw(st.integers(1, RELATIONS - 1))
        body = draw(st.integers(0, RELATIONS - 1))
        rule = f"R{head}(x) :- R{body}(x)"
        if draw(st.booleans()):
            rule += f", not R{draw(st.integers(0, RELATIONS - 1))}(x)"
        lines.append(rule + ".")
    lines.append("Deny(x) :- " + ", ".join(f"R{i}(x)" for i in range(RELATIONS)) + ".")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(programs())
def test_strata_are_networkx_components_in_dependency_order(text: str) -> None:
    result = compile_source(text, "random.dl")
    assert isinstance(result, Stratified), [d.message for d in result.diagnostics]
    graph = nx.DiGraph()
    graph.add_nodes_from(result.graph.successors)
    negative = set()
    for head, body, _ in result.graph.edges():
        graph.add_edge(head, body)
        if any(d.kind != "positive" for d in result.graph.dependencies(head, body)):
            negative.add((head, body))
    strata = result.strata
    assert {frozenset(s.relations) for s in strata.strata} == {
        frozenset(c) for c in nx.strongly_connected_components(graph)
    }
    for head, body in graph.edges():
        assert strata.of[body] <= strata.of[head], (head, body)
        if strata.of[body] == strata.of[head]:
            assert strata.strata[strata.of[head]].recursive
    for stratum in strata.strata:
        cyclic = len(stratum.relations) > 1 or graph.has_edge(stratum.relations[0], stratum.relations[0])
        assert stratum.recursive == cyclic, stratum
    inside = any(strata.of[head] == strata.of[body] for head, body in negative)
    reported = any(d.name == "negation-cycle" for d in result.diagnostics)
    assert reported == inside, [d.message for d in result.diagnostics]
