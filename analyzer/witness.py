"""`policyc witness`: the smallest database on which a query holds, replayed before it is shown.

The search (:mod:`~policyc.analyzer.search`) looks for a model of the policy, over domains with
``K`` fresh values per type, where the query's rule derives something, with as few input facts
(and uninterpreted functor entries) as possible. What it finds is evaluated again by policyc's
evaluator, and shown only if the evaluator derives the query too. When the search finds nothing
the answer is "none up to K" (``bounded``), unless the query's rule can be shown never to hold on
any database (``proved``: see :mod:`~policyc.analyzer.reach`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Parsed, Stratified

from . import asp
from .deadline import within
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
    numbers: list[tuple] = field(default_factory=list)  # tool arguments that are JSON numbers

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
            "numbers": [list(row) for row in self.numbers],
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
        lines.extend(render_numbers(self.numbers))
        return "\n".join(lines)


def render_tables(tables: dict[str, list[tuple]]) -> list[str]:
    """Functor table rows as lines: ``f(args) = value``, or ``p(args)`` for a predicate that holds."""
    lines = []
    for name, rows in sorted(tables.items()):
        for row in rows:
            call = f"  {name}({', '.join(render(v) for v in row[:-1])})"
            lines.append(call if row[-1] is True else f"{call} = {render(row[-1])}")
    return lines


def render_numbers(numbers: list[tuple]) -> list[str]:
    """The tool arguments that are JSON numbers, as lines (none: no lines)."""
    if not numbers:
        return []
    lines = ["tool arguments that are JSON numbers (`tool_arg` gives the number, `ToolArg` its text):"]
    lines.extend(f"  tool_arg({render(a)}, {render(k)}) = {n}" for a, k, n in numbers)
    return lines


def render(value: Any) -> str:
    return (
        '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(value, str) else repr(value)
    )


def find_witness(loaded: Loaded, text: str, bound: int = 3, timeout: float = 60.0) -> Witness:
    compiled, query = with_query(loaded, text)
    compilation = ensure_clean(compiled, "the policy or the query")
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
    found = _confirmed(compilation, problem, QUERY, query.variables, model, bound, text)
    if isinstance(found, AnalysisError):
        raise found
    return found


def find_witnesses(
    compilation: Parsed, goals: Sequence[Sequence[str]], bound: int = 3, timeout: float = 60.0
) -> list[Witness | AnalysisError | None]:
    """Witnesses for many questions about one checked policy, over one grounding.

    Each goal names relations of the policy to try in order; its answer is the witness of the
    first that holds on some database within the bound (``none`` when none does), an
    :class:`AnalysisError` when the evaluator does not confirm what the search found, or
    ``None`` when the goal was not answered within ``timeout`` (grounding and every search
    together). A policy the search cannot translate raises :class:`AnalysisError`.
    """
    return WitnessSearch(compilation, goals, bound).run(timeout)


class WitnessSearch:
    """:func:`find_witnesses` in two steps: what must happen in this process (the proofs that
    a relation never holds use z3, which must not run in two threads at once), then
    :meth:`run`, whose search runs in a child process and may run beside other searches."""

    def __init__(self, compilation: Parsed, goals: Sequence[Sequence[str]], bound: int = 3) -> None:
        self.compilation = ensure_clean(compilation, "the policy")
        self.goals = goals
        self.bound = bound
        self.never = never_holds(self.compilation)
        names = list(dict.fromkeys(name for goal in goals for name in goal))
        self.variables = {name: _head_variables(self.compilation, name) for name in names}
        try:
            self.problem = Problem(self.compilation, bound)
            switches, lines = [], []
            for n, name in enumerate(names):
                xs = ",".join(f"X{i}" for i in range(len(self.variables[name])))
                switches.append(f"#external policyc_want({n}). [free]")
                lines += [
                    f"policyc_goal({n}) :- {asp.predicate_name(name)}({xs})."
                    if xs
                    else f"policyc_goal({n}) :- {asp.predicate_name(name)}.",
                    f":- policyc_want({n}), not policyc_goal({n}).",
                ]
            self.text = "\n".join(switches) + "\n" + self.problem.program() + "\n".join(lines) + "\n"
        except asp.Untranslatable as error:
            raise AnalysisError(f"cannot search this policy: {error}") from None
        self.plan = [[(names.index(name), name) for name in goal] for goal in goals]

    def run(self, timeout: float) -> list[Witness | AnalysisError | None]:
        deadline = time.monotonic() + timeout
        problem, variables = self.problem, self.variables
        try:
            found = within(
                timeout, lambda: _search_each(problem, self.text, self.plan, variables, self.never, deadline)
            )
        except (TimeoutError, RuntimeError):
            return [None] * len(self.goals)
        answers: list[Witness | AnalysisError | None] = []
        for result in found:
            if result is None or isinstance(result, Witness):
                answers.append(result)
                continue
            name, model = result
            answers.append(_confirmed(self.compilation, problem, name, variables[name], model, self.bound))
        return answers


def _head_variables(compilation: Stratified, name: str) -> tuple[str, ...]:
    rules = compilation.program.rules_of(name)
    if not rules:
        raise AnalysisError(f"the policy has no rule for `{name}`")
    args = rules[0].head.args
    names = [a.name for a in args if isinstance(a, ast.Var)]
    if len(names) == len(args) and len(set(names)) == len(names):
        return tuple(names)
    return tuple(f"x{i + 1}" for i in range(len(args)))


def _search_each(
    problem: Problem,
    text: str,
    plan: list[list[tuple[int, str]]],
    variables: dict[str, tuple[str, ...]],
    never: dict[str, str],
    deadline: float,
) -> list[Any]:
    """For each goal: ``(name, model)`` of the first of its relations with a model, a
    ``Witness`` saying there is none, or ``None`` when time ran out."""
    import clingo

    control = clingo.Control(["--warn=none", "--opt-mode=opt", "--opt-strategy=usc"])
    control.add("base", [], text)
    control.ground([("base", [])], context=asp.ground_context(problem.compilation))
    wanted = [clingo.Function("policyc_want", [clingo.Number(n)]) for n in range(len(variables))]
    results: list[Any] = []
    for k, goal in enumerate(plan):
        answer: Any = None
        reasons = [never[name] for _, name in goal if name in never]
        for n, name in goal:
            left = deadline - time.monotonic()
            if name in never or left <= 0:
                continue
            best: list[Any] = []
            assumptions = [(atom, i == n) for i, atom in enumerate(wanted)]

            def keep(model: clingo.Model, best: list[Any] = best) -> None:
                best[:] = model.symbols(atoms=True)

            with control.solve(assumptions=assumptions, on_model=keep, async_=True) as handle:
                finished = handle.wait(left / (len(plan) - k))
                if not finished:
                    handle.cancel()
                result = handle.get()
            if best:
                answer = (
                    name,
                    problem.read_model(best, 0, {"goal": (asp.predicate_name(name), variables[name])}),
                )
                break
            if not finished or not (result.unsatisfiable or result.exhausted):
                answer = None  # not answered in time
                break
            answer = "none"
        if answer == "none" or (answer is None and len(reasons) == len(goal)):
            proved = len(reasons) == len(goal)
            answer = Witness(
                " or ".join(name for _, name in goal),
                "none",
                "proved" if proved else "bounded",
                problem.bound,
                reason="; ".join(reasons) if proved else "",
            )
        results.append(answer)
    return results


def _confirmed(
    compilation: Stratified,
    problem: Problem,
    name: str,
    variables: Sequence[str],
    model: Any,
    bound: int,
    query: str | None = None,
) -> Witness | AnalysisError:
    """The witness of ``name`` a model is, once the evaluator derives it from the model's facts
    (an :class:`AnalysisError` when it does not: the search and the evaluator disagree)."""
    result = evaluate(compilation, model, problem.tabled)
    derived = result.relation(name)
    wanted = tuple(model.bindings.get(v) for v in variables)
    if result.errored or wanted not in derived:
        return AnalysisError(
            "internal error: the evaluator does not confirm the search's witness "
            f"(derived {sorted(derived, key=repr)[:3]}, errors {[e.message for e in result.errors][:2]}); please report it"
        )
    used = shown_tables(model.tables, compilation.symbols.functors)
    if query is None:
        query = f"{name}({', '.join(variables)})" if variables else name
    return Witness(
        query, "found", "bounded", bound, model.facts, dict(model.bindings), used, numbers=model.numbers
    )
