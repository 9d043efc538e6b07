"""Input facts of a full evaluation: every value is checked before any two rows are compared,
and an input relation the rules read through one index only is held as that index."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.facts import FactsError

TOXIC = """
.decl Untrusted(e: symbol)
.decl Sensitive(e: symbol)
.decl DependsOn(e: symbol, d: symbol)
.decl Send(a: symbol)
.input Untrusted, Sensitive, DependsOn, Send
Tainted(e) :- Untrusted(e).
Tainted(e) :- DependsOn(e, d), Tainted(d).
Secret(e) :- Sensitive(e).
Secret(e) :- DependsOn(e, d), Secret(d).
Deny(a) :- Send(a), Tainted(a), Secret(a).
"""


def relation_number(policy: policyc.Policy, name: str) -> int:
    return policy.relations.index(name)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1], [True]], "row 2, value 1: true is not a policy value"),
        ([[True], [1]], "row 1, value 1: true is not a policy value"),
        ([[1], [1.0]], "row 2, value 1: expected an integer, got 1.0"),
        ([["a"], [1]], "row 2, value 1: expected a string, got 1"),
    ],
)
def test_every_value_is_checked_even_when_rows_are_equal(rows: list, message: str) -> None:
    # 1, 1.0 and True are equal keys: dropping duplicate rows first would let a wrong one through
    policy = policyc.load(".decl N(x: number)\n.decl S(x: symbol)\n.input N, S\nDeny(x) :- N(x).")
    name = "S" if isinstance(rows[0][0], str) else "N"
    with pytest.raises(FactsError, match=message):
        policy.evaluate({name: rows}, strict=True)
    assert policy.evaluate({name: rows}).decide(1).allowed is False


def test_a_relation_read_through_one_index_only_is_held_as_that_index() -> None:
    policy = policyc.load(TOXIC)
    assert policy.compiled.index_only == {relation_number(policy, "DependsOn"): (1,)}
    scanned = policyc.load(TOXIC + "Direct(e, d) :- DependsOn(e, d).\n")
    assert scanned.compiled.index_only == {}, "a rule scans DependsOn: it needs the set of facts"
    tested = policyc.load(TOXIC + 'Root(e) :- Send(e), !DependsOn(e, "e0").\n')
    assert tested.compiled.index_only == {}, "a rule tests a DependsOn fact: it needs the set of facts"


def test_rows_given_twice_are_one_fact_and_the_rows_are_not_kept() -> None:
    policy = policyc.load(TOXIC)
    rows = [["e1", "e0"], ["e2", "e1"], ["e2", "e1"], ["e3", "e2"]]
    facts = {"Untrusted": [["e0"]], "Sensitive": [["e1"]], "DependsOn": rows, "Send": [["e3"]]}
    result = policy.evaluate(facts)
    assert not result.errored
    assert result.relation("Deny") == {("e3",)}
    rows[0][0] = 7  # the caller changes its rows afterwards: the evaluation kept their values
    rows.append(["e9", "e3"])
    assert result.relation("DependsOn") == {("e1", "e0"), ("e2", "e1"), ("e3", "e2")}
    derivation = result.why("Deny", ("e3",))
    leaves = []
    stack = [derivation]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.kind == "input":
            leaves.append(node.fact)
    assert 'DependsOn("e3", "e2")' in leaves and 'DependsOn("e1", "e0")' in leaves


def _closure(base: set[str], edges: list[tuple[str, str]]) -> set[str]:
    dependents: dict[str, set[str]] = {}
    for e, d in edges:
        dependents.setdefault(d, set()).add(e)
    found, todo = set(base), list(base)
    while todo:
        for e in dependents.get(todo.pop(), ()):
            if e not in found:
                found.add(e)
                todo.append(e)
    return found


events = st.sampled_from([f"e{i}" for i in range(8)])


@settings(max_examples=150, deadline=None)
@given(
    edges=st.lists(st.tuples(events, events), max_size=30),
    untrusted=st.sets(events, max_size=3),
    sensitive=st.sets(events, max_size=3),
    sends=st.sets(events, max_size=4),
    as_tuples=st.booleans(),
)
def test_evaluation_over_an_index_decides_what_the_closure_decides(
    edges: list, untrusted: set, sensitive: set, sends: set, as_tuples: bool
) -> None:
    policy = policyc.load(TOXIC)
    row = tuple if as_tuples else list
    facts = {
        "Untrusted": [row([e]) for e in untrusted],
        "Sensitive": [row([e]) for e in sensitive],
        "DependsOn": [row(edge) for edge in edges + edges[:3]],  # some rows twice
        "Send": [row([e]) for e in sends],
    }
    result = policy.evaluate(facts)
    expected = sends & _closure(untrusted, edges) & _closure(sensitive, edges)
    assert result.relation("Deny") == {(a,) for a in expected}
    assert result.relation("DependsOn") == set(edges)
    # what the same facts give as sets of tuples, the way sessions and explanations load them
    evaluation = policy.evaluation({})
    evaluation.load({relation_number(policy, n): {tuple(r) for r in rows} for n, rows in facts.items()})
    evaluation.run()
    assert evaluation.relations[relation_number(policy, "Deny")].as_tuples() == result.relation("Deny")
