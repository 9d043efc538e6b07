"""Stratified semi-naive evaluation of a compiled plan.

Strata run in order. A stratum that is not recursive runs each of its rules once. A recursive
stratum runs its base rules once, then repeats rounds in which each delta variant reads the
facts the previous round added (the delta) until a round adds nothing: every derivation is
found once its last ingredient appears, and none is recomputed from old facts only.

Evaluation fails closed. A functor that raises or returns a value of the wrong type, a
division by zero, a rule whose code raises (a comparison between a string and a number that
came from an ``any`` functor), or a limit on the number of facts or the time spent: each is
recorded as an :class:`EvalError`, the failing literal does not hold, and the result is marked
errored, so every decision on it is a denial.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from policyc.compiler import plan as p

from . import codegen
from .codegen import FAIL
from .functors import wrap
from .relations import Relation


@dataclass(frozen=True)
class EvalError:
    kind: str  # functor | arithmetic | rule | limit | facts
    message: str


def causes(errors: Iterable[EvalError]) -> str:
    """What went wrong, each message once, in order."""
    return "; ".join(dict.fromkeys(e.message for e in errors))


@dataclass(frozen=True)
class Limits:
    """Bounds on one evaluation; exceeding one makes the result errored."""

    max_facts: int = 10_000_000
    max_seconds: float | None = 60.0

    def deadline(self) -> float | None:
        """When an evaluation starting now must stop (``time.monotonic``), if ever."""
        return None if self.max_seconds is None else time.monotonic() + self.max_seconds


class _LimitExceeded(Exception):
    pass


class CompiledPlan:
    """A plan with its rules compiled to Python functions, ready for many evaluations."""

    def __init__(self, plan: p.Plan) -> None:
        self.plan = plan
        self.strata: list[
            tuple[p.Stratum, list[tuple[p.RulePlan, Callable]], list[tuple[p.RulePlan, Callable]]]
        ] = []
        for n, stratum in enumerate(plan.strata):
            base = [(r, codegen.compile_rule(plan, r, f"s{n}_r{r.rule}")[1]) for r in stratum.rules]
            deltas = [(r, codegen.compile_rule(plan, r, f"s{n}_d{r.rule}")[1]) for r in stratum.delta_rules]
            self.strata.append((stratum, base, deltas))
        self.derived = {
            rule.head for stratum in plan.strata for rule in (*stratum.rules, *stratum.delta_rules)
        }
        self.bound: list[list[tuple[p.BoundRule, Callable]]] = [
            [(b, codegen.compile_bound_rule(plan, b, f"m{r}_{b.rule}")[1]) for b in rules]
            for r, rules in enumerate(plan.bound_rules)
        ]


class Evaluation:
    """The state of one evaluation: relations, functor wrappers, inline relations, errors."""

    def __init__(self, compiled: CompiledPlan, functors: list[Callable[..., Any]], limits: Limits) -> None:
        plan = compiled.plan
        self.compiled = compiled
        self.plan = plan
        self.index = plan.relation_index()
        self.functors = functors
        self.limits = limits
        self.inputs: dict[int, set[tuple]] = {}
        self.errors: list[EvalError] = []
        self.relations = [Relation(spec.arity) for spec in plan.relations]
        self.memos: list[dict] = []
        self.F = [wrap(spec, fn, self.errors) for spec, fn in zip(plan.functors, functors, strict=True)]
        self.I: dict[int, Callable[..., Any]] = {
            r: self._inline(r) for r, spec in enumerate(plan.relations) if spec.inline
        }
        self.ranks: dict[int, dict[tuple, int]] | None = None
        self.facts = 0
        self.kept: dict[int, Callable[[], Relation]] = {}  # relations held otherwise than as sets

    def keep(self, relation: int, make: Callable[[], Relation]) -> None:
        """Hold ``relation`` in what ``make`` returns (a session's implicit ``DependsOn``),
        here and in every :meth:`fresh` copy."""
        self.kept[relation] = make
        self.relations[relation] = make()

    def fresh(self) -> Evaluation:
        """A new evaluation of the same plan, functors, limits and kept relations."""
        again = Evaluation(self.compiled, self.functors, self.limits)
        for relation, make in self.kept.items():
            again.keep(relation, make)
        return again

    def E(self, op: str) -> Any:
        self.errors.append(EvalError("arithmetic", "division by zero" if op == "/" else "modulo by zero"))
        return FAIL

    @property
    def errored(self) -> bool:
        return bool(self.errors)

    # the questions verdicts ask (a monitor session answers them too)

    def holds(self, relation: int, values: tuple) -> bool:
        if self.plan.relations[relation].inline:
            return self.I[relation](*values) is True
        return self.relations[relation].contains(values)

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[p.BoundRule, tuple, tuple]]:
        """Every binding of every rule of the relation whose head takes these values."""
        for bound, match in self.compiled.bound[relation]:
            for slots, matched in match(self.relations, self.F, self.I, self.E, None, *values):
                yield bound, slots, matched

    def explanation(self) -> Evaluation:
        return self

    def forget(self) -> None:
        """Drop what inline relations remembered (the facts they read have changed)."""
        for memo in self.memos:
            memo.clear()

    def _inline(self, relation: int) -> Callable[..., Any]:
        rules = self.compiled.bound[relation]
        memo: dict[tuple, Any] = {}
        self.memos.append(memo)

        def holds(*values: Any) -> Any:
            try:
                return memo[values]
            except KeyError:
                pass
            found: Any = False
            try:
                for _, match in rules:
                    for _ in match(self.relations, self.F, self.I, self.E, None, *values):
                        found = True
                        break
                    if found:
                        break
            except Exception as error:
                self.errors.append(
                    EvalError(
                        "rule",
                        f"inline relation `{self.plan.relations[relation].name}` "
                        f"failed: {type(error).__name__}: {error}",
                    )
                )
                found = FAIL
            memo[values] = found
            return found

        return holds

    # ---------------------------------------------------------------------- running

    def load(self, facts: dict[int, set[tuple]]) -> None:
        self.inputs = facts
        derived = self.compiled.derived
        for r, tuples in facts.items():
            relation = self.relations[r]
            if (
                type(relation) is Relation
                and relation.arity != 1
                and r not in derived
                and not relation.tuples
            ):
                relation.tuples = tuples  # only read from now on: shared with `inputs`, not copied
            else:
                relation.add_all(relation.store(tuples))
            self.facts += len(tuples)

    def run(self, track_ranks: bool = False) -> None:
        """Evaluate every stratum (ranks: the round each recursive fact appeared in)."""
        if track_ranks:
            self.ranks = {}
        deadline = self.limits.deadline()
        try:
            for stratum, base, deltas in self.compiled.strata:
                self._stratum(stratum, base, deltas, deadline)
        except _LimitExceeded as limit:
            self.errors.append(EvalError("limit", str(limit)))

    def _call(self, rule: p.RulePlan, fn: Callable, deltas: Any, out: set) -> None:
        try:
            fn(self.relations, deltas, out, self.F, self.I, self.E)
        except Exception as error:
            info = self.plan.rules[rule.rule]
            self.errors.append(EvalError("rule", f"rule `{info.id}` failed: {type(error).__name__}: {error}"))

    def _merge(self, relation: int, new: set, deadline: float | None) -> set:
        added = self.relations[relation].add_all(new)
        self.facts += len(added)
        if self.facts > self.limits.max_facts:
            raise _LimitExceeded(f"more than {self.limits.max_facts:,} facts; evaluation stopped")
        if deadline is not None and time.monotonic() > deadline:
            raise _LimitExceeded(f"evaluation took longer than {self.limits.max_seconds} s; stopped")
        return added

    def _stratum(self, stratum: p.Stratum, base: list, deltas: list, deadline: float | None) -> None:
        if not stratum.recursive:
            for rule, fn in base:
                out: set[tuple] = set()
                self._call(rule, fn, None, out)
                self._merge(rule.head, out, deadline)
            return
        members = stratum.relations
        news: dict[int, set[tuple]] = {r: set() for r in members}
        for rule, fn in base:
            self._call(rule, fn, None, news[rule.head])
        for r in members:
            self._merge(r, news[r], deadline)
        # the first delta is everything the stratum holds so far (inputs included)
        delta = {r: Relation.owning(self.relations[r].arity, set(self.relations[r].tuples)) for r in members}
        round_number = 0
        if self.ranks is not None:
            for r in members:
                self.ranks.setdefault(r, {}).update(dict.fromkeys(self.relations[r].as_tuples(), 0))
        while any(delta[r].tuples for r in members):
            round_number += 1
            news = {r: set() for r in members}
            for rule, fn in deltas:
                if delta[_delta_relation(rule)].tuples:
                    self._call(rule, fn, delta, news[rule.head])
            delta = {
                r: Relation.owning(self.relations[r].arity, self._merge(r, news[r], deadline))
                for r in members
            }
            if self.ranks is not None:
                for r in members:
                    self.ranks[r].update(dict.fromkeys(delta[r].as_tuples(), round_number))


def _delta_relation(rule: p.RulePlan) -> int:
    for step in rule.steps:
        if isinstance(step, p.Scan) and step.source == "delta":
            return step.relation
    raise AssertionError("a delta rule scans a delta")
