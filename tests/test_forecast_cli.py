"""`policyc forecast learn|query|show|replay` through the installed command, and the example
folder: its README's commands print what it shows, its sessions are what the generator makes."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from .conftest import EXAMPLES, ROOT, json_difference

FOLDER = EXAMPLES / "forecast"
README = (FOLDER / "README.md").read_text("utf-8")
POLICY = str(FOLDER / "copilot_forecast.dl")
MODEL = str(FOLDER / "model.json")
COPILOT = EXAMPLES / "copilot"


def console_blocks() -> list[tuple[str, str]]:
    blocks = re.findall(r"```console\n(.*?)```", README, flags=re.S)
    return [tuple(block.split("\n", 1)) for block in blocks]  # type: ignore[misc]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return str(path)


# --------------------------------------------------------------------------- the example


@pytest.mark.parametrize(
    "command, shown",
    [b for b in console_blocks() if b[0].startswith("$ policyc forecast ") and " learn " not in b[0]],
    ids=lambda v: v[:60] if v.startswith("$") else "",
)
def test_readme_forecast_commands_print_what_is_shown(policyc, command, shown) -> None:
    run = policyc(*shlex.split(command)[2:])
    assert run.status == 0, run.stderr
    assert run.stdout.rstrip("\n") == shown.rstrip("\n")


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_readme_learn_command_writes_the_committed_model(policyc, tmp_path) -> None:
    ((command, shown),) = [b for b in console_blocks() if " forecast learn " in b[0]]
    args = shlex.split(command)[2:]
    assert args[args.index("-o") + 1] == "model.json"  # the README's command writes no committed file
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    run = policyc(*args, cwd=tmp_path)
    assert run.status == 0, run.stderr
    assert run.stdout.rstrip("\n") == shown.rstrip("\n")
    output = tmp_path / "model.json"
    written, committed = (json.loads(Path(p).read_text("utf-8")) for p in (output, MODEL))
    assert json_difference(written, committed) is None


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_readme_threshold_table_is_what_replay_reports(policyc) -> None:
    rows = re.findall(
        r"^\| (0\.\d+) \| (\d+) of (\d+) \| (\S+) / (\S+) / (\d+) \| (\d+) of (\d+) \|$", README, flags=re.M
    )
    assert len(rows) == 3
    for threshold, ahead, violations, median, mean, most, alarms, safe in rows:
        run = policyc(
            "forecast", "replay", POLICY, MODEL, str(FOLDER / "test.jsonl"),
            "--threshold", threshold, "--summary", "--format", "json",
        )  # fmt: skip
        assert run.status == 0, run.stderr
        found = run.json()["summary"]
        assert (found["warned_ahead"], found["violations"]) == (int(ahead), int(violations))
        assert (found["lead"]["median"], found["lead"]["mean"], found["lead"]["max"]) == (
            float(median),
            float(mean),
            int(most),
        )
        assert (found["false_alarms"], found["safe_sessions"]) == (int(alarms), int(safe))
        assert found["warned_ahead"] > 0 and found["lead"]["min"] >= 1  # warnings come before the deny


def test_readme_python_example_prints_what_is_shown() -> None:
    fences = re.findall(r"^```(\w*)\n(.*?)^```$", README, flags=re.S | re.M)
    (code,) = [body for language, body in fences if language == "python"]
    (shown,) = [body for language, body in fences if language == "" and "Risk alert" in body]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown.strip()


def test_the_generator_writes_the_committed_sessions(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, str(FOLDER / "generate.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for name in ("train.jsonl", "test.jsonl"):
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name
    scenario = (FOLDER / "scenario.jsonl").read_text("utf-8").splitlines()
    assert set(scenario) <= set((FOLDER / "test.jsonl").read_text("utf-8").splitlines())


# ------------------------------------------------------------------------------- learn


def test_learn_json_and_the_pac_requirement(policyc, tmp_path) -> None:
    output = str(tmp_path / "m.json")
    args = [
        "forecast", "learn", str(COPILOT / "copilot.dl"), str(COPILOT / "scenario.jsonl"),
        "-p", 'Edit,sast=CoveredBy(_, "sast_scan")', "-p", "UncoveredDiffSize", "--unsafe", "Deny",
        "--invariant", "sast -> Edit", "--horizon", "3", "-o", output,
    ]  # fmt: skip
    run = policyc(*args, "--format", "json")
    assert run.status == 0, run.stderr
    found = run.json()
    assert found["output"] == output and found["data"] == {"traces": 2, "unsafe_traces": 2, "steps": 29}
    assert [(p["name"], p["monotone"]) for p in found["predicates"]] == [
        ("Edit", True),
        ("sast", True),
        ("UncoveredDiffSize", False),
    ]
    assert found["invariants"] == ["sast -> Edit"] and found["pac"]["met"] is False
    model = json.loads(Path(output).read_text("utf-8"))
    assert model["horizons"] == [3] and all(len(s["within"]) == 1 for s in model["states"])
    assert policyc(*args, "--require-pac").status == 1  # two sessions are far from enough
    frequency = policyc(*args, "--estimator", "frequency")
    assert (
        frequency.status == 0
        and "(frequency)" in frequency.stdout
        and "from smoothing" not in frequency.stdout
    )


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["-p", "Edit(", "--unsafe", "Deny"], 1, "invalid predicate list `Edit(`: it ends too early"),
        (["-p", "Edits", "--unsafe", "Deny"], 1, "the policy has no relation `Edits`; did you mean `Edit`?"),
        (
            ["-p", "Edit,Push", "--unsafe", "Deny", "--invariant", "Edit -> Push"],
            1,
            "scenario.jsonl:1: after event `e1`: the state {Edit}: the invariant `Edit -> Push` does not hold",
        ),
        (["-p", "Edit", "--unsafe", "Deny", "--alpha", "0"], 2, "Invalid value for '--alpha'"),
    ],
)
def test_learn_reports_bad_input(policyc, tmp_path, args, status, message) -> None:
    run = policyc(
        "forecast",
        "learn",
        str(COPILOT / "copilot.dl"),
        str(COPILOT / "scenario.jsonl"),
        "-o",
        str(tmp_path / "m"),
        *args,
    )
    assert run.status == status, run.stderr
    assert message in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "m").exists()


def test_learn_reports_bad_traces(policyc, tmp_path) -> None:
    def learn(trace: str):
        return policyc(
            "forecast", "learn", str(COPILOT / "copilot.dl"), trace, "-p", "Edit", "--unsafe", "Deny",
            "-o", str(tmp_path / "m.json"),
        )  # fmt: skip

    run = learn(write(tmp_path, "t.jsonl", '{"events": []}\nnot json\n'))
    assert run.status == 1 and re.search(r"t.jsonl:2:\d+: not valid JSON", run.stderr)
    event = {"id": "e1", "kind": "tool_call", "tool": "create_file"}
    run = learn(
        write(tmp_path, "t.jsonl", json.dumps({"events": [event, {"id": "e2", "kind": "tool_call"}]}))
    )
    assert run.status == 1 and "t.jsonl:1: event 2 (`e2`): the session failed" in run.stderr
    assert "malformed event" in run.stderr
    run = learn(str(tmp_path / "missing.jsonl"))
    assert run.status == 2 and "cannot read" in run.stderr
    assert "Traceback" not in run.stderr


# ------------------------------------------------------------------------ query and show


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_query_selects_states_and_checks_the_cached_probabilities(policyc, tmp_path) -> None:
    run = policyc("forecast", "query", MODEL, "--state", "Committed,!Unscanned", "--format", "json")
    assert run.status == 0 and run.json()["consistent"] is True
    names = [p["name"] for p in run.json()["predicates"]]
    for state in run.json()["states"]:
        values = dict(zip(names, state["values"], strict=True))
        assert values["Committed"] and not values["Unscanned"]
    model = json.loads(Path(MODEL).read_text("utf-8"))
    position = {p["name"]: i for i, p in enumerate(model["predicates"])}
    expected = [
        s["id"]
        for s in model["states"]
        if s["values"][position["Committed"]] and not s["values"][position["Unscanned"]]
    ]
    assert [s["id"] for s in run.json()["states"]] == expected and expected
    assert policyc("forecast", "query", MODEL, "--state", "s3").stdout.count("\ns3 ") == 1
    bad = policyc("forecast", "query", MODEL, "--state", "Pushed")
    assert bad.status == 1 and "`Pushed` is not a predicate or a state of the model" in bad.stderr
    twice = policyc("forecast", "query", MODEL, "--state", "!!Committed")
    assert twice.status == 1 and "`!!Committed`: negate a predicate once (`!Committed`)" in twice.stderr
    both = policyc("forecast", "query", MODEL, "--state", "Committed,!Committed")
    assert both.status == 1 and "asks for `Committed` to hold and not to hold" in both.stderr
    data = json.loads(Path(MODEL).read_text("utf-8"))
    data["states"][2]["within"][0] = 0.5
    run = policyc("forecast", "query", write(tmp_path, "m.json", json.dumps(data)))
    assert run.status == 1 and "`s2`: cached P(F<=5 unsafe) = 0.5, the chain gives" in run.stderr
    data["transitions"][0]["probability"] = 2
    run = policyc("forecast", "query", write(tmp_path, "m.json", json.dumps(data)))
    assert run.status == 1 and "transitions[0].probability: expected a number in [0, 1], got 2" in run.stderr
    assert policyc("forecast", "query", str(tmp_path / "none.json")).status == 2


def test_show_draws_every_state_and_edge(policyc, tmp_path) -> None:
    model = json.loads(Path(MODEL).read_text("utf-8"))
    dot = policyc("forecast", "show", MODEL)
    assert dot.status == 0 and dot.stdout.startswith("digraph forecast {")
    nodes = set(re.findall(r'^  "(s\d+|unsafe|end)" \[label=', dot.stdout, flags=re.M))
    assert nodes == {s["id"] for s in model["states"]} | {"unsafe", "end"}
    edges = re.findall(r'^  "(\w+)" -> "(\w+)" \[label="([\d.]+) \[(\d+)\]"', dot.stdout, flags=re.M)
    drawn = [t for t in model["transitions"] if t["from"] not in ("unsafe", "end")]
    assert len(edges) == len(drawn)
    for (source, target, probability, count), t in zip(edges, drawn, strict=True):
        assert (source, target, int(count)) == (t["from"], t["to"], t["count"])
        assert float(probability) == pytest.approx(t["probability"], abs=5.01e-4)  # printed to 3 places
    fewer = policyc("forecast", "show", MODEL, "--min-probability", "0.2").stdout
    assert len(re.findall(r" -> ", fewer)) == sum(t["probability"] >= 0.2 for t in drawn) + sum(
        1 for s in model["states"] if s["initial"]
    )
    svg = tmp_path / "chain.svg"
    run = policyc("forecast", "show", MODEL, "--format", "svg", "--min-probability", "0.2", "-o", str(svg))
    assert run.status == 0 and run.stdout == f"wrote {svg}\n"
    root = ElementTree.fromstring(svg.read_text("utf-8"))
    assert root.tag.endswith("svg")
    text = svg.read_text("utf-8")
    assert all(f"{s['id']}: " in text for s in model["states"])


# ------------------------------------------------------------------------------- replay


def test_replay_refuses_a_model_of_another_policy(policyc) -> None:
    run = policyc(
        "forecast",
        "replay",
        str(COPILOT / "copilot.dl"),
        MODEL,
        str(COPILOT / "scenario.jsonl"),
        "--threshold",
        "0.5",
    )
    assert run.status == 1 and "learned with another policy" in run.stderr


def test_replay_json_reports_every_step(policyc) -> None:
    run = policyc(
        "forecast", "replay", POLICY, MODEL, str(FOLDER / "scenario.jsonl"),
        "--threshold", "0.4", "--horizon", "10", "--format", "json",
    )  # fmt: skip
    assert run.status == 0, run.stderr
    sessions = run.json()["sessions"]
    hasty = sessions[0]
    assert hasty["session"] == "test-016" and hasty["violation"] == 18
    first = hasty["steps"][hasty["violation"]]
    assert first["denied"] is True and first["rules"] == ["push-needs-scan"] and first["unsafe_now"]
    # within 10 steps the risk is lower than eventually, so the warning comes later than at θ on P(F unsafe)
    assert hasty["first_warning"] is None or hasty["first_warning"] >= 10


def test_replay_shows_a_failed_session_as_failed(policyc, tmp_path) -> None:
    events = [
        {"id": "c1", "kind": "tool_call", "tool": "create_file", "args": {}},
        5,
        {"kind": "user_message"},
    ]
    trace = write(tmp_path, "t.jsonl", json.dumps({"session": "broken", "events": events}))
    run = policyc("forecast", "replay", POLICY, MODEL, trace, "--threshold", "0.4")
    assert run.status == 0, run.stderr
    lines = run.stdout.splitlines()
    # the events without an id are named by their place; their predicates are unknown, not an unseen state
    assert re.match(r"\s+2 \(event 2\)\s+P\(safe\) 0\.00 \(predicates unknown\)  WARNING$", lines[3])
    assert re.match(r"\s+3 \(event 3\)\s+P\(safe\) 0\.00 \(predicates unknown\)  WARNING$", lines[4])
    assert "unseen state" not in run.stdout and "false alarm)" not in run.stdout
    assert "  at step 2: the session failed, so its predicates are unknown: malformed event" in run.stdout
    assert lines[-1].startswith("1 session, threshold 0.40;")
    # a failed session is neither safe nor violating: its warnings are no false alarms
    assert lines[-1].endswith(
        "0 false alarms in 0 safe; 1 failed before reaching `Deny` (their predicates are unknown)"
    )
    data = policyc(
        "forecast", "replay", POLICY, MODEL, trace, "--threshold", "0.4", "--format", "json"
    ).json()
    steps = data["sessions"][0]["steps"]
    assert [s["error"] is not None for s in steps] == [False, False, True, True]


def test_query_selects_a_predicate_named_by_its_pattern(policyc, tmp_path) -> None:
    model = str(tmp_path / "m.json")
    learned = policyc(
        "forecast", "learn", POLICY, str(FOLDER / "scenario.jsonl"), "-p", 'Edit,Uncovered(_, _, "sast_scan")',
        "--unsafe", "UncoveredLines(2000)", "-o", model,
    )  # fmt: skip
    assert learned.status == 0, learned.stderr
    data = json.loads(Path(model).read_text("utf-8"))
    holding = [s["id"] for s in data["states"] if s["values"][1]]
    assert holding  # the hasty session pushes unscanned edits
    for spec in ('Uncovered(_, _, "sast_scan")', 'Edit,Uncovered(_,_,"sast_scan")'):
        run = policyc("forecast", "query", model, "--state", spec, "--format", "json")
        assert run.status == 0, run.stderr
        assert [s["id"] for s in run.json()["states"]] == holding
    run = policyc("forecast", "query", model, "--state", '!Uncovered(_,_,"sast_scan")', "--format", "json")
    assert [s["id"] for s in run.json()["states"]] == [s["id"] for s in data["states"] if not s["values"][1]]


def test_replay_and_learn_refuse_a_trace_without_sessions(policyc, tmp_path) -> None:
    empty = write(tmp_path, "empty.jsonl", "\n")
    run = policyc("forecast", "replay", POLICY, MODEL, empty, "--threshold", "0.4")
    assert run.status == 1 and "no recorded sessions to replay" in run.stderr
    run = policyc(
        "forecast", "learn", POLICY, empty, "-p", "Edit", "--unsafe", "Deny", "-o", str(tmp_path / "m.json")
    )
    assert run.status == 1 and "no recorded sessions to learn from" in run.stderr


def test_learn_counts_one_session_in_the_singular(policyc, tmp_path) -> None:
    one = write(tmp_path, "one.jsonl", (FOLDER / "scenario.jsonl").read_text().splitlines()[0])
    run = policyc(
        "forecast",
        "learn",
        POLICY,
        one,
        "-p",
        "Edit,Unscanned",
        "--unsafe",
        "Deny",
        "-o",
        str(tmp_path / "m.json"),
    )
    assert run.status == 0, run.stderr
    assert "learned from 1 session (1 reached `Deny`)" in run.stdout
    assert "sessions" not in run.stdout.split("PAC")[1].split("at the rate")[1]
