"""One typed reader for policyc's file formats, with located errors.

Every format policyc reads (plans, bundles, thresholds, calibration records, forecast models,
traces, policy test files) is read through a :class:`Cursor`: a value with the path that leads
to it and the :class:`Source` it came from. A cursor reads its value as a given type — an
object, a list, a string, a boolean, a count, a finite number, a probability, one of a set of
names, a mapping of names to something — and returns it typed, or raises a
:class:`FormatError` that says where and what was expected::

    thresholds.json:14: strata.target.threshold: expected a number, "inf" or "-inf", got "high"

The line is found only when there is an error: a source's ``locate`` maps the path of the
wrong value to its line (for a JSON document, :func:`policyc.compiler.locate.json_line` goes
through the text again along the path; a JSON Lines record has the line of the record). Parsing stays with the
format: :mod:`policyc.runtime.jsonio` for JSON, :mod:`tomllib` for test files.

>>> source = Source("t.json")
>>> top = Cursor.root({"n": -1, "kind": "x"}, source)
>>> top["kind"].choice(("a", "b"))
Traceback (most recent call last):
...
policyc.compiler.reading.FormatError: t.json: kind: expected one of a, b, got "x"
>>> top["n"].count()
Traceback (most recent call last):
...
policyc.compiler.reading.FormatError: t.json: n: expected a count (an integer, 0 or more), got -1
>>> top.optional("delta", Cursor.probability, None) is None
True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .locate import Key, json_line

T = TypeVar("T")
Path = tuple[Key, ...]


class FormatError(ValueError):
    """A file (or part of one) that is not what its format says, located:
    ``file:line: field: problem`` (``line`` and ``field`` left out when unknown or empty;
    ``column`` after the line when known, for text that does not parse)."""

    def __init__(
        self, file: str, line: int | None, field: str, problem: str, column: int | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.problem = problem
        self.column = column
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.field}: {self.problem}" if self.field else f"{where}: {self.problem}"

    def __reduce__(self) -> tuple[Any, ...]:
        return FormatError, (self.file, self.line, self.field, self.problem, self.column)


def _nowhere(path: Path) -> int | None:
    return None


@dataclass(frozen=True, slots=True)
class Source:
    """Where values come from: a file's name and how to find the line of the value at a path
    (called only for an error)."""

    file: str
    locate: Callable[[Path], int | None] = _nowhere

    @staticmethod
    def json(file: str, text: str) -> Source:
        """A JSON document: a value's line is where it starts in ``text``."""
        return Source(file, lambda path: json_line(text, path))

    @staticmethod
    def line(file: str, number: int) -> Source:
        """One record of a JSON Lines file: every value is on line ``number``."""
        return Source(file, lambda path: number)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def field_name(path: Path) -> str:
    """A path as errors show it: ``strata.target.n``, ``states[3].within[0]``, a key that is
    not a name in brackets (``fields["a.b"]``).

    >>> field_name(("states", 3, "within", 0))
    'states[3].within[0]'
    >>> field_name(("fields", "a.b"))
    'fields["a.b"]'
    """
    text = ""
    for key in path:
        if isinstance(key, int):
            text += f"[{key}]"
        elif _PLAIN.fullmatch(key):
            text += f".{key}" if text else key
        else:
            text += f"[{json.dumps(key, ensure_ascii=False)}]"
    return text


def show(value: Any) -> str:
    """A value as errors quote it: its JSON, cut to 40 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Cursor:
    """A value read from a source, with the way to it (``parent`` and ``key``): the reader of
    one field. A cursor is never changed once made (a plain class with slots rather than a
    frozen dataclass: a bundle's plan makes hundreds of thousands, and this makes them three
    times faster)."""

    __slots__ = ("key", "parent", "source", "value")

    def __init__(self, value: Any, source: Source, parent: Cursor | None = None, key: Key | None = None):
        self.value = value
        self.source = source
        self.parent = parent
        self.key = key

    def __repr__(self) -> str:
        return f"Cursor({self.source.file}: {self.field or '(top)'} = {show(self.value)})"

    @staticmethod
    def root(value: Any, source: Source, path: Path = ()) -> Cursor:
        """The cursor of a whole document (or of the value at ``path`` inside one)."""
        cursor = Cursor(value, source)
        for key in path:
            cursor = Cursor(value, source, cursor, key)
        return cursor

    # ---------------------------------------------------------------------------- where

    @property
    def path(self) -> Path:
        keys: list[Key] = []
        cursor: Cursor | None = self
        while cursor is not None and cursor.parent is not None:
            keys.append(cursor.key)  # type: ignore[arg-type]
            cursor = cursor.parent
        return tuple(reversed(keys))

    @property
    def field(self) -> str:
        return field_name(self.path)

    def fail(self, problem: str) -> FormatError:
        """The error of this value: ``problem`` located at its line and named by its path."""
        path = self.path
        return FormatError(self.source.file, self.source.locate(path), field_name(path), problem)

    def expected(self, what: str) -> FormatError:
        """The error of a value that is not ``what`` (or of a field that is missing)."""
        parent = self.parent
        if self.value is None and parent is not None and isinstance(parent.value, dict):
            if self.key not in parent.value:
                return self.fail(f"missing (expected {what})")
        return self.fail(f"expected {what}, got {show(self.value)}")

    # ------------------------------------------------------------------------ containers

    def object(self, known: Collection[str] | None = None) -> Cursor:
        """This value as an object; with ``known``, a key outside it is refused (with the
        closest known key, if one is close)."""
        if not isinstance(self.value, dict):
            raise self.expected("an object")
        if known is not None:
            for key in self.value:
                if key not in known:
                    raise self.child(key).fail(unknown_key(key, known))
        return self

    def child(self, key: Key) -> Cursor:
        """The value at ``key`` of this object or list (None as its value when absent)."""
        value = self.value
        if isinstance(value, dict):
            return Cursor(value.get(key), self.source, self, key)
        if isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            return Cursor(value[key], self.source, self, key)
        return Cursor(None, self.source, self, key)

    def __getitem__(self, key: str) -> Cursor:
        """A required field of this object."""
        if not isinstance(self.value, dict):
            raise self.expected("an object")
        if key not in self.value:
            raise Cursor(None, self.source, self, key).fail("missing")
        return Cursor(self.value[key], self.source, self, key)

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    def get(self, key: str) -> Cursor | None:
        """A field of this object that may be absent (None then)."""
        if not isinstance(self.value, dict):
            raise self.expected("an object")
        if key not in self.value:
            return None
        return Cursor(self.value[key], self.source, self, key)

    def optional(self, key: str, read: Callable[[Cursor], T], default: T) -> T:
        """A field read with ``read``, or ``default`` when it is absent or null."""
        found = self.get(key)
        if found is None or found.value is None:
            return default
        return read(found)

    def list(self, length: int | None = None) -> list[Cursor]:
        """This value as a list, a cursor per element (of exactly ``length``, when given)."""
        value = self.value
        if type(value) is not list:
            raise self.expected("a list")
        if length is not None and len(value) != length:
            raise self.fail(f"expected a list of {length}, got {len(value)}")
        source = self.source
        return [Cursor(v, source, self, i) for i, v in enumerate(value)]

    def items(self, read: Callable[[Cursor], T]) -> tuple[T, ...]:
        """Every element of this list, read with ``read``."""
        return tuple([read(c) for c in self.list()])

    def entries(self) -> Iterator[tuple[str, Cursor]]:
        """The keys of this object, a cursor for each value."""
        for key, value in self.object().value.items():
            yield key, Cursor(value, self.source, self, key)

    def mapping(self, read: Callable[[Cursor], T]) -> dict[str, T]:
        """This object as a mapping of names to values read with ``read``."""
        return {key: read(c) for key, c in self.entries()}

    # ---------------------------------------------------------------------------- scalars

    def string(self, *, empty: bool = True) -> str:
        value = self.value
        if not isinstance(value, str) or (not empty and not value):
            raise self.expected("a string" if empty else "a non-empty string")
        return value

    def strings(self, *, empty: bool = True) -> tuple[str, ...]:
        """This value as a list of strings."""
        value = self.value
        if type(value) is list and all(type(v) is str and (empty or v) for v in value):
            return tuple(value)
        return tuple(c.string(empty=empty) for c in self.list())

    def counts(self, below: int | None = None) -> tuple[int, ...]:
        """This value as a list of counts (each below ``below``, when given)."""
        value = self.value
        if type(value) is list and all(type(v) is int and 0 <= v for v in value):
            if below is None or all(v < below for v in value):
                return tuple(value)
        return tuple(c.count(below) for c in self.list())

    def boolean(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.expected("true or false")
        return self.value

    def count(self, below: int | None = None, what: str = "a count (an integer, 0 or more)") -> int:
        """An integer ≥ 0 (and < ``below`` when given: an index into something of that size)."""
        value = self.value
        if not _is_integer(value) or value < 0:
            raise self.expected(what)
        if below is not None and value >= below:
            raise self.fail(f"expected an index below {below}, got {value}")
        return value

    def positive(self) -> int:
        value = self.value
        if not _is_integer(value) or value < 1:
            raise self.expected("a positive integer")
        return value

    def number(self, low: float = -math.inf, high: float = math.inf, *, null_infinite: bool = False) -> float:
        """A finite number in [low, high]; with ``null_infinite``, null stands for infinity."""
        value = self.value
        if value is None and null_infinite:
            return math.inf
        if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
            if high != math.inf:
                span = f"a number in [{low:g}, {high:g}]"
            elif low != -math.inf:
                span = f"a number >= {low:g}"
            else:
                span = "a finite number"
            raise self.expected(span + (" or null" if null_infinite else ""))
        return float(value)

    def probability(self) -> float:
        """A number in (0, 1]."""
        value = self.value
        if not _is_number(value) or not 0 < value <= 1:
            raise self.expected("a number in (0, 1]")
        return float(value)

    def choice(self, names: Collection[str]) -> str:
        """One of ``names``."""
        if not isinstance(self.value, str) or self.value not in names:
            raise self.expected(f"one of {', '.join(names)}")
        return self.value


def unknown_key(key: str, known: Collection[str]) -> str:
    """What an error says of a key a format does not have."""
    from .syntax_errors import did_you_mean

    close = did_you_mean(key, sorted(known))
    if close:
        return f"unknown key (did you mean `{close}`?)"
    return f"unknown key (the keys are {', '.join(f'`{k}`' for k in sorted(known))})"
