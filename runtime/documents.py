"""JSON files as cursors of the typed reader (:mod:`policyc.compiler.reading`).

:func:`document` parses a whole JSON document and :func:`records` the lines of a JSON Lines
file, both with :mod:`.jsonio`; text that is not JSON is a
:class:`~policyc.compiler.reading.FormatError` at its line and column, and every value read
afterwards is located in the text only if it is refused.

>>> document('{"n": 1}', "a.json")["n"].count()
1
>>> document('{"n":\\n NaN}', "a.json")
Traceback (most recent call last):
...
policyc.compiler.reading.FormatError: a.json:2:2: NaN is not a JSON number (numbers must be finite)
>>> [(line, c["n"].value) for line, c in records('{"n": 1}\\n\\n{"n": 2}\\n', "a.jsonl")]
[(1, 1), (3, 2)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from policyc.compiler.reading import Cursor, FormatError, Source

from .jsonio import loads, problem


def document(text: str, file: str) -> Cursor:
    """The cursor of a JSON document (:class:`FormatError` when it is not JSON policyc reads)."""
    try:
        value = loads(text)
    except json.JSONDecodeError as error:
        raise FormatError(file, error.lineno, "", problem(error), error.colno) from None
    return Cursor.root(value, Source.json(file, text))


def record(text: str, file: str, line: int) -> Cursor:
    """The cursor of one line of a JSON Lines file."""
    try:
        value = loads(text)
    except json.JSONDecodeError as error:
        raise FormatError(file, line, "", problem(error), error.colno) from None
    return Cursor.root(value, Source.line(file, line))


def records(text: str, file: str) -> Iterator[tuple[int, Cursor]]:
    """The records of a JSON Lines text, each with its line: only ``\\n`` ends a record (a
    string may hold U+2028 and the like), blank lines are skipped."""
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield number, record(line, file, number)


def decode(data: bytes, file: str) -> str:
    """The UTF-8 text of a file (:class:`FormatError` at the line of the first bad byte)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FormatError(file, line, "", f"not UTF-8 text ({error.reason} at byte {error.start})") from None
