"""Structured values: records and ADT values, as the evaluator keeps them.

A record ``[1, "a"]`` is the tuple ``(1, "a")`` and ``nil`` the empty tuple; an ADT value
``$A(1)`` is an :class:`Adt`, a tuple holding the branch name first (``("A", 1)``) whose
class tells it from a record. Both are hashable and ordered, so they are facts' values like
any other. In JSON (facts files, results) a record is an array, ``nil`` is ``null`` and an
ADT value an object of one key, the branch name, whose value is the array of its fields:

>>> to_json((1, ("a", ())))
[1, ['a', None]]
>>> from_json({"A": [1]}), to_json(from_json({"B": []}))
(Adt(('A', 1)), {'B': []})
"""

from __future__ import annotations

from typing import Any


class Adt(tuple):
    """An ADT value: its branch name, then its fields."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Adt({tuple.__repr__(self)})"


def kind(value: Any) -> Any:
    """A record's number of fields (``nil``: 0), an ADT value's branch name; None for a
    value of neither (a pattern never matches it)."""
    if type(value) is Adt:
        return value[0]
    if type(value) is tuple:
        return len(value)
    return None


def to_json(value: Any) -> Any:
    """A value as JSON data (records as arrays, ``nil`` as null, ADT values as objects)."""
    if type(value) is Adt:
        return {value[0]: [to_json(v) for v in value[1:]]}
    if type(value) is tuple:
        return [to_json(v) for v in value] if value else None
    return value


def from_json(data: Any) -> Any:
    """A structured value from its JSON form; :class:`ValueError` for anything else."""
    if data is None:
        return ()
    if type(data) is Adt:
        return data
    if isinstance(data, list | tuple):
        return tuple(from_json(v) for v in data)
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


def show(value: Any) -> str:
    """A value as a policy writes it: ``[1, "a"]``, ``nil``, ``$A(1)``."""
    import json

    if type(value) is Adt:
        fields = ", ".join(show(v) for v in value[1:])
        return f"${value[0]}({fields})"
    if type(value) is tuple:
        return "[" + ", ".join(show(v) for v in value) + "]" if value else "nil"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)
