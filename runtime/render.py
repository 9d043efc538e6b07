"""Values and calls in people's text: the one renderer of every message a decision is put
into (the agent's feedback, approval prompts, the audit log's and the service's messages).

A text is shown between backticks, as it is (no JSON quoting, no escaping of quotes or
backslashes), except that what would not read as itself is made visible: a backtick inside
it is shown as ``\\u0060`` (so a value never closes its own delimiters), a line break, tab or
carriage return as ``\\n``, ``\\t``, ``\\r``, and every other control, format (bidirectional
controls, zero-width characters), separator or surrogate character as ``\\uXXXX``. A text
longer than its limit is cut, with ``…`` before the closing backtick. A number is shown as a
number; a record or an ADT value as the language writes it, delimited like a text. A call is
shown as its tool and short arguments: ``send_email(to=`x@y.z`, body=`Hi…`)``.

>>> value("a`b\\nc"), value(5), value(["x", 1])
('`a\\\\u0060b\\\\nc`', '5', '`["x", 1]`')
>>> call("send_email", {"to": "x@y.z", "body": "Hi there, how are you?"}, limit=2)
'send_email(to=`x@…`, body=`Hi…`)'
>>> interpolate("{a} sends {x}; call {a.id}", {"a": "c6", "x": 'say "hi"'}, {"c6": ("post", {})})
'post() sends `say "hi"`; call `c6`'
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from .values import FEEDBACK_VALUE_LIMIT

VALUE_LIMIT = FEEDBACK_VALUE_LIMIT  # characters of one value a message shows
ARGUMENT_LIMIT = 24  # characters of one argument's value a call shows
ARGUMENTS_SHOWN = 4  # arguments a call shows (the rest are `…`)
APPROVAL_LIMIT = 500  # characters of one argument's value an approval prompt shows
DELIMITER = "`"

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/:]{0,63}")
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_VISIBLE_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def visible(text: str) -> str:
    """``text`` with every character that would not read as itself made visible (see the
    module): the output holds no backtick and no control or format character."""
    return "".join([_visible(c) for c in text])


def printable(text: str) -> str:
    """``text`` (a message the renderer wrote, read back from elsewhere) with every control or
    format character made visible, its backticks kept: the delimiters of its values."""
    return "".join([c if c == DELIMITER else _visible(c) for c in text])


def _visible(character: str) -> str:
    if character in _SHORT:
        return _SHORT[character]
    if character == DELIMITER or unicodedata.category(character) in _VISIBLE_CATEGORIES:
        code = ord(character)
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return character


def _cut(text: str, limit: int) -> str:
    """``text`` made visible, cut to ``limit`` characters of the original with ``…``."""
    if len(text) <= limit:
        return visible(text)
    return visible(text[:limit]) + "…"


def value(data: Any, limit: int = VALUE_LIMIT) -> str:
    """A value as people's text shows it: a number as a number, anything else between
    backticks (see the module), cut to ``limit`` characters with ``…`` inside the delimiters."""
    if isinstance(data, bool):
        return f"{DELIMITER}{'true' if data else 'false'}{DELIMITER}"
    if isinstance(data, int | float):
        return _number(data, limit)
    if isinstance(data, str):
        text = data
    elif data is None:  # a tool's argument given as JSON null
        text = "null"
    else:
        text = _written(data)
    return f"{DELIMITER}{_cut(text, limit)}{DELIMITER}"


def _written(data: Any) -> str:
    """A record or an ADT value as the language writes it, a list or an object (a tool's
    argument) as JSON writes it, anything else as ``str`` makes it."""
    import json

    from .values import show

    try:
        if isinstance(data, tuple):
            return show(data)
        if isinstance(data, list | dict):
            return json.dumps(data, ensure_ascii=False, default=str)
        return str(data)
    except Exception:
        return f"<{type(data).__name__}>"


def _number(data: int | float, limit: int) -> str:
    if isinstance(data, float) and not math.isfinite(data):
        return f"{DELIMITER}{data!r}{DELIMITER}"
    try:
        text = repr(data)
    except ValueError:  # an integer with more digits than Python prints
        digits = int(math.log10(abs(data)))
        leading = abs(data) // 10 ** max(digits - limit, 0)
        return ("-" if data < 0 else "") + str(leading) + "…"
    return text if len(text) <= limit else text[:limit] + "…"


def is_name(text: Any) -> bool:
    """Whether ``text`` reads as a name (letters, digits, ``_ . - / :``, at most 64)."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


def name(text: Any) -> str:
    """A tool's or an argument's name: as it is when it reads as a name (letters, digits,
    ``_ . - / :``, at most 64 characters), else as a value."""
    if is_name(text):
        return text
    return value(text, ARGUMENT_LIMIT)


def call(tool: Any, arguments: Mapping[str, Any] | None, limit: int = ARGUMENT_LIMIT) -> str:
    """A call as people read it: its tool and its arguments (at most :data:`ARGUMENTS_SHOWN`,
    each value cut to ``limit`` characters), in the order the call gave them."""
    items = list((arguments or {}).items()) if isinstance(arguments, Mapping) else []
    shown = [f"{name(key)}={value(data, limit)}" for key, data in items[:ARGUMENTS_SHOWN]]
    if len(items) > ARGUMENTS_SHOWN:
        shown.append("…")
    return f"{name(tool if tool is not None else 'call')}({', '.join(shown)})"


Calls = Mapping[Any, tuple[Any, Mapping[str, Any] | None]]  # an event id: its tool and arguments


def interpolate(template: str | None, bindings: Mapping[str, Any], calls: Calls | None = None) -> str | None:
    """``template`` with ``{var}`` replaced by the variable's value as people read it: a
    variable bound to a call's id (one of ``calls``) shows the call, ``{var.id}`` its id as a
    value; ``{{`` and ``}}`` are braces; a variable the rule does not bind stays as written."""
    if template is None:
        return None

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        key = match.group(1).strip()
        as_id = key.endswith(".id")
        data = bindings.get(key[:-3] if as_id else key)
        if data is None:
            return token
        if not as_id and calls:
            try:
                found = calls.get(data)
            except TypeError:  # an unhashable value names no call
                found = None
            if found is not None:
                return call(*found)
        return value(data)

    return _PLACEHOLDER.sub(replace, template)
