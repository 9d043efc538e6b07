"""The one JSON reader for input from outside (`policyc.runtime.jsonio`): standard JSON, and
none of what Python's parser accepts but policyc cannot hold — nesting deeper than 256 levels,
integers over 4,300 digits, NaN and infinities, lone surrogates — each refused at its place."""

from __future__ import annotations

import json

import pytest

from policyc.runtime import jsonio
from policyc.runtime.jsonio import MalformedJSON, loads, raw_decode

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 5000


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        (DEEP, "nested more than 256 levels deep", 1, 257),
        ('{"a": [1,\n  ' + "[" * 300 + "]" * 300 + "]}", "nested more than 256 levels deep", 2, 257),
        ("[" * 257 + "]" * 257, "nested more than 256 levels deep", 1, 257),  # parses, still refused
        ('{"n": ' + HUGE + "}", "an integer of 5,000 digits (policyc reads at most 4,300)", 1, 7),
        ('["' + HUGE + '", -' + HUGE + "]", "an integer of 5,000 digits", 1, 5006),
        ('{"x": "NaN", "y": NaN}', "NaN is not a JSON number (numbers must be finite)", 1, 19),
        ("[Infinity]", "Infinity is not a JSON number", 1, 2),
        ('{"a": -Infinity}', "-Infinity is not a JSON number", 1, 7),
        ('["1e999", 1e999]', "the number 1e999 is too large for a float", 1, 11),
        ('{"s": "\\ud800"}', "a string holds a lone surrogate escape", 1, 8),
    ],
)
def test_refusals_are_located(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(MalformedJSON) as caught:
        loads(text)
    assert caught.value.msg.startswith(message), caught.value.msg
    assert (caught.value.lineno, caught.value.colno) == (line, column)
    assert isinstance(caught.value, json.JSONDecodeError)  # reported wherever JSON errors are


def test_what_it_accepts() -> None:
    nested: list = []
    for _ in range(255):
        nested = [nested]
    assert loads("[" * 256 + "]" * 256) == nested
    assert loads('{"a": [1, 2.5, "x", true, null], "b": "\\ud83d\\ude00", "c": "\\\\ud800"}') == {
        "a": [1, 2.5, "x", True, None],
        "b": "\U0001f600",
        "c": "\\ud800",  # an escaped backslash, not a surrogate
    }
    assert loads("-" + "9" * 4300) == -int("9" * 4300)
    assert loads('"[[[[" ') == "[[[["
    assert raw_decode('Sure: {"a": 1} and more', 6) == ({"a": 1}, 14)
    with pytest.raises(json.JSONDecodeError) as caught:
        loads('{"a": 1')
    assert not isinstance(caught.value, MalformedJSON) and jsonio.problem(caught.value).startswith(
        "not valid JSON"
    )


def test_a_deep_structure_is_not_walked_recursively() -> None:
    """The depth check after parsing uses no recursion: a structure that parses, at a depth
    Python's own walkers could not handle, is refused without a RecursionError."""
    import sys

    depth = sys.getrecursionlimit() - 100
    with pytest.raises(MalformedJSON, match="nested more than"):
        loads("[" * depth + "]" * depth)
    with pytest.raises(MalformedJSON, match="nested more than 10 levels"):
        loads('{"a": ' * 11 + "1" + "}" * 11, max_depth=10)


# ------------------------------------------------------------------- answers of a translation model


def test_hostile_model_answers_are_malformed_answers_not_a_crash(tmp_path) -> None:
    """Answers nested 100,000 deep (in the text, or in the response body itself), with NaN or
    a 5,000-digit integer are each a malformed answer in the report; the run goes on, and what
    the other requests answered is kept."""
    from .test_translate import task43_args, task43_script, translate
    from .translate.chat import ChatServer, Reply

    deep_object = '{"verdict": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}"
    answers = [
        Reply.answer(deep_object),
        Reply.answer('{"verdict": NaN}'),
        Reply.answer('{"verdict": "allow", "confidence": ' + HUGE + "}"),
        Reply(raw=('{"id": "x", "choices": ' + DEEP + "}").encode()),
    ]
    served: list[int] = []

    def judge(request) -> Reply:  # asked once, then again after a malformed answer: the same kind
        served.append(1)
        return answers[(len(served) - 1) // 2 % len(answers)]

    script, _ = task43_script("translation_fixed.dl", judge=judge, judge_again=judge)
    with ChatServer(script) as server:
        run = translate(
            server,
            *task43_args(
                tmp_path, "--retries", "0", "--jobs", "1", "--skip", "synthesis", "--skip", "analysis"
            ),
        )
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr[-3000:]
    assert run.status == 1, run.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    malformed = [p for p in report["problems"] if p["name"] == "malformed-answer"]
    assert len(served) >= 4 and malformed, [p["message"] for p in report["problems"]]
    messages = " ".join(p["message"] for p in malformed)
    for kind in ("nested more than", "NaN", "digits", "not a chat completion"):
        assert kind in messages, (kind, messages)
    assert report["steps"]["judge"] == "failed" and report["back_translation"]  # kept
    assert (tmp_path / "policy.dl").exists()
