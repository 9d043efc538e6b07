"""Abstracting a monitor session into the truth values of chosen policy predicates.

A **step** is the session after one more event (and, before any event, the session as it
starts). At each step every predicate is evaluated over the facts of the session so far: a
predicate ``P`` holds when relation ``P`` has a fact, ``P(_, "x")`` when some fact matches. At a
step whose event is a tool call, ``Candidate`` holds for that call (it is the action under
decision), as it does when the monitor decides it; at any other step ``Candidate`` is empty.

How a relation is read:

* a relation the session **maintains** (it only grows: see :mod:`policyc.runtime.session`) is
  read where the session keeps it, with an index lookup for a pattern with constants: the cost
  does not depend on the length of the session;
* any other relation (one using negation or aggregates over facts that still grow, or
  ``Candidate``) is **kept** for the session from the step's changes, facts added and removed
  (:mod:`policyc.runtime.volatile`): a step costs what it changed, not the length of the session.

The facts behind a predicate that holds (the evidence of a warning) are the latest to come.

Whether a predicate is *monotone* (can never turn false again) is a separate question, answered
from the policy by :mod:`.monotone`.
"""

from __future__ import annotations

import difflib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policyc.compiler import plan as p
from policyc.runtime.evaluator import Evaluation, causes
from policyc.runtime.facts import FactsError, convert
from policyc.runtime.relations import Relation
from policyc.runtime.values import render_fact
from policyc.runtime.volatile import Keeper, Tracker

from .errors import ForecastError
from .monotone import CANDIDATE, derive, rules_of
from .patterns import WILDCARD, Predicate


@dataclass(frozen=True)
class Resolved:
    """A predicate bound to a relation of the policy, with what the policy says of it."""

    predicate: Predicate
    relation: int
    monotone: bool
    why: str  # the derivation of (non-)monotonicity, in words
    maintained: bool  # read where the session keeps it (otherwise computed for each step)


@dataclass(frozen=True)
class Observation:
    """A step abstracted: the value of each predicate, and of the unsafe predicate."""

    values: tuple[bool, ...]
    unsafe: bool


class Abstraction:
    """The predicates and the unsafe predicate of a forecast, resolved against a monitor's policy."""

    def __init__(self, monitor: Any, predicates: list[Predicate], unsafe: Predicate) -> None:
        names = [pr.name for pr in predicates]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ForecastError(f"predicate `{duplicates[0]}` is given twice; give each predicate once")
        if not predicates:
            raise ForecastError("no predicates given")
        self.monitor = monitor
        prepared = monitor.prepared
        self.plan: p.Plan = prepared.plan
        self.derivations = derive(self.plan)
        self.predicates = tuple(self._resolve(pr) for pr in predicates)
        self.unsafe = self._resolve(unsafe)
        computed = {r.relation for r in (*self.predicates, self.unsafe) if not r.maintained}
        self.needed = self._closure(computed)
        self.keeper = Keeper(prepared, self.needed)
        self._trackers: weakref.WeakKeyDictionary[Any, Tracker] = weakref.WeakKeyDictionary()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.predicate.name for r in self.predicates)

    @property
    def monotone(self) -> tuple[bool, ...]:
        return tuple(r.monotone for r in self.predicates)

    # ------------------------------------------------------------------------- resolving

    def _resolve(self, predicate: Predicate) -> Resolved:
        plan = self.plan
        index = plan.relation_index()
        name = predicate.relation
        if name not in index:
            close = difflib.get_close_matches(name, list(index), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ForecastError(f"predicate `{predicate}`: the policy has no relation `{name}`{hint}")
        r = index[name]
        spec = plan.relations[r]
        if spec.inline:
            raise ForecastError(
                f"predicate `{predicate}`: `{name}` is an inline relation, which is not stored; "
                "use a relation without `inline`"
            )
        if predicate.args is not None:
            if len(predicate.args) != spec.arity:
                raise ForecastError(
                    f"predicate `{predicate}`: `{name}` has {spec.arity} argument{'s' * (spec.arity != 1)}, "
                    f"the pattern gives {len(predicate.args)}"
                )
            for position, (value, kind) in enumerate(zip(predicate.args, spec.types, strict=True), 1):
                if value is not WILDCARD:
                    try:
                        convert(value, kind, f"predicate `{predicate}`: argument {position} of `{name}`")
                    except FactsError as error:
                        raise ForecastError(str(error)) from None
        maintained = self._maintained(r)
        if spec.input and not maintained and r not in self.monitor.prepared.seeded and name != CANDIDATE:
            raise ForecastError(
                f"predicate `{predicate}`: no rule of the policy reads the input relation `{name}`, so a "
                "session does not keep its facts; derive a relation from it in the policy and use that"
            )
        derivation = self.derivations[name]
        return Resolved(predicate, r, derivation.monotone, derivation.why, maintained)

    def _closure(self, targets: set[int]) -> set[int]:
        """The relations to compute for the targets: everything they read that the session does
        not maintain."""
        read_by = {
            r: {read for _, steps in rules for read, _ in p.reads(steps)}
            for r, rules in rules_of(self.plan).items()
        }
        needed: set[int] = set()
        todo = list(targets)
        while todo:
            r = todo.pop()
            if r in needed or self._maintained(r):
                continue
            needed.add(r)
            todo.extend(read_by[r])
        return needed

    def _maintained(self, r: int) -> bool:
        """Whether the session keeps relation ``r`` up to date as events arrive."""
        prepared = self.monitor.prepared
        return r in prepared.incremental and (not self.plan.relations[r].input or r in prepared.stored)

    # ------------------------------------------------------------------------ evaluating

    def observe(self, session: Any) -> Observation:
        """The predicates' values at the session's current step (:class:`ForecastError` when the
        session failed, or computing a predicate did)."""
        return self.evaluate(self.facts(session))

    def evaluate(self, facts: list[Relation]) -> Observation:
        values = tuple(_holds(facts[r.relation], r.predicate) for r in self.predicates)
        return Observation(values, _holds(facts[self.unsafe.relation], self.unsafe.predicate))

    def witnesses(self, session: Any, limit: int = 3) -> dict[str, list[str]]:
        """For each predicate that holds at the session's step (as :meth:`facts` last found it),
        the latest ``limit`` facts that make it hold, in the order they came."""
        tracker = self._trackers[session]
        found: dict[str, list[str]] = {}
        for resolved in self.predicates:
            rows = list(_matching(tracker.latest(resolved.relation), resolved.predicate, limit))[::-1]
            if rows:
                name = self.plan.relations[resolved.relation].name
                found[resolved.predicate.name] = [render_fact(name, row) for row in rows]
        return found

    def facts(self, session: Any) -> list[Relation]:
        """The session's relations, with the ones the predicates need brought up to date for
        this step (by what the step changed: :mod:`policyc.runtime.volatile`)."""
        _check(session)
        tracker = self._trackers.get(session)
        if tracker is None:
            shown = {r.relation for r in self.predicates}
            tracker = self._trackers[session] = self.keeper.track(session, shown)
        try:
            facts = tracker.step(current_action(session))
        except Exception as error:  # a limit, or a rule's code raising while checking a fact
            tracker.reset()
            raise ForecastError(f"computing the predicates failed: {error}") from None
        if tracker.errors:
            message = causes(tracker.errors)
            tracker.reset()
            raise ForecastError(f"computing the predicates failed: {message}")
        return facts

    def computed(self, session: Any) -> list[Relation]:
        """The same relations computed whole from the session's maintained ones (what
        :meth:`facts` keeps up to date step by step; the test suite compares the two)."""
        _check(session)
        scratch = Evaluation(self.monitor.prepared.compiled, session.functors, session.monitor.limits)
        try:
            facts = self.keeper.compute(session, current_action(session), scratch)
        except Exception as error:  # a limit
            raise ForecastError(f"computing the predicates failed: {error}") from None
        if scratch.errors:
            raise ForecastError(f"computing the predicates failed: {causes(scratch.errors)}")
        return facts


def _check(session: Any) -> None:
    if session.sticky:
        raise ForecastError(f"the session failed, so its predicates are unknown: {causes(session.sticky)}")


def current_action(session: Any) -> Any:
    """The tool call the session's last event is, if it is one (the action under decision)."""
    if not session.order:
        return None
    last = session.order[-1]
    return last if session.events[last].get("kind") == "tool_call" else None


def _holds(relation: Relation, predicate: Predicate) -> bool:
    args = predicate.args
    if not relation.tuples:
        return False
    if args is None or all(a is WILDCARD for a in args):
        return True
    positions = tuple(i for i, a in enumerate(args) if a is not WILDCARD)
    if len(positions) == len(args):
        return relation.contains(args)
    key = args[positions[0]] if len(positions) == 1 else tuple(args[i] for i in positions)
    return any(predicate.matches(row) for row in relation.select(positions, key))


def _matching(rows: Iterator[tuple], predicate: Predicate, limit: int) -> Iterator[tuple]:
    found = 0
    for row in rows:
        if predicate.matches(row):
            yield row
            found += 1
            if found >= limit:
                return


def fingerprint(plan: p.Plan) -> str:
    """A hash of what the policy computes — its relations, functors and rules by name and text,
    not where the rules are written or the order the compiler numbered them in, nor how it is
    evaluated (the magic relations and rules of demand-driven relations are left out) — so a
    model is only used with the policy it was learned with."""
    import hashlib
    import json

    from policyc.compiler.magic import is_magic

    def rule_id(info: p.RuleInfo) -> str:
        return "" if info.id.startswith(f"{info.head}@") else info.id  # an id made from its place

    data = {
        "default": plan.default,
        "relations": sorted(
            [r.name, list(r.types), r.input, r.output, r.inline]
            for r in plan.relations
            if not is_magic(r.name)
        ),
        "functors": sorted([f.name, list(f.params), f.returns] for f in plan.functors),
        "rules": sorted(
            [i.head, i.text, rule_id(i), i.message or "", i.suggest or "", i.severity or ""]
            for i in plan.rules
            if not is_magic(i.head)
        ),
    }
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
