"""Volatile relations kept step by step (runtime/volatile.py) against the same relations
computed whole from the session at every step: random sessions over a policy with every kind
of rule that can lose facts, and the recorded sessions of the forecasting example."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.compiler import plan as p
from policyc.forecast.abstraction import Abstraction
from policyc.forecast.patterns import parse_predicate
from policyc.runtime import codegen
from policyc.runtime.relations import Relation
from policyc.runtime.replay import read_sessions, steps
from policyc.runtime.volatile import starting_from

from .conftest import EXAMPLES, examples

POLICY = """
.import events
.import provenance

.decl Risk(e: symbol, level: number)
.input Risk

// the facts given for an input relation that rules also derive
.decl Flag(e: symbol)
.input Flag
Flag(e) :- Open(e), Label(e, "hot").

Edited(e) :- ToolCall(e, "edit").
Scanned(e, t) :- ToolResult(r, _, t), Reaches(r, e), Label(r, "pass").
Open(e) :- Edited(e), not Scanned(e, _).
OpenSast(e) :- Edited(e), not Scanned(e, "scan").
Stale(e) :- Open(e), not Label(e, "fresh").
Cleared(e) :- Edited(e), not Open(e).
Pair(a, b) :- Open(a), Open(b), a != b, DependsOn(a, b).
Renamed(e) :- Edited(e), not Label(cat(e, "'"), "pass").
Echoed(e) :- Open(e), ToolCall(c, _), Label(cat(c, "'"), "pass").
Lonely(a) :- Edited(a), not Pair(a, _).
Unrun(e, t) :- Edited(e), ToolCall(_, t), not Scanned(e, t).
Clean(e) :- Edited(e), not Unrun(e, _).
Named(e, n) :- Open(e), n = cat(e, "!"), not Label(e, n).
Now(a) :- Candidate(a), Open(d), DependsOn(a, d).
Quiet(a) :- Candidate(a), not Label(a, "loud").
Count(n) :- n = count : { Open(_) }.
PerTool(t, n) :- ToolCall(_, t), n = count c : { ToolCall(c, t), not Label(c, "ok") }.
Total(s) :- s = sum l : { Risk(e, l), Open(e) }.
Worst(m) :- m = max l : { Risk(e, l), Stale(e) }.
High(e) :- Risk(e, l), Count(n), l > n.
Level(e, n) :- Risk(e, l), Count(n), l = n.
Chain(a, b) :- Open(a), DependsOn(a, b).
Chain(a, c) :- Chain(a, b), DependsOn(b, c).
.decl Near(a: symbol, b: symbol) inline
Near(a, b) :- DependsOn(a, b), Open(b).
Close(a, b) :- Edited(a), Edited(b), Near(a, b).
Hot(e) :- Flag(e), not Label(e, "fresh").

@id("open-now")
Deny(a) :- Now(a).
"""

KEPT = (
    "Flag Edited Scanned Open OpenSast Stale Cleared Pair Renamed Echoed Lonely Unrun Clean Named Now Quiet Count PerTool "
    "Total Worst High Level Chain Close Hot"
).split()

TOOLS = ("edit", "scan", "run")
LABELS = ("pass", "fresh", "loud", "ok", "hot")


@st.composite
def sessions(draw):
    """What happens in a session, in order: events (each with deps or depending on everything
    before it), and facts given between them."""
    happenings = []
    ids: list[str] = []
    calls: list[str] = []
    for i in range(draw(st.integers(1, 28))):
        if ids and draw(st.integers(0, 5)) == 0:
            which = draw(st.sampled_from(ids))
            if draw(st.booleans()):
                happenings.append(("facts", {"Risk": [[which, draw(st.integers(0, 4))]]}))
            else:
                happenings.append(("facts", {"Flag": [[which]]}))
            continue
        e = f"e{i}"
        kind = draw(st.sampled_from(("tool_call", "tool_call", "tool_result", "user_message")))
        event: dict = {"id": e, "kind": kind}
        if kind == "tool_result" and calls:
            event["of"] = draw(st.sampled_from(calls))
        elif kind == "tool_result":
            event["tool"] = draw(st.sampled_from(TOOLS))
        if kind == "tool_call":
            event["tool"] = draw(st.sampled_from(TOOLS))
            calls.append(e)
        labels = draw(st.lists(st.sampled_from(LABELS), max_size=2, unique=True))
        if labels:
            event["labels"] = labels
        if ids and draw(st.booleans()):
            event["deps"] = draw(st.lists(st.sampled_from(ids), max_size=3, unique=True))
        happenings.append(("event", event))
        ids.append(e)
    return happenings


def abstraction_of(policy: str, kept: list[str], unsafe: str = "Deny") -> Abstraction:
    """``policy``: source text or a file."""
    monitor = policyc.Monitor(policyc.load(policy))
    return Abstraction(monitor, [parse_predicate(name) for name in kept], parse_predicate(unsafe))


def disagreements(abstraction: Abstraction, session) -> list[str]:
    kept = abstraction.facts(session)
    whole = abstraction.computed(session)
    return [
        f"{abstraction.plan.relations[r].name}: kept {sorted(kept[r].as_tuples())}, whole {sorted(whole[r].as_tuples())}"
        for r in sorted(abstraction.needed)
        if kept[r].tuples != whole[r].tuples
    ]


def kept_relations_equal_whole(happenings) -> None:
    abstraction = abstraction_of(POLICY, KEPT)
    session = abstraction.monitor.session("s", principal="dev")
    assert disagreements(abstraction, session) == []
    for number, (what, value) in enumerate(happenings):
        if what == "facts":
            session.add_facts(value)
        elif value["kind"] == "tool_call":
            session.authorize(value)
        else:
            session.record(value)
        assert not session.sticky
        assert disagreements(abstraction, session) == [], f"after happening {number}: {value}"


def test_every_kind_of_rule_is_kept_without_computing_it_whole() -> None:
    """Which strata the random sessions above exercise: rules started from changes, rules run
    whole (an aggregate, an inline relation) and strata computed whole (recursion, given facts)."""
    abstraction = abstraction_of(POLICY, KEPT)
    relations = abstraction.plan.relations
    units = {relations[u.stratum.relations[0]].name: u for u in abstraction.keeper.units}
    assert {name for name, unit in units.items() if unit.whole} == {"Chain", "Flag"}
    rerun = {name for name, unit in units.items() if unit.rerun}
    assert rerun == {"Count", "PerTool", "Total", "Worst", "Close"}
    started = {name for name, unit in units.items() if unit.occurrences}
    assert {"Open", "Cleared", "Pair", "Now", "Quiet", "High", "Named", "Renamed", "Deny"} <= started


def test_recorded_sessions_of_the_forecasting_example() -> None:
    folder = EXAMPLES / "forecast"
    predicates = ["Edit", "Unscanned", "Unchecked", "Tested", "Committed", "OpenFinding"]
    abstraction = abstraction_of(str(folder / "copilot_forecast.dl"), predicates)
    checked = 0
    for name, _, record in read_sessions(str(folder / "test.jsonl")):
        for session, _, _ in steps(abstraction.monitor, record, name):
            assert disagreements(abstraction, session) == [], f"{name} after {len(session.order)} events"
            checked += 1
    assert checked > 1000


def test_a_rule_started_from_an_atom_derives_what_the_rule_derives_with_that_atom() -> None:
    """Run from every fact of a positive atom's relation, a variant derives what the rule does
    (whatever the order of the body and the values the atom leaves to later steps)."""
    policy = policyc.load(
        """
        .decl A(x: symbol, y: symbol)
        .decl B(y: symbol, z: symbol)
        .decl C(x: symbol)
        .input A, B, C
        H(x, z) :- A(x, y), B(y, z), not C(z), x != z.
        K(x, n) :- A(x, y), n = cat(y, "!"), B(y, n).
        L(x) :- A(x, x), B(x, _), not C(cat(x, "!")).
        """
    )
    plan = policy.plan
    index = plan.relation_index()
    facts = {
        "A": {("a", "b"), ("b", "c"), ("c", "c"), ("a", "c"), ("b", "b")},
        "B": {("b", "c"), ("c", "a"), ("c", "c!"), ("b", "b!"), ("c", "d")},
        "C": {("d",), ("b!",)},
    }
    relations = [Relation(spec.arity) for spec in plan.relations]
    for name, rows in facts.items():
        relations[index[name]].add_all(relations[index[name]].store(rows))
    functors = list(policy.functors)
    variants = 0
    for stratum in plan.strata:
        for rule in stratum.rules:
            whole: set = set()
            codegen.compile_rule(plan, rule)[1](relations, None, whole, functors, {}, None)
            assert whole, plan.rules[rule.rule].text
            for position, step in enumerate(rule.steps):
                if not isinstance(step, p.Scan):
                    continue
                out: set = set()
                variant = starting_from(rule, position)
                assert isinstance(variant.steps[0], p.Scan) and variant.steps[0].source == "delta"
                delta = {step.relation: relations[step.relation]}
                codegen.compile_rule(plan, variant)[1](relations, delta, out, functors, {}, None)
                assert out == whole, (plan.rules[rule.rule].text, position)
                variants += 1
    assert variants >= 6


@pytest.mark.parametrize("every_step", [True, False])
def test_the_evidence_is_the_latest_facts_in_the_order_they_came(every_step) -> None:
    """Whether the session was forecast at every step or only now: the facts about later events
    come later."""
    folder = EXAMPLES / "forecast"
    abstraction = abstraction_of(str(folder / "copilot_forecast.dl"), ["Edit", "Unscanned"])
    session = abstraction.monitor.session("s", principal="dev")
    abstraction.facts(session)
    for i in (5, 1, 4, 2, 3):  # ids out of their sorted order
        session.authorize({"id": f"c{i}", "kind": "tool_call", "tool": "create_file", "args": {}})
        if every_step:
            abstraction.facts(session)
        session.record({"id": f"r{i}", "kind": "tool_result", "of": f"c{i}", "text": "Edited"})
        if every_step:
            abstraction.facts(session)
    abstraction.facts(session)
    shown = abstraction.witnesses(session)
    assert shown["Edit"] == ['Edit("c4")', 'Edit("c2")', 'Edit("c3")']
    assert shown["Unscanned"] == ['Unscanned("c4")', 'Unscanned("c2")', 'Unscanned("c3")']
    # a passing scan of everything so far: nothing is unscanned any more
    session.authorize({"id": "c9", "kind": "tool_call", "tool": "sast_scan", "args": {}})
    session.record({"id": "r9", "kind": "tool_result", "of": "c9", "text": "PASS"})
    abstraction.facts(session)
    assert "Unscanned" not in abstraction.witnesses(session)


@examples(75, 300)
def test_kept_relations_equal_the_relations_computed_whole_at_every_step(examples: int) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        given(sessions())(kept_relations_equal_whole)
    )()
