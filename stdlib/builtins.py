"""Implementations of the builtin functors declared in ``builtins.dl``.

Each is a pure, deterministic function of its arguments. A function that cannot give a value
for its arguments raises (the literal fails and the evaluation is marked errored).

Each is bounded: it takes time linear in the size of its arguments (its result). A regular
expression (``match``) is RE2 syntax, compiled by RE2 and matched in time linear in the text
(no backtracking: a pattern like ``(a+)+b`` takes as long as any other); a pattern RE2 does not
accept (invalid, or using backreferences or lookaround, which need backtracking), or longer
than :data:`MAX_PATTERN` characters, is an error of that call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import re2


def contains(text: str, part: str) -> bool:
    return part in text


def startswith(text: str, prefix: str) -> bool:
    return text.startswith(prefix)


def endswith(text: str, suffix: str) -> bool:
    return text.endswith(suffix)


MAX_PATTERN = 10_000  # characters of a regular expression
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is an error of the call, not a line on stderr
_OPTIONS.max_mem = 8 << 20  # bytes RE2 may use for one compiled pattern


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN:
        raise ValueError(
            f"the pattern has {len(pattern):,} characters, more than the {MAX_PATTERN:,} allowed"
        )
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(
            f"invalid pattern {pattern!r}: {reason} (RE2 syntax, matched in linear time: "
            "no backreferences or lookaround)"
        ) from None


def match(pattern: str, text: str) -> bool:
    return _regex(pattern).fullmatch(text) is not None


def lower(text: str) -> str:
    return text.lower()


def upper(text: str) -> str:
    return text.upper()


def strlen(text: str) -> int:
    return len(text)


def substr(text: str, start: int, length: int) -> str:
    if start < 0 or length < 0 or start > len(text):
        raise ValueError(f"substr({text!r}, {start}, {length}) is out of range")
    return text[start : start + length]


def cat(a: str, b: str) -> str:
    return a + b


def to_number(text: str) -> int:
    return int(text.strip())


def to_string(n: int) -> str:
    return str(n)


def _split(url: str) -> Any:
    if "://" not in url and not url.startswith("//"):
        url = "//" + url  # `example.com/path`: a host without a scheme
    return urlsplit(url)


def url_host(url: str) -> str:
    return (_split(url).hostname or "").lower()


def url_scheme(url: str) -> str:
    return urlsplit(url).scheme.lower() if "://" in url else ""


BUILTINS: dict[str, Callable[..., Any]] = {
    "contains": contains,
    "startswith": startswith,
    "endswith": endswith,
    "match": match,
    "lower": lower,
    "upper": upper,
    "strlen": strlen,
    "substr": substr,
    "cat": cat,
    "to_number": to_number,
    "to_string": to_string,
    "url_host": url_host,
    "url_scheme": url_scheme,
}
