"""Fixes: the one `.import` fix of a library's undefined names, and `policyc check --fix`
applying the fixes diagnostics carry, as `ruff check --fix` does (safe ones; `--unsafe-fixes`;
`--diff`), round after round until none applies."""

from __future__ import annotations

from policyc.compiler.pipeline import compile_source

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
