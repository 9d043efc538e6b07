"""Facts given to a session one batch at a time (``add_facts`` per event, as a policy over its
own input relations is fed) are checked by generated code: it accepts exactly what the general
check accepts and gives the same facts, anything else gets the general check's message, and a
session fed so decides what an evaluation of all the facts decides, poisoned from the first
malformed batch on."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.fact_checks import FactChecks
from policyc.runtime.facts import FactsError, validate

POLICY = """
.decl DependsOn(e: symbol, e2: symbol)
.decl UntrustedInput(e: symbol)
.decl SensitiveInput(e: symbol)
.decl ExternalSend(a: symbol)
.decl Amount(a: symbol, n: float)
.decl Count(a: symbol, n: number)
.input DependsOn, UntrustedInput, SensitiveInput, ExternalSend, Amount, Count, Tag
Tainted(e) :- UntrustedInput(e).
Tainted(e) :- DependsOn(e, e'), Tainted(e').
HasSecret(e) :- SensitiveInput(e).
HasSecret(e) :- DependsOn(e, e'), HasSecret(e').
@id("toxic-flow") Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).
@id("amount") Deny(a) :- Amount(a, n), n > 10.
@id("count") Deny(a) :- Count(a, n), n > 3.
@id("tag") Deny(a) :- Tag(a, "bad").
"""
TYPES = {
    "DependsOn": ("symbol", "symbol"),
    "UntrustedInput": ("symbol",),
    "SensitiveInput": ("symbol",),
    "ExternalSend": ("symbol",),
    "Amount": ("symbol", "float"),
    "Count": ("symbol", "number"),
    "Tag": (None, None),  # untyped: strings and numbers
}
IDS = [f"e{i}" for i in range(6)]

ids = st.sampled_from(IDS)
good_values = {
    "symbol": ids,
    "number": st.integers(-2, 6),
    "float": st.one_of(st.floats(0, 20, allow_nan=False), st.integers(0, 20)),  # an int is a float
    None: st.one_of(ids, st.sampled_from(["bad", "ok"]), st.integers(0, 3), st.floats(0, 3)),
}
bad_values = st.sampled_from([True, None, math.nan, math.inf, -math.inf, b"x", ("t",), 1.5, "s", 7])
bad_rows = st.sampled_from(["e1", b"e1", {"a": 1}, {"e1"}, 3, None])


@st.composite
def good_row(draw, name: str) -> list | tuple:
    row = [draw(good_values[t]) for t in TYPES[name]]
    return tuple(row) if draw(st.booleans()) else row


@st.composite
def batch(draw, malformed: bool) -> dict:
    """One event's facts: rows of a few relations, one of them wrong when ``malformed``."""
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=0, max_size=3, unique=True))
    facts: dict = {name: draw(st.lists(good_row(name), min_size=0, max_size=3)) for name in names}
    if not malformed:
        return facts
    how = draw(st.sampled_from(["value", "arity", "row", "rows", "name", "not input"]))
    name = draw(st.sampled_from(sorted(TYPES)))
    rows = list(facts.get(name, []))
    if how == "value" and TYPES[name]:
        row = list(draw(good_row(name)))
        row[draw(st.integers(0, len(row) - 1))] = draw(bad_values)
        rows.insert(draw(st.integers(0, len(rows))), row)
    elif how in ("value", "arity"):
        rows.append([*draw(good_row(name)), "extra"] if draw(st.booleans()) else [])
    elif how == "row":
        rows.insert(draw(st.integers(0, len(rows))), draw(bad_rows))
    elif how == "rows":
        rows = draw(st.sampled_from(["e1", {"e1": 1}, 5, None]))
    elif how == "name":
        name = draw(st.sampled_from(["Unknown", "dependson", 3]))
    else:
        name = "Tainted"
    facts[name] = rows
    return facts


def stored(plan, checked: dict) -> dict:
    """The general check's facts in the form relations store them."""
    return {
        r: {t[0] for t in rows} if plan.relations[r].arity == 1 else set(rows) for r, rows in checked.items()
    }


def sorted_reasons(decision) -> list:
    return sorted((r.rule, r.facts) for r in decision.reasons)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.booleans().flatmap(batch))
def test_the_generated_checks_accept_what_the_general_check_accepts(facts) -> None:
    plan = policyc.load(POLICY).plan
    fast = FactChecks(plan)(facts)
    try:
        expected = stored(plan, validate(plan, facts, "session s"))
    except FactsError:
        assert fast is None  # malformed: left to the general check, which says where
        return
    assert fast is None or fast == expected


class Text(str):
    """A string of another type: the general check accepts it, the generated ones leave it."""


VALUES = [
    "e1", Text("e1"), "", 0, 1, -7, 2**70, True, False, None, 0.0, -0.0, 2.5, 1e308,
    math.nan, math.inf, -math.inf, b"e1", ("e1",), ["e1"], {"e1": 1}, object(),
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("value", VALUES, ids=[f"{i}-{type(v).__name__}" for i, v in enumerate(VALUES)])
def test_every_kind_of_value_in_every_position(name, value) -> None:
    """Each value in each position of each relation's row, as a list and as a tuple: the
    generated check gives what the general check gives, or leaves the rows to it."""
    plan = policyc.load(POLICY).plan
    checks = FactChecks(plan)
    for position in range(len(TYPES[name])):
        row = ["e0"] * len(TYPES[name])
        row[position] = value
        for facts in ({name: [row]}, {name: (tuple(row), ["e2"] * len(row))}):
            fast = checks(facts)
            try:
                expected = stored(plan, validate(plan, facts, "session s"))
            except (FactsError, OverflowError):
                assert fast is None, (facts, fast)
                continue
            assert fast is None or fast == expected, (facts, fast, expected)
            if type(value) is str or (type(value) is int and TYPES[name][position] != "float"):
                assert fast is not None  # the common case is the generated check's


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(batch(False), min_size=1, max_size=8),
    st.one_of(st.none(), st.tuples(st.integers(0, 8), batch(True))),
)
def test_sessions_given_facts_per_event_decide_as_an_evaluation_of_all_of_them(batches, bad) -> None:
    policy = policyc.load(POLICY)
    session = policyc.Monitor(policy).session("s")
    batches = list(batches)
    problem = None
    if bad is not None:
        at, malformed = bad
        batches.insert(min(at, len(batches)), malformed)
    seen: dict[str, list] = {}
    named: set = set()
    for facts in batches:
        try:
            validate(policy.plan, facts, "session s")
        except FactsError as error:
            problem = problem or str(error)
        session.add_facts(facts)
        if problem is None:
            for name, rows in facts.items():
                seen.setdefault(name, []).extend(rows)
                for row in rows:
                    named.update(row)
        scratch = policy.evaluate(seen)
        assert not scratch.errored, scratch.errors
        for action in IDS:
            mine = session.decide(action)
            if problem is not None:  # poisoned: every decision denies and says why
                assert not mine.allowed and mine.errored
                assert problem in mine.reasons[0].message, (problem, mine.reasons[0].message)
                continue
            if action not in named:
                assert mine.reasons[0].rule == "policyc:unknown-action"
                continue
            theirs = scratch.decide(action)
            assert (mine.allowed, mine.errored) == (theirs.allowed, theirs.errored), (batches, action)
            assert sorted_reasons(mine) == sorted_reasons(theirs), (batches, action)


def test_a_message_names_the_relation_the_row_and_the_value() -> None:
    session = policyc.Monitor(policyc.load(POLICY)).session("s")
    session.add_facts({"DependsOn": [["e1", "e0"]], "Amount": [["e1", 3.0], ["e1", math.nan]]})
    decision = session.decide("e1")
    assert not decision.allowed and decision.errored
    assert (
        "session s: relation `Amount`, row 2, value 2: nan is not a finite number"
        in decision.reasons[0].message
    )


def test_rows_that_fail_to_iterate_poison_the_session() -> None:
    def rows():
        yield ["e1"]
        raise RuntimeError("the host's rows broke")

    session = policyc.Monitor(policyc.load(POLICY)).session("s")
    session.add_facts({"UntrustedInput": [["e0"]]})
    session.add_facts({"UntrustedInput": rows()})
    decision = session.decide("e0")
    assert not decision.allowed and decision.errored
    assert "the host's rows broke" in decision.reasons[0].message


def test_given_unary_facts_are_explained_as_facts() -> None:
    session = policyc.Monitor(policyc.load(POLICY)).session("s")
    for facts in (
        {"UntrustedInput": [["e0"]]},
        {"SensitiveInput": [("e1",)]},
        {"DependsOn": [["e2", "e0"], ["e2", "e1"]], "ExternalSend": [["e2"]]},
    ):
        session.add_facts(facts)
    decision = session.decide("e2")
    assert not decision.allowed and decision.reasons[0].rule == "toxic-flow"
    text = decision.explain().text()
    assert 'UntrustedInput("e0")' in text and 'SensitiveInput("e1")' in text
    assert session.explanation().relations[session.index["UntrustedInput"]].as_tuples() == {("e0",)}
