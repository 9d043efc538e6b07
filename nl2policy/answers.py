"""Reading the model's answers: untrusted text that should hold one JSON object.

An answer may wrap its object in a code fence or in prose; the first JSON object in it is
taken. Its shape is then checked by the step that asked (``shape`` raises
:class:`AnswerError` with what is wrong). A malformed answer is shown to the model once, with
what is wrong, and asked again; a second malformed answer is a ``malformed-answer`` problem.
Prose without any object that reads like a refusal is a ``refusal``.

>>> extract_json('Here it is:\\n```json\\n{"a": 1}\\n```')
{'a': 1}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from . import problems as P
from .client import Chat

T = TypeVar("T")

REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry,|i can(?:no|')t|i cannot|i am unable|i'?m unable|i won'?t|"
    r"as an ai|i must decline|unfortunately,? i)",
    re.IGNORECASE,
)


class AnswerError(ValueError):
    """An answer that is not what the step asked for; the message says what is wrong."""


def extract_json(text: str) -> Any:
    """The first JSON object of an answer (:class:`AnswerError` when there is none, or when it
    is JSON policyc refuses: nested too deep, an integer too long, NaN or an infinity)."""
    from policyc.runtime.jsonio import MalformedJSON, loads, raw_decode

    stripped = text.strip()
    try:
        return loads(stripped)
    except MalformedJSON as error:
        raise AnswerError(f"the answer is malformed JSON: {error.msg} at character {error.pos}") from None
    except json.JSONDecodeError:
        pass
    last: json.JSONDecodeError | None = None
    for match in re.finditer(r"\{", stripped):
        try:
            value, _ = raw_decode(stripped, match.start())
        except MalformedJSON as error:  # every later `{` is inside it: stop here
            raise AnswerError(f"the answer is malformed JSON: {error.msg} at character {error.pos}") from None
        except json.JSONDecodeError as error:
            last = last or error
            continue
        return value
    if last is not None:
        raise AnswerError(f"the answer is not valid JSON: {last.msg} at character {last.pos}")
    raise AnswerError("the answer holds no JSON object")


def ask_json(
    chat: Chat,
    step: str,
    subject: str | None,
    messages: list[dict[str, str]],
    shape: Callable[[Any], T],
) -> tuple[T | None, list[P.Problem]]:
    """The shaped answer to ``messages``, or ``None`` and the problems that kept it from one."""
    found: list[P.Problem] = []
    reply = chat.ask(step, subject, messages)
    found.extend(reply.notes)
    if reply.text is None:
        assert reply.problem is not None
        return None, [*found, reply.problem]
    value, error = _shaped(reply.text, shape)
    if error is None:
        return value, found
    if not reply.text.lstrip().startswith("{") and "{" not in reply.text and REFUSAL.search(reply.text):
        return None, [*found, P.REFUSAL(step, f"the model refused: {P.shorten(reply.text, 160)}", subject)]
    again = [
        *messages,
        {"role": "assistant", "content": reply.text},
        {
            "role": "user",
            "content": f"Your answer could not be used: {error}. Answer again with only the JSON object "
            "the instructions describe.",
        },
    ]
    second = chat.ask(step, subject, again)
    found.extend(second.notes)
    if second.text is None:
        assert second.problem is not None
        return None, [*found, second.problem]
    value, second_error = _shaped(second.text, shape)
    if second_error is None:
        found.append(P.ASKED_AGAIN(step, f"the first answer could not be used ({error})", subject))
        return value, found
    if "{" not in second.text and REFUSAL.search(second.text):
        return None, [*found, P.REFUSAL(step, f"the model refused: {P.shorten(second.text, 160)}", subject)]
    return None, [*found, P.MALFORMED_ANSWER(step, f"{second_error} (asked twice)", subject)]


def _shaped(text: str, shape: Callable[[Any], T]) -> tuple[T | None, str | None]:
    try:
        return shape(extract_json(text)), None
    except AnswerError as error:
        return None, str(error)


# ---- shape helpers


def field(value: Any, key: str, kind: type | tuple[type, ...], where: str = "the answer") -> Any:
    """``value[key]``, checked to be of ``kind``."""
    if not isinstance(value, dict):
        raise AnswerError(f"{where} is not a JSON object")
    if key not in value:
        raise AnswerError(f"{where} has no `{key}`")
    item = value[key]
    if not isinstance(item, kind) or (isinstance(item, bool) and bool not in _kinds(kind)):
        raise AnswerError(f"`{key}` of {where} is not {_kind_name(kind)}")
    return item


def optional(
    value: Any, key: str, kind: type | tuple[type, ...], default: Any, where: str = "the answer"
) -> Any:
    if not isinstance(value, dict):
        raise AnswerError(f"{where} is not a JSON object")
    if value.get(key) is None:
        return default
    return field(value, key, kind, where)


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", list: "a list", dict: "an object", int: "a number", bool: "true or false"}
    return " or ".join(names.get(k, k.__name__) for k in _kinds(kind))
