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
