"""Reading JSON from outside: one reader for every file and message policyc parses.

:func:`loads` is :func:`json.loads` for input policyc does not trust (facts, traces, bundles,
models, thresholds, calibration records, model answers). It parses standard JSON only and
refuses, as malformed input with the position of the problem:

* nesting deeper than :data:`MAX_DEPTH` levels of arrays and objects (Python's parser would
  raise ``RecursionError`` a few hundred levels further, and deep values break the code that
  walks them);
* an integer of more than ``sys.get_int_max_str_digits()`` digits (4,300 by default; Python
  refuses to convert it);
* ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON, and a number too large for a
  float (``1e999``), which Python would read as an infinity: events, arguments and facts hold
  finite numbers only;
* a string with a lone surrogate (``"\\ud800"``), which is no Unicode text: it could not be
  printed or written as UTF-8.

Every refusal is a :class:`MalformedJSON` (a number it cannot hold, a :class:`NumberRefused`),
a :class:`json.JSONDecodeError` (so ``msg``,
``lineno``, ``colno`` and ``pos`` say where), so a caller that reports ``JSONDecodeError``
reports these too. :func:`read` reads a file through :func:`policyc.compiler.files.read_bytes`
(a regular file, at most :data:`~policyc.compiler.files.DATA_LIMIT` bytes) and parses it.

>>> loads('{"a": [1, 2.5, "x"]}')
{'a': [1, 2.5, 'x']}
>>> loads('[NaN]')
Traceback (most recent call last):
...
policyc.runtime.jsonio.NumberRefused: NaN is not a JSON number (numbers must be finite): line 1 column 2 (char 1)
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from itertools import chain, compress
from typing import Any

MAX_DEPTH = 256  # levels of arrays and objects (a bundle's plan nests about 210 at most)

_CONTAINER = {list, dict}.__contains__
_STRING = r'"(?:[^"\\]|\\.)*"'


class MalformedJSON(json.JSONDecodeError):
    """JSON policyc refuses: too deep, a number it cannot hold, or not JSON at all."""


class NumberRefused(MalformedJSON):
    """JSON with a number policyc cannot hold exactly: not finite (``NaN``, ``1e999``), or an
    integer of more digits than it reads."""


class _NotFinite(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _constant(name: str) -> Any:
    raise _NotFinite(name)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotFinite(text)
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of a JSON text (:class:`MalformedJSON` when it is not one policyc reads)."""
    return _decode(text, 0, max_depth, whole=True)[0]


def raw_decode(text: str, start: int = 0, *, max_depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """The JSON value that starts at ``start`` and where it ends, as
    :meth:`json.JSONDecoder.raw_decode` does (text may follow it)."""
    return _decode(text, start, max_depth, whole=False)


def read(path: str | os.PathLike[str], limit: int | None = None) -> Any:
    """The JSON value of a file (``OSError`` when it cannot be read: not a regular file, or
    larger than ``limit``; ``UnicodeDecodeError``; :class:`MalformedJSON`)."""
    from policyc.compiler.files import DATA_LIMIT, read_bytes

    return loads(read_bytes(path, DATA_LIMIT if limit is None else limit).decode("utf-8"))


def problem(error: json.JSONDecodeError) -> str:
    """What is wrong, as a reader reports it after the place: ``not valid JSON: ...`` for a
    syntax error, or the reason policyc refuses JSON that parses."""
    return error.msg if isinstance(error, MalformedJSON) else f"not valid JSON: {error.msg}"


# ------------------------------------------------------------------------------ internals

_BLANKS = re.compile(r"[ \t\n\r]*")
_NUMBER_AT = re.compile(r"-?([0-9]+)")
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _decode(text: str, start: int, max_depth: int, whole: bool) -> tuple[Any, int]:
    if not isinstance(text, str):
        raise TypeError(f"JSON text must be str, not {type(text).__name__}")
    begin = _BLANKS.match(text, start).end()  # type: ignore[union-attr]
    try:
        if whole:
            value, end = _DECODER.decode(text), len(text)
        else:
            value, end = _DECODER.raw_decode(text, begin)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _too_deep(text, begin, max_depth) from None
    except _NotFinite as error:
        raise _not_finite(text, begin, error.text) from None
    except ValueError as error:  # an integer Python will not convert
        raise _too_long(text, begin, error) from None
    if _deeper_than(value, max_depth, text, begin, end):
        raise _too_deep(text, begin, max_depth)
    if _SURROGATE.search(text, begin, end) is not None:
        _check_text(value, text, begin, end)
    return value, end


def _check_text(value: Any, text: str, start: int, end: int) -> None:
    """Refuse a value with a string that is not Unicode text (a lone surrogate escape)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        hit = _SURROGATE.search(text, start, end)
        at = start if hit is None else hit.start()
        raise MalformedJSON(
            "a string holds a lone surrogate escape, which is not Unicode text", text, at
        ) from None


def _deeper_than(value: Any, limit: int, text: str, start: int, end: int) -> bool:
    """Whether a parsed value nests more than ``limit`` arrays and objects (one level at a
    time, with no recursion; skipped when the text has too few brackets to be that deep)."""
    if not _CONTAINER(type(value)):
        return False
    if text.count("[", start, end) + text.count("{", start, end) <= limit:
        return False
    level = [value]
    for _ in range(limit):
        dicts = [v for v in level if type(v) is dict]
        lists = [v for v in level if type(v) is list] if dicts else level
        elements = list(chain(chain.from_iterable(lists), chain.from_iterable(map(dict.values, dicts))))
        level = list(compress(elements, map(_CONTAINER, map(type, elements))))
        if not level:
            return False
    return True


def _position(text: str, pattern: str, start: int) -> int:
    """Where ``pattern`` first matches outside a string of the JSON text (``start`` if not)."""
    for match in re.compile(f"{_STRING}|(?P<hit>{pattern})").finditer(text, start):
        if match.group("hit") is not None:
            return match.start()
    return start


def _too_deep(text: str, start: int, limit: int) -> MalformedJSON:
    depth = 0
    at = start
    for match in re.compile(f"{_STRING}|[\\[\\]{{}}]").finditer(text, start):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                at = match.start()
                break
        elif token in ("]", "}"):
            depth -= 1
    return MalformedJSON(f"nested more than {limit:,} levels deep", text, at)


def _not_finite(text: str, start: int, number: str) -> MalformedJSON:
    if number in ("NaN", "Infinity", "-Infinity"):
        at = _position(text, re.escape(number), start)
        return NumberRefused(f"{number} is not a JSON number (numbers must be finite)", text, at)
    at = _position(text, r"(?<![\w.+-])" + re.escape(number) + r"(?![\w.+-])", start)
    return NumberRefused(f"the number {_short(number)} is too large for a float", text, at)


def _too_long(text: str, start: int, error: ValueError) -> MalformedJSON:
    limit = sys.get_int_max_str_digits()
    at = _position(text, f"-?[0-9]{{{limit + 1},}}", start)
    number = _NUMBER_AT.match(text, at)
    if number is not None and len(number.group(1)) > limit:
        digits = len(number.group(1))
        return NumberRefused(f"an integer of {digits:,} digits (policyc reads at most {limit:,})", text, at)
    return MalformedJSON(f"not a number policyc reads ({error})", text, at)


def _short(number: str) -> str:
    return number if len(number) <= 30 else f"{number[:12]}...{number[-12:]}"
