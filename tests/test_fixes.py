"""Fixes: the one `.import` fix of a library's undefined names, and `policyc check --fix`
applying the fixes diagnostics carry, as `ruff check --fix` does (safe ones; `--unsafe-fixes`;
`--diff`), round after round until none applies."""

from __future__ import annotations

from pathlib import Path

from policyc.compiler.pipeline import compile_source

from .conftest import ROOT

VOCABULARY = """\
// mail after untrusted content

@id("no-tainted-mail") @message("{a} sends mail after untrusted content")
Deny(a) :- ToolCall(a, "send_email"), DependsOn(a, e), Label(e, "untrusted"), tool_arg(a, "to") != "me".
"""


def applied(text: str, fix) -> str:
    for edit in sorted(fix.edits, key=lambda e: -e.span.start):
        text = text[: edit.span.start] + edit.text + text[edit.span.end :]
    return text


def undefined(text: str) -> list:
    found = compile_source(text, "p.dl").diagnostics
    return [d for d in found if d.name in ("undefined-relation", "undefined-function")]


def test_the_event_vocabulary_undefined_gets_one_import_fix() -> None:
    found = undefined(VOCABULARY)
    assert [d.message.split("`")[1] for d in found] == ["ToolCall", "DependsOn", "Label", "tool_arg"]
    (fix,) = {d.fix for d in found}  # one fix, shared by every use
    assert fix.message == "add `.import events`" and fix.safe
    assert all("`.import events`" in (d.help or "") for d in found)
    fixed = applied(VOCABULARY, fix)
    assert fixed.startswith("// mail after untrusted content\n\n.import events\n\n@id(")
    assert compile_source(fixed, "p.dl").diagnostics == ()


def test_the_import_goes_before_the_comment_of_the_first_statement() -> None:
    text = '// the rule\nDeny(a) :- ToolCall(a, "rm").\n'
    (d,) = undefined(text)
    assert applied(text, d.fix) == '.import events\n\n// the rule\nDeny(a) :- ToolCall(a, "rm").\n'
    text = '.import lists\nDeny(a) :- ToolCall(a, "rm").\n'  # among the imports
    (d,) = undefined(text)
    assert applied(text, d.fix).startswith(".import events\n.import lists\n")


def test_another_library_module_and_what_is_not_a_vocabulary_name() -> None:
    (d,) = undefined('.import events\nDeny(a) :- ToolCall(a, "send"), Tainted(a).\n')
    assert d.fix is not None and d.fix.message == "add `.import provenance`"
    # the vocabulary's `Label` has two arguments: a `Label` of one is some other relation
    (d,) = undefined(".input Send\nDeny(a) :- Send(a), Label(a).\n")
    assert d.fix is not None and d.fix.message == "declare `Label` as an input relation"


def test_the_import_is_not_safe_when_it_brings_a_name_the_policy_defines() -> None:
    text = '.decl Text(e: symbol, t: symbol)\n.input Text\nDeny(a) :- ToolCall(a, "send"), Text(a, "x").\n'
    (d,) = undefined(text)
    assert d.fix is not None and d.fix.message == "add `.import events`" and not d.fix.safe


# ------------------------------------------------------------------------------ check --fix

DRAFT = """\
// a first draft

@id("no-send-after-untrusted") @message("{a} sends after reading untrusted content")
Deny(a) :- ToolCall(a, "send"), DependsOn(a, e), Label(e, "untrusted"), ToolArg(a, key, value).

@id("blocked") @message("{a} sends to a blocked address")
Deny(a) :- ToolCall(a, "send"), tool_arg(a, "to") = to, Blocked(to).
"""

FIXED = """\
// a first draft

.import events

@id("no-send-after-untrusted") @message("{a} sends after reading untrusted content")
Deny(a) :- ToolCall(a, "send"), DependsOn(a, e), Label(e, "untrusted"), ToolArg(a, _, _).

@id("blocked") @message("{a} sends to a blocked address")
Deny(a) :- ToolCall(a, "send"), tool_arg(a, "to") = to, Blocked(to).
"""


def test_check_says_how_many_findings_fix_would_fix(policyc, tmp_path: Path) -> None:
    """As ruff's: the safe ones, then the unsafe ones `--unsafe-fixes` would add; nothing when no
    finding carries a fix; only in the text output."""
    policy = tmp_path / "draft.dl"
    policy.write_text(DRAFT)
    lines = policyc("check", str(policy)).stdout.splitlines()
    assert lines[-1] == "[*] 8 fixable with `policyc check --fix` (1 more with `--unsafe-fixes`)."
    assert "fixable" not in policyc("check", "--format", "json", str(policy)).stdout
    policy.write_text(FIXED)
    lines = policyc("check", str(policy)).stdout.splitlines()
    assert lines[-2:] == [
        "Found 1 error.",
        "No safe fixes (1 fixable with `policyc check --fix --unsafe-fixes`).",
    ]
    policy.write_text(
        FIXED.replace("Blocked(to)", "Tainted(to)").replace(
            ".import events", ".import events\n.import provenance"
        )
    )
    assert "fixable" not in policyc("check", str(policy)).stdout


def test_fix_applies_the_safe_fixes_and_reports_what_remains(policyc, tmp_path: Path) -> None:
    policy = tmp_path / "draft.dl"
    policy.write_text(DRAFT)
    policy.chmod(0o640)
    run = policyc("check", "--fix", str(policy))
    assert policy.read_text() == FIXED and (policy.stat().st_mode & 0o777) == 0o640
    assert run.status == 1 and run.stderr == ""
    lines = run.stdout.splitlines()
    assert f"fixed {policy}:4:12: add `.import events` [PC101, PC106] (6 diagnostics)" in lines
    assert f"fixed {policy}:4:84: replace it with `_` [PC201]" in lines
    assert "Fixed 8 problems." in lines
    assert "1 fix is not safe and not applied: review it, or apply it with `--unsafe-fixes`." in lines
    assert f"{policy}:9:57: error[PC101]: relation `Blocked` is not defined [undefined-relation]" in lines
    assert lines[-1] == "Found 1 error."
    # again: nothing left that is safe to fix, and the file as it was
    run = policyc("check", "--fix", str(policy))
    assert "No fixes applied." in run.stdout and policy.read_text() == FIXED
    run = policyc("check", "--fix", "--unsafe-fixes", "--format", "json", str(policy))
    assert run.status == 0, run.stdout + run.stderr
    report = run.json()
    assert report["diagnostics"] == [] and report["settled"] and report["files"] == [str(policy)]
    assert [(d["name"], d["fix"]["safe"]) for d in report["fixed"]] == [("undefined-relation", False)]
    assert ".decl Blocked(to: symbol)\n.input Blocked\n" in policy.read_text()
    assert policyc("check", "--fail-on", "warning", str(policy)).stdout == "All checks passed.\n"


def test_diff_writes_nothing_and_shows_every_round(policyc, tmp_path: Path) -> None:
    policy = tmp_path / "draft.dl"
    policy.write_text(DRAFT)
    run = policyc("check", "--diff", str(policy))
    assert run.status == 1 and policy.read_text() == DRAFT
    assert run.stdout.startswith(f"--- {policy}\n+++ {policy}\n")
    assert "+.import events\n" in run.stdout and "+Deny(a) :- ToolCall" in run.stdout
    assert (
        run.stderr
        == "Would fix 8 problems in 1 file (1 remaining).\n1 fix is not safe: `--unsafe-fixes` shows it too.\n"
    )
    (tmp_path / "fixed.dl").write_text(FIXED.replace("Blocked(to)", 'to = "x"'))
    run = policyc("check", "--diff", str(tmp_path / "fixed.dl"))
    assert (run.status, run.stdout) == (0, "")
    assert run.stderr == "No fixes available (0 remaining).\n"


def test_standard_input_is_fixed_to_standard_output(policyc) -> None:
    run = policyc("check", "--fix", "--stdin-filename", "draft.dl", "-", stdin=DRAFT.encode())
    assert run.stdout == FIXED
    assert "fixed draft.dl:4:12: add `.import events`" in run.stderr and run.stderr.endswith(
        "Found 1 error.\n"
    )


def test_fixes_reach_included_files(policyc, tmp_path: Path) -> None:
    (tmp_path / "rules.dl").write_text('.import events\nDeny(a) :- ToolArg(a, "to", to).\n')
    (tmp_path / "main.dl").write_text('.include "rules.dl"\nAllow(a) :- ToolCall(a, t).\n')
    run = policyc("check", "--fix", str(tmp_path / "main.dl"))
    assert (tmp_path / "rules.dl").read_text() == '.import events\nDeny(a) :- ToolArg(a, "to", _).\n'
    assert (tmp_path / "main.dl").read_text() == '.include "rules.dl"\nAllow(a) :- ToolCall(a, _).\n'
    assert "Fixed 2 problems." in run.stdout


def test_unsafe_fixes_need_fix_or_diff(policyc, tmp_path: Path) -> None:
    (tmp_path / "p.dl").write_text(DRAFT)
    for argv in (["--unsafe-fixes"], ["--fix", "--show", "ast"], ["--diff", "--format", "sarif"]):
        run = policyc("check", *argv, str(tmp_path / "p.dl"))
        assert run.status == 2 and "Usage" in run.stderr, argv
    assert (tmp_path / "p.dl").read_text() == DRAFT


def test_fixes_that_undo_each_other_stop_where_they_began() -> None:
    from policyc.compiler import codes
    from policyc.compiler.diagnostics import Edit, Fix
    from policyc.compiler.fixing import fix_texts
    from policyc.compiler.source import SourceFile

    def check(texts):  # `a` wants to be `b`, and `b` wants to be `a`
        source = SourceFile("p.dl", texts["p.dl"])
        word = texts["p.dl"][0]
        other = "b" if word == "a" else "a"
        fix = Fix(f"write `{other}`", (Edit(source.span(0, 1), other),))
        return [codes.SINGLETON_VARIABLE(source.span(0, 1), f"not {word}", fix=fix)]

    done = fix_texts({"p.dl": "a.\n"}, check)
    assert not done.settled and done.texts == {"p.dl": "a.\n"} and done.rounds == 2
    assert [d.message for d in done.fixed] == ["not a", "not b"]


def test_a_fix_of_a_file_that_may_not_be_edited_is_skipped_whole() -> None:
    from policyc.compiler import codes
    from policyc.compiler.diagnostics import Edit, Fix
    from policyc.compiler.fixing import fix_texts
    from policyc.compiler.source import SourceFile

    mine, library = SourceFile("p.dl", "a.\n"), SourceFile("<stdlib>/events.dl", "b.\n")
    both = Fix("write `c` twice", (Edit(mine.span(0, 1), "c"), Edit(library.span(0, 1), "c")))

    def check(texts):
        return [codes.SINGLETON_VARIABLE(mine.span(0, 1), "x", fix=both)] if texts["p.dl"] == "a.\n" else []

    done = fix_texts({"p.dl": "a.\n"}, check, read=lambda file: None)
    assert done.texts == {"p.dl": "a.\n"} and done.fixed == () and done.settled


# ------------------------------------------------------------------- verdicts without names


def test_a_deny_or_escalate_rule_without_id_or_message_gets_a_warning() -> None:
    text = (ROOT / "tests" / "golden" / "missing-verdict-annotation.dl").read_text("utf-8")
    found = [d for d in compile_source(text, "p.dl").diagnostics]
    assert [(d.name, d.span.line, d.message) for d in found] == [
        ("missing-verdict-annotation", 2, "`Deny` rule without `@id` and `@message`"),
        ("missing-verdict-annotation", 4, "`Deny` rule `no-force-push` without `@message`"),
        ("missing-verdict-annotation", 6, "`Escalate` rule without `@id`"),
    ]
    assert all(d.severity.value == "warning" and d.fix is None for d in found)
    assert "`Deny@p.dl:2`" in (found[0].help or "")
    # a rule written once stands for its instances and alternatives: one warning
    text = '.import events\n.comp C { Deny(a) :- ToolCall(a, "x") ; ToolCall(a, "y"). }\n.init c = C\n'
    assert [d.name for d in compile_source(text, "p.dl").diagnostics] == ["missing-verdict-annotation"]
    # a program without verdicts (Soufflé's) and the library never warn
    assert (
        compile_source('.decl Escalate(a: symbol, b: symbol)\nEscalate(a, a) :- a = "x".\n').diagnostics == ()
    )
