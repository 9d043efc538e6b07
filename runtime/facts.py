"""Input facts: checked against the policy before anything is evaluated.

Facts are given per relation name as rows of values: from Python (a mapping of names to
iterables of sequences), from a JSON file ``{"Rel": [[v1, v2], ...]}``, or from a folder of
Soufflé-style ``Rel.facts`` files (one fact per line, values separated by tabs). Every row is
checked: the relation must be an ``.input`` of the policy, the row must have its arity, and
each value its attribute's type (``symbol``: a string; ``number``: an integer; ``float``: a
number), and the facts of a relation keep its keys (``.key``). A problem is a
:class:`FactsError` naming the relation, the row and the value (or the key and the two facts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from policyc.compiler.plan import Plan, RelationSpec

FactsInput = Mapping[str, Iterable[Any]]


class FactsError(ValueError):
    """Facts that do not fit the policy; the message says where."""


def describe_value(value: Any) -> str:
    """A value as a message shows it: JSON for a plain value, cut at 40 characters."""
    text = json.dumps(value) if isinstance(value, str | int | float | bool) or value is None else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def convert(value: Any, type_: str | None, where: str) -> Any:
    """A value of the given attribute type, or :class:`FactsError`."""
    if type_ == "record":
        from .values import from_json

        try:
            return from_json(value)
        except (ValueError, RecursionError) as error:
            raise FactsError(
                f"{where}: {describe_value(value)} is not a record or ADT value ({error})"
            ) from None
    if isinstance(value, bool) or value is None:
        raise FactsError(f"{where}: {describe_value(value)} is not a policy value")
    if type_ == "symbol":
        if not isinstance(value, str):
            raise FactsError(f"{where}: expected a string, got {describe_value(value)}")
        return value
    if type_ == "number":
        if not isinstance(value, int):
            raise FactsError(f"{where}: expected an integer, got {describe_value(value)}")
        return value
    if type_ == "unsigned":
        if not isinstance(value, int) or value < 0:
            raise FactsError(f"{where}: expected an integer of at least 0, got {describe_value(value)}")
        return value
    if type_ == "float":
        if not isinstance(value, int | float):
            raise FactsError(f"{where}: expected a number, got {describe_value(value)}")
        value = float(value)
    elif not isinstance(value, str | int | float):
        raise FactsError(f"{where}: {describe_value(value)} is not a string or a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise FactsError(f"{where}: {value!r} is not a finite number")
    return value


def validate(
    plan: Plan,
    facts: FactsInput,
    origin: str = "facts",
    *,
    ordered: bool = False,
    as_rows: Collection[int] = (),
) -> dict[int, Collection[Any]]:
    """The facts as tuples per relation index; :class:`FactsError` at the first problem.

    Each relation's facts are a set, or with ``ordered`` a dict whose keys are the facts in
    the order given (duplicates dropped): evaluation stores a relation that is only read in
    that form, since going through facts in the order they were made is faster than in the
    order of a set's hash table. The relations in ``as_rows`` keep the rows as given once
    every one is checked (a list or tuple of lists or tuples, duplicates kept), for the caller
    to take their values from at once (:meth:`.relations.Relation.from_rows`)."""
    if not isinstance(facts, Mapping):
        raise FactsError(f"{origin}: expected a mapping from relation names to rows")
    index = plan.relation_index()
    checked: dict[int, Collection[Any]] = {}
    for name, rows in facts.items():
        where = f"{origin}: relation `{name}`"
        if not isinstance(name, str) or name not in index:
            raise FactsError(f"{where} is not a relation of the policy")
        r = index[name]
        spec = plan.relations[r]
        if not spec.input:
            raise FactsError(f"{where} is not an input of the policy (declare it `.input {name}`)")
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
            raise FactsError(f"{where}: expected a list of rows, got {_kind(rows)}")
        fast = _fast(rows, spec.types, ordered, r in as_rows)
        if fast is not None:
            if spec.keys:
                check_rows(spec, [tuple(row) for row in fast], where)
            checked[r] = fast
            continue
        tuples: set[tuple] = set()
        for n, row in enumerate(rows):
            at = f"{where}, row {n + 1}"
            if isinstance(row, str | bytes | Mapping | set | frozenset) or not isinstance(row, Iterable):
                raise FactsError(f"{at}: expected a list of {spec.arity} values, got {_kind(row)}")
            values = list(row)
            if len(values) != spec.arity:
                raise FactsError(f"{at}: expected {spec.arity} values, got {len(values)}")
            tuples.add(
                tuple(
                    convert(v, t, f"{at}, value {i + 1}")
                    for i, (v, t) in enumerate(zip(values, spec.types, strict=True))
                )
            )
        if spec.keys:
            check_rows(spec, tuples, where)
        checked[r] = tuples
    return checked


def key_text(spec: RelationSpec, key: tuple[int, ...]) -> str:
    """``.key ToolArg(a, key)``."""
    return f".key {spec.name}({', '.join(spec.attributes[i] for i in key)})"


def conflict(
    spec: RelationSpec, key: tuple[int, ...], first: tuple, second: tuple, origins: tuple[str, str] = ("", "")
) -> str:
    """What two facts that break a key are: ``.key ToolCall(a)` allows one `tool` per `a`, and
    `a` = "c1" has two: "x" and "y"`` (each value followed by where it came from, if said)."""
    names = spec.attributes
    rest = [i for i in range(len(spec.types)) if i not in key]

    def shown(row: tuple, origin: str) -> str:
        if not key:
            text = f"{spec.name}({', '.join(describe_value(v) for v in row)})"
        else:
            values = [describe_value(row[i]) for i in rest]
            text = values[0] if len(values) == 1 else f"({', '.join(values)})"
        return f"{text} ({origin})" if origin else text

    pair = f"{shown(first, origins[0])} and {shown(second, origins[1])}"
    if not key:
        return f"`{key_text(spec, key)}` allows at most one fact, and there are two: {pair}"
    per = ", ".join(f"`{names[i]}`" for i in key)
    at = ", ".join(f"`{names[i]}` = {describe_value(first[i])}" for i in key)
    one = ", ".join(f"`{names[i]}`" for i in rest)
    return f"`{key_text(spec, key)}` allows one {one} per {per if len(key) == 1 else '(' + per + ')'}, and {at} has two: {pair}"


def check_rows(spec: RelationSpec, rows: Iterable[tuple], where: str) -> None:
    """:class:`FactsError` when two of ``rows`` (checked facts of ``spec``) break one of its keys
    (``.key``: the attributes named determine the others).

    >>> spec = RelationSpec("ToolCall", ("symbol", "symbol"), input=True, keys=((0,),), attributes=("a", "tool"))
    >>> check_rows(spec, [("c1", "x"), ("c2", "x")], "facts: relation `ToolCall`")
    >>> check_rows(spec, [("c1", "x"), ("c1", "y")], "facts: relation `ToolCall`")
    Traceback (most recent call last):
    ...
    policyc.runtime.facts.FactsError: facts: relation `ToolCall`: `.key ToolCall(a)` allows one `tool` per `a`, and `a` = "c1" has two: "x" and "y"
    """
    facts = rows if isinstance(rows, Collection) else list(rows)
    for key in spec.keys:
        seen: dict[tuple, tuple] = {}
        for row in facts:
            at = tuple(row[i] for i in key)
            before = seen.setdefault(at, row)
            if before != row:
                raise FactsError(f"{where}: {conflict(spec, key, before, row)}")


def _kind(value: Any) -> str:
    """What a value that should be a list is, for a message (an object's keys are not a row)."""
    if isinstance(value, Mapping):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            return "a mapping"
        return f"an object {text if len(text) <= 40 else text[:37] + '...'}"
    if isinstance(value, set | frozenset):
        return "a set (a row's values are in order)"
    return describe_value(value)


_ALLOWED: dict[str | None, frozenset[type]] = {
    "symbol": frozenset({str}),
    "number": frozenset({int}),
    "float": frozenset({float}),
    "unsigned": frozenset(),  # checked value by value (at least 0)
    "record": frozenset(),  # converted value by value (arrays to tuples)
    None: frozenset({str, int, float}),
}
_ROWS = frozenset({list, tuple})


def _fast(
    rows: Iterable[Any], types: tuple[str | None, ...], ordered: bool, as_rows: bool = False
) -> Collection[Any] | None:
    """The rows as a set of tuples (``ordered``: a dict with the tuples as keys, in the
    order given; ``as_rows``: the rows themselves) when every one is already right (the
    common case), checked in whole passes (row kinds, lengths, then the values' types a column
    at a time, or all at once when every attribute has the same type); None to fall back to
    the row-by-row check that locates the problem."""
    if not isinstance(rows, list | tuple | set | frozenset):
        return None
    if not set(map(type, rows)) <= _ROWS:
        return None
    if rows and set(map(len, rows)) != {len(types)}:
        return None
    # every value's type before any two rows are compared: 1, 1.0 and True are equal keys
    columns: list[tuple[str | None, Iterable[Any]]]
    if types and all(t == "symbol" for t in types):
        try:  # joining checks that each is a string (or a subclass, as `convert` accepts) fastest
            "".join(chain.from_iterable(rows))
        except TypeError:
            return None
        columns = []
    elif len(set(types)) == 1:  # one type for every attribute: one pass over every value
        columns = [(types[0], chain.from_iterable(rows))]
    else:
        columns = [(type_, map(itemgetter(i), rows)) for i, type_ in enumerate(types)]
    floats = False
    for type_, values in columns:
        kinds = set(map(type, values))
        if not kinds <= _ALLOWED[type_]:
            return None
        floats = floats or float in kinds
    if floats and not all(map(math.isfinite, (v for v in chain.from_iterable(rows) if type(v) is float))):
        return None  # NaN and infinities: the row-by-row check says where
    if as_rows and isinstance(rows, list | tuple):
        return rows
    return dict.fromkeys(map(tuple, rows)) if ordered else set(map(tuple, rows))


def read(path: str, plan: Plan) -> dict[str, list[list[Any]]]:
    """Facts from a JSON file or a folder of ``.facts`` files (:class:`FactsError` saying
    where; ``OSError`` for a file that cannot be read: not a regular file, or too large)."""
    from policyc.compiler.files import read_bytes

    from .jsonio import loads, problem

    target = Path(path)
    if target.is_dir():
        return _read_folder(target, plan)
    data = read_bytes(target)
    try:
        facts = loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FactsError(f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise FactsError(f"{path}:{error.lineno}:{error.colno}: {problem(error)}") from None
    if not isinstance(facts, dict):
        raise FactsError(f"{path}: expected a JSON object mapping relation names to rows")
    return facts


def _read_folder(folder: Path, plan: Plan) -> dict[str, list[list[Any]]]:
    from policyc.compiler.files import read_bytes

    index = plan.relation_index()
    facts: dict[str, list[list[Any]]] = {}
    files = sorted(folder.glob("*.facts"))
    if not files:
        raise FactsError(f"{folder}: no facts files (`Rel.facts`) in the folder")
    for file in files:
        name = file.stem
        if name not in index:
            raise FactsError(f"{file}: relation `{name}` is not a relation of the policy")
        types = plan.relations[index[name]].types
        rows = facts.setdefault(name, [])
        data = read_bytes(file)
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError as error:
            at = data.count(b"\n", 0, error.start) + 1
            raise FactsError(f"{file}:{at}: not UTF-8 text ({error.reason})") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            fields = line.split("\t") if types else []
            if len(fields) != len(types):
                raise FactsError(
                    f"{file}:{number}: expected {len(types)} tab-separated values, got {len(fields)}"
                )
            rows.append([_parse_field(f, t, f"{file}:{number}") for f, t in zip(fields, types, strict=True)])
    return facts


def _parse_field(text: str, type_: str | None, where: str) -> Any:
    if type_ == "record":  # written as JSON: `[1, "a"]`, `null`, `{"A": [1]}`
        try:
            return convert(json.loads(text), type_, where)
        except ValueError:
            raise FactsError(f"{where}: `{text}` is not a record written as JSON") from None
    try:
        if type_ == "number" or type_ == "unsigned":
            value = int(text)
            if type_ == "unsigned" and value < 0:
                raise ValueError(text)
            return value
        if type_ == "float":
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            return number
    except ValueError:
        raise FactsError(f"{where}: `{text}` is not a {type_}") from None
    return text


def parse_fact(text: str) -> tuple[str, tuple]:
    """A ground atom written in the policy language, like ``Deny("v6")`` or
    ``P([1, nil], $A(2))`` (``ValueError`` if it is not one)."""
    from policyc.compiler import ast
    from policyc.compiler.parser import parse
    from policyc.compiler.source import SourceFile

    module, diagnostics = parse(SourceFile("<fact>", text.strip().rstrip(".") + "."))
    rules = [s for s in module.statements if isinstance(s, ast.Rule)]
    if diagnostics or len(rules) != 1 or rules[0].body:
        raise ValueError(f'`{text}` is not a fact like Deny("v6")')
    from .values import Adt, record

    def value(arg: ast.Term) -> Any:
        if isinstance(arg, ast.String | ast.Integer | ast.Float):
            return arg.value
        if isinstance(arg, ast.Nil):
            return ()
        if isinstance(arg, ast.Record):
            return record(tuple(value(a) for a in arg.args))
        if isinstance(arg, ast.Constructor):
            return Adt((arg.name, *(value(a) for a in arg.args)))
        raise ValueError(f"`{text}` has a non-constant argument")

    return rules[0].head.name, tuple(value(arg) for arg in rules[0].head.args)
