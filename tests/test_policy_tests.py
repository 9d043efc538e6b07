"""`policyc test`, through the installed command: passing and failing cases, coverage, traces,
and test files or policies that cannot run."""

from __future__ import annotations

import json
from pathlib import Path

POLICY = """\
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).

@id("no-tainted-mail")
@message("{a} would send mail after reading untrusted content")
Deny(a) :- is_tool(a, "send_email"), Tainted(a).

@id("no-shell")
Deny(a) :- ToolCall(a, "shell").
"""

MAIL = """\
policy = "mail.dl"

[[test]]
name = "mail after an untrusted page is denied"
events = [
  { id = "c1", kind = "tool_call", tool = "fetch", args = { url = "https://example.com" } },
  { id = "r1", kind = "tool_result", of = "c1", labels = ["untrusted"] },
  { id = "c2", kind = "tool_call", tool = "send_email", deps = ["r1"] },
]
allow = ["c1"]
deny = ["c2"]
reasons = { c2 = ["no-tainted-mail"] }
derived = ['Tainted("c2")']
not_derived = ['Tainted("c1")']
"""


def project(tmp_path: Path, test: str = MAIL, policy: str = POLICY) -> Path:
    (tmp_path / "mail.dl").write_text(policy)
    (tmp_path / "mail_test.toml").write_text(test)
    return tmp_path


def test_passing_cases(policyc, tmp_path: Path) -> None:
    run = policyc("test", str(project(tmp_path)))
    assert run.status == 0, run.stdout + run.stderr
    assert "ok     mail after an untrusted page is denied" in run.stdout
    assert run.stdout.rstrip().endswith("1 test, 1 passed, 0 failed")


def test_failures_show_expected_against_actual(policyc, tmp_path: Path) -> None:
    wrong = MAIL.replace('allow = ["c1"]\ndeny = ["c2"]', 'allow = ["c2"]\ndeny = ["c1"]').replace(
        "not_derived = ['Tainted(\"c1\")']", "not_derived = ['Tainted(\"c2\")']"
    )
    run = policyc("test", "--format", "json", str(project(tmp_path, wrong)))
    assert run.status == 1
    (case,) = run.json()["files"][0]["cases"]
    assert not case["passed"] and case["line"] == 3
    failures = {(f["check"], f["subject"]): (f["expected"], f["actual"]) for f in case["failures"]}
    assert failures == {
        ("allow", "c2"): ("allowed", "denied by no-tainted-mail"),
        ("deny", "c1"): ("denied", "allowed"),
        ("not_derived", 'Tainted("c2")'): ("does not hold", "holds"),
    }
    text = policyc("test", str(tmp_path)).stdout
    assert f"FAIL   mail after an untrusted page is denied  ({tmp_path / 'mail_test.toml'}:3)" in text
    assert "deny c1: expected denied, got allowed" in text


def test_coverage_lists_the_deny_rules_no_test_exercises(policyc, tmp_path: Path) -> None:
    run = policyc("test", "--coverage", "--format", "json", str(project(tmp_path)))
    assert run.status == 0
    coverage = run.json()["coverage"]
    fired = {(Path(r["file"]).name, r["line"]): r["fired"] for r in coverage["rules"]}
    assert fired == {("mail.dl", 2): True, ("mail.dl", 3): True, ("mail.dl", 7): True, ("mail.dl", 10): False}
    (unexercised,) = coverage["unexercised_deny_rules"]
    assert (Path(unexercised["file"]).name, unexercised["line"], unexercised["id"]) == (
        "mail.dl",
        10,
        "no-shell",
    )
    text = policyc("test", "--coverage", str(tmp_path)).stdout
    assert "coverage: 3 of 4 rules fired" in text
    assert "Deny rules no test exercises:" in text and "mail.dl:10:1  no-shell" in text
    policy = tmp_path / "mail.dl"
    assert (
        f"  NOT FIRED  {policy}:10:1  no-shell" in text
        and f"  fired      {policy}:7:1  no-tainted-mail" in text
    )
    shell = (
        MAIL
        + '\n[[test]]\nname = "no shell"\nevents = [{ id = "s", kind = "tool_call", tool = "shell" }]\ndeny = ["s"]\n'
    )
    project(tmp_path, shell)
    text = policyc("test", "--coverage", str(tmp_path)).stdout
    assert "coverage: 4 of 4 rules fired" in text and "every Deny rule is exercised" in text


def test_a_failed_decision_never_passes_as_a_denial(policyc, tmp_path: Path) -> None:
    """The runtime denies when an event is malformed, but that is not the policy's verdict."""
    malformed = 'policy = "mail.dl"\n[[test]]\nname = "no tool"\nevents = [{ id = "c1", kind = "tool_call" }]\ndeny = ["c1"]\n'
    run = policyc("test", "--format", "json", str(project(tmp_path, malformed)))
    assert run.status == 1
    (case,) = run.json()["files"][0]["cases"]
    checks = {f["check"]: f["actual"] for f in case["failures"]}
    assert "decision" in checks and "tool call without a `tool`" in checks["decision"]


def test_facts_and_traces(policyc, tmp_path: Path) -> None:
    sessions = [
        {"session": "quiet", "events": [{"id": "c1", "kind": "tool_call", "tool": "send_email"}]},
        {"session": "noisy", "events": [{"id": "s1", "kind": "tool_call", "tool": "shell"}]},
    ]
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    test = """\
policy = "mail.dl"

[[test]]
name = "first session"
trace = "trace.jsonl"
allow = ["c1"]

[[test]]
name = "a session by name"
trace = "trace.jsonl"
session = "noisy"
deny = ["s1"]
"""
    run = policyc("test", str(project(tmp_path, test)))
    assert run.status == 0, run.stdout
    assert "2 tests, 2 passed, 0 failed" in run.stdout
    (tmp_path / "flow.dl").write_text(
        '.input Send, Untrusted\n@id("no-untrusted-send")\nDeny(a) :- Send(a), Untrusted(a).\n'
    )
    (tmp_path / "flow_test.toml").write_text(
        'policy = "flow.dl"\n[[test]]\nname = "facts only"\n'
        'facts = { Send = [["x"], ["y"]], Untrusted = [["x"]] }\n'
        'deny = ["x"]\nallow = ["y"]\nreasons = { x = ["no-untrusted-send"] }\n'
    )
    run = policyc("test", str(tmp_path / "flow_test.toml"))
    assert run.status == 0 and "1 test, 1 passed, 0 failed" in run.stdout, run.stdout


def test_traces_are_read_as_replay_reads_them(policyc, tmp_path: Path) -> None:
    """Only `\\n` ends a session (a U+2028 inside a string does not), blank lines are skipped,
    and a line that is not a session is named by its line in the file, as `policyc replay` does."""
    session = {"events": [{"id": "c1", "kind": "tool_call", "tool": "note", "args": {"t": "a\u2028b"}}]}
    (tmp_path / "trace.jsonl").write_text("\n" + json.dumps(session, ensure_ascii=False) + "\n", "utf-8")
    test = 'policy = "mail.dl"\n[[test]]\nname = "t"\ntrace = "trace.jsonl"\nallow = ["c1"]\n'
    run = policyc("test", str(project(tmp_path, test)))
    assert run.status == 0 and "1 test, 1 passed, 0 failed" in run.stdout, run.stdout
    (tmp_path / "trace.jsonl").write_text("\n" + json.dumps(session) + "\n\nnot json\n", "utf-8")
    run = policyc("test", str(tmp_path / "mail_test.toml"))
    assert run.status == 1 and "trace.jsonl:4:1: not valid JSON" in run.stdout, run.stdout


def test_event_functors_need_events(policyc, tmp_path: Path) -> None:
    """Without events there is no session to answer `is_tool`: the case fails, and says why."""
    facts = 'policy = "mail.dl"\n[[test]]\nname = "facts"\nfacts = { Label = [["x", "untrusted"]] }\ndeny = ["x"]\n'
    run = policyc("test", str(project(tmp_path, facts)))
    assert run.status == 1
    assert "`is_tool` is answered from the events of a monitor session" in run.stdout


def test_test_files_that_cannot_run(policyc, tmp_path: Path) -> None:
    project(tmp_path, 'policy = "mail.dl"\n[[test]\nname = "x"\n')
    run = policyc("test", str(tmp_path))
    assert run.status == 1
    assert f"{tmp_path / 'mail_test.toml'}:2:" in run.stdout and "not valid TOML" in run.stdout
    assert "[invalid-test-file]" in run.stdout and "Traceback" not in run.stdout + run.stderr
    project(tmp_path, 'policy = "mail.dl"\n\n[[test]]\nname = "x"\nfacts = {}\ndeny = ["a"]\nexpect = 1\n')
    assert (
        "mail_test.toml:7: test[0].expect: unknown key (the keys are" in policyc("test", str(tmp_path)).stdout
    )
    project(tmp_path, 'policy = "mail.dl"\n[[test]]\nname = "x"\ndeny = ["a"]\n')
    assert "case `x` has no input" in policyc("test", str(tmp_path)).stdout
    project(tmp_path, MAIL, POLICY.replace('ToolCall(a, "shell")', "Nope(a)"))
    broken = policyc("test", str(tmp_path))
    assert broken.status == 1 and "has errors" in broken.stdout and "`Nope` is not defined" in broken.stdout
    missing = policyc("test", str(tmp_path / "absent"))
    assert missing.status == 2 and "cannot read" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    none = policyc("test", str(empty))
    assert none.status == 1 and "no test files" in none.stderr


def test_new_scaffolds_a_policy_whose_tests_pass_with_full_coverage(policyc, tmp_path: Path) -> None:
    made = policyc("new", "payments", "--dir", str(tmp_path))
    assert made.status == 0, made.stderr
    folder = tmp_path / "payments"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "payments.dl", "payments_test.toml"]
    checked = policyc("check", "--deep", "--fail-on", "warning", str(folder / "payments.dl"))
    assert checked.status == 0, checked.stdout
    run = policyc("test", "--coverage", "--format", "json", str(folder))
    assert run.status == 0, run.stdout
    result = run.json()
    assert result["summary"] == {"tests": 2, "passed": 2, "failed": 0, "errors": 0}
    assert all(rule["fired"] for rule in result["coverage"]["rules"])
    assert result["coverage"]["unexercised_deny_rules"] == []
    again = policyc("new", "payments", "--dir", str(tmp_path))
    assert again.status == 1 and "already exists" in again.stderr
    assert policyc("new", "../x", "--dir", str(tmp_path)).status == 1


def test_the_documented_test_file_passes(policyc) -> None:
    """docs/testing.md shows examples/quickstart/agent_test.toml (tests/test_docs.py checks that
    the block is the file): its cases pass and make every rule fire."""
    run = policyc("test", "--coverage", "examples/quickstart")
    assert run.status == 0, run.stdout
    assert "4 tests, 4 passed, 0 failed" in run.stdout and "coverage: 5 of 5 rules fired" in run.stdout


def test_counts_of_one_are_singular(policyc, tmp_path: Path) -> None:
    """One case is `1 test`, one rule `1 of 1 rule fired`, one inline rule `1 rule of inline
    relations`."""
    (tmp_path / "one.dl").write_text(
        ".input Send, Untrusted\n.decl Bad(a: symbol) inline\nBad(a) :- Untrusted(a).\n"
        '@id("no-untrusted-send")\nDeny(a) :- Send(a), Bad(a).\n'
    )
    (tmp_path / "one_test.toml").write_text(
        'policy = "one.dl"\n[[test]]\nname = "one"\nfacts = { Send = [["x"]], Untrusted = [["x"]] }\ndeny = ["x"]\n'
    )
    run = policyc("test", "--coverage", str(tmp_path))
    assert run.status == 0, run.stdout
    assert "\n1 test, 1 passed, 0 failed\n" in run.stdout, run.stdout
    assert "coverage: 1 of 1 rule fired (1 rule of inline relations not tracked)" in run.stdout, run.stdout


def test_coverage_keeps_policies_of_the_same_name_apart(policyc, tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for folder in (first, second):
        folder.mkdir()
        project(folder)
    shell = (
        MAIL
        + '\n[[test]]\nname = "no shell"\nevents = [{ id = "s", kind = "tool_call", tool = "shell" }]\ndeny = ["s"]\n'
    )
    (second / "mail_test.toml").write_text(shell)
    run = policyc("test", "--coverage", "--format", "json", str(tmp_path))
    unexercised = run.json()["coverage"]["unexercised_deny_rules"]
    assert [(Path(r["file"]).parent.name, r["line"]) for r in unexercised] == [("one", 10)]


def test_reasons_naming_a_rule_the_policy_lacks_fail_and_say_so(policyc, tmp_path: Path) -> None:
    policy = POLICY.replace("Tainted(e) :- Label", '@id("taint")\nTainted(e) :- Label')
    test = (
        MAIL.replace('c2 = ["no-tainted-mail"]', 'c2 = ["no-tainted-mail", "taint"]')
        + """
[[test]]
name = "shell"
events = [{ id = "c1", kind = "tool_call", tool = "shell" }]
deny = ["c1"]
reasons = { c1 = ["no-shel"] }
"""
    )
    run = policyc("test", str(project(tmp_path, test, policy)))
    assert run.status == 1
    assert (
        "reasons c2: expected the id of a `Deny` or `Escalate` rule, got `taint`, the id of a `Tainted` rule"
        in run.stdout
    )
    assert (
        "reasons c1: expected a rule id of the policy, got `no-shel`: no rule has it (did you mean `no-shell`?)"
        in run.stdout
    )
    run = policyc("test", "--format", "json", str(tmp_path))
    cases = {c["name"]: c for c in run.json()["files"][0]["cases"]}
    assert [f["check"] for f in cases["shell"]["failures"]] == ["reasons"]
    # the monitor's own reasons (`policyc:...`) are no rules of the policy, and may be expected
    strict = tmp_path / "strict"
    strict.mkdir()
    (strict / "strict.dl").write_text(
        '.import events\n.default deny\n@id("reads")\nAllow(a) :- ToolCall(a, "read").\n'
    )
    (strict / "strict_test.toml").write_text(
        'policy = "strict.dl"\n\n[[test]]\nname = "default"\n'
        'events = [{ id = "c1", kind = "tool_call", tool = "write" }]\n'
        'deny = ["c1"]\nreasons = { c1 = ["policyc:default-deny"] }\n'
    )
    run = policyc("test", str(strict))
    assert run.status == 0, run.stdout
