"""`policyc translate` through the installed command, against a local chat-completions server
with scripted answers (the real `openai` client talks to it over HTTP on 127.0.0.1).

The scripts answer like a model would, including badly: malformed Datalog, invented names,
wrong requirement ids, refusals, empty and truncated answers, HTTP 429 and 500, answers slower
than the timeout, and a requirements document that tries to give the translator instructions.
The judge answers by a reference policy, replayed on exactly what the judge was shown. The
key case is FORGE's Task 43: a translation that makes a covered reason necessary for every
cancellation agrees with every recorded decision, and only a synthesized decision point shows
the difference.
"""

from __future__ import annotations

import json

import pytest

from .conftest import EXAMPLES, ROOT, run_policyc
from .translate.chat import ChatServer, Reply
from .translate.run import (
    AIRLINE,
    AIRLINE_TEXT,
    TASK43,
    airline_script,
    codes,
    no_traceback,
    task43_args,
    task43_script,
    translate,
)
from .translate.script import (
    ReferenceJudge,
    Script,
    blocks,
    fixture,
    translation,
)

# ------------------------------------------------------------------------------ Task 43


@pytest.fixture(scope="module")
def task43(tmp_path_factory):
    """The defective translation of FORGE H.3, with traces of three denied cancellations."""
    out = tmp_path_factory.mktemp("task43")
    script, judge = task43_script()
    with ChatServer(script) as server:
        run = translate(server, *task43_args(out))
    return run, json.loads((out / "report.json").read_text()), out, judge, server


def test_task43_recorded_decisions_agree(task43) -> None:
    run, report, _, _, _ = task43
    no_traceback(run)
    recorded = report["summary"]["recorded"]
    # FORGE H.3: the construction traces held three cancellations, all rightly denied
    cancellations = [
        p
        for p in report["decision_points"]["recorded"]
        if p["scenario"]["events"][-1]["tool"] == "cancel_reservation"
    ]
    assert len(cancellations) == 3
    assert all(not p["policy"]["allowed"] and p["judge"]["verdict"] == "deny" for p in cancellations)
    assert recorded["points"] == 6 and recorded["judged"] == 6 and recorded["rate"] == 1.0
    assert not [d for d in report["disagreements"] if d["origin"] == "recorded"]


def test_task43_defect_is_caught_by_a_synthesized_decision_point(task43) -> None:
    run, report, _, _, _ = task43
    assert run.status == 1
    caught = [
        d
        for d in report["disagreements"]
        if d["origin"] == "synthesized" and d["path"]["rule"] == "cancel-needs-reason"
    ]
    assert caught, report["disagreements"]
    for d in caught:
        # the translation denies, and only because of the covered-reason rule; the judge allows
        assert d["policy"] == {"allowed": False, "errored": False, "reasons": ["cancel-needs-reason"]}
        assert d["judge"]["verdict"] == "allow"
        said = " ".join(e.get("text", "").lower() for e in d["scenario"]["events"])
        assert "health" not in said and "weather" not in said
    # among them, the business reservation of the path through the first eligibility rule
    business = [d for d in caught if "Business(a, res)" in d["path"]["description"]]
    assert business
    assert "synthesized" in run.stdout and "cancel-needs-reason" in run.stdout
    assert "judge-disagreement" in codes(report)


def test_task43_disagreement_scenario_replays(task43, tmp_path) -> None:
    """The scenario in the report is a session `policyc replay` runs: the translation denies
    its last call, the reference policy allows it."""
    _, report, out, _, _ = task43
    caught = next(d for d in report["disagreements"] if d["path"]["rule"] == "cancel-needs-reason")
    trace = tmp_path / "scenario.jsonl"
    trace.write_text(json.dumps(caught["scenario"]) + "\n")
    call = caught["scenario"]["events"][-1]["id"]
    translated = run_policyc("replay", "--each", str(out / "policy.dl"), str(trace), "--format", "json")
    reference = run_policyc("replay", "--each", str(TASK43 / "reference.dl"), str(trace), "--format", "json")
    assert translated.status == reference.status == 0, translated.stderr + reference.stderr
    last = next(d for d in translated.json()["sessions"][0]["decisions"] if d["event"] == call)
    assert not last["allowed"] and [r["rule"] for r in last["reasons"]] == ["cancel-needs-reason"]
    assert next(d for d in reference.json()["sessions"][0]["decisions"] if d["event"] == call)["allowed"]


def test_task43_judge_saw_what_the_report_says(task43) -> None:
    """The judge answered from the rendered session alone, and what it replayed is the scenario."""
    _, report, _, judge, server = task43
    judged = [r for r in server.requests if "<session>" in r.user]
    assert len(judged) == len(report["decision_points"]["recorded"]) + len(
        report["decision_points"]["synthesized"]
    )
    for request in judged:
        assert request.system.startswith("You are an independent compliance judge")
        shown = blocks(request.user)
        assert shown["policy"] == (TASK43 / "requirements.md").read_text()
        assert "Deny(" not in request.user  # the judge never sees the translation

    def shown(events: list[dict]) -> str:
        keys = ("id", "kind", "tool", "args", "text", "of")
        return json.dumps(
            [{k: e[k] for k in keys if e.get(k) not in (None, {})} for e in events], sort_keys=True
        )

    replayed = {shown(events) for events, _ in judge.verdicts}
    for point in report["decision_points"]["synthesized"]:
        assert shown(point["scenario"]["events"]) in replayed


def test_task43_correct_translation_has_no_disagreement(tmp_path) -> None:
    script, _ = task43_script("translation_fixed.dl")
    with ChatServer(script) as server:
        run = translate(server, *task43_args(tmp_path))
    no_traceback(run)
    report = json.loads((tmp_path / "report.json").read_text())
    assert run.status == 0, run.stdout
    assert report["status"] == "ok" and report["complete"]
    assert report["summary"]["synthesized"]["judged"] >= 5
    assert report["summary"]["synthesized"]["rate"] == 1.0 and report["disagreements"] == []
    assert "every requirement is covered and every check agrees" in run.stdout


def test_task43_policy_and_traceability(task43) -> None:
    _run, report, out, _, _ = task43
    check = run_policyc("check", str(out / "policy.dl"))
    assert check.status == 0, check.stdout
    text = (out / "policy.dl").read_text()
    for rule in report["rules"]:
        assert rule["text"] in text
        assert text.splitlines()[rule["line"] - 1] == rule["text"].splitlines()[0]
        assert rule["requirements"] and all(r in {"R1", "R2", "R3"} for r in rule["requirements"])
    assert {r["id"]: r["rules"] for r in report["requirements"]}["R1"] == ["cancel-unconfirmed"]
    assert all(r["covered"] for r in report["requirements"])
    # the vocabulary comes first, without decisions of its own
    assert text.index("// ---- vocabulary: vocabulary.dl") < text.index("// ---- translated rules")


def test_back_translation_is_source_blind(task43) -> None:
    _, report, _, _, server = task43
    requirement_texts = [r["text"] for r in report["requirements"]]
    asked = [r for r in server.requests if r.system.startswith("You explain what a rule")]
    assert len(asked) == len([r for r in report["rules"] if r["kind"] == "deny"])
    for request in asked:
        assert not any(text in request.user for text in requirement_texts)
        assert "@message" not in request.user and "@suggest" not in request.user
        assert "<vocabulary>" in request.user
        # nor the translator's comments, which may say what the rule is for
        assert "//" not in blocks(request.user)["rule"] and "covers the user's reason" not in request.user
    needs_reason = next(r for r in asked if "id: cancel-needs-reason" in r.user)
    assert "Eligible(a, res) :- Insured(a, res)." not in needs_reason.user  # it uses no helper
    ineligible = next(r for r in asked if "id: cancel-ineligible" in r.user)
    assert "Eligible(a, res) :- Insured(a, res)." in ineligible.user  # its helper rules come along


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_policy_without_events_gets_fact_scenarios(tmp_path) -> None:
    """FORGE's running example: a vocabulary of plain input relations. Its scenarios are
    databases and an action; the judge reads them as facts; the verdicts are the policy's."""
    normalized = {
        "requirements": [
            {
                "text": "Do not send information to an external recipient if the message is influenced by "
                "untrusted input and carries sensitive data.",
                "lines": [3, 4],
            }
        ],
        "context": [],
    }
    judge = ReferenceJudge(EXAMPLES / "forge" / "toxic_flow.dl")
    script = Script(
        normalize=lambda r: Reply.json(normalized),
        translate=lambda r: translation(fixture("toxic", "translation.dl")),
        backtranslate=lambda r: Reply.json(
            {"description": "Denies an external send of tainted secret data."}
        ),
        compare=lambda r: Reply.json({"verdict": "same", "difference": ""}),
        judge=judge,
    )
    with ChatServer(script) as server:
        run = translate(
            server,
            str(ROOT / "tests" / "translate" / "toxic" / "requirements.md"),
            "--vocab",
            str(EXAMPLES / "forge" / "toxic_flow.dl"),
            "-o",
            str(tmp_path / "policy.dl"),
            "--format",
            "json",
            "--bound",
            "3",
        )
    no_traceback(run)
    report = run.json()
    assert run.status == 0, run.stdout
    points = report["decision_points"]["synthesized"]
    assert {p["path"]["kind"] for p in points} == {"fires", "blocked"}
    assert any(p["policy"]["allowed"] for p in points) and any(not p["policy"]["allowed"] for p in points)
    for point in points:
        scenario = point["scenario"]
        assert scenario["events"] == [] and "action" in scenario
        facts = tmp_path / "facts.json"
        facts.write_text(json.dumps(scenario["facts"]))
        evaluated = run_policyc(
            "eval", str(tmp_path / "policy.dl"), "--facts", str(facts), "--query", "Deny", "--format", "json"
        )
        denied = [row[0] for row in evaluated.json()["relations"]["Deny"]]
        assert (scenario["action"] in denied) == (not point["policy"]["allowed"])
    shown = [blocks(r.user) for r in server.requests if "<call>" in r.user]
    assert len(shown) == len(points)
    assert all(b["call"].startswith("the action ") and "<session>" not in b["session"] for b in shown)
    assert any('ExternalSend("' in b.get("facts", "") for b in shown)


# ------------------------------------------------------------------- tau2 end to end


@pytest.fixture(scope="module")
def airline(tmp_path_factory):
    """The example's airline policy text, translated end to end over the tau2 example's vocabulary."""
    out = tmp_path_factory.mktemp("airline")
    script = airline_script()
    with ChatServer(script) as server:
        run = translate(
            server,
            str(AIRLINE_TEXT),
            "--vocab",
            str(AIRLINE),
            "--traces",
            str(EXAMPLES / "tau2_airline" / "scenario.jsonl"),
            "-o",
            str(out / "policy.dl"),
            "--report",
            str(out / "report.json"),
            "--bound",
            "3",
        )
    return run, json.loads((out / "report.json").read_text()), out, server, script


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_airline_policy_checks_clean_and_report_is_complete(airline) -> None:
    run, report, out, _, _ = airline
    no_traceback(run)
    assert run.status == 1  # requirements a tool-call monitor cannot check are reported uncovered
    assert report["complete"] and report["output"] == str(out / "policy.dl")
    assert set(report["steps"]) == {
        "normalize",
        "translate",
        "coverage",
        "back-translate",
        "synthesize",
        "judge",
        "analyze",
    }
    assert set(report["steps"].values()) == {"done"}
    check = run_policyc("check", "--format", "json", str(out / "policy.dl"))
    assert check.status == 0 and check.json()["errors"] == 0


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_airline_coverage_both_ways(airline) -> None:
    _, report, _, _, _ = airline
    unexpressed = {u["requirement"] for u in json.loads(fixture("tau2", "not_expressible.json"))}
    uncovered = {u["requirement"] for u in report["uncovered"]}
    assert uncovered == unexpressed
    assert all(u["reason"] != "no rule encodes it" for u in report["uncovered"])
    ids = {r["id"] for r in report["requirements"]}
    assert len(ids) == 32
    for rule in report["rules"]:
        assert rule["requirements"] and set(rule["requirements"]) <= ids
    by_requirement = {r["id"]: r["rules"] for r in report["requirements"]}
    assert by_requirement["R26"] == ["cancel-not-eligible"]
    assert set(by_requirement["R17"]) == {"reservation-unchecked", "cancel-not-eligible"}
    # every requirement cites lines of the document, and quotes them
    text = AIRLINE_TEXT.read_text().splitlines()
    for requirement in report["requirements"]:
        assert requirement["source"].splitlines()[0] == text[requirement["lines"][0] - 1].strip()
    # every other line is context, and no line reads like instructions to a model
    assert not [p for p in report["problems"] if p["step"] == "normalize"]
    assert [p for p in report["problems"] if p["name"] == "uncovered-requirement"]


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_airline_repair_round_fixed_the_first_draft(airline) -> None:
    _, report, _, server, script = airline
    assert report["repair_rounds"] == 1
    assert script.steps.count("repair") == 1
    repair = next(r for r in server.requests if "Your translation cannot be used" in r.user)
    problems = blocks(repair.user)["problems"]
    assert "error[PC001]" in problems and "expected `.`" in problems  # rendered like `policyc check`
    assert "`UserAgreed` is not in the vocabulary" in problems
    assert "no `@req" in problems and "`R99`" in problems
    # the model's previous answer is in the conversation, as the assistant's turn
    assert "UserAgreed" in repair.messages[-2]["content"] and repair.messages[-2]["role"] == "assistant"
    assert len(report["rules"]) == 11
    assert not [
        p for p in report["problems"] if p["name"] in ("rule-rejected", "invented-name", "malformed-datalog")
    ]


def test_airline_back_translation_and_decisions(airline) -> None:
    run, report, _, _, _ = airline
    differ = [b for b in report["back_translation"] if b["verdict"] == "different"]
    assert [b["rule"] for b in differ] == ["compensation-over-limit"]
    assert report["summary"]["back_translation_discrepancies"] == 1
    recorded = report["summary"]["recorded"]
    assert recorded["points"] == 6 and recorded["rate"] == 1.0
    synthesized = report["summary"]["synthesized"]
    assert synthesized["paths"] > synthesized["points"] > 0 and synthesized["judged"] == synthesized["points"]
    # a synthesized point's verdict is the translated policy's on its scenario, as a monitor decides it
    for point in report["decision_points"]["synthesized"]:
        assert point["scenario"]["events"][-1]["id"] == point["action"]
    outcomes = {p["outcome"].split(" (")[0] for p in report["decision_points"]["paths"]}
    assert outcomes <= {"scenario", "no scenario", "not searched", "not answered in time"}
    for line in (
        "Requirements: 32 (13 covered, 19 uncovered)",
        "Back-translation: 11 rules",
        "Synthesized decisions:",
    ):
        assert line in run.stdout
