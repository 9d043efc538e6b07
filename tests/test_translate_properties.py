"""Properties of the translation pipeline's pieces (the judge's rendering, scenarios as
sessions, tagged data), and the manual run against a local model."""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import run_policyc
from .translate.run import (
    no_traceback,
    task43_args,
)
from .translate.script import (
    parse_event,
)

# --------------------------------------------------------------------------- properties

EVENT_ID = st.sampled_from(["e1", "e2", "e3", "e4", "e5"])
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": EVENT_ID,
                "kind": st.sampled_from(
                    ["user_message", "assistant_message", "tool_call", "tool_result", "note"]
                ),
                "text": st.none() | TEXT,
                "tool": st.sampled_from(["cancel_reservation", "get_reservation_details"]),
                "args": st.dictionaries(st.sampled_from(["reservation_id", "user_id"]), TEXT, max_size=2),
                "labels": st.lists(st.sampled_from(["untrusted", "sensitive"]), max_size=2, unique=True),
            }
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda e: e["id"],
    )
)
@settings(max_examples=150, deadline=None)
def test_judge_rendering_reads_back(events) -> None:
    """What the judge reads is the session: every event line parses back into the same event."""
    from policyc.nl2policy.judge import render_event

    seen: list[str] = []
    for event in events:
        record = {"id": event["id"], "kind": event["kind"]}
        if event["text"] is not None and event["kind"] != "tool_call":
            record["text"] = event["text"]
        if event["kind"] == "tool_call":
            record.update(tool=event["tool"], args=event["args"])
        if event["kind"] == "tool_result" and seen:
            record["of"] = seen[-1]
        if event["labels"]:
            record["labels"] = event["labels"]
        if len(seen) > 1:
            record["deps"] = seen[:1]
        back = parse_event(render_event(record, seen))
        assert back == record
        seen.append(event["id"])


@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), max_size=8),
    st.dictionaries(EVENT_ID, st.sampled_from(["cancel_reservation", "get_reservation_details"]), max_size=3),
    st.dictionaries(EVENT_ID, TEXT, max_size=3),
    st.sampled_from(["e1", "e2", "e3"]),
)
@settings(max_examples=150, deadline=None)
def test_scenarios_become_sessions_with_the_same_facts(depends, calls, texts, action) -> None:
    """A database of the event vocabulary, made a session, is a session a monitor accepts,
    decided at the action, with every dependency, call and text of the events before it."""
    from policyc.analyzer.sessions import to_session
    from policyc.stdlib.events import check_event

    calls = {**calls, action: calls.get(action, "cancel_reservation")}
    facts = {
        "DependsOn": sorted({(f"e{e}", f"e{d}") for e, d in depends if d < e}),
        "ToolCall": sorted(calls.items()),
        "Action": sorted((a,) for a in calls),
        "Text": sorted((e, t) for e, t in texts.items() if e not in calls),
    }
    record = to_session(facts, action, "s", True)
    events = {e["id"]: e for e in record["events"]}
    ids = [e["id"] for e in record["events"]]
    assert ids[-1] == action
    recorded: dict = {}
    for event in record["events"]:
        checked = check_event(dict(event), recorded)  # raises on a malformed event
        recorded[checked["id"]] = checked
    for e, d in facts["DependsOn"]:
        if e in events and d in events:
            assert d in events[e]["deps"]
        if d == action:
            assert e not in events  # what depends on the action happens after the decision
    assert all(d in events for e, d in facts["DependsOn"] if e == action)
    for a, tool in facts["ToolCall"]:
        if a in events:
            assert events[a]["kind"] == "tool_call" and events[a]["tool"] == tool
    for e, text in facts["Text"]:
        if e in events:
            assert events[e]["text"] == text


TAGS = st.sampled_from(["document", "policy", "session", "rule"])
SPACE = st.sampled_from(["", " ", "\t", "\n"])


@st.composite
def closing_tags(draw) -> str:
    """A closing tag as a document could spell it: any case, spaces around the slash."""
    tag = draw(st.sampled_from(["document", "policy", "session", "rule"]))
    spelt = "".join(c.upper() if draw(st.booleans()) else c for c in tag)
    return f"<{draw(SPACE)}/{draw(SPACE)}{spelt}{draw(SPACE)}>"


@given(TAGS, st.lists(closing_tags() | st.sampled_from(["a", " ", "\n", "<", ">", "/", "\\"])).map("".join))
@settings(max_examples=300, deadline=None)
def test_data_cannot_close_its_tag(tag, text) -> None:
    """However a closing tag is spelt inside the data (`</Document >`), the only one a model
    reads in a block is the block's own, at its end."""
    from policyc.nl2policy.templates import block

    framed = block(tag, text)
    closings = list(re.finditer(rf"<\s*/\s*{tag}\s*>", framed, re.IGNORECASE))
    assert len(closings) == 1 and closings[0].end() == len(framed)
    assert framed.startswith(f"<{tag}>\n")


# ------------------------------------------------------------------ a real model, by hand


@pytest.mark.skipif(
    not os.environ.get("POLICYC_TEST_BASE_URL") or not os.environ.get("POLICYC_TEST_MODEL"),
    reason="a manual run against a local model: set POLICYC_TEST_BASE_URL and POLICYC_TEST_MODEL",
)
def test_with_a_local_model(tmp_path) -> None:
    """The Task 43 requirements through a real model (a llama.cpp or vLLM server): whatever
    it answers, the command reports rather than crashes, and what it writes checks clean."""
    run = run_policyc(
        "translate",
        *task43_args(tmp_path, "--timeout", "600"),
        "--model",
        os.environ["POLICYC_TEST_MODEL"],
        "--base-url",
        os.environ["POLICYC_TEST_BASE_URL"],
        env={"OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "local")},
    )
    no_traceback(run)
    assert run.status in (0, 1), run.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    if report["output"]:
        assert run_policyc("check", report["output"]).status == 0
