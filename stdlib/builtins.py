"""Implementations of the builtin functors declared in ``builtins.dl``.

Each is a pure, deterministic function of its arguments. A function that cannot give a value
for its arguments raises (the literal fails and the evaluation is marked errored).

The functors Soufflé also has return what Soufflé returns (its interpreter, Engine.cpp, and
``include/souffle/utility/StringUtil.h`` / ``EvaluatorUtil.h``), counting characters where
Soufflé counts the bytes of UTF-8 (the same for ASCII text): ``contains(part, text)`` puts the
part first; ``to_number`` reads a number as ``std::stoll`` does, in the base its prefix names
(``0x`` hexadecimal, ``0b`` binary); ``substr`` out of range is ``""``. Where Soufflé stops the
whole program (``to_number`` of a text with no number in front), the call is an error here.

Those readings are Soufflé's programs' (programs without verdict rules). A policy binds
:data:`POLICY_BUILTINS`: its ``to_number``, ``to_unsigned`` and ``to_float`` read the whole
text as a JSON number or fail (:mod:`.json_numbers`), and Soufflé's readings keep other names
in every program, ``leading_number`` and ``leading_float`` (:data:`LENIENT_CONVERSIONS`).
:func:`builtins_for` chooses.

Each is bounded: it takes time linear in the size of its arguments (its result). A regular
expression (``match``) is compiled by RE2 and matched in time linear in the text (no
backtracking: a pattern like ``(a+)+b`` takes as long as any other). In a policy it is read in
the policy dialect (ECMAScript, with RE2's extensions; see :mod:`policyc.compiler.regex`) and a
pattern it cannot run (invalid, using backreferences or lookaround, which need backtracking, or
longer than 10,000 characters) is an error of that call; in a Soufflé program it is read as
Soufflé's ``std::regex`` reads it, against the bytes of the text, and such a pattern matches
nothing, as Soufflé answers.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from policyc.compiler.regex import compile_pattern, souffle_match

from .json_numbers import primitive, strict_float, strict_number, strict_unsigned


def contains(part: str, text: str) -> bool:
    """``part`` occurs in ``text`` (Soufflé's order: the part first)."""
    return part in text


def startswith(text: str, prefix: str) -> bool:
    return text.startswith(prefix)


def endswith(text: str, suffix: str) -> bool:
    return text.endswith(suffix)


def match(pattern: str, text: str) -> bool:
    """A policy's ``match``: the pattern in the policy dialect (ECMAScript with RE2's
    extensions), matched against the characters of the text; a pattern it cannot run is an
    error of the call (the decision fails closed)."""
    return compile_pattern(pattern).fullmatch(text) is not None


def lower(text: str) -> str:
    return text.lower()


def upper(text: str) -> str:
    return text.upper()


def strlen(text: str) -> int:
    return len(text)


def substr(text: str, start: int, length: int) -> str:
    """``length`` characters of ``text`` from ``start``, as C++ ``std::string::substr`` with
    Soufflé's arguments converted to ``size_t``: a start past the end (or negative) is ``""``
    (Soufflé warns and gives ``""``), a length past the end (or negative) takes the rest."""
    if start < 0 or start > len(text):
        return ""
    return text[start:] if length < 0 else text[start : start + length]


def cat(a: str, b: str) -> str:
    return a + b


_SPACE = " \t\n\v\f\r"  # what C's isspace skips
_DIGITS = {2: "01", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _leading_integer(text: str, base: int, written: str, functor: str) -> int:
    """The integer at the start of ``text``, read as C's ``strtoll`` reads it in ``base``:
    spaces skipped, a sign, ``0x`` in base 16, the longest run of digits (the rest ignored)."""
    i, n = 0, len(text)
    while i < n and text[i] in _SPACE:
        i += 1
    negative = i < n and text[i] == "-"
    if i < n and text[i] in "+-":
        i += 1
    digits = _DIGITS[base]
    if base == 16 and text[i : i + 2] in ("0x", "0X") and text[i + 2 : i + 3] and text[i + 2] in digits:
        i += 2
    j = i
    while j < n and text[j] in digits:
        j += 1
    if j == i:
        raise ValueError(f"{functor}({written!r}): the text does not start with a number")
    value = int(text[i:j], base)
    return -value if negative else value


def _from_text(text: str, functor: str = "to_number") -> int:
    """The integer written at the start of ``text``, in the base its prefix names, as Soufflé
    reads it (``RamSignedFromString`` with base 0): ``0x10`` is 16, ``-0b101`` is -5, ``12ab``
    is 12; a text with no number in front is an error (Soufflé stops the program)."""
    if text.startswith(("0b", "-0b")):
        return _leading_integer("-" + text[3:] if text.startswith("-") else text[2:], 2, text, functor)
    return _leading_integer(text, 16 if text.startswith(("0x", "-0x")) else 10, text, functor)


def to_number(value: str | int | float, functor: str = "to_number") -> int:
    """``value`` as an integer, as Soufflé's ``to_number`` of each type: a text is read as
    :func:`_from_text` reads it, a float truncated toward zero (``static_cast``), an integer is
    itself. Infinity and NaN have no integer and are an error."""
    value = primitive(value, functor)
    if isinstance(value, str):
        return _from_text(value, functor)
    if isinstance(value, float):
        return ftoi(value)
    return value


def to_unsigned(value: str | int | float) -> int:
    """``value`` as an unsigned integer (Soufflé's ``to_unsigned``): as :func:`to_number`, and
    a negative result is an error where Soufflé's C++ cast wraps it around its word size (a
    policy's values are exact, so it fails closed instead)."""
    number = to_number(value, "to_unsigned")
    if number < 0:
        raise ValueError(f"to_unsigned({value!r}): {number} is negative")
    return number


_FLOAT = re.compile(
    r"[ \t\n\v\f\r]*([+-]?)(?:(0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)"
    r"|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf(?:inity)?))",
    re.IGNORECASE | re.ASCII,
)


def to_float(value: str | int | float, functor: str = "to_float") -> float:
    """``value`` as a float (Soufflé's ``to_float`` of each type): a text is read as C++
    ``std::stod`` reads it (``RamFloatFromString``): ``" 2.5kg"`` is 2.5, ``"1e3"`` 1000.0,
    ``"0x1p3"`` 8.0, ``"inf"`` infinity; a text with no number in front, or a NaN, is an error.
    An integer is converted (``static_cast``), a float is itself."""
    value = primitive(value, functor)
    if not isinstance(value, str):
        return float(value)
    found = _FLOAT.match(value)
    if found is None:
        raise ValueError(f"{functor}({value!r}): the text does not start with a number")
    sign, hexadecimal, decimal = found.groups()
    number = float.fromhex(hexadecimal) if hexadecimal else float(decimal)
    return -number if sign == "-" else number


def leading_number(value: str | int | float) -> int:
    """The number at the start of a text, as Soufflé's ``to_number`` reads it
    (:func:`to_number`), in every program: a policy's ``to_number`` reads the whole text."""
    return to_number(value, "leading_number")


def leading_float(value: str | int | float) -> float:
    """The number at the start of a text, as Soufflé's ``to_float`` reads it (:func:`to_float`),
    in every program: a policy's ``to_float`` reads the whole text."""
    return to_float(value, "leading_float")


def to_string(value: str | int | float) -> str:
    """``value`` as a text (Soufflé's ``to_string`` of each type, C++ ``std::to_string``): an
    integer in decimal, a float with six decimals (``2.500000``), a text is itself."""
    value = primitive(value, "to_string")
    if isinstance(value, float):
        return f"{value:f}"
    return value if isinstance(value, str) else str(value)


def ord_(text: str) -> int:
    """A number of ``text`` that no other text has, the same in every run: the UTF-8 bytes of
    the text after a 1 byte, read as one unsigned integer. Soufflé's ``ord`` is the text's
    index in its symbol table (the order texts were first seen); that order is not a property
    of a policy, so policyc keeps only what programs rely on: equal texts have equal numbers,
    different texts different ones, and the numbers are totally ordered."""
    return int.from_bytes(b"\x01" + text.encode("utf-8"), "big")


def itof(n: int) -> float:
    """The integer ``n`` as a float (Soufflé's ``itof``)."""
    return float(n)


def ftoi(x: float) -> int:
    """The float ``x`` truncated toward zero (Soufflé's ``ftoi``, a C++ ``static_cast``);
    infinity and NaN have no integer and are an error."""
    if not math.isfinite(x):
        raise ValueError(f"ftoi({x!r}): {x!r} has no integer value")
    return int(x)


def _split(url: str) -> Any:
    if "://" not in url and not url.startswith("//"):
        url = "//" + url  # `example.com/path`: a host without a scheme
    return urlsplit(url)


def url_host(url: str) -> str:
    return (_split(url).hostname or "").lower()


def url_scheme(url: str) -> str:
    return urlsplit(url).scheme.lower() if "://" in url else ""


PER_EVALUATION = "__policyc_per_evaluation__"
"""The attribute of a builtin whose value depends on the evaluation: a function from the
evaluation (anything with ``round``, or None) to what the calls call (not cached)."""


def _per_evaluation(make: Callable[[Any], Callable[..., Any]]) -> Callable[[Callable[..., Any]], Any]:
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, PER_EVALUATION, make)
        return fn

    return mark


def _counter(state: Any) -> Callable[[], int]:
    numbers = itertools.count()
    return lambda: next(numbers)


@_per_evaluation(_counter)
def autoinc() -> int:
    """Soufflé's ``autoinc()``: 0, 1, 2, ... one number per call, in the order of evaluation
    (a fresh count for each evaluation; order-dependent, so a policy refuses it)."""
    raise RuntimeError("autoinc() counts per evaluation")  # replaced for each evaluation


@_per_evaluation(lambda state: lambda: state.round if state is not None else 0)
def recursive_iteration_cnt() -> int:
    """Soufflé's ``recursive_iteration_cnt()``: the round of the recursion the rule is
    evaluated in, from 0 (0 outside a recursion)."""
    raise RuntimeError("recursive_iteration_cnt() is the evaluation's")  # replaced for each evaluation


BUILTINS: dict[str, Callable[..., Any]] = {
    "contains": contains,
    "startswith": startswith,
    "endswith": endswith,
    "match": souffle_match,  # Soufflé's reading: a pattern it cannot use matches nothing
    "autoinc": autoinc,
    "recursive_iteration_cnt": recursive_iteration_cnt,
    "lower": lower,
    "upper": upper,
    "strlen": strlen,
    "substr": substr,
    "cat": cat,
    "to_number": to_number,
    "to_unsigned": to_unsigned,
    "to_float": to_float,
    "leading_number": leading_number,
    "leading_float": leading_float,
    "to_string": to_string,
    "ord": ord_,
    "itof": itof,
    "ftoi": ftoi,
    "url_host": url_host,
    "url_scheme": url_scheme,
}

LENIENT_CONVERSIONS = frozenset({"leading_number", "leading_float"})
"""The builtins that read the number at the start of a text, as Soufflé's ``to_number`` and
``to_float`` read it (``leading_number("2000abc")`` is 2000, ``leading_number("1e9")`` is 1):
in a policy, a reading of agent text that can differ from the tool's."""

STRICT_CONVERSIONS: dict[str, Callable[..., Any]] = {
    "to_number": strict_number,
    "to_unsigned": strict_unsigned,
    "to_float": strict_float,
}
"""The conversions as a policy reads them: the whole text as a JSON number, or an error
(:mod:`.json_numbers`)."""

POLICY_BUILTINS: dict[str, Callable[..., Any]] = {**BUILTINS, **STRICT_CONVERSIONS, "match": match}
"""The builtins of a program with verdict rules (a policy): :data:`BUILTINS` with the strict
conversions, and ``match`` in the policy dialect, whose invalid patterns are errors."""


def builtins_for(policy: bool) -> dict[str, Callable[..., Any]]:
    """The builtins a program binds: a policy's (:data:`POLICY_BUILTINS`, numbers read whole)
    when it has verdict rules, else Soufflé's (:data:`BUILTINS`).

    >>> builtins_for(True)["to_number"]("0x10")
    Traceback (most recent call last):
    ...
    ValueError: to_number("0x10"): "0x10" is not written in decimal; write the number alone, in decimal digits (3000, -5)
    >>> builtins_for(False)["to_number"]("0x10"), builtins_for(True)["leading_number"]("0x10")
    (16, 16)
    """
    return POLICY_BUILTINS if policy else BUILTINS
