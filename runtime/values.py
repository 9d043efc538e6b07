"""Values: records and ADT values as the evaluator keeps them, and every value as messages,
explanations and the agent's feedback show it (:func:`render_value`, :func:`render_fact`,
:func:`quote_value`).

A record ``[1, "a"]`` is the tuple ``(1, "a")`` and ``nil`` the empty tuple; an ADT value
``$A(1)`` is an :class:`Adt`, a tuple holding the branch name first (``("A", 1)``) whose
class tells it from a record. Both are hashable and ordered, so they are facts' values like
any other. In JSON (facts files, results) a record is an array, ``nil`` is ``null`` and an
ADT value an object of one key, the branch name, whose value is the array of its fields:

>>> to_json((1, ("a", ())))
[1, ['a', None]]
>>> from_json({"A": [1]}), to_json(from_json({"B": []}))
(Adt(('A', 1)), {'B': []})
>>> render_fact("Deny", ("c1", 5)), quote_value("a\\x00b")
('Deny("c1", 5)', '"a\\\\u0000b"')
"""

from __future__ import annotations

import json
import math
from typing import Any

FEEDBACK_VALUE_LIMIT = 100  # characters of one interpolated value the feedback shows


class Adt(tuple):
    """An ADT value: its branch name, then its fields."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Adt({tuple.__repr__(self)})"


def kind(value: Any) -> Any:
    """A record's number of fields (``nil``: 0), an ADT value's branch name; None for a
    value of neither (a pattern never matches it)."""
    if type(value) is Adt:
        return value[0]
    if type(value) is tuple:
        return len(value)
    return None


def to_json(value: Any) -> Any:
    """A value as JSON data (records as arrays, ``nil`` as null, ADT values as objects)."""
    if type(value) is Adt:
        return {value[0]: [to_json(v) for v in value[1:]]}
    if type(value) is tuple:
        return [to_json(v) for v in value] if value else None
    return value


def from_json(data: Any) -> Any:
    """A structured value from its JSON form; :class:`ValueError` for anything else."""
    if data is None:
        return ()
    if type(data) is Adt:
        return data
    if isinstance(data, list | tuple):
        return tuple(from_json(v) for v in data)
    if isinstance(data, dict):
        if len(data) != 1:
            raise ValueError("an ADT value is an object of one key, its branch name")
        ((tag, fields),) = data.items()
        if not isinstance(fields, list):
            raise ValueError(f"the fields of `${tag}` are an array")
        return Adt((tag, *(from_json(v) for v in fields)))
    if isinstance(data, bool) or not isinstance(data, str | int | float):
        raise ValueError(f"{data!r} is not a policy value")
    return data


def show(value: Any) -> str:
    """A value as a policy writes it: ``[1, "a"]``, ``nil``, ``$A(1)``."""
    import json

    if type(value) is Adt:
        fields = ", ".join(show(v) for v in value[1:])
        return f"${value[0]}({fields})"
    if type(value) is tuple:
        return "[" + ", ".join(show(v) for v in value) + "]" if value else "nil"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def render_value(value: Any) -> str:
    """A value as explanations and messages show it: a text as a JSON string, a record or an
    ADT value as the language writes it, a number as Python writes it."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'  # what JSON makes of it, sooner
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        return show(value)
    return repr(value)


def render_fact(name: str, values: tuple) -> str:
    """A fact as the language writes it: ``Deny("c1")``."""
    return f"{name}({', '.join([render_value(v) for v in values])})"


def quote_value(value: Any) -> str:
    """A value as the feedback shows it: a number as a number, anything else as a JSON string
    with every character that is not printable escaped; cut to :data:`FEEDBACK_VALUE_LIMIT`
    characters, with ``…`` after the closing quote when cut."""
    limit = FEEDBACK_VALUE_LIMIT
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = _number(value)
        return text if len(text) <= limit else text[:limit] + "…"
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    cut = len(text) > limit
    quoted = "".join(
        [c if c.isprintable() else _escape(c) for c in json.dumps(text[:limit], ensure_ascii=False)]
    )
    return quoted + "…" if cut else quoted


def _number(value: int | float) -> str:
    try:
        return repr(value)
    except ValueError:  # an integer with more digits than Python prints: its leading digits
        digits = int(math.log10(abs(value)))
        leading = abs(value) // 10 ** max(digits - FEEDBACK_VALUE_LIMIT, 0)
        return ("-" if value < 0 else "") + str(leading) + "…"


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON escape is a UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
