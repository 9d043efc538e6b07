"""Where a value starts in a JSON text: the line of the value at a path of keys and indices.

Files are parsed by :mod:`policyc.runtime.jsonio`, which keeps no positions; when a reader
refuses a value (rarely), :func:`json_line` parses the text again with Lark
(``grammar/json.lark``, LALR, positions kept) and follows the path down to the value. A key
given twice is the last one (as :func:`json.loads` reads it); a path that leads out of the text
(a missing key, an index past the end) stops at the last value it reaches: a missing field is
reported at the object that lacks it.

>>> json_line('{"a": [1,\\n  {"b": true}]}', ("a", 1, "b"))
2
>>> json_line('{"a": 1}', ("nothing", "here"))
1
>>> json_line("not json", ("a",)) is None
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any

Key = str | int


@cache
def _parser() -> Any:
    from importlib import resources

    from lark import Lark

    grammar = resources.files("policyc.grammar").joinpath("json.lark").read_text("utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


def json_line(text: str, path: Sequence[Key]) -> int | None:
    """The line (1-based) where the value at ``path`` starts in the JSON ``text`` (None when
    the text is not JSON Lark reads)."""
    from lark import LarkError, Token

    try:
        node = _parser().parse(text)
    except LarkError:
        return None
    for key in path:
        child = _child(node, key)
        if child is None:
            break
        node = child
    line = node.line if isinstance(node, Token) else node.meta.line
    return line


def _child(node: Any, key: Key) -> Any:
    """The value of ``node`` at ``key`` (None when it has none)."""
    from lark import Token

    if isinstance(node, Token):
        return None
    if node.data == "array":
        if isinstance(key, int) and 0 <= key < len(node.children):
            return node.children[key]
        return None
    if node.data == "object" and isinstance(key, str):
        found = None
        for pair in node.children:
            name, value = pair.children
            if json.loads(name) == key:
                found = value
        return found
    return None
