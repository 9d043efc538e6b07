"""Input that once gave silently wrong output: facts rows written as objects, a facts error
followed by relations, an empty facts folder, explanations of facts of another shape, replays
of malformed events, and a compile killed while writing its bundle."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
from pathlib import Path

from .conftest import EXAMPLES, ROOT, policyc_command

TIMEOUT = 60
TOXIC = EXAMPLES / "toxic_flow" / "toxic_flow.dl"  # over the event vocabulary
FORGE = EXAMPLES / "forge" / "toxic_flow.dl"  # over input relations (`ExternalSend`, ...)


def policyc(*argv: str, cwd: Path = ROOT, **options) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    env.pop("POLICYC_DEBUG", None)
    return subprocess.run(
        [*policyc_command(), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        **options,
    )


def test_a_row_written_as_an_object_is_refused(tmp_path) -> None:
    """`{"S": [{"a": 1}]}` is not the row `("a",)`: an object is no list of values."""
    for facts, where in (
        ('{"ExternalSend": [{"v6": 1}]}', "row 1: expected a list of 1 values, got an object"),
        ('{"ExternalSend": {"v6": 1}}', "expected a list of rows, got an object"),
    ):
        path = tmp_path / "facts.json"
        path.write_text(facts, "utf-8")
        run = policyc("eval", str(FORGE), "--facts", str(path))
        assert run.returncode == 1 and where in run.stderr and str(path) in run.stderr, run.stderr
        assert run.stdout == "", run.stdout


def test_after_a_facts_error_no_relation_is_printed(tmp_path) -> None:
    """Nothing was evaluated: printing `Deny: 0 facts` next to the error would say the policy
    denied nothing."""
    path = tmp_path / "facts.json"
    path.write_text('{"ExternalSend": [["v6", "extra"]]}', "utf-8")
    run = policyc("eval", str(FORGE), "--facts", str(path))
    assert run.returncode == 1 and "expected 1 values, got 2" in run.stderr
    assert run.stdout == "", run.stdout
    # with --format json the error is the whole answer on standard output, and no relation
    run = policyc("eval", str(FORGE), "--facts", str(path), "--format", "json")
    assert run.returncode == 1 and "expected 1 values, got 2" in run.stderr
    answer = json.loads(run.stdout)
    assert set(answer) == {"errors", "diagnostics"} and "expected 1 values, got 2" in answer["errors"][0]
    run = policyc("explain", str(FORGE), 'Deny("v6")', "--facts", str(path))
    assert run.returncode == 1 and run.stdout == "", run.stdout


def test_a_facts_folder_without_facts_is_refused(tmp_path) -> None:
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "notes.txt").write_text("UntrustedInput\tv3\n", "utf-8")
    run = policyc("eval", str(FORGE), "--facts", str(tmp_path / "facts"))
    assert run.returncode == 1 and "no facts files" in run.stderr and run.stdout == "", run.stderr


def test_explain_checks_the_fact_against_its_relation(tmp_path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"ExternalSend": [["v6"]]}', "utf-8")
    wrong_arity = policyc("explain", str(FORGE), 'Deny("v6", "v7")', "--facts", str(facts))
    assert wrong_arity.returncode == 2 and "gives 2 values, but `Deny` has 1" in wrong_arity.stderr
    wrong_type = policyc("explain", str(FORGE), "Deny(6)", "--facts", str(facts))
    assert wrong_type.returncode == 2 and "expected a string, got 6" in wrong_type.stderr
    for run in (wrong_arity, wrong_type):
        assert "Traceback" not in run.stderr and run.stdout == "", run.stdout


def test_replay_shows_a_malformed_event_without_a_tool_call(tmp_path) -> None:
    """A session whose only events are malformed makes no decision: its failure must still be
    shown, or the replay reads as a clean session."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"session": "s1", "events": [{"kind": "user_message"}, 7]}\n', "utf-8")
    run = policyc("replay", "--each", str(TOXIC), str(trace))
    assert run.returncode == 0, run.stderr
    assert "session s1" in run.stdout and "problem: malformed event" in run.stdout, run.stdout
    data = json.loads(policyc("replay", "--each", str(TOXIC), str(trace), "--format", "json").stdout)
    assert data["sessions"][0]["decisions"] == [] and data["sessions"][0]["problems"], data


def test_compile_never_leaves_a_truncated_bundle(tmp_path) -> None:
    """A write that fails halfway (here: the file size limit) leaves the previous bundle whole,
    and no temporary file behind."""
    out = tmp_path / "policy.bundle"
    assert policyc("compile", str(TOXIC), "-o", str(out)).returncode == 0
    before = out.read_bytes()

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    run = policyc("compile", str(EXAMPLES / "copilot" / "copilot.dl"), "-o", str(out), preexec_fn=small_files)
    assert run.returncode == 2 and "cannot write" in run.stderr, run.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.bundle"]
    assert policyc("compile", str(EXAMPLES / "copilot" / "copilot.dl"), "-o", str(out)).returncode == 0
    assert out.read_bytes() != before and (out.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
