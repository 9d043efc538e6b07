"""The inputs of risk budgets: calibration records (every problem located), thresholds.json
(written, read back, malformed files refused with the part named), the lexical provenance
detector (against a plain-Python oracle) and a call's trusted and untrusted context."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.risk.calibrate import calibrate
from policyc.risk.context import call_context, dependencies, trust
from policyc.risk.declarations import Declarations, Role, declarations_of, read_declarations
from policyc.risk.detectors import LexicalProvenance, detector_named
from policyc.risk.errors import RiskError
from policyc.risk.records import Record, parse_records, split_records
from policyc.risk.thresholds import from_json, read_thresholds

POLICY = Declarations(
    {"target": Role("target", 0.05), "credential": Role("credential", 0.01, "high_risk")},
    {("send_money", "recipient"): "target", ("mcp.vault.set", "secret"): "credential"},
)


def parse(*lines: str, episodes: bool = False) -> list[Record]:
    return parse_records(lines, POLICY, "calib.jsonl", need_episodes=episodes)


def problems(*lines: str, episodes: bool = False) -> tuple[str, ...]:
    with pytest.raises(RiskError) as caught:
        parse(*lines, episodes=episodes)
    return caught.value.problems


# ------------------------------------------------------------------------------ records


def test_records_take_their_role_from_the_field_map() -> None:
    records = parse(
        '{"field": "send_money.recipient", "score": 0.4, "violated": true, "episode": "e1"}',
        "",
        '{"role": "credential", "score": 1, "violated": false, "episode": 7}',
        '{"field": "mcp.vault.set.secret", "role": "credential", "score": -2.5, "violated": false}',
    )
    assert [(r.role, r.score, r.violated, r.episode, r.line) for r in records] == [
        ("target", 0.4, True, "e1", 1),
        ("credential", 1.0, False, "7", 3),
        ("credential", -2.5, False, None, 4),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"field": "send_money.recipient", "score": 0.4', "calib.jsonl:1:47: not valid JSON"),
        ("[1, 2]", "calib.jsonl:1: a record is a JSON object, not an array"),
        (
            '{"role": "target", "score": 0.1, "violation": true}',
            "violation: unknown key (did you mean `violated`?)",
        ),
        ('{"score": 0.1, "violated": true}', "needs a `field` (tool.argument) or a `role`"),
        (
            '{"field": "send_money", "score": 0.1, "violated": true}',
            "field: expected a string `tool.argument`",
        ),
        (
            '{"field": "send_money.amount", "score": 0.1, "violated": true}',
            "field: `send_money.amount` has no role",
        ),
        (
            '{"field": "send_money.recipient", "role": "credential", "score": 0.1, "violated": true}',
            "role: the record says `credential`, but the policy maps `send_money.recipient` to `target`",
        ),
        (
            '{"role": "targte", "score": 0.1, "violated": true}',
            "role: `targte` is not declared in the policy (did you mean `target`?)",
        ),
        ('{"role": "target", "violated": true}', "score: missing"),
        (
            '{"role": "target", "score": "high", "violated": true}',
            'score: expected a finite number, got "high"',
        ),
        (
            '{"role": "target", "score": NaN, "violated": true}',
            "NaN is not a JSON number (numbers must be finite)",
        ),
        ('{"role": "target", "score": true, "violated": true}', "score: expected a finite number, got true"),
        ('{"role": "target", "score": 0.1}', "violated: missing"),
        ('{"role": "target", "score": 0.1, "violated": 1}', "violated: expected true or false, got 1"),
        (
            '{"role": "target", "score": 0.1, "violated": true, "episode": [1]}',
            "episode: expected a string or an integer",
        ),
    ],
)
def test_each_bad_record_is_reported_at_its_line(line: str, message: str) -> None:
    found = problems('{"role": "target", "score": 0.1, "violated": false}', line)
    assert len(found) == 1
    assert (
        found[0].startswith("calib.jsonl:2") and message.replace("calib.jsonl:1", "calib.jsonl:2") in found[0]
    )


def test_every_problem_is_reported_and_capped() -> None:
    lines = ['{"role": "nope", "score": 0.1, "violated": true}'] * 25
    found = problems(*lines)
    assert len(found) == 21 and found[-1] == "calib.jsonl: ... and 5 more problems"
    assert [p.split(":")[1] for p in found[:20]] == [str(n) for n in range(1, 21)]


def test_no_records_and_missing_episodes() -> None:
    assert problems("", "  ") == ("calib.jsonl: no calibration records (one JSON object per line)",)
    found = problems('{"role": "target", "score": 0.1, "violated": true}', episodes=True)
    assert found == ("calib.jsonl:1: episode: missing (episode-level calibration needs one on every record)",)


def test_test_split_keeps_episodes_whole_and_is_seeded() -> None:
    records = [Record("target", i / 100, False, f"e{i // 4}", line=i) for i in range(100)]
    calibration, test = split_records(records, 0.3, seed=4)
    assert {r.episode for r in calibration}.isdisjoint({r.episode for r in test})
    assert len({r.episode for r in test}) == round(25 * 0.3)
    assert split_records(records, 0.3, seed=4) == (calibration, test)
    assert split_records(records, 0.3, seed=5) != (calibration, test)
    with pytest.raises(RiskError, match="leaves one side empty"):
        split_records(records[:4], 0.3, seed=0)


def test_declarations_from_a_policy_file(tmp_path) -> None:
    source = '.role target budget 0.02 pool p\n.field "mcp.mail.send.to" : target\n'
    (tmp_path / "p.dl").write_text(source)
    declarations = read_declarations(tmp_path / "p.dl")
    assert declarations.roles == {"target": Role("target", 0.02, "p")}
    assert declarations.role_of("mcp.mail.send.to") == "target"
    (tmp_path / "bad.dl").write_text(".role target budget 2\n")
    with pytest.raises(RiskError, match="outside") as caught:
        read_declarations(tmp_path / "bad.dl")
    assert caught.value.diagnostics
    with pytest.raises(RiskError, match="cannot read") as caught:
        read_declarations(tmp_path / "missing.dl")
    assert caught.value.io


# --------------------------------------------------------------------------- thresholds


def thresholds_json() -> dict:
    records = [Record("target", i / 200, i % 3 == 0, f"e{i}") for i in range(200)]
    records += [Record("credential", 0.5, True, "c")]
    return calibrate(records, POLICY, method="clopper-pearson", delta=0.1).to_json()


def test_thresholds_round_trip(tmp_path) -> None:
    data = thresholds_json()
    assert data["strata"]["high_risk"]["threshold"] == "-inf"
    assert data["role_to_stratum"] == {"credential": "high_risk", "target": "target"}
    thresholds = from_json(data, "t.json")
    thresholds.write(tmp_path / "t.json")
    assert read_thresholds(tmp_path / "t.json") == thresholds
    assert json.loads((tmp_path / "t.json").read_text()) == data
    assert thresholds.strata["high_risk"].flags(-1e300)
    assert (
        not from_json(
            {
                **data,
                "strata": {**data["strata"], "target": {**data["strata"]["target"], "threshold": "inf"}},
            },
            "x",
        )
        .strata["target"]
        .flags(1e300)
    )


def broken(path: str, value: object) -> dict:
    data = thresholds_json()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("format", "other", "t.json: format: expected 'policyc-thresholds'"),
        ("version", 9, "t.json: version: version 9 is newer than this policyc reads"),
        ("method", "bayes", "t.json: method: expected one of crc, clopper-pearson"),
        ("method", KeyError, "t.json: method: missing"),
        ("delta", 0, "t.json: delta: expected a number in (0, 1]"),
        ("strata", [], "t.json: strata: expected an object"),
        (
            "strata.target.threshold",
            "high",
            't.json: strata.target.threshold: expected a number, "inf" or "-inf", got "high"',
        ),
        ("strata.target.threshold", KeyError, "t.json: strata.target.threshold: missing"),
        ("strata.target.n", -1, "t.json: strata.target.n: expected a count"),
        ("strata.target.budget", 1.5, "t.json: strata.target.budget: expected a number in (0, 1]"),
        ("strata.target.members", "target", "t.json: strata.target.members: expected a list of role names"),
        ("role_to_stratum.target", "nowhere", "t.json: role_to_stratum.target: names no stratum"),
        ("roles.target.certified", "maybe", "t.json: roles.target.certified: expected one of"),
        ("roles.target.stratum", "high_risk", 't.json: roles.target.stratum: "high_risk" is not the stratum'),
        ("episode_level", "no", "t.json: episode_level: expected true or false"),
    ],
)
def test_malformed_thresholds_name_the_wrong_part(path: str, value: object, message: str) -> None:
    with pytest.raises(RiskError) as caught:
        from_json(broken(path, value), "t.json")
    assert str(caught.value).startswith(message)


def test_unreadable_thresholds(tmp_path) -> None:
    (tmp_path / "t.json").write_text('{"method": ')
    with pytest.raises(RiskError, match=r"t.json:1:12: not valid JSON"):
        read_thresholds(tmp_path / "t.json")
    with pytest.raises(RiskError, match="cannot read") as caught:
        read_thresholds(tmp_path / "none.json")
    assert caught.value.io
    with pytest.raises(RiskError, match="expected a JSON object"):
        from_json([], "t.json")


def test_thresholds_know_when_they_do_not_fit_a_policy() -> None:
    thresholds = from_json(thresholds_json(), "t.json")
    assert thresholds.problems(POLICY) == []
    tighter = Declarations({**POLICY.roles, "target": Role("target", 0.01)}, POLICY.fields)
    assert thresholds.problems(tighter) == [
        "role `target` has budget 0.01, but its threshold was calibrated for 0.05; calibrate again"
    ]
    looser = Declarations({**POLICY.roles, "target": Role("target", 0.2)}, POLICY.fields)
    assert thresholds.problems(looser) == []  # a threshold for a tighter budget is still valid
    other = Declarations(
        {"target": Role("target", 0.05), "command": Role("command", 0.01)},
        {("send_money", "recipient"): "target", ("shell", "cmd"): "command"},
    )
    assert thresholds.problems(other) == [
        "the thresholds calibrate role `credential`, which the policy does not declare",
        "the thresholds have no stratum for role `command`; calibrate again with this policy",
    ]


# ---------------------------------------------------------------------------- detectors


def grams(text: str, n: int) -> set[str]:
    """The oracle: character n-grams of the normalized, space-padded text, in plain Python."""
    normalized = " " + " ".join(text.lower().split()) + " "
    if not normalized.strip():
        return set()
    normalized = normalized.ljust(n)
    return {normalized[i : i + n] for i in range(len(normalized) - n + 1)}


def oracle_score(value: str, trusted: list[str], untrusted: list[str], n: int) -> float:
    mine = grams(value, n)

    def sim(texts: list[str]) -> float:
        if not mine:
            return 0.0
        seen = set().union(*(grams(t, n) for t in texts)) if texts else set()
        return len(mine & seen) / len(mine)

    return (sim(untrusted) - sim(trusted) + 1) / 2


TEXT = st.text(alphabet=st.sampled_from("ab c1\t.É€😀"), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    value=TEXT, trusted=st.lists(TEXT, max_size=3), untrusted=st.lists(TEXT, max_size=3), n=st.integers(1, 4)
)
def test_lexical_provenance_matches_the_oracle(value, trusted, untrusted, n) -> None:
    detector = LexicalProvenance(n)
    score = detector.score(value, trusted, untrusted)
    assert score == pytest.approx(oracle_score(value, trusted, untrusted, n))
    assert 0 <= score <= 1
    assert detector.score(value, untrusted, trusted) == pytest.approx(1 - score)


def test_detector_names() -> None:
    assert LexicalProvenance().name == "lexical-provenance"
    assert detector_named("lexical-provenance:4") == LexicalProvenance(4)
    assert detector_named("lexical-provenance:4").name == "lexical-provenance:4"
    with pytest.raises(RiskError, match="unknown detector `bert`"):
        detector_named("bert")
    with pytest.raises(RiskError, match="n-gram size"):
        LexicalProvenance(0)


# ------------------------------------------------------------------------------ context


def test_trust_of_events() -> None:
    assert trust({"kind": "user_message"}) == "trusted"
    assert trust({"kind": "system_message"}) == "trusted"
    assert trust({"kind": "message", "role": "user"}) == "trusted"
    assert trust({"kind": "tool_result"}) == "untrusted"
    assert trust({"kind": "agent_message"}) == "untrusted"
    assert trust({"kind": "user_message", "labels": ["untrusted"]}) == "untrusted"
    assert trust({"kind": "tool_result", "labels": ["trusted"]}) == "trusted"
    assert trust({"kind": "tool_result", "labels": ["trusted", "untrusted"]}) == "untrusted"
    assert trust({"kind": "assistant_message"}) is None
    assert trust({"kind": "tool_call"}) is None
    assert trust({"kind": "message", "role": "assistant"}) is None
    # a kind the agent does not produce came from outside, unless labelled trusted
    assert trust({"kind": "retrieval"}) == "untrusted"
    assert trust({"kind": "web_page", "labels": ["trusted"]}) == "trusted"


def test_context_follows_dependencies() -> None:
    events = {
        "u": {"id": "u", "kind": "user_message", "text": "hello"},
        "c1": {"id": "c1", "kind": "tool_call", "tool": "read", "deps": ["u"]},
        "r1": {"id": "r1", "kind": "tool_result", "of": "c1", "text": "page one", "deps": []},
        "r2": {"id": "r2", "kind": "tool_result", "text": "page two", "deps": []},
        "s": {"id": "s", "kind": "system_message", "text": "rules"},
        "m": {"id": "m", "kind": "assistant_message", "text": "thinking", "deps": ["r1"]},
    }
    order = list(events)
    assert dependencies(events, order, {"id": "x", "deps": ["m"]}) == ["u", "c1", "r1", "m"]
    assert dependencies(events, order, {"id": "x", "deps": ["s"]}) == ["u", "c1", "r1", "r2", "s"]
    assert dependencies(events, order, {"id": "x", "deps": []}) == []
    assert call_context(events, order, {"id": "x", "deps": ["m"]}) == (["hello"], ["page one"])
    assert call_context(events, order, {"id": "x"}) == (["hello", "rules"], ["page one", "page two"])


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[list[dict], dict]:
    """Events with random `deps` (or none: every earlier event) and `of`, and a call after them."""
    events: list[dict] = []
    for i in range(draw(st.integers(0, 12)) + 1):
        earlier = [e["id"] for e in events]
        event: dict = {"id": f"e{i}", "kind": "tool_result"}
        if earlier and draw(st.booleans()):
            event["of"] = draw(st.sampled_from(earlier))
        if draw(st.booleans()):
            event["deps"] = draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else []
        events.append(event)
    ids = [e["id"] for e in events]
    call = {"id": "call", "kind": "tool_call", "tool": "t", "deps": draw(st.lists(st.sampled_from(ids)))}
    if draw(st.booleans()):
        call["of"] = draw(st.sampled_from(ids))
    return events, call


@settings(max_examples=200, deadline=None)
@given(_sessions())
def test_dependencies_are_what_depends_on_reaches(session: tuple[list[dict], dict]) -> None:
    """The events a call depends on are those the session's `DependsOn` facts reach from it."""
    from policyc.stdlib.events import event_facts

    events, call = session
    order = [e["id"] for e in events]
    edges: dict[str, set[str]] = {}
    for position, event in enumerate([*events, call]):
        for e, d in event_facts(event, position, order[:position])["DependsOn"]:
            edges.setdefault(e, set()).add(d)
    reached: set[str] = set()
    pending = list(edges.get("call", ()))
    while pending:
        e = pending.pop()
        if e not in reached:
            reached.add(e)
            pending.extend(edges.get(e, ()))
    by_id = {e["id"]: e for e in events}
    assert dependencies(by_id, order, call) == [e for e in order if e in reached]


def test_declarations_of_a_compilation() -> None:
    from policyc.compiler.pipeline import compile_source

    compilation = compile_source(".role a budget 1\n.role b budget 0.5 pool q\n.field t.x : b\n")
    declarations = declarations_of(compilation)
    assert declarations.roles == {"a": Role("a", 1.0), "b": Role("b", 0.5, "q")}
    assert not declarations.roles["a"].controlled and declarations.fields_of("t") == {"x": "b"}
    assert math.isclose(declarations.roles["b"].budget, 0.5)


# ------------------------------------------------------------------------------- report


def test_the_report_says_why_a_stratum_flags_every_field() -> None:
    from policyc.risk.report import Report, evaluate

    declarations = Declarations({"target": Role("target", 0.01), "rare": Role("rare", 0.01)}, {})
    records = [Record("target", i / 150, False, f"e{i}") for i in range(150)]
    records += [Record("rare", 0.5, False, "r")]
    thresholds = calibrate(records, declarations, method="clopper-pearson", delta=0.1)
    text = Report(thresholds, evaluate(records, thresholds), source="c.jsonl", confidence=0.1).text()
    # 150 fields pass the floor 1/151 <= 0.01, but a certificate needs ln(0.05)/ln(0.99) > 298
    assert (
        "target: threshold -inf flags every field: a Clopper-Pearson certificate at 0.01 needs at least 299 units, it has 150"
        in text
    )
    assert (
        "high_risk: threshold -inf flags every field: 1 unit is too few for budget 0.01 (floor 0.5000)"
        in text
    )
    row = next(line for line in text.splitlines() if line.startswith("rare "))
    assert row.split() == [
        "rare",
        "0.01",
        "1",
        "0.5000",
        "high_risk",
        "not",
        "certifiable",
        "-inf",
        "0.0000",
        "1.0000",
    ]
