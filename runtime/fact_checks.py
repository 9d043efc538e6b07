"""The check of facts given to a session, one generated function per input relation.

A session is given facts a few rows at a time (``session.add_facts`` per event, as FORGE's
listings and Soufflé programs are fed), so what a call costs beside maintenance is the check of
a handful of rows. The general check (:func:`~policyc.runtime.facts.validate`) finds each
relation by name, builds a view per column and a set per relation, then the session copies and
converts them again. Here each input relation gets, once per monitor, a function written for its
arity and attribute types: it goes through the rows once, tests each value's type exactly
(``type(v) is str`` for a ``symbol``, ``int`` for a ``number``, a finite ``float`` for a
``float``, any of those for an untyped attribute) and builds the set of facts in the form the
relation stores (values for a unary relation, tuples otherwise) that the session keeps and
inserts as it is.

The functions only accept; they never explain. Anything they do not recognise at once — a name
that is not an input relation, rows that are not a list or tuple of lists or tuples, a value of
another type (a ``bool``, an ``int`` for a ``float`` attribute, a subclass of ``str``, a NaN),
an arity that differs, two facts that break a key (``.key``) of the relation — makes the
whole call fall back to
:func:`~policyc.runtime.facts.validate`, which accepts exactly what it accepted before and
otherwise raises the same :class:`~policyc.runtime.facts.FactsError`, naming the relation, the
row and the value. So what is accepted, what it becomes and every message stay those of the
general check.

Generated code only contains names it makes itself (``check_3`` for relation 3, ``v0`` for a
row's first value); nothing of the plan but arities, the four attribute types, which select
fixed fragments, and the keys' attribute positions (integers, checked when the plan is read)
reaches the source text.

>>> from policyc.compiler.plan import RelationSpec
>>> class Plan:  # just what the checks read of a plan
...     relations = (RelationSpec("Edge", ("symbol", "number"), input=True), RelationSpec("Seen", ("symbol",), input=True))
>>> checks = FactChecks(Plan())
>>> checked = checks({"Edge": [["a", 1], ("b", 2)], "Seen": [["a"]]})
>>> sorted(checked[0]), checked[1]
([('a', 1), ('b', 2)], {'a'})
>>> checks({"Edge": [["a", True]]}) is None, checks({"Other": []}) is None, checks([]) is None
(True, True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policyc.compiler import plan as p

Check = Callable[[Any], "set[Any] | None"]

# per attribute type: the test of value ``{v}``, true when it is already a policy value of the type
_TESTS: dict[str | None, str] = {
    "symbol": "type({v}) is str",
    "number": "type({v}) is int",
    "float": "type({v}) is float and {v} - {v} == 0.0",  # finite: inf - inf and NaN are NaN
    None: "(type({v}) is str or type({v}) is int or (type({v}) is float and {v} - {v} == 0.0))",
}


class FactChecks:
    """The generated checks of a plan's input relations. Called with facts as given to
    ``add_facts`` (names to rows), it returns the facts per relation index in the relations'
    stored form, or None when the general check must decide (and explain)."""

    def __init__(self, plan: p.Plan) -> None:
        self.by_name: dict[str, tuple[int, Check]] = {}
        self.source = ""
        lines: list[str] = []
        made: list[tuple[str, int]] = []
        for r, spec in enumerate(plan.relations):
            if not spec.input or spec.inline or any(t not in _TESTS for t in spec.types):
                continue  # no fast check: every call naming it goes to the general check
            lines.extend(_check_source(r, spec.types, spec.keys))
            made.append((spec.name, r))
        if not made:
            return
        self.source = "\n".join(lines) + "\n"
        namespace: dict[str, Any] = {}
        exec(compile(self.source, "<policyc fact checks>", "exec"), namespace)
        self.by_name = {name: (r, namespace[f"check_{r}"]) for name, r in made}

    def __call__(self, facts: Any) -> dict[int, set[Any]] | None:
        if type(facts) is not dict:
            return None
        by_name = self.by_name
        checked: dict[int, set[Any]] = {}
        try:
            for name, rows in facts.items():
                found = by_name.get(name)
                if found is None:
                    return None
                r, check = found
                got = check(rows)
                if got is None:
                    return None
                checked[r] = got
        except Exception:  # a key that fails to compare, say: the general check says what
            return None
        return checked


def _check_source(r: int, types: tuple[str | None, ...], keys: tuple[tuple[int, ...], ...] = ()) -> list[str]:
    """The source of ``check_<r>(rows)``: the rows as a new set in stored form, or None (also
    when two of them break one of ``keys``: as many distinct keys as facts, else the general
    check says which)."""
    arity = len(types)
    names = [f"v{i}" for i in range(arity)]
    lines = [
        f"def check_{r}(rows):",
        "    if type(rows) is not list and type(rows) is not tuple:",
        "        return None",
        "    out = set()",
        "    add = out.add",
        "    for row in rows:",
        "        kind = type(row)",
        f"        if kind is not list and kind is not tuple or len(row) != {arity}:",
        "            return None",
    ]
    if arity:
        lines.append(f"        {', '.join(names)}{',' if arity == 1 else ''} = row")
        tests = " and ".join(_TESTS[t].format(v=v) for v, t in zip(names, types, strict=True))
        lines.append(f"        if not ({tests}):")
        lines.append("            return None")
    stored = names[0] if arity == 1 else f"({', '.join(names)}{',' if arity == 1 else ''})"
    lines.append(f"        add({stored})")
    for key in keys:
        if not key:
            lines.append("    if len(out) > 1:")
        else:
            at = ", ".join(f"t[{int(i)}]" for i in key)
            lines.append(
                f"    if len({{{at if len(key) == 1 else '(' + at + ')'} for t in out}}) != len(out):"
            )
        lines.append("        return None")
    lines.append("    return out")
    return lines
