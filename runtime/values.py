"""Values: records and ADT values as the evaluator keeps them, and every value as
explanations and facts show it (:func:`render_value`, :func:`render_fact`; people's text, the agent's
feedback included, shows values through :mod:`.render`).

A record ``[1, "a"]`` is the tuple ``(1, "a")`` (a :class:`Record`, which keeps its hash) and
``nil`` the empty tuple; an ADT value
``$A(1)`` is an :class:`Adt`, a tuple holding the branch name first (``("A", 1)``) whose
class tells it from a record. Both are hashable and ordered, so they are facts' values like
any other. In JSON (facts files, results) a record is an array, ``nil`` is ``null`` and an
ADT value an object of one key, the branch name, whose value is the array of its fields:

>>> to_json((1, ("a", ())))
[1, ['a', None]]
>>> from_json({"A": [1]}), to_json(from_json({"B": []}))
(Adt(('A', 1)), {'B': []})
>>> render_fact("Deny", ("c1", 5))
'Deny("c1", 5)'
"""

from __future__ import annotations

import json
from typing import Any

FEEDBACK_VALUE_LIMIT = 100  # characters of one value the feedback shows (runtime/render.py)


def _kept_hash(value: tuple) -> int:
    """The hash of a record or an ADT value, computed once from its fields' (which a nested
    one keeps in turn): storing a record built on another, or looking one up, takes time
    linear in its own fields, not in all it holds (a list of 10,000 cells is hashed once per
    cell, not once per cell per cell above it). The same number as the plain tuple's."""
    kept = value.__dict__
    found = kept.get("_hash")
    if found is None:
        found = kept["_hash"] = tuple.__hash__(value)
    return found


class Record(tuple):
    """A record value of one field or more (``nil`` is the empty tuple): a tuple, equal to and
    hashed as the plain tuple of its fields, that keeps its hash (:func:`_kept_hash`)."""

    __hash__ = _kept_hash

    def __reduce__(self) -> tuple[Any, ...]:  # the fields only: a hash is the process's own
        return (Record, (tuple(self),))


class Adt(tuple):
    """An ADT value: its branch name, then its fields; it keeps its hash as a record does."""

    __hash__ = _kept_hash

    def __repr__(self) -> str:
        return f"Adt({tuple.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Adt, (tuple(self),))


def record(fields: tuple) -> tuple:
    """The record of ``fields`` (``nil`` for none)."""
    return Record(fields) if fields else ()


def is_record(value: Any) -> bool:
    """Whether a value is a record (``nil`` included), not an ADT value or a primitive."""
    kind = type(value)
    return kind is Record or kind is tuple


def kind(value: Any) -> Any:
    """A record's number of fields (``nil``: 0), an ADT value's branch name; None for a
    value of neither (a pattern never matches it)."""
    if type(value) is Adt:
        return value[0]
    if is_record(value):
        return len(value)
    return None


def to_json(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """A value as JSON data (records as arrays, ``nil`` as null, ADT values as objects),
    however deep it nests (no recursion). With ``memo`` (the caller keeps the values alive),
    a record met again, as a field of another, is the same list: converting a list of 10,000
    cells each built on the one before takes time linear in the cells."""
    if not isinstance(value, tuple):
        return value
    if not value and type(value) is not Adt:
        return None
    done = {} if memo is None else memo
    stack: list[tuple[tuple, bool]] = [(value, False)]
    while stack:
        item, ready = stack.pop()
        if id(item) in done:
            continue
        fields = item[1:] if type(item) is Adt else item
        if not ready:
            stack.append((item, True))
            stack.extend((v, False) for v in fields if isinstance(v, tuple) and v and id(v) not in done)
            continue
        converted = [
            (None if not v and type(v) is not Adt else done[id(v)]) if isinstance(v, tuple) else v
            for v in fields
        ]
        done[id(item)] = {item[0]: converted} if type(item) is Adt else converted
    return done[id(value)]


def from_json(data: Any) -> Any:
    """A structured value from its JSON form; :class:`ValueError` for anything else."""
    if data is None:
        return ()
    if type(data) is Adt:
        return data
    if isinstance(data, list | tuple):
        return record(tuple(from_json(v) for v in data))
    if isinstance(data, dict):
        if len(data) != 1:
            raise ValueError("an ADT value is an object of one key, its branch name")
        ((tag, fields),) = data.items()
        if not isinstance(fields, list):
            raise ValueError(f"the fields of `${tag}` are an array")
        return Adt((tag, *(from_json(v) for v in fields)))
    if isinstance(data, bool) or not isinstance(data, str | int | float):
        raise ValueError(f"{data!r} is not a policy value")
    return data


def show(value: Any, memo: dict[int, str] | None = None) -> str:
    """A value as a policy writes it: ``[1, "a"]``, ``nil``, ``$A(1)``, however deep it nests
    (no recursion). With ``memo`` (the caller keeps the values alive), a record met again is
    written once: a list of 10,000 cells each built on the one before is shown in time linear
    in what is written."""
    if not isinstance(value, tuple):
        return _scalar(value)
    done = {} if memo is None else memo
    stack: list[tuple[tuple, bool]] = [(value, False)]
    while stack:
        item, ready = stack.pop()
        if id(item) in done:
            continue
        fields = item[1:] if type(item) is Adt else item
        if not ready:
            stack.append((item, True))
            stack.extend((v, False) for v in fields if isinstance(v, tuple) and id(v) not in done)
            continue
        parts = ", ".join(done[id(v)] if isinstance(v, tuple) else _scalar(v) for v in fields)
        if type(item) is Adt:
            done[id(item)] = f"${item[0]}({parts})"
        else:
            done[id(item)] = f"[{parts}]" if item else "nil"
    return done[id(value)]


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def render_value(value: Any, memo: dict[int, str] | None = None) -> str:
    """A value as explanations and messages show it: a text as a JSON string, a record or an
    ADT value as the language writes it (``memo``: see :func:`show`), a number as Python
    writes it."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'  # what JSON makes of it, sooner
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        return show(value, memo)
    return repr(value)


def render_fact(name: str, values: tuple, memo: dict[int, str] | None = None) -> str:
    """A fact as the language writes it: ``Deny("c1")`` (``memo``: see :func:`show`)."""
    return f"{name}({', '.join([render_value(v, memo) for v in values])})"
