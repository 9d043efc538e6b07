"""The grammar as the tokenizer and the parser use it: plain tables derived from Lark's.

Lark compiles ``grammar/policy.lark`` into terminals and an LALR table; :func:`derive` turns
them into what :mod:`.tokens` and :mod:`.parser` need (one regular expression of the
terminals, the keywords, the LALR actions re-keyed by name). Importing Lark and loading its
grammar takes longer than checking a small policy, so :func:`tables` keeps the derived tables
in a JSON file next to Lark's own cache (the system's temporary folder), named by a checksum
of the grammar and :data:`FORMAT`, and reads that file instead when it is there, is the
user's own and holds what it should; anything else about it and the tables are derived again.

>>> found = tables()
>>> set(found.rules) == set(derive().rules), found.keywords["not"]
(True, 'NOT')
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
import zlib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lark import Lark

FORMAT = 1  # what derive() computes and how it is written: change it when either changes


@dataclass(frozen=True)
class Tables:
    """The terminals as one alternation of named groups, tried in Lark's order
    (``pattern``), the keywords NAME also matches (text → terminal), the terminals skipped,
    and the LALR automaton for ``item`` (see :class:`~policyc.compiler.parser._Automaton`)."""

    pattern: str
    keywords: dict[str, str]
    ignore: frozenset[str]
    actions: dict[int, dict[str, tuple[bool, int]]]  # state -> symbol -> (shift?, state or rule)
    rules: tuple[tuple[str, int, str | None, bool], ...]  # (origin, length, method, splices)
    start: int
    end: int


def grammar_text() -> str:
    return resources.files("policyc.grammar").joinpath("policy.lark").read_text("utf-8")


@functools.cache
def compiled_grammar() -> Lark:
    """Lark's compilation of the grammar (its LALR table cached on disk by Lark)."""
    from lark import Lark

    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="basic",
        start=["item", "comment"],
        keep_all_tokens=True,
        maybe_placeholders=False,
        cache=True,
    )


@functools.cache
def tables() -> Tables:
    """The grammar's tables: from the cache file if it holds them, else derived (and cached)."""
    text = grammar_text()
    path = os.path.join(
        tempfile.gettempdir(), f".policyc-grammar-{zlib.crc32(text.encode()):08x}-{FORMAT}-{_user()}.json"
    )
    found = _read(path)
    if found is not None:
        return found
    derived = derive()
    _write(path, derived)
    return derived


def derive() -> Tables:
    """The tables, from Lark's compilation of the grammar."""
    from lark.parsers.lalr_analysis import Shift

    lark = compiled_grammar()
    pattern, keywords = _terminals(lark)
    table = lark.parse_interactive(None, start="item").parser_state.parse_conf.parse_table
    index: dict[Any, int] = {}
    rules: list[tuple[str, int, str | None, bool]] = []
    for rule in lark.rules:
        if rule.origin.name == "comment":
            continue  # a start symbol only there to keep COMMENT in the grammar
        splices = any(not s.is_term and s.name.startswith("_") for s in rule.expansion)
        if rule.origin.name.startswith("_"):
            method: str | None = "_splice"
        elif rule.options.expand1 and not rule.alias and len(rule.expansion) == 1:
            method = None
        else:
            method = rule.alias or rule.origin.name
        index[rule] = len(rules)
        rules.append((rule.origin.name, len(rule.expansion), method, splices))
    actions = {
        state: {
            symbol: (True, arg) if action is Shift else (False, index[arg])
            for symbol, (action, arg) in row.items()
            if action is Shift or arg in index
        }
        for state, row in table.states.items()
    }
    return Tables(
        pattern,
        keywords,
        frozenset(lark.lexer_conf.ignore),
        actions,
        tuple(rules),
        table.start_states["item"],
        table.end_states["item"],
    )


def _terminals(lark: Lark) -> tuple[str, dict[str, str]]:
    """Lark's own lexer builds the same alternation (priority, then width, then name) and
    turns keywords that NAME also matches into a lookup on NAME's text. Three fallback
    alternatives catch what no terminal matches, so that a scan never skips text silently:
    an unterminated string, an unterminated block comment, any other character."""
    terminals = [t for t in lark.terminals if t.pattern.value]
    regexps = [t for t in terminals if t.pattern.type == "re"]
    keywords: dict[str, str] = {}
    embedded = set()
    for t in terminals:
        if t.pattern.type != "str":
            continue
        for r in regexps:
            m = re.match(r.pattern.to_regexp(), t.pattern.value)
            if r.priority == t.priority and m and m.group(0) == t.pattern.value:
                keywords[t.pattern.value] = t.name
                embedded.add(t.name)
    ordered = sorted(
        (t for t in terminals if t.name not in embedded),
        key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name),
    )
    alternatives = [r"(?P<_BAD_COMMENT>/\*(?![\s\S]*?\*/)[\s\S]*)"]  # before `/` can match
    alternatives += [f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in ordered]
    alternatives += [
        r'(?P<_BAD_STRING>"(?:[^"\\\n]|\\.)*\\?)',
        r"(?P<_BAD_QUOTES>\u201c[^\u201d\n]*\u201d|'[^'\n]*')",
        r"(?P<_BAD>[\s\S])",
    ]
    return "|".join(alternatives), keywords


def _user() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else "user"


def _read(path: str) -> Tables | None:
    """The tables a cache file holds; None if it is missing, not the user's own, writable by
    others, or not exactly tables of this format."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as file:
            status = os.fstat(file.fileno())
            if hasattr(os, "getuid") and (status.st_uid != os.getuid() or status.st_mode & 0o022):
                return None
            data = json.loads(file.read())
        return _tables_of(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _tables_of(data: Any) -> Tables | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    actions = {
        int(state): {str(symbol): (action[0] is True, _count(action[1])) for symbol, action in row.items()}
        for state, row in data["actions"].items()
    }
    rules = tuple(
        (str(origin), _count(length), None if method is None else str(method), splices is True)
        for origin, length, method, splices in data["rules"]
    )
    keywords = {str(k): str(v) for k, v in data["keywords"].items()}
    return Tables(
        str(data["pattern"]),
        keywords,
        frozenset(str(i) for i in data["ignore"]),
        actions,
        rules,
        _count(data["start"]),
        _count(data["end"]),
    )


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("not a count")
    return value


def _write(path: str, found: Tables) -> None:
    """Keep the tables for the next process (quietly not, if the folder is not writable)."""
    data = {
        "format": FORMAT,
        "pattern": found.pattern,
        "keywords": found.keywords,
        "ignore": sorted(found.ignore),
        "actions": {str(state): row for state, row in found.actions.items()},
        "rules": found.rules,
        "start": found.start,
        "end": found.end,
    }
    try:
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".policyc-grammar-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(data, file)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:  # a temporary folder that cannot be written: the tables are derived each time
        pass
