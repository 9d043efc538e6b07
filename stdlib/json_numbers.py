"""The strict conversions: ``to_number``, ``to_unsigned`` and ``to_float`` as a policy reads them.

A policy decides on text an agent wrote, so a conversion reads the whole text as the number a
program reading it as JSON would, or fails: the text, padded by JSON's whitespace at most
(spaces, tabs, line breaks), must match JSON's number grammar (RFC 8259, section 6)::

    -?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?

No ``+``, no leading zeros, no ``_``, no digits other than ASCII ``0``-``9``, no ``0x``, no
``inf`` or ``nan``, nothing before or after the number. ``to_number`` and ``to_unsigned`` take
the integer form only and give an exact integer (30 digits stay 30 digits); ``to_float`` takes
the whole grammar, and a number too large for a float is an error.

>>> strict_number(" 3000\\n"), strict_number("-0"), strict_number(2.0)
(3000, 0, 2)
>>> strict_float("2.5e3")
2500.0
>>> strict_number("1e9")
Traceback (most recent call last):
...
ValueError: to_number("1e9"): "1e9" is not a whole number written in decimal digits (an exponent or a fraction); write the number as digits, or use to_float(...)

Soufflé's readings (``to_number("2000abc")`` is 2000) stay available under other names:
:data:`policyc.stdlib.builtins.LENIENT_CONVERSIONS`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from typing import Any

# JSON's number grammar (RFC 8259), its integer part, and JSON's whitespace
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)
_WHITESPACE = " \t\n\r"
# the longest integer read, as the event reader's (Python's limit on converting text to integers)
MAX_DIGITS = getattr(sys.int_info, "default_max_str_digits", 4300) or 4300
_SHOWN = 40  # characters of a text a message quotes


def shown(value: Any) -> str:
    """A value as a message quotes it: a text in JSON's quotes (cut after 40 characters), a
    number as written."""
    if isinstance(value, str):
        return json.dumps(value if len(value) <= _SHOWN else value[:_SHOWN] + "…", ensure_ascii=False)
    written = repr(value)
    return written if len(written) <= _SHOWN else written[:_SHOWN] + "…"


def _problem(text: str) -> str:
    """Why a text is not a number as JSON writes it, in a few words."""
    body = text.strip(_WHITESPACE)
    if not body:
        return "is empty" if not text else "holds no number"
    if any(not c.isascii() and unicodedata.category(c) == "Nd" for c in body):
        return "has digits other than 0-9"
    unsigned = body[1:] if body[0] in "+-" else body
    if body[0] == "+":
        return 'starts with "+"'
    if unsigned[:2].lower() in ("0x", "0b", "0o"):
        return "is not written in decimal"
    if unsigned.lower() in ("inf", "infinity", "nan"):
        return "is not a finite number"
    if "_" in body or "," in body:
        return 'has "_" or "," between its digits'
    if len(unsigned) > 1 and unsigned[0] == "0" and unsigned[1].isdigit():
        return "has a leading zero"
    found = re.match(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", body, re.ASCII)
    if found is None:
        return "does not start with a number"
    return f"has text after the number {shown(found.group())}"


_WRITE = {
    "to_float": "write the number alone, as JSON writes it (2.5, -0.5, 1e3)",
    "to_number": "write the number alone, in decimal digits (3000, -5)",
    "to_unsigned": "write the number alone, in decimal digits (3000)",
}


def _json_number(text: str, functor: str) -> re.Match[str]:
    found = _NUMBER.fullmatch(text.strip(_WHITESPACE))
    if found is None:
        raise ValueError(f"{functor}({shown(text)}): {shown(text)} {_problem(text)}; {_WRITE[functor]}")
    return found


def _text_integer(text: str, functor: str) -> int:
    found = _json_number(text, functor)
    if found.group(2) or found.group(3):
        raise ValueError(
            f"{functor}({shown(text)}): {shown(text)} is not a whole number written in decimal digits "
            "(an exponent or a fraction); write the number as digits, or use to_float(...)"
        )
    digits = found.group(1)
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"{functor}({shown(text)}): the number has more than {MAX_DIGITS:,} digits")
    return int(digits)


def primitive(value: Any, functor: str) -> str | int | float:
    """A value the conversions take: a text or a number (records and ADTs have none)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{functor}: {shown(value)} is not a symbol or a number")
    return value


def strict_number(value: str | int | float, functor: str = "to_number") -> int:
    """``to_number`` in a policy: a text read whole as a JSON integer, a float with an integral
    value as that integer (a fraction is an error: ``ftoi`` truncates), an integer itself."""
    value = primitive(value, functor)
    if isinstance(value, str):
        return _text_integer(value, functor)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{functor}({value!r}): {value!r} has no integer value")
        if not value.is_integer():
            raise ValueError(
                f"{functor}({value!r}): {value!r} is not a whole number; use ftoi(...) to truncate it"
            )
        return int(value)
    return value


def strict_unsigned(value: str | int | float) -> int:
    """``to_unsigned`` in a policy: as :func:`strict_number`, and a negative number is an error."""
    number = strict_number(value, "to_unsigned")
    if number < 0:
        raise ValueError(f"to_unsigned({shown(value)}): {number} is negative")
    return number


def strict_float(value: str | int | float) -> float:
    """``to_float`` in a policy: a text read whole as a JSON number, an integer converted; a
    result that is not finite (``"1e999"``, an integer too large) is an error."""
    value = primitive(value, "to_float")
    if isinstance(value, str):
        number = float(_json_number(value, "to_float").group())
    else:
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"to_float({shown(value)}): the number is too large for a float")
    return number
