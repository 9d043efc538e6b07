"""`policyc witness`: the smallest database on which a query holds, replayed before it is shown.

The search (:mod:`~policyc.analyzer.search`) looks for a model of the policy, over domains with
``K`` fresh values per type, where the query's rule derives something, with as few input facts
(and uninterpreted functor entries) as possible. What it finds is evaluated again by policyc's
evaluator, and shown only if the evaluator derives the query too. When the search finds nothing
the answer is "none up to K" (``bounded``), unless the query's rule can be shown never to hold on
any database (``proved``: see :mod:`~policyc.analyzer.reach`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import asp
from .query import QUERY, AnalysisError, Loaded, ensure_clean, with_query
from .reach import never_holds
from .replay import evaluate, shown_tables
from .search import Problem


@dataclass
class Witness:
    query: str
    status: str  # "found" or "none"
    strength: str  # "proved" or "bounded"
    bound: int
    facts: dict[str, list[tuple]] = field(default_factory=dict)
    bindings: dict[str, Any] = field(default_factory=dict)
    functors: dict[str, list[tuple]] = field(default_factory=dict)  # uninterpreted tables used
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "status": self.status,
            "strength": self.strength,
            "bound": self.bound,
            "facts": {name: [list(row) for row in rows] for name, rows in sorted(self.facts.items())},
            "bindings": self.bindings,
            "functors": {name: [list(row) for row in rows] for name, rows in sorted(self.functors.items())},
            "reason": self.reason,
        }

    def text(self) -> str:
        if self.status == "none":
            if self.strength == "proved":
                return f"no database makes `{self.query}` true (proved: {self.reason})"
            return f"no database with up to {self.bound} fresh values per type makes `{self.query}` true (bounded search)"
        lines = [
            f"found: the query `{self.query}` holds on this database (bound {self.bound}; replayed through the evaluator)"
        ]
        if self.bindings:
            lines.append("  " + ", ".join(f"{k} = {render(v)}" for k, v in self.bindings.items()))
        lines.append("facts:")
        if not self.facts:
            lines.append("  (none)")
        for name, rows in sorted(self.facts.items()):
            lines.extend(f"  {name}({', '.join(render(v) for v in row)})." for row in rows)
        if self.functors:
            lines.append("uninterpreted functors (their values chosen by the search):")
            lines.extend(render_tables(self.functors))
        return "\n".join(lines)


def render_tables(tables: dict[str, list[tuple]]) -> list[str]:
    """Functor table rows as lines: ``f(args) = value``, or ``p(args)`` for a predicate that holds."""
    lines = []
    for name, rows in sorted(tables.items()):
        for row in rows:
            call = f"  {name}({', '.join(render(v) for v in row[:-1])})"
            lines.append(call if row[-1] is True else f"{call} = {render(row[-1])}")
    return lines


def render(value: Any) -> str:
    return (
        '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(value, str) else repr(value)
    )


def find_witness(loaded: Loaded, text: str, bound: int = 3, timeout: float = 60.0) -> Witness:
    compilation, query = with_query(loaded, text)
    ensure_clean(compilation, "the policy or the query")
    never = never_holds(compilation)
    if QUERY in never:
        return Witness(text, "none", "proved", bound, reason=never[QUERY])
    try:
        problem = Problem(compilation, bound)
        n = len(query.variables)
        goal_atom = f"p_{QUERY}({','.join(f'Q{i}' for i in range(n))})" if n else f"p_{QUERY}"
        goal = [f"policyc_goal :- {goal_atom}.", ":- not policyc_goal."]
        shown = {"goal": (f"p_{QUERY}", query.variables)}
        model = problem.solve(goal, shown, timeout)
    except asp.Untranslatable as error:
        raise AnalysisError(f"cannot search this policy: {error}") from None
    except TimeoutError as error:
        raise AnalysisError(str(error)) from None
    if model is None:
        return Witness(text, "none", "bounded", bound)
    result = evaluate(compilation, model, problem.tabled)
    derived = result.relation(QUERY)
    wanted = tuple(model.bindings.get(v) for v in query.variables)
    if result.errored or wanted not in derived:
        raise AnalysisError(
            "internal error: the evaluator does not confirm the search's witness "
            f"(derived {sorted(derived)[:3]}, errors {[e.message for e in result.errors][:2]}); please report it"
        )
    used = shown_tables(model.tables, compilation.symbols.functors)
    return Witness(text, "found", "bounded", bound, model.facts, dict(model.bindings), used)
