"""Where a value starts in a JSON text: the line of the value at a path of keys and indices.

Files are parsed by :mod:`policyc.runtime.jsonio`, which keeps no positions; when a reader
refuses a value (rarely), :func:`json_line` goes through the text again along the path only:
in each object or list on the way it reads the keys with :func:`json.decoder.scanstring` and
steps over the values before the one it wants with :meth:`json.JSONDecoder.raw_decode` (the
standard library's parser, in C), so finding a line costs about one more parse of the text. A
key given twice is the last one (as :func:`json.loads` reads it); a path that leads out of the
text (a missing key, an index past the end) stops at the last value it reaches: a missing field
is reported at the object that lacks it.

>>> json_line('{"a": [1,\\n  {"b": true}]}', ("a", 1, "b"))
2
>>> json_line('{"a": 1}', ("nothing", "here"))
1
>>> json_line("not json", ("a",))
1
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # in the module, not in typeshed's stub

Key = str | int

_BLANK = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def json_line(text: str, path: Sequence[Key]) -> int:
    """The line (1-based) where the value at ``path`` starts in the JSON ``text`` (as far down
    the path as the text goes)."""
    offset = _blank(text, 0)
    for key in path:
        try:
            found = _member(text, offset, key)
        except (ValueError, IndexError):  # not JSON after all: stop where it was
            found = None
        if found is None:
            break
        offset = found
    return text.count("\n", 0, offset) + 1


def _blank(text: str, at: int) -> int:
    return _BLANK.match(text, at).end()  # type: ignore[union-attr]


def _member(text: str, at: int, key: Key) -> int | None:
    """Where the value at ``key`` of the object or list starting at ``at`` starts."""
    opening = text[at : at + 1]
    if opening == "{" and isinstance(key, str):
        return _field(text, _blank(text, at + 1), key)
    if opening == "[" and isinstance(key, int) and not isinstance(key, bool):
        return _element(text, _blank(text, at + 1), key)
    return None


def _field(text: str, at: int, key: str) -> int | None:
    found = None
    if text[at] == "}":
        return None
    while True:
        name, at = scanstring(text, at + 1)  # at: the opening quote
        at = _blank(text, at)
        if text[at] != ":":
            raise ValueError("expected ':'")
        at = _blank(text, at + 1)
        if name == key:
            found = at
        at = _blank(text, _DECODER.raw_decode(text, at)[1])
        if text[at] != ",":
            return found
        at = _blank(text, at + 1)


def _element(text: str, at: int, index: int) -> int | None:
    if text[at] == "]":
        return None
    for _ in range(index):
        at = _blank(text, _DECODER.raw_decode(text, at)[1])
        if text[at] != ",":
            return None
        at = _blank(text, at + 1)
    return at
