"""Shadow rollout: a shadow policy beside the enforced one, rules in shadow mode, and a monitor
in shadow mode (runtime/shadow.py).

On random sessions and pairs of policies, the enforced decisions with a shadow policy equal
those without one, and the would-be decisions (in the decision and in the audit log) equal
what the shadow policy decides alone; a shadow policy that raises, errs or hits a limit never
changes an enforced decision; a rule in shadow mode reports its would-deny while the call runs;
a monitor in shadow mode says so everywhere and is the only way to run a policy unenforced.
"""

from __future__ import annotations

import json
import logging
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.compiler.pipeline import check_source
from policyc.runtime.audit import AuditLog, read_records, verify
from policyc.runtime.evaluator import Limits

from .test_session_events import POLICIES, TOXIC, streams

SEND = '.import events\n@id("no-send") @message("{a} sends")\nDeny(a) :- ToolCall(a, "send").\n'
# a rule in shadow mode beside an enforced one
ROLLOUT = (
    TOXIC
    + '@id("new-no-read") @mode("shadow") @message("{a} reads after untrusted input")\n'
    + 'Deny(a) :- ToolCall(a, "read"), Tainted(a).\n'
)


def verdict(decision) -> tuple:
    return (
        decision.allowed,
        decision.verdict,
        decision.errored,
        tuple((r.rule, r.message, r.facts) for r in decision.reasons),
    )


def run(monitor, events, session="s") -> list:
    s = monitor.session(session)
    found = []
    for event in events:
        if event["kind"] == "tool_call":
            found.append(s.authorize(event))
        else:
            s.record(event)
    return found


@st.composite
def pairs(draw):
    enforced, events = draw(streams())
    shadow = draw(st.sampled_from(sorted({*POLICIES, "send"} - {enforced})))
    return enforced, shadow, events


def policy(name: str):
    return policyc.load(source=SEND if name == "send" else POLICIES[name])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(pairs())
def test_a_shadow_policy_never_changes_the_enforced_decisions(drawn) -> None:
    enforced_name, shadow_name, events = drawn
    enforced, shadow = policy(enforced_name), policy(shadow_name)
    alone = run(policyc.Monitor(enforced), events)
    shadow_alone = run(policyc.Monitor(shadow), events)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audit.jsonl"
        with AuditLog(path, checkpoint_every=4) as log:
            beside = run(policyc.Monitor(enforced, shadow=shadow, audit=log), events)
        assert verify(path).ok
        logged = [r for r in read_records(path) if r["type"] == "decision"]
    assert [verdict(d) for d in beside] == [verdict(d) for d in alone]
    assert [d.shadow.verdict for d in beside] == [d.verdict for d in shadow_alone]
    assert [tuple(r.rule for r in d.shadow.reasons) for d in beside] == [
        tuple(r.rule for r in d.reasons) for d in shadow_alone
    ]
    assert [r["shadow"]["verdict"] for r in logged] == [d.verdict for d in shadow_alone]
    assert [[x["rule"] for x in r["shadow"]["reasons"]] for r in logged] == [
        [r.rule for r in d.reasons] for d in shadow_alone
    ]
    assert [r["verdict"] for r in logged] == [d.verdict for d in alone]
    for decision, other in zip(beside, shadow_alone, strict=True):
        assert decision.shadow.differs == (
            decision.verdict != other.verdict
            or {r.rule for r in decision.reasons} != {r.rule for r in other.reasons}
        )


BASE = TOXIC + 'Reviewed(e) :- Label(e, "reviewed").\n' + ".decl Flagged(e: symbol)\n.input Flagged\n"
RULES = [
    'Deny(a) :- ToolCall(a, "send"), Tainted(a).',
    'Deny(a) :- ToolCall(a, "read"), Label(a, "external").',
    "Deny(a) :- Action(a), HasSecret(a), !Reviewed(a).",
    'Allow(a) :- Action(a), Label(a, "ok").',
    "Allow(a) :- ToolCall(a, _), !Tainted(a).",
    "Deny(a) :- ToolCall(a, _), n = count : { DependsOn(a, _) }, n > 3.",
    'Escalate(a) :- ToolCall(a, "send"), Label(a, "sensitive").',
    "Deny(a) :- ToolResult(r, a, _), Tainted(r), Action(a).",
    "Deny(a) :- Action(a), Flagged(a).",
    "Escalate(a) :- Action(a), DependsOn(a, d), Flagged(d).",
]


@st.composite
def random_policies(draw) -> str:
    chosen = draw(st.lists(st.integers(0, len(RULES) - 1), min_size=1, max_size=5, unique=True))
    lines = [f'@id("r{i}") @message("{{a}} by r{i}")\n{RULES[i]}' for i in sorted(chosen)]
    default = ".default deny\n" if draw(st.booleans()) else ""
    return BASE + default + "\n".join(lines) + "\n"


@st.composite
def random_sessions(draw):
    _, events = draw(streams())
    flagged = draw(st.lists(st.sampled_from([e["id"] for e in events]), max_size=3))
    return draw(random_policies()), draw(random_policies()), events, flagged


def run_with_facts(monitor, events, flagged) -> list:
    s = monitor.session("s")
    found = []
    for event in events:
        if event["kind"] == "tool_call":
            found.append(s.authorize(event))
        else:
            s.record(event)
        if event["id"] in flagged:  # rows given as a generator: read once
            s.add_facts({"Flagged": ((e,) for e in [event["id"]])})
    return found


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(random_sessions())
def test_random_shadow_policies_never_change_the_enforced_decisions(drawn) -> None:
    enforced_source, shadow_source, events, flagged = drawn
    enforced, shadow = policyc.load(source=enforced_source), policyc.load(source=shadow_source)
    alone = run_with_facts(policyc.Monitor(enforced), events, flagged)
    shadow_alone = run_with_facts(policyc.Monitor(shadow), events, flagged)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audit.jsonl"
        with AuditLog(path, checkpoint_every=5) as log:
            beside = run_with_facts(policyc.Monitor(enforced, shadow=shadow, audit=log), events, flagged)
        assert verify(path).ok
        logged = [r for r in read_records(path) if r["type"] == "decision"]
    assert [verdict(d) for d in beside] == [verdict(d) for d in alone]
    assert [(d.shadow.verdict, d.shadow.allowed, d.shadow.errored) for d in beside] == [
        (d.verdict, d.allowed, d.errored) for d in shadow_alone
    ]
    assert [[(r.rule, r.message) for r in d.shadow.reasons] for d in beside] == [
        [(r.rule, r.message) for r in d.reasons] for d in shadow_alone
    ]
    assert [(r["verdict"], r["shadow"]["verdict"]) for r in logged] == [
        (a.verdict, b.verdict) for a, b in zip(alone, shadow_alone, strict=True)
    ]


def boom(x: str) -> bool:
    raise RuntimeError("the shadow functor fails")


FAILING = {
    "a functor that raises": (
        '.import events\n.functor boom(x: symbol): bool\n@id("boom") Deny(a) :- ToolCall(a, _), boom(a).\n',
        {"boom": boom},
        None,
    ),
    "a fact limit": (
        ".import events\nReach(a, b) :- DependsOn(a, b).\nReach(a, c) :- Reach(a, b), DependsOn(b, c).\n"
        '@id("far") Deny(a) :- ToolCall(a, _), Reach(a, _).\n',
        None,
        Limits(max_facts=3),
    ),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_a_failing_shadow_policy_never_changes_the_enforced_decision(name, caplog, tmp_path) -> None:
    source, functors, limits = FAILING[name]
    shadow = policyc.load(source=source, functors=functors, limits=limits)
    enforced = policyc.load(source=POLICIES["maintained allow"])
    events = [
        {"id": "u", "kind": "user_message", "text": "hi", "labels": ["ok"]},
        *[{"id": f"c{i}", "kind": "tool_call", "tool": "send", "labels": ["ok"]} for i in range(5)],
    ]
    alone = run(policyc.Monitor(enforced), events)
    with caplog.at_level(logging.WARNING, logger="policyc.shadow"):
        with AuditLog(tmp_path / "audit.jsonl") as log:
            beside = run(policyc.Monitor(enforced, shadow=shadow, audit=log), events)
    assert [verdict(d) for d in beside] == [verdict(d) for d in alone]
    assert any(d.allowed for d in beside)
    failed = beside[-3:]  # the fact limit is reached after a few events
    assert all(d.shadow.errored and not d.shadow.allowed and d.shadow.error for d in failed)
    assert "the shadow policy failed to decide" in caplog.text
    logged = [r for r in read_records(tmp_path / "audit.jsonl") if r["type"] == "decision"]
    assert all(r["shadow"]["errored"] for r in logged[-3:])
    assert [r["allowed"] for r in logged] == [d.allowed for d in alone]


def test_a_shadow_session_that_fails_to_start_never_changes_the_enforced_decision(caplog) -> None:
    class Broken:
        def session(self, *args):
            raise RuntimeError("no shadow session")

    enforced = policyc.load(source=SEND)
    monitor = policyc.Monitor(enforced)
    monitor.watch = None
    beside = policyc.Monitor(enforced, shadow=policyc.load(source=SEND))
    beside.watch.shadow = Broken()
    with caplog.at_level(logging.WARNING, logger="policyc.shadow"):
        decision = beside.session("s").authorize({"id": "c", "kind": "tool_call", "tool": "read"})
    assert decision.allowed and decision.shadow.errored
    assert "failed to start" in caplog.text


# ---------------------------------------------------------------------- rules in shadow mode


def test_a_rule_in_shadow_mode_reports_would_deny_while_the_call_runs(tmp_path, caplog) -> None:
    events = [
        {"id": "r", "kind": "tool_result", "text": "...", "labels": ["untrusted"]},
        {"id": "c", "kind": "tool_call", "tool": "read"},
    ]
    with caplog.at_level(logging.INFO, logger="policyc.shadow"):
        with AuditLog(tmp_path / "audit.jsonl") as log:
            (decision,) = run(policyc.Monitor(policyc.load(source=ROLLOUT), audit=log), events)
    assert decision.allowed and decision.verdict == "allow" and not decision.reasons
    assert [(r.rule, r.message) for r in decision.would_deny] == [
        ("new-no-read", "read() reads after untrusted input")
    ]
    assert decision.to_json()["would_deny"][0]["rule"] == "new-no-read"
    assert decision.feedback == ""
    (logged,) = [r for r in read_records(tmp_path / "audit.jsonl") if r["type"] == "decision"]
    assert logged["allowed"] and [r["rule"] for r in logged["would_deny"]] == ["new-no-read"]
    assert "would-deny" in caplog.text and "new-no-read" in caplog.text
    # enforced, the same rule denies
    enforced = policyc.load(source=ROLLOUT.replace('@mode("shadow")', '@mode("enforce")'))
    (denied,) = run(policyc.Monitor(enforced), events)
    assert not denied.allowed and [r.rule for r in denied.reasons] == ["new-no-read"]


ROLLOUT_VARIANTS = {name: source for name, source in POLICIES.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams())
def test_the_enforced_verdict_never_sees_a_rule_in_shadow_mode(drawn) -> None:
    name, events = drawn
    base = POLICIES[name]
    rule = '@id("new-no-read") {mode}\nDeny(a) :- ToolCall(a, "read"), Tainted(a).\n'
    shadowed = run(policyc.Monitor(policyc.load(source=base + rule.format(mode='@mode("shadow")'))), events)
    without = run(policyc.Monitor(policyc.load(source=base)), events)
    enforced = run(policyc.Monitor(policyc.load(source=base + rule.format(mode=""))), events)
    assert [verdict(d) for d in shadowed] == [verdict(d) for d in without]
    assert [[r.rule for r in d.would_deny] for d in shadowed] == [
        [r.rule for r in d.reasons if r.rule == "new-no-read"] for d in enforced
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('@mode("shadw") Deny(a) :- B(a).\n.input B\n', "unknown mode `shadw`"),
        ('@mode("shadow") C(a) :- B(a).\n.input B\n.output C\n', '`@mode("shadow")` applies to `Deny` rules'),
        ('@mode("shadow", "x") Deny(a) :- B(a).\n.input B\n', "`@mode` takes one string"),
    ],
)
def test_a_mode_other_than_enforce_or_shadow_is_an_invalid_annotation(source, message) -> None:
    found = [d for d in check_source(source) if d.is_error]
    assert [d.name for d in found] == ["invalid-annotation"]
    assert message in found[0].message


def test_mode_enforce_is_the_default() -> None:
    assert not check_source('@id("b") @message("{a} is b") @mode("enforce") Deny(a) :- B(a).\n.input B\n')
    plain = policyc.load(source=SEND)
    enforce = policyc.load(source=SEND.replace('@id("no-send")', '@id("no-send") @mode("enforce")'))
    assert [r.name for r in plain.plan.relations] == [r.name for r in enforce.plan.relations]
    assert "Deny@shadow" not in plain.relations


# ---------------------------------------------------------------------- a monitor in shadow mode


def test_a_monitor_in_shadow_mode_says_so_everywhere(tmp_path, caplog) -> None:
    with (
        caplog.at_level(logging.INFO, logger="policyc.shadow"),
        warnings.catch_warnings(record=True) as warned,
    ):
        warnings.simplefilter("always")
        with AuditLog(tmp_path / "audit.jsonl") as log:
            monitor = policyc.Monitor(policyc.load(source=SEND), mode="shadow", audit=log)
            decision = monitor.session("s").authorize({"id": "c", "kind": "tool_call", "tool": "send"})
            other = monitor.session("s").authorize({"id": "d", "kind": "tool_call", "tool": "read"})
    assert any("shadow mode" in str(w.message) for w in warned)
    assert "shadow mode" in caplog.records[0].getMessage()
    assert all(getattr(r, "policyc_mode", None) == "shadow" for r in caplog.records)
    assert decision.allowed and decision.mode == "shadow" and decision.verdict == "deny"
    assert [r.rule for r in decision.reasons] == ["no-send"]
    assert decision.feedback.startswith("Shadow mode (nothing is enforced): the policy would deny")
    assert "send() sends" in decision.feedback
    assert decision.to_json()["mode"] == "shadow" and decision.to_json()["allowed"] is True
    assert other.allowed and other.mode == "shadow" and "would allow" in other.feedback
    records = read_records(tmp_path / "audit.jsonl")
    assert records and all(r["mode"] == "shadow" for r in records)
    assert records[0]["type"] == "header" and records[0]["mode"] == "shadow"


def test_a_monitor_enforces_unless_told_otherwise() -> None:
    decision = (
        policyc.Monitor(policyc.load(source=SEND))
        .session("s")
        .authorize({"id": "c", "kind": "tool_call", "tool": "send"})
    )
    assert not decision.allowed and decision.mode == "enforce" and decision.to_json()["mode"] == "enforce"
    with pytest.raises(ValueError, match="`enforce` or `shadow`"):
        policyc.Monitor(policyc.load(source=SEND), mode="advisory")
    with pytest.raises(TypeError, match="fail_open"):
        policyc.Monitor(policyc.load(source=SEND), fail_open=True)


def test_the_decision_json_of_a_shadow_result_is_json() -> None:
    monitor = policyc.Monitor(policyc.load(source=SEND), shadow=policyc.load(source=TOXIC))
    decision = monitor.session("s").authorize({"id": "c", "kind": "tool_call", "tool": "send"})
    data = json.loads(json.dumps(decision.to_json()))
    assert data["shadow"] == {
        "verdict": "allow",
        "allowed": True,
        "errored": False,
        "differs": True,
        "error": None,
        "reasons": [],
    }


def test_the_deep_check_counts_no_rule_in_shadow_mode_as_a_verdict() -> None:
    from policyc.analyzer.deep import deep_findings
    from policyc.compiler.pipeline import compile_source

    shadow = (
        '.import events\n.default deny\n@id("new") @mode("shadow")\nDeny(a) :- ToolCall(a, "send").\n'
        '@id("ok") Allow(a) :- ToolCall(a, "send").\n'
    )
    assert [d.name for d in deep_findings(compile_source(shadow))] == []
    enforced = shadow.replace('@mode("shadow")', "")
    assert {"shadowed-allow", "always-deny"} <= {d.name for d in deep_findings(compile_source(enforced))}
    dead = '.import events\n@id("dead") @mode("shadow")\nDeny(a) :- ToolCall(a, "send"), 1 > 2.\n'
    assert [d.name for d in deep_findings(compile_source(dead))] == ["unsatisfiable-rule"]


def test_a_failing_rule_in_shadow_mode_never_changes_a_decision(caplog) -> None:
    source = (
        '.import events\n.functor boom(x: symbol): bool\n@id("send") Deny(a) :- ToolCall(a, "send").\n'
        '@id("new") @mode("shadow") Deny(a) :- ToolCall(a, _), boom(a).\n'
    )
    policy = policyc.load(source=source, functors={"boom": boom})
    without = policyc.load(source=source.split('@id("new")')[0], functors={"boom": boom})
    events = [
        {"id": f"c{i}", "kind": "tool_call", "tool": tool} for i, tool in enumerate(["read", "send", "read"])
    ]
    with caplog.at_level(logging.WARNING, logger="policyc.shadow"):
        shadowed = run(policyc.Monitor(policy), events)
    assert [verdict(d) for d in shadowed] == [verdict(d) for d in run(policyc.Monitor(without), events)]
    assert [d.allowed for d in shadowed] == [True, False, True]
    assert all(not d.would_deny for d in shadowed)
    assert "the rules in shadow mode failed to decide" in caplog.text
