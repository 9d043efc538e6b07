"""Forecasting, in the library: the monotone derivation against real sessions, predicates and
invariants, the model file, and the monitor's forecasts and interventions."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

import policyc
from policyc.forecast import Forecaster, ForecastError, load_model
from policyc.forecast.abstraction import Abstraction
from policyc.forecast.build import verify
from policyc.forecast.model import parse
from policyc.forecast.monotone import derive
from policyc.forecast.patterns import parse_formula, parse_predicate, parse_predicates
from policyc.runtime.session import Monitor

from .conftest import EXAMPLES, json_difference

FOLDER = EXAMPLES / "forecast"
POLICY = FOLDER / "copilot_forecast.dl"
PREDICATES = "Edit,Unscanned,Unchecked,Tested,Committed,OpenFinding"

# --------------------------------------------------------------------- the monotone derivation


def plan_of(source: str):
    from policyc.compiler.pipeline import compile_source
    from policyc.runtime.planned import plan_of as plan

    return plan(compile_source(source, "p.dl"))


def test_derivation_of_monotone_and_volatile_relations() -> None:
    found = derive(
        plan_of(
            """
            .input Edit, Scan, Cost, Candidate
            Kind("a"). Kind("b").
            Other(k) :- Kind(k), not Kind("c").
            Reach(x, y) :- Edit(x), Edit(y).
            Reach(x, z) :- Reach(x, y), Reach(y, z).
            Scanned(e) :- Edit(e), Scan(s), s > e.
            Known(e) :- Edit(e), not Kind(e).
            Pending(e) :- Edit(e), not Scanned(e).
            Total(t) :- t = sum c : { Cost(_, c) }.
            Current(a) :- Candidate(a).
            Later(e) :- Pending(e), Edit(e).
            """
        )
    )
    monotone = {name for name, d in found.items() if d.monotone}
    assert {"Edit", "Scan", "Kind", "Other", "Reach", "Scanned", "Known"} <= monotone
    assert not {"Pending", "Total", "Current", "Later", "Candidate"} & monotone
    assert found["Kind"].fixed and found["Other"].fixed and not found["Edit"].fixed
    assert "negates `Scanned`, which can grow" in found["Pending"].why
    assert "aggregates over `Cost`" in found["Total"].why
    assert "action under decision" in found["Candidate"].why
    assert "reads `Pending`, which can lose facts" in found["Later"].why


RECURSIVE = """
.input U, D, S, W
V(e) :- S(e), not W(e).
T(e) :- U(e).
T(e) :- D(e, f), T(f), V(e).
R(e) :- U(e).
R(e) :- D(e, f), R(f), not W(e).
"""


def test_the_recursive_rules_of_a_recursive_relation_count() -> None:
    """A recursive stratum plans its recursive rules apart from its base rules; what they read
    decides monotonicity, and what a predicate needs computed, as much as the base rules do."""
    found = derive(plan_of(RECURSIVE))
    assert not found["T"].monotone and "reads `V`, which can lose facts" in found["T"].why
    assert not found["R"].monotone and "negates `W`, which can grow" in found["R"].why
    policy = policyc.load(RECURSIVE)
    monitor = Monitor(policy)
    abstraction = Abstraction(monitor, parse_predicates('T("b"), R("b")'), parse_predicate("W"))
    session = monitor.session("s")
    facts = {"U": [["a"]], "D": [["b", "a"]], "S": [["b"]]}
    session.add_facts(facts)
    evaluated = policy.evaluate(facts)
    assert ("b",) in evaluated.relation("T") and ("b",) in evaluated.relation("R")
    assert abstraction.observe(session).values == (True, True)
    session.add_facts({"W": [["b"]]})  # V("b") and R("b") lose their facts
    assert abstraction.observe(session).values == (False, False)


def test_monotone_relations_never_lose_a_fact_in_recorded_sessions() -> None:
    """The derivation against the evaluator: each relation derived monotone keeps every fact
    from one step of a recorded session to the next (evaluated from scratch at each step), and
    some volatile ones do lose facts."""
    policy = policyc.load(POLICY)
    found = derive(policy.plan)
    monitor = Monitor(policy)
    lost = set()
    lines = (FOLDER / "test.jsonl").read_text("utf-8").splitlines()[:6]
    for line in lines:
        record = json.loads(line)
        session = monitor.session(record["session"])
        for event in record["events"]:
            session.record(event)
        before: dict[str, set] = {}
        for k in range(len(record["events"]) + 1):
            last = record["events"][k - 1] if k else None
            action = last["id"] if last and last["kind"] == "tool_call" else ""  # the step's Candidate
            relations = session.explanation(events=k, action=action).relations
            now = {
                spec.name: rel.as_tuples()
                for spec, rel in zip(policy.plan.relations, relations, strict=True)
                if not spec.inline
            }
            for name, facts in before.items():
                if not facts <= now[name]:
                    assert not found[name].monotone, (name, record["session"], k)
                    lost.add(name)
            before = now
    assert {"Unscanned", "Unchecked", "OpenFinding", "Candidate"} <= lost


# ------------------------------------------------------------------ predicates and invariants


def test_predicate_and_invariant_syntax() -> None:
    found = parse_predicates('Edit, sast=Uncovered(_, _, "sast_scan"), Size(_, 12), Flag()')
    assert [(p.name, p.relation, p.args) for p in found] == [
        ("Edit", "Edit", None),
        ("sast", "Uncovered", (None, None, "sast_scan")),
        ("Size(_, 12)", "Size", (None, 12)),
        ("Flag", "Flag", ()),
    ]
    assert [str(p) for p in found] == ["Edit", 'sast=Uncovered(_, _, "sast_scan")', "Size(_, 12)", "Flag()"]
    assert parse_predicate(str(found[1])) == found[1]
    formula = parse_formula("a and not b' -> (c | !a)")
    for a, b, c, b2 in itertools.product([False, True], repeat=4):
        expected = not (a and not b2) or (c or not a)
        assert formula.holds({"a": a, "b": b, "c": c}, {"a": a, "b": b2, "c": c}) == expected
    for bad, message in [
        ("Edit(", "ends too early"),
        ("Edit(x)", "unexpected"),
        ("a=", "ends too early"),
        ("", "no predicates"),
    ]:
        with pytest.raises(ForecastError, match=message):
            parse_predicates(bad)
    with pytest.raises(ForecastError, match="invalid invariant"):
        parse_formula("a -> -> b")
    # a name that starts with a keyword is a name, not the keyword
    for text, names in [
        ("notes -> Edit", {"notes", "Edit"}),
        ("nothing", {"nothing"}),
        ("trueish & falsey", {"trueish", "falsey"}),
        ("android | order", {"android", "order"}),
    ]:
        assert parse_formula(text).names() == names
    assert parse_formula("nothing").holds({"nothing": True})
    assert parse_formula("not(a) and b").holds({"a": False, "b": True})
    # and a keyword cannot name a predicate: an invariant could not read it
    for keyword in ("true", "false", "not", "and", "or"):
        with pytest.raises(ForecastError, match=f"`{keyword}` is a word of the invariant language"):
            parse_predicates(f"{keyword}=Edit")


def test_predicates_are_checked_against_the_policy() -> None:
    monitor = Monitor(policyc.load(POLICY))
    unsafe = parse_predicate("Deny")
    for text, message in [
        ("Unscaned", "no relation `Unscaned`; did you mean `Unscanned`?"),
        ("Uncovered(_, _)", "`Uncovered` has 3 arguments, the pattern gives 2"),
        ("Uncovered(_, _, 3)", "argument 3 of `Uncovered`: expected a string, got 3"),
        ("Anchored", "inline relation"),
        ("Event", "no rule of the policy reads the input relation `Event`"),
        ("Edit, Edit", "given twice"),
    ]:
        with pytest.raises(ForecastError, match=message):
            Abstraction(monitor, parse_predicates(text), unsafe)


def test_patterns_read_maintained_and_computed_relations() -> None:
    monitor = Monitor(policyc.load(POLICY))
    predicates = parse_predicates(
        'sast=Uncovered(_, _, "sast_scan"), osv=Uncovered(_, _, "osv_scan"), pushes=Push("c3"), Tested, Edit'
    )
    abstraction = Abstraction(monitor, predicates, parse_predicate("Deny"))
    assert [r.maintained for r in abstraction.predicates] == [False, False, True, True, True]
    session = monitor.session("s")
    assert abstraction.observe(session).values == (False,) * 5
    session.authorize(
        {"id": "c1", "kind": "tool_call", "tool": "create_file", "args": {"filePath": "/r/a.py"}}
    )
    session.record({"id": "r1", "kind": "tool_result", "of": "c1", "text": "ok"})
    session.authorize(
        {"id": "c2", "kind": "tool_call", "tool": "run_in_terminal", "args": {"command": "pytest"}}
    )
    assert abstraction.observe(session).values == (False, False, False, True, True)
    session.authorize(
        {"id": "c3", "kind": "tool_call", "tool": "run_in_terminal", "args": {"command": "git push"}}
    )
    observed = abstraction.observe(session)
    assert observed.values == (True, False, True, True, True) and observed.unsafe


# ------------------------------------------------------------------------------ the model


def test_the_committed_forecast_model_is_what_learning_gives(forecast_model) -> None:
    model, traces = forecast_model
    committed = json.loads((FOLDER / "model.json").read_text("utf-8"))
    assert json_difference(json.loads(model.dumps()), committed) is None
    assert parse(json.loads(model.dumps())) == model
    assert verify(model) == []
    # the counts are the traces': every session starts in the initial state, and each state's
    # sessions that reached `Deny` are among those that visited it
    assert sum(s.initial for s in model.states) + model.initial_unsafe == model.traces == len(traces)
    assert model.unsafe_traces == sum(1 for t in traces if t.violation is not None)
    for state in model.states:
        assert state.unsafe_traces <= state.traces and 0 <= state.unsafe <= 1
        assert all(p <= q + 1e-12 for p, q in itertools.pairwise([*state.within, state.unsafe]))


def test_a_model_is_validated_when_loaded(forecast_model, tmp_path) -> None:
    model, _ = forecast_model
    good = model.to_json()

    def broken(change) -> str:
        data = json.loads(json.dumps(good))
        change(data)
        path = tmp_path / "model.json"
        path.write_text(json.dumps(data), "utf-8")
        with pytest.raises(ForecastError) as caught:
            load_model(path)
        return str(caught.value)

    assert "version: unsupported version 9" in broken(lambda d: d.update(version=9))
    assert "format: not a forecast model" in broken(lambda d: d.update(format="other"))
    assert "states[0].unsafe: expected a number in [0, 1], got 1.5" in broken(
        lambda d: d["states"][0].update(unsafe=1.5)
    )
    assert "states[2].values: expected 6 booleans" in broken(lambda d: d["states"][2]["values"].pop())
    assert "predicates[1].monotone: missing" in broken(lambda d: d["predicates"][1].pop("monotone"))
    assert "sum to" in broken(lambda d: d["transitions"][0].update(probability=0.999))
    assert "no state `s99`" in broken(lambda d: d["transitions"][0].update(to="s99"))

    def revive(d) -> None:  # give mass to a transition turning the monotone `Edit` false
        source = next(s["id"] for s in d["states"] if s["values"][0])
        target = next(s["id"] for s in d["states"] if not s["values"][0])
        d["transitions"].append({"from": source, "to": target, "count": 0, "probability": 0.0})
        d["transitions"][-1]["probability"] = 0.1
        first = next(t for t in d["transitions"] if t["from"] == source and t["probability"] > 0.1)
        first["probability"] -= 0.1

    assert "which is impossible: `Edit` is monotone and cannot turn false" in broken(revive)
    # the invariants and patterns a model names are checked too
    assert "version: unsupported version True" in broken(lambda d: d.update(version=True))
    assert "horizons[1]: horizon 5 is given twice" in broken(lambda d: d.update(horizons=[5, 5]))
    assert "predicates[0].pattern: invalid predicate list `Edit(`" in broken(
        lambda d: d["predicates"][0].update(pattern="Edit(")
    )
    assert "invariants[0]: invalid invariant `Edit ->`" in broken(lambda d: d.update(invariants=["Edit ->"]))
    assert "invariants[0]: `Nope` is not a predicate" in broken(lambda d: d.update(invariants=["Nope"]))
    assert "is not a valid state: the invariant `!Edit` does not hold" in broken(
        lambda d: d.update(invariants=["!Edit"])
    )
    assert "which is impossible: the transition invariant `Tested -> !Tested'` does not hold" in broken(
        lambda d: d.update(invariants=["Tested -> !Tested'"])
    )
    (tmp_path / "bad.json").write_text("{", "utf-8")
    with pytest.raises(ForecastError, match=r"bad.json:1:2: not valid JSON"):
        load_model(tmp_path / "bad.json")


def test_verify_finds_cached_probabilities_the_chain_does_not_give(forecast_model) -> None:
    model, _ = forecast_model
    data = model.to_json()
    data["states"][3]["unsafe"] = min(1.0, data["states"][3]["unsafe"] + 0.01)
    problems = verify(parse(data))
    assert len(problems) == 1 and problems[0].startswith("`s3`: cached P(F unsafe)")


# ------------------------------------------------------------------------------ the monitor


def test_session_forecast_looks_up_the_model_at_every_step(forecast_model) -> None:
    model, traces = forecast_model
    policy = policyc.load(POLICY)
    monitor = policyc.Monitor(policy, forecast=Forecaster(model, threshold=0.4))
    record = json.loads((FOLDER / "train.jsonl").read_text("utf-8").splitlines()[0])
    session = monitor.session(record["session"])
    trace = next(t for t in traces if t.name == record["session"])
    forecasts = [session.forecast()]
    for event in record["events"]:
        if event["kind"] == "tool_call":
            session.authorize(event)
        else:
            session.record(event)
        forecasts.append(session.forecast())
    assert len(forecasts) == len(trace.steps)
    for forecast, step in zip(forecasts, trace.steps, strict=True):
        assert forecast.unsafe_now == step.unsafe
        if not step.unsafe:
            state = model.lookup(step.values)
            assert forecast.state == state.id and forecast.known
            assert forecast.safe == pytest.approx(1 - state.unsafe)
            assert forecast.below == (1 - state.unsafe < 0.4)
        else:
            assert forecast.safe == 0.0 and forecast.below


def test_unseen_states_are_judged_conservatively(forecast_model) -> None:
    model, _ = forecast_model
    policy = policyc.load(POLICY)
    # only the states without `Tested` are known: any state with it is unseen
    data = model.to_json()
    keep = {s["id"] for s in data["states"] if not s["values"][3]}
    partial = replace(model, states=tuple(s for s in model.states if s.id in keep))
    events = [
        {"id": "c1", "kind": "tool_call", "tool": "create_file", "args": {"filePath": "/r/a.py"}},
        {"id": "c2", "kind": "tool_call", "tool": "run_in_terminal", "args": {"command": "pytest -q"}},
    ]
    for unseen, expected in [("worst", 0.0), ("max", 1 - max(s.unsafe for s in partial.states))]:
        monitor = policyc.Monitor(policy, forecast=Forecaster(partial, threshold=0.05, unseen=unseen))
        session = monitor.session("s")
        session.authorize(events[0])
        assert session.forecast().known
        session.authorize(events[1])
        forecast = session.forecast()
        assert not forecast.known and forecast.state is None
        assert forecast.safe == pytest.approx(expected)
        if unseen == "worst":
            assert forecast.below and "no recorded session was ever in this state" in forecast.feedback


def test_warn_leaves_decisions_and_stop_halts_the_session(forecast_model) -> None:
    model, _ = forecast_model
    policy = policyc.load(POLICY)
    events = [
        {"id": "c1", "kind": "tool_call", "tool": "create_file", "args": {"filePath": "/r/a.py"}},
        {"id": "r1", "kind": "tool_result", "of": "c1", "text": "Created"},
        {"id": "c2", "kind": "tool_call", "tool": "run_in_terminal", "args": {"command": "pytest -q"}},
        {"id": "r2", "kind": "tool_result", "of": "c2", "text": "3 passed"},
        {"id": "c3", "kind": "tool_call", "tool": "run_in_terminal", "args": {"command": "git commit -am x"}},
    ]
    later = {"id": "c4", "kind": "tool_call", "tool": "sast_scan", "args": {"path": "/repo"}}

    def run(intervention: str):
        monitor = policyc.Monitor(
            policy, forecast=Forecaster(model, threshold=0.4, intervention=intervention)
        )
        session = monitor.session("s")
        decisions = [session.authorize(e) if e["kind"] == "tool_call" else session.record(e) for e in events]
        return [d for d in decisions if d is not None], session.authorize(later)

    decisions, after = run("warn")
    assert all(d.allowed for d in decisions) and after.allowed
    decisions, after = run("stop")
    assert [d.allowed for d in decisions] == [True, True, False]
    stopped = decisions[-1]
    assert stopped.reasons[0].rule == "policyc:forecast"
    assert "dropped to 0.13, below 0.40, at step 5" in stopped.reasons[0].message
    assert 'Committed("c3")' in stopped.reasons[0].facts
    assert not after.allowed and after.reasons == stopped.reasons  # it stays stopped
    # the explanation names the forecast, then what the policy alone says (it allows the commit)
    explained = stopped.explain()
    assert not explained.allowed
    assert explained.summary.startswith("denied: the forecast stopped the session (the probability")
    assert explained.summary.endswith("; the policy alone: allowed by the default: no rule denies it")
    assert explained.why_not is not None and explained.why_not.fact == 'Deny("c3")'


def test_forecast_errors(forecast_model, tmp_path) -> None:
    model, _ = forecast_model
    copilot = policyc.load(EXAMPLES / "copilot" / "copilot.dl")
    with pytest.raises(ForecastError, match="learned with another policy"):
        policyc.Monitor(copilot, forecast=model)
    policy = policyc.load(POLICY)
    with pytest.raises(ForecastError, match="the monitor has no forecast model"):
        policyc.Monitor(policy).session("s").forecast()
    with pytest.raises(ForecastError, match="no horizon 7"):
        policyc.Monitor(policy, forecast=Forecaster(model, horizon=7))
    with pytest.raises(ForecastError, match="unknown intervention `block`"):
        policyc.Monitor(policy, forecast=Forecaster(model, intervention="block"))
    with pytest.raises(ForecastError, match="the intervention `stop` needs a threshold"):
        policyc.Monitor(policy, forecast=Forecaster(model, intervention="stop"))
    # a model file by path, and a horizon the model has
    path = tmp_path / "model.json"
    path.write_text(model.dumps(), "utf-8")
    monitor = policyc.Monitor(policy, forecast=Forecaster(path, threshold=0.5, horizon=5))
    session = monitor.session("s")
    assert session.forecast().safe == pytest.approx(1 - model.lookup((False,) * 6).within[0])
    # a malformed event is refused: the session, and its forecast, are as they were
    before = session.forecast().safe
    with pytest.raises(policyc.EventRefused, match="malformed event"):
        session.record({"id": "x", "kind": "tool_call"})
    assert session.forecast().safe == before and not session.forecast().error
    # facts the host gives that break the vocabulary fail the session: the forecast is unknown,
    # and assumes the worst
    session.add_facts({"Event": [["e1"]]})
    forecast = session.forecast()
    assert forecast.error and "malformed" in forecast.error and forecast.safe == 0.0 and forecast.below
