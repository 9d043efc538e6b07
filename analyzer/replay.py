"""Replaying what a search found through the real evaluator.

A witness is only shown once policyc's own evaluator, given the witness's facts, derives what
the search claimed: the translation and the search are checked on every answer they give. The
functors answer from the witness: a tabled functor from its table (no entry: no value), the
event functors from the event facts (``tool_arg`` with each argument's JSON type: the number,
for the arguments the witness makes numbers), the builtins as always.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from policyc.compiler.stages import Stratified

from .search import Model


def implementations(
    compilation: Stratified, model: Model, tabled: frozenset[str]
) -> dict[str, Callable[..., Any]]:
    """Functor implementations answering from a model."""
    found: dict[str, Callable[..., Any]] = {}
    functors = compilation.symbols.functors
    for name in tabled:
        found[name] = table_function(model.tables.get(name, []), functors[name].is_predicate)
    facts = model.facts
    calls = {a: t for a, t in facts.get("ToolCall", [])}
    args = model.arguments()
    texts = {e: t for e, t in facts.get("Text", [])}
    if "is_tool" in functors:
        found.setdefault("is_tool", lambda a, name: calls.get(a) == name)
    if "tool_name" in functors:
        found.setdefault("tool_name", lambda a: calls.get(a))
    if "tool_arg" in functors:
        found.setdefault("tool_arg", lambda a, key: args.get((a, key)))
    if "text_of" in functors:
        found.setdefault("text_of", lambda e: texts.get(e, ""))
    return found


def table_function(rows: Iterable[Sequence[Any]], predicate: bool) -> Callable[..., Any]:
    """A functor answering from its table: a predicate's rows are the argument tuples it holds
    for; a function's, ``(args..., value)`` (no row: no value)."""
    if predicate:
        truths = {tuple(row) for row in rows}
        return lambda *args: tuple(args) in truths
    values = {tuple(row[:-1]): row[-1] for row in rows}
    return lambda *args: values.get(tuple(args))


def evaluate(compilation: Stratified, model: Model, tabled: frozenset[str]) -> Any:
    """The evaluator's result on a model's facts (a ``Result``)."""
    from policyc.runtime.opener import from_compilation

    policy = from_compilation(compilation, implementations(compilation, model, tabled))
    facts = {name: [list(row) for row in rows] for name, rows in model.facts.items()}
    return policy.evaluate(json.loads(json.dumps(facts)))


def shown_tables(tables: dict[str, list[tuple]], signatures: dict[str, Any]) -> dict[str, list[tuple]]:
    """A model's non-empty functor tables as shown to users: ``(args..., value)`` rows, a
    predicate's rows ending in ``True``."""
    shown = {}
    for name, rows in tables.items():
        if rows:
            predicate = signatures[name].is_predicate
            shown[name] = [(*row, True) if predicate else row for row in rows]
    return shown
