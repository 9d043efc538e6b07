"""JSON in and out of the service: orjson where it reads and writes a value exactly, the
project's reader (:mod:`policyc.runtime.jsonio`) where it does not.

orjson reads an integer past 64 bits as a float (``-9223372036854775809`` becomes
``-9.223372036854776e+18``), which would decide a call on another number than the agent sent,
and cannot write one back. A body with a run of 19 digits or more is read by the project's
reader instead, which reads integers exactly; a value orjson cannot write is written by the
standard library. Numbers no JSON value can hold exactly (``1e999``, ``NaN``) are refused
(:class:`~policyc.runtime.jsonio.NumberRefused`).

>>> loads(b'{"n": -9223372036854775809}')
{'n': -9223372036854775809}
>>> dumps({"n": 2**70})
b'{"n":1180591620717411303424}'
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from policyc.runtime import jsonio

_LONG = re.compile(rb"[0-9]{19,}")  # an integer orjson may not read exactly (or text with digits)


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data`` (:class:`~policyc.runtime.jsonio.MalformedJSON`, a
    ``json.JSONDecodeError``, when it is not JSON; ``UnicodeDecodeError`` when not UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if _LONG.search(data) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # say why as the project's reader does
    return jsonio.loads(data.decode("utf-8"))


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer past 64 bits
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
