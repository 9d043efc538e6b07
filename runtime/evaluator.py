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

Limits are checked as the rules' code runs, not only between rules (:mod:`.limits`): a limit
hit stops the evaluation wherever it is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, cast

from policyc.compiler import plan as p

from . import codegen
from .codegen import FAIL
from .errors import EvalError, causes
from .functors import wrap
from .limits import LimitExceeded, Limits, Meter
from .relations import Relation

__all__ = ["CompiledPlan", "CompiledRule", "EvalError", "Evaluation", "LimitExceeded", "Limits", "causes"]

CompiledRule = tuple[p.RulePlan, Callable[..., None]]
"""A rule's plan and the function :func:`.codegen.compile_rule` made of it."""


ARITHMETIC_ERRORS = {
    "/": "division by zero",
    "%": "modulo by zero",
    "^": "a power with no value (0 to a negative power, a result too large, or no real value)",
    "bshl": "a shift left by a negative count or a result too large",
    "bshr": "a shift by a negative count",
    "bshru": "a shift by a negative count",
}


class CompiledPlan:
    """A plan with its rules compiled to Python functions, ready for many evaluations."""

    def __init__(self, plan: p.Plan) -> None:
        self.plan = plan
        self.strata: list[tuple[p.Stratum, list[CompiledRule], list[CompiledRule]]] = []
        reads: set[tuple[int, tuple[int, ...] | None]] = set()
        for n, stratum in enumerate(plan.strata):
            base = [(r, codegen.compile_rule(plan, r, f"s{n}_r{r.rule}", reads)[1]) for r in stratum.rules]
            deltas = [
                (r, codegen.compile_rule(plan, r, f"s{n}_d{r.rule}", reads)[1]) for r in stratum.delta_rules
            ]
            self.strata.append((stratum, base, deltas))
        # per relation, its subsumption rules (each derives a dominated and a dominating tuple)
        self.subsumers: dict[int, list[CompiledRule]] = {}
        for n, stratum in enumerate(plan.strata):
            for r in stratum.subsumptions:
                fn = codegen.compile_rule(plan, r, f"s{n}_s{r.rule}", reads)[1]
                self.subsumers.setdefault(r.head, []).append((r, fn))
        self.derived = {
            rule.head for stratum in plan.strata for rule in (*stratum.rules, *stratum.delta_rules)
        }
        indexes: dict[int, set[tuple[int, ...]]] = {}
        scanned: set[int] = set()
        for relation, positions in reads:
            if positions is None:
                scanned.add(relation)
            else:
                indexes.setdefault(relation, set()).add(positions)
        # input relations the rules read through one index only (an event graph's DependsOn):
        # an evaluation builds that index from the rows given, and their set of facts only if
        # something else asks for it (Relation.from_rows)
        self.index_only: dict[int, tuple[int, ...]] = {
            r: next(iter(found))
            for r, found in indexes.items()
            if len(found) == 1
            and r not in scanned
            and plan.relations[r].input
            and plan.relations[r].arity > 1
            and r not in self.derived
        }
        self.bound: list[list[tuple[p.BoundRule, Callable]]] = [
            [(b, codegen.compile_bound_rule(plan, b, f"m{r}_{b.rule}")[1]) for b in rules]
            for r, rules in enumerate(plan.bound_rules)
        ]


class Evaluation:
    """The state of one evaluation: relations, functor wrappers, inline relations, errors.

    What sessions, the volatile keeper and explanations use of it is listed in
    docs/runtime.md ("The evaluator's interface"); the rest is private."""

    def __init__(self, compiled: CompiledPlan, functors: list[Callable[..., Any]], limits: Limits) -> None:
        plan = compiled.plan
        self.compiled = compiled
        self.plan = plan
        self.index = plan.relation_index()
        self.functors = functors
        self.limits = limits
        self.inputs: Mapping[int, Collection[Any]] = {}
        self.errors: list[EvalError] = []
        self.relations = [Relation(spec.arity) for spec in plan.relations]
        self.memos: list[dict] = []
        self.facts = 0
        # what generated code reports to: arithmetic errors, and the limits, checked as it runs
        self.E = Meter(limits, self._count, self._arithmetic, bool(plan.functors))
        # the round of the recursion being evaluated (0 outside one): `recursive_iteration_cnt()`
        self.round = 0
        self.F = [wrap(spec, fn, self.errors, self) for spec, fn in zip(plan.functors, functors, strict=True)]
        self.I: dict[int, Callable[..., Any]] = {
            r: self._inline(r) for r, spec in enumerate(plan.relations) if spec.inline
        }
        self.ranks: dict[int, dict[tuple, int]] | None = None
        self.kept: dict[int, Callable[[], Relation]] = {}  # relations held otherwise than as sets
        # per relation with a choice domain: how many facts it held and the keys of each domain
        self.keys: dict[int, tuple[int, list[set[tuple]]]] = {}

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

    def _arithmetic(self, op: str) -> Any:
        """An expression that has no value: ``/`` or ``%`` by zero, a power or shift with no
        value, else what is wrong (a ``range`` over too many values, or over something else
        than numbers)."""
        self.errors.append(EvalError("arithmetic", ARITHMETIC_ERRORS.get(op, op)))
        return FAIL

    def _count(self) -> int:
        return self.facts

    @property
    def errored(self) -> bool:
        return bool(self.errors)

    # the questions verdicts ask (a monitor session answers them too)

    def holds(self, relation: int, values: tuple) -> bool:
        """Whether a fact holds (an inline relation's, computed within the limits: a limit
        hit is an error, and the fact does not hold)."""
        if not self.plan.relations[relation].inline:
            return self.relations[relation].contains(values)
        opened = self.E.start(what="decision")
        try:
            return self.I[relation](*values) is True
        except LimitExceeded as limit:
            self.errors.append(EvalError("limit", str(limit)))
            return False
        finally:
            if opened:
                self.E.stop()

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[p.BoundRule, tuple, tuple]]:
        """Every binding of every rule of the relation whose head takes these values (each
        found within the limits: a limit hit is an error, and the bindings stop)."""
        meter = self.E
        for bound, match in self.compiled.bound[relation]:
            found = match(self.relations, self.F, self.I, meter, None, *values)
            while True:
                opened = meter.start(what="decision")  # not across a yield: the caller runs then
                try:
                    slots, matched = next(found)
                except StopIteration:
                    break
                except LimitExceeded as limit:
                    self.errors.append(EvalError("limit", str(limit)))
                    return
                finally:
                    if opened:
                        meter.stop()
                yield bound, slots, matched

    def explanation(self) -> Evaluation:
        """What explanations walk: this evaluation (a session makes one from its events)."""
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
            except LimitExceeded:
                raise  # the evaluation stops: nothing is remembered
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

    def load(self, facts: Mapping[int, Collection[Any]]) -> None:
        """Add input facts (per relation, a set of tuples or a dict whose keys are the facts in
        the order given, as :func:`.facts.validate` makes them; for a relation of
        :attr:`CompiledPlan.index_only`, a list or tuple of checked rows)."""
        self.inputs = dict(facts)
        derived = self.compiled.derived
        index_only = self.compiled.index_only
        for r, tuples in facts.items():
            relation = self.relations[r]
            untouched = (
                type(relation) is Relation
                and r not in derived
                and not relation.tuples
                and not relation.fillers
            )
            if isinstance(tuples, list | tuple) and untouched and r in index_only:
                # the rows' values go into the index now: the rows themselves are not kept
                relation = self.relations[r] = Relation.from_rows(relation.arity, tuples, index_only[r])
                self.inputs[r] = relation
            elif isinstance(tuples, list | tuple):  # rows, but the relation is held otherwise
                facts_of = self.inputs[r] = set(map(tuple, tuples))
                relation.add_all(relation.store(facts_of))
            elif untouched and relation.arity == 1:
                relation.tuples = relation.store(tuples)
            elif untouched and isinstance(tuples, set | dict):
                # only read from now on: shared with `inputs`, not copied (a change copies it;
                # a dict's keys are read like a set's members)
                relation.tuples = cast(set, tuples)
            else:
                relation.add_all(relation.store(tuples))
            self.facts += len(tuples)

    def run(self, track_ranks: bool = False) -> None:
        """Evaluate every stratum (ranks: the round each recursive fact appeared in)."""
        if track_ranks:
            self.ranks = {}
        opened = self.E.start()
        try:
            for stratum, base, deltas in self.compiled.strata:
                self.run_stratum(stratum, base, deltas)
        except LimitExceeded as limit:
            self.errors.append(EvalError("limit", str(limit)))
        finally:
            if opened:
                self.E.stop()

    # ------------------------------------------- the interface to sessions (docs/runtime.md)

    def run_stratum(
        self,
        stratum: p.Stratum,
        base: list[CompiledRule],
        deltas: list[CompiledRule],
        deadline: float | None = None,
    ) -> None:
        """Evaluate one stratum over the facts the relations hold now, adding what it derives:
        its ``base`` rules once, then, if it is recursive, rounds of its ``deltas`` until a
        round adds nothing (the rules as :attr:`CompiledPlan.strata` gives them, or variants
        of them). Within the window open on the meter, else in one of its own ending at
        ``deadline`` (by default the time limit from now). A rule whose code raises is an
        error of the evaluation (:meth:`call_rule`); a limit hit raises :class:`LimitExceeded`.

        >>> from policyc.compiler.pipeline import compile_source, plan
        >>> compiled = CompiledPlan(plan(compile_source('''
        ... .input Edge
        ... Path(x, y) :- Edge(x, y).
        ... Path(x, z) :- Path(x, y), Edge(y, z).
        ... ''')).plan)
        >>> evaluation = Evaluation(compiled, [], Limits())
        >>> evaluation.load({0: {("a", "b"), ("b", "c")}})  # Edge
        >>> stratum, base, deltas = compiled.strata[1]  # Path
        >>> evaluation.run_stratum(stratum, base, deltas)
        >>> sorted(evaluation.relations[1].tuples), evaluation.errors
        ([('a', 'b'), ('a', 'c'), ('b', 'c')], [])
        """
        meter = self.E
        opened = meter.start(deadline)
        try:
            self._rounds(stratum, base, deltas)
        finally:
            meter.pending = ()
            if opened:
                meter.stop()

    def call_rule(self, rule: p.RulePlan, fn: Callable[..., None], deltas: Any, out: set) -> None:
        """Run one compiled rule (``fn``, made by :func:`.codegen.compile_rule` from ``rule``)
        over the relations, adding the facts it derives to ``out``, not to its head relation;
        ``deltas`` are the relations its ``delta`` scans read (None: it has none). Code that
        raises is recorded as an :class:`EvalError` naming the rule (what it derived until
        then stays in ``out``); :class:`LimitExceeded` goes through."""
        try:
            fn(self.relations, deltas, out, self.F, self.I, self.E)
        except LimitExceeded:
            raise
        except Exception as error:
            info = self.plan.rules[rule.rule]
            self.errors.append(EvalError("rule", f"rule `{info.id}` failed: {type(error).__name__}: {error}"))

    def dominators(self, relation: int, values: tuple) -> list[tuple[p.RulePlan, tuple]]:
        """The tuples of ``relation`` that would drop the fact ``values`` were it derived, each
        with the subsumption rule that says so (none for a relation without one). The fact is
        added for the question and removed again if it was not there."""
        rules = self.compiled.subsumers.get(relation)
        if not rules:
            return []
        held = self.relations[relation]
        (stored,) = held.store([values])
        added = held.add_all({stored})
        found: list[tuple[p.RulePlan, tuple]] = []
        try:
            for rule, fn in rules:
                pairs: set[tuple] = set()
                self.call_rule(rule, fn, None, pairs)
                width = held.arity
                found.extend(
                    (rule, pair[width:])
                    for pair in sorted(pairs, key=repr)
                    if pair[:width] == values and pair[width:] != values
                )
        finally:
            if added:
                held.discard_all(added)
        return found

    # ----------------------------------------------------------------------- private

    def _merge(self, relation: int, new: set) -> set:
        if self.plan.relations[relation].choice and new:
            new = self._chosen(relation, new)
        limit = self.plan.relations[relation].limit
        if limit is not None and new:
            new = self._limited(relation, new, limit)
        added = self.relations[relation].add_all(new)
        self.facts += len(added)
        self.E.check()
        return added

    def _out(self, relation: int) -> Any:
        """Where the rules of a relation put the facts they derive: for a relation with choice
        domains or a size limit, in the order they derive them (:class:`Derived`)."""
        spec = self.plan.relations[relation]
        return Derived() if spec.choice or spec.limit is not None else set()

    def _limited(self, relation: int, new: set, limit: int) -> set:
        """The first facts of ``new`` (in the order derived) that the relation takes before it
        holds ``limit`` facts: Soufflé's ``.limitsize``, which stops a relation growing."""
        held = self.relations[relation].tuples
        room = limit - len(held)
        fresh = [t for t in new if t not in held]
        return set(fresh[: max(room, 0)])

    def _chosen(self, relation: int, new: set) -> set:
        """The facts of ``new`` a relation with choice domains takes: one whose key (in any
        domain) a fact of the relation has, or an earlier fact of ``new`` is dropped. Earlier
        is in the order the rules derived them (:class:`Derived`: rule by rule in program
        order, each in the order of its nested loops, which run through facts in ascending
        order), else in the order of values (numbers by value, symbols by text; by their text
        where those do not compare). So the first round that derives a key decides its fact,
        deterministically, and as Soufflé's single-threaded evaluation decides it."""
        domains = self.plan.relations[relation].choice
        held = self.relations[relation].tuples
        if self.relations[relation].arity == 1:
            return new  # a fact is its own key
        size, keys = self.keys.get(relation, (-1, []))
        if size != len(held):
            keys = [{tuple(t[i] for i in d) for t in held} for d in domains]
        if isinstance(new, Derived):
            ordered = [t for t in new if t not in held]
        else:
            fresh = new - held if isinstance(held, set) else {t for t in new if t not in held}
            try:
                ordered = sorted(fresh)
            except TypeError:
                ordered = sorted(fresh, key=repr)
        kept = set()
        for fact in ordered:
            found = [tuple(fact[i] for i in d) for d in domains]
            if any(k in seen for k, seen in zip(found, keys, strict=True)):
                continue
            for k, seen in zip(found, keys, strict=True):
                seen.add(k)
            kept.add(fact)
        self.keys[relation] = (len(held) + len(kept), keys)
        return kept

    def _subsume(self, relation: int) -> set:
        """Drop every tuple of ``relation`` that one of its subsumption rules finds dominated
        by another, distinct, tuple of it (all found before any is dropped: two tuples that
        dominate each other both go); the tuples dropped (as stored) are returned."""
        rules = self.compiled.subsumers.get(relation)
        if not rules:
            return set()
        held = self.relations[relation]
        arity = held.arity
        pairs: set[tuple] = set()
        self.E.pending = (pairs,)
        for rule, fn in rules:
            self.call_rule(rule, fn, None, pairs)
        self.E.pending = ()
        dominated = {pair[:arity] for pair in pairs if pair[:arity] != pair[arity:]}
        gone = {t for t in held.store(dominated) if t in held.tuples}
        if gone:
            held.discard_all(gone)
        return gone

    def _rounds(self, stratum: p.Stratum, base: list[CompiledRule], deltas: list[CompiledRule]) -> None:
        meter = self.E
        subsumed = (
            [r for r in stratum.relations if r in self.compiled.subsumers] if stratum.subsumptions else ()
        )
        if not stratum.recursive:
            for rule, fn in base:
                out = self._out(rule.head)
                meter.pending = (out,)
                self.call_rule(rule, fn, None, out)
                self._merge(rule.head, out)
            for r in subsumed:
                self._subsume(r)
            return
        members = stratum.relations
        relations = self.relations
        news: dict[int, set[tuple]] = {r: self._out(r) for r in members}
        meter.pending = tuple(news.values())
        for rule, fn in base:
            self.call_rule(rule, fn, None, news[rule.head])
        for r in members:
            self._merge(r, news[r])
        for r in subsumed:
            self._subsume(r)
        # the first delta is everything the stratum holds so far (inputs included)
        delta = {r: Relation.owning(relations[r].arity, set(relations[r].tuples)) for r in members}
        # each delta rule with the relation its delta scan reads, found once
        reading = [(rule, fn, _delta_relation(rule)) for rule, fn in deltas]
        round_number = 0
        ranks = self.ranks
        if ranks is not None:
            for r in members:
                ranks.setdefault(r, {}).update(dict.fromkeys(relations[r].as_tuples(), 0))
        while any(delta[r].tuples for r in members):
            self.round = round_number  # Soufflé counts the rounds of its loop from 0
            round_number += 1
            news = {r: self._out(r) for r in members}
            meter.pending = tuple(news.values())
            for rule, fn, source in reading:
                if delta[source].tuples:
                    self.call_rule(rule, fn, delta, news[rule.head])
            for r in members:
                delta[r] = Relation.owning(relations[r].arity, self._merge(r, news[r]))
            for r in subsumed:  # a tuple dropped this round is no new fact to build on
                gone = self._subsume(r)
                if gone:
                    delta[r] = Relation.owning(relations[r].arity, delta[r].tuples - gone)
            if ranks is not None:
                for r in members:
                    ranks[r].update(dict.fromkeys(delta[r].as_tuples(), round_number))
        self.round = 0


class Derived(dict):
    """The facts rules derive, in the order derived (a set that remembers its order: the
    generated code calls ``add``); what a relation with choice domains keeps depends on it."""

    def add(self, fact: tuple) -> None:
        self[fact] = None


def _delta_relation(rule: p.RulePlan) -> int:
    for step in rule.steps:
        if isinstance(step, p.Scan) and step.source == "delta":
            return step.relation
    raise AssertionError("a delta rule scans a delta")
