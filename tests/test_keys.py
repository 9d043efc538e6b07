"""Keys (`.key R(a)`): the directive, its checks (`invalid-key`), the keys of the event vocabulary
(true of every session's events), the planner's use of them and the runtime's refusal of given
facts that break one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.compiler import ast
from policyc.compiler.formatter import format_source
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_source
from policyc.compiler.source import SourceFile
from policyc.stdlib.events import LIST_RELATIONS, RELATIONS, check_event, event_facts

from .checks_table import assert_diagnostics

KEYED = """
.decl Called(call: symbol, tool: symbol)
.decl Seat(flight: symbol, row: number, passenger: symbol)
.decl Now(t: number)
.input Called, Seat, Now
.key Called(call)
.key Seat(flight, row)
.key Seat(passenger)
.key Now()
Deny(a) :- Called(a, "rm").
"""


def test_a_key_names_the_attributes_that_determine_the_others() -> None:
    compiled = compile_source(KEYED)
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    relations = compiled.symbols.relations
    assert relations["Called"].keys == ((0,),)
    assert relations["Seat"].keys == ((0, 1), (2,))
    assert relations["Now"].keys == ((),)
    assert relations["Seat"].qualifiers == (
        "one `passenger` per (`flight`, `row`)",
        "one `flight`, `row` per `passenger`",
    )
    assert relations["Now"].qualifiers == ("at most one fact",)


def test_the_formatter_writes_a_key_back_and_keeps_its_comments() -> None:
    written = (
        ".decl R(a: symbol, b: symbol)\n.input R\n.key   R( a ,b )\n.key R(\n  a // the id\n  )\n.key  R( )\n"
    )
    once = format_source(written)
    assert ".key R(a, b)\n" in once and ".key R()\n" in once and "// the id" in once
    assert format_source(once) == once
    module, diagnostics = parse(SourceFile("p.dl", once))
    assert diagnostics == []
    assert [tuple(n.name for n in s.attributes) for s in module.statements if isinstance(s, ast.Key)] == [
        ("a", "b"),
        ("a",),
        (),
    ]


def test_a_key_in_a_component_is_a_key_of_each_instance() -> None:
    compiled = compile_source(
        ".comp Table {\n    .decl row(id: symbol, v: number)\n    .input row\n    .key row(id)\n}\n"
        ".init t = Table\n.init u = Table\nDeny(a) :- t.row(a, 1), u.row(a, 2).\n"
    )
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    assert compiled.symbols.relations["t.row"].keys == ((0,),) == compiled.symbols.relations["u.row"].keys


INVALID = {
    "unknown attribute": (".decl R(a: symbol, b: symbol)\n.input R\n.key R(c)\n", [("invalid-key", 3, "c")]),
    "attribute twice": (
        ".decl R(a: symbol, b: symbol)\n.input R\n.key R(a, a)\n",
        [("invalid-key", 3, "a)")],
    ),
    "every attribute": (
        ".decl R(a: symbol, b: symbol)\n.input R\n.key R(b, a)\n",
        [("invalid-key", 3, ".key")],
    ),
    "nullary relation": (".decl Flag()\n.input Flag\n.key Flag()\n", [("invalid-key", 3, ".key")]),
    "twice": (
        ".decl R(a: symbol, b: symbol)\n.input R\n.key R(a)\n.key R(a)\n",
        [("invalid-key", 4, ".key")],
    ),
    "undeclared": (".input R\n.key R(a)\nDeny(a) :- R(a).\n", [("invalid-key", 2, "R")]),
    "not an input": (
        '.decl R(a: symbol, b: symbol)\n.key R(a)\nR("x", "y").\n',
        [("invalid-key", 2, ".key")],
    ),
    "eqrel": (
        ".decl R(a: symbol, b: symbol) eqrel\n.input R\n.key R(a)\n",
        [("invalid-key", 3, ".key")],
    ),
    "a key of the library's relation": (
        '.import events\n.key Label(e)\nDeny(a) :- Label(a, "x").\n',
        [("invalid-key", 2, ".key")],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_keys_are_located(case: str) -> None:
    source, expected = INVALID[case]
    assert_diagnostics(source, expected)


def test_an_unknown_attribute_gets_the_close_name() -> None:
    compiled = compile_source(".decl Called(call: symbol, tool: symbol)\n.input Called\n.key Called(cal)\n")
    (found,) = compiled.diagnostics
    assert found.code == "PC119" and "did you mean `call`?" in (found.help or "")
    assert found.fix is not None and found.fix.edits[0].text == "call"


# ------------------------------------------------------------------ the event vocabulary's keys


def _vocabulary_keys() -> dict[str, tuple[tuple[int, ...], ...]]:
    compiled = compile_source(".import events\n.import lists\n")
    return {
        name: relation.keys
        for name, relation in compiled.symbols.relations.items()
        if name in (*RELATIONS, *LIST_RELATIONS)
    }


def test_the_event_vocabulary_declares_what_one_event_has_one_of() -> None:
    keys = _vocabulary_keys()
    assert keys["ToolCall"] == ((0,),) and keys["ToolArg"] == ((0, 1),) and keys["Event"] == ((0,),)
    assert keys["Position"] == ((0,), (1,)) and keys["ToolResult"] == ((0,),)
    assert keys["DependsOn"] == keys["Label"] == keys["Action"] == ()
    relations = compile_source(".import events\n").symbols.relations
    assert relations["Candidate"].keys == ((),) == relations["Principal"].keys


_VALUES = st.one_of(
    st.text(max_size=3), st.integers(-5, 5), st.booleans(), st.lists(st.integers(0, 3), max_size=3)
)


@st.composite
def _sessions(draw: st.DrawFn) -> list[dict]:
    events: list[dict] = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["tool_call", "tool_result", "user_message", "note"]))
        event: dict = {"id": f"e{i}", "kind": kind}
        if kind == "tool_call":
            event["tool"] = draw(st.sampled_from(["send", "read"]))
            event["args"] = draw(st.dictionaries(st.sampled_from(["to", "n", "xs"]), _VALUES, max_size=3))
        if kind == "tool_result" and events and draw(st.booleans()):
            event["of"] = draw(st.sampled_from([e["id"] for e in events]))
        for field in ("text", "agent", "role"):
            if draw(st.booleans()):
                event[field] = draw(st.sampled_from(["a", "b"]))
        event["labels"] = draw(st.lists(st.sampled_from(["x", "y"]), max_size=2))
        events.append(event)
    return events


@settings(max_examples=40, deadline=None)
@given(_sessions())
def test_every_session_keeps_the_keys_of_the_event_vocabulary(events: list[dict]) -> None:
    keys = _vocabulary_keys()
    known: dict[str, dict] = {}
    facts: dict[str, set[tuple]] = {}
    for position, event in enumerate(events):
        checked = check_event(event, known)
        known[checked["id"]] = checked
        wanted = {name: name for name in (*RELATIONS, *LIST_RELATIONS)}
        for name, rows in event_facts(checked, position, list(known)[:-1], wanted).items():
            facts.setdefault(str(name), set()).update(rows)
    for name, relation_keys in keys.items():
        for key in relation_keys:
            seen: dict[tuple, tuple] = {}
            for row in facts.get(name, ()):
                at = tuple(row[i] for i in key)
                assert seen.setdefault(at, row) == row, (name, key, seen[at], row)


# ------------------------------------------------------------------ the runtime keeps the keys

MAIL = """
.import events
.decl Seat(flight: symbol, row: number, passenger: symbol)
.input Seat
.key Seat(flight, row)
.key Seat(passenger)
Deny(a) :- ToolCall(a, "rm").
Deny(a) :- ToolCall(a, "book"), Seat(_, _, p), p = tool_arg(a, "who").
"""


@pytest.fixture(scope="module")
def mail():
    import policyc

    return policyc.load_source(MAIL)


def test_facts_that_break_a_key_are_refused_naming_the_relation_the_key_and_the_two_values(mail) -> None:
    from policyc.runtime.facts import FactsError

    with pytest.raises(FactsError) as refused:
        mail.evaluate({"Seat": [["LH1", 3, "ann"], ["LH1", 3, "bob"]]}, strict=True)
    message = str(refused.value)
    assert "relation `Seat`" in message and "`.key Seat(flight, row)`" in message
    assert '"ann"' in message and '"bob"' in message and '`flight` = "LH1", `row` = 3' in message
    with pytest.raises(FactsError, match=r"`\.key Seat\(passenger\)`"):
        mail.evaluate({"Seat": [["LH1", 3, "ann"], ["LH2", 4, "ann"]]}, strict=True)
    with pytest.raises(FactsError, match=r"`\.key Candidate\(\)` allows at most one fact"):
        mail.evaluate({"Candidate": [["c1"], ["c2"]]}, strict=True)
    # the same fact twice breaks nothing; nor do facts with other keys
    result = mail.evaluate({"Seat": [["LH1", 3, "ann"], ["LH1", 3, "ann"], ["LH1", 4, "bob"]]}, strict=True)
    assert len(result.relation("Seat")) == 2


def test_policyc_eval_refuses_a_facts_file_that_breaks_a_key(tmp_path, policyc) -> None:
    policy = tmp_path / "p.dl"
    policy.write_text(MAIL, "utf-8")
    facts = tmp_path / "facts.json"
    facts.write_text('{"ToolCall": [["c1", "rm"], ["c1", "ls"]]}', "utf-8")
    run = policyc("eval", str(policy), "--facts", str(facts))
    assert run.status == 1, run.stdout + run.stderr
    assert "`.key ToolCall(a)` allows one `tool` per `a`" in run.stdout + run.stderr


def test_a_session_refuses_given_facts_that_break_a_key_with_what_it_holds(mail) -> None:
    import policyc

    monitor = policyc.Monitor(mail)
    # against an event: the host says c1 calls `rm`; the event says `ls`
    session = monitor.session("s1")
    session.record({"id": "c1", "kind": "tool_call", "tool": "ls"})
    session.add_facts({"ToolCall": [["c1", "rm"]]})
    decision = session.authorize({"id": "c2", "kind": "tool_call", "tool": "ls"})
    assert not decision.allowed and decision.errored
    assert '"rm" (given now) and "ls" (from event `c1`)' in decision.reasons[0].message
    # against facts given before, in another batch, and the generated checks' fast path
    session = monitor.session("s2")
    session.add_facts({"Seat": [["LH1", 3, "ann"]]})
    assert session.authorize({"id": "c1", "kind": "tool_call", "tool": "ls"}).allowed
    session.add_facts({"Seat": [("LH1", 3, "bob")]})
    decision = session.decide("c1")
    assert not decision.allowed and "`.key Seat(flight, row)`" in decision.reasons[0].message
    assert '"bob" (given now) and "ann" (given earlier)' in decision.reasons[0].message
    # within one batch
    session = monitor.session("s3")
    session.add_facts({"Seat": [["LH1", 3, "ann"], ["LH2", 1, "ann"]]})
    assert (
        "`.key Seat(passenger)`"
        in session.authorize({"id": "c1", "kind": "tool_call", "tool": "x"}).reasons[0].message
    )
    # against the session's own principal
    session = monitor.session("s4", principal="alice")
    session.add_facts({"Principal": [["bob"]]})
    assert (
        "`.key Principal()`"
        in session.authorize({"id": "c1", "kind": "tool_call", "tool": "x"}).reasons[0].message
    )


def test_an_event_that_breaks_a_key_with_given_facts_is_refused_alone(mail) -> None:
    import policyc
    from policyc.runtime.verdict import EventRefused

    session = policyc.Monitor(mail).session("s1")
    session.add_facts({"ToolCall": [["c1", "rm"]], "ToolArg": [["c2", "who", "ann"], ["c3", "who", "ann"]]})
    with pytest.raises(EventRefused) as refused:
        session.record({"id": "c1", "kind": "tool_call", "tool": "ls"})
    assert refused.value.code == "conflicting-facts"
    assert '"ls" (from event `c1`) and "rm" (given)' in str(refused.value)
    decision = session.authorize({"id": "c1", "kind": "tool_call", "tool": "ls"})
    assert not decision.allowed and decision.reasons[0].code == "conflicting-facts"
    assert "c1" not in session.events
    # the session decides on: an event that agrees with the given facts is recorded
    assert not session.authorize(
        {"id": "c1", "kind": "tool_call", "tool": "rm"}
    ).allowed  # denied by the rule
    assert session.authorize({"id": "c2", "kind": "tool_call", "tool": "ls", "args": {"who": "ann"}}).allowed
    with pytest.raises(
        EventRefused, match=r"`\.key ToolArg\(a, key\)` allows one `value` per \(`a`, `key`\)"
    ):
        session.record({"id": "c3", "kind": "tool_call", "tool": "ls", "args": {"who": "bob"}})
    assert session.sticky == [] and "c3" not in session.events


def test_the_generated_check_of_given_facts_refuses_a_batch_that_breaks_a_key() -> None:
    from policyc.compiler.plan import RelationSpec
    from policyc.runtime.fact_checks import FactChecks

    class Plan:
        relations = (
            RelationSpec("Call", ("symbol", "symbol"), input=True, keys=((0,),), attributes=("a", "t")),
            RelationSpec("One", ("number",), input=True, keys=((),), attributes=("n",)),
        )

    checks = FactChecks(Plan())
    assert checks({"Call": [["a", "x"], ["b", "x"], ["a", "x"]], "One": [[1], [1]]}) == {
        0: {("a", "x"), ("b", "x")},
        1: {1},
    }
    assert checks({"Call": [["a", "x"], ["a", "y"]]}) is None
    assert checks({"One": [[1], [2]]}) is None


def test_a_plan_carries_the_keys_and_a_bundle_reads_them_back() -> None:
    from policyc.compiler.plan import PlanError
    from policyc.compiler.plan_read import from_data
    from policyc.compiler.plan_write import to_data
    from policyc.runtime.planned import plan_of

    plan = plan_of(compile_source(KEYED))
    data = to_data(plan)
    assert from_data(data) == plan
    seat = next(r for r in data["relations"] if r["name"] == "Seat")
    assert seat["keys"] == [[0, 1], [2]] and seat["attributes"] == ["flight", "row", "passenger"]
    for bad in ([[0, 1, 2]], [[1, 0]], [[3]], [[0, 0]]):
        seat["keys"] = bad
        with pytest.raises(PlanError):
            from_data(data)


def test_the_planner_looks_up_a_keyed_atom_before_one_that_may_find_several_facts() -> None:
    from policyc.compiler import plan as p
    from policyc.runtime.planned import plan_of

    def scans(source: str) -> list[str]:
        plan = plan_of(compile_source(source))
        (rule,) = [r for s in plan.strata for r in s.rules if plan.relations[r.head].name == "Deny"]
        return [plan.relations[s.relation].name for s in rule.steps if isinstance(s, p.Scan)]

    rule = "Deny(a) :- Candidate(a), DependsOn(a, d), ToolCall(a, t), Label(d, t).\n"
    # the call has one tool: looked up first, then its dependencies
    assert scans(".import events\n" + rule) == ["Candidate", "ToolCall", "DependsOn", "Label"]
    own = (
        ".decl Call(a: symbol, t: symbol)\n.decl Dep(a: symbol, d: symbol)\n.decl Cand(a: symbol)\n"
        ".decl Lab(e: symbol, l: symbol)\n.input Call, Dep, Cand, Lab\n{key}"
        "Deny(a) :- Cand(a), Dep(a, d), Call(a, t), Lab(d, t).\n"
    )
    assert scans(own.format(key=".key Call(a)\n")) == ["Cand", "Call", "Dep", "Lab"]
    assert scans(own.format(key="")) == ["Cand", "Dep", "Call", "Lab"]
