"""Keeping a session's volatile relations whole, step by step: facts added *and removed*.

A monitor session maintains the relations that only grow (:mod:`.session`). A relation using
negation or aggregates over facts that still grow, or reading ``Candidate``, can also lose facts;
a decision only asks about the few facts it needs. Whatever reads such a relation whole at every
step (forecasting does) keeps it here, by *delete and rederive* over what the step changed:

1. **Changes.** The facts the session added to each maintained relation since the last step
   (a watcher on the relation records them), the candidate action that came or went, and what
   the earlier strata here added and removed.
2. **Gains.** A fact appears only through a derivation that uses a changed fact. For each atom of
   each rule that reads a changed relation, the rule is run *starting from* the changed facts —
   a positive atom from the added ones, a negated atom from the removed ones — and the rest of
   its body over the current facts: what it derives holds now.
3. **Losses.** A fact disappears only when each of its derivations used a changed fact: a
   removed fact under a positive atom, an added fact under a negated one. The relation's facts
   that agree with the head values such a fact binds are checked by the rules with their values
   given (the plan's bound rules) over the current facts, and removed when none matches.

A rule that reads a changed relation inside an aggregate or through an inline relation is run
whole (its previous results are the loss candidates), and a recursive stratum, or one holding
facts given for an input relation, is computed again whole when something it reads changed.
Either costs what the rule or the stratum costs; everything else costs what the changes cost,
not the length of the session.

Errors are the evaluator's: a failing functor is recorded in the scratch evaluation's
``errors`` (the caller fails closed and starts over).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from policyc.compiler import plan as p

from . import codegen
from .evaluator import EvalError, Evaluation
from .relations import Relation


@dataclass(frozen=True)
class Occurrence:
    """An atom of a rule reading a relation, and the rule run starting from that relation's
    changed facts (``run(R, D, out, F, I, E)`` reads them from ``D[relation]``)."""

    rule: p.RulePlan
    relation: int
    negated: bool
    constants: tuple[tuple[int, Any], ...]  # (argument position, the constant it must equal)
    heads: tuple[tuple[int, int], ...]  # (head position, argument position) a changed fact binds
    run: Callable[..., None]

    def losing(self, head: Relation, facts: Iterable[Any], arity: int) -> Iterator[tuple]:
        """The facts of ``head`` a derivation using one of ``facts`` (a changed fact of this
        atom's relation, in its representation) could have derived."""
        constants = self.constants
        positions = tuple(h for h, _ in self.heads)
        for fact in facts:
            row = (fact,) if arity == 1 else fact
            if any(row[i] != value for i, value in constants):
                continue  # this atom never matches the fact
            if len(positions) == 1:
                key: Any = row[self.heads[0][1]]
            else:
                key = tuple(row[i] for _, i in self.heads)
            yield from head.select(positions, key)


@dataclass(frozen=True)
class Unit:
    """A stratum of the relations kept, and how its rules meet changes."""

    stratum: p.Stratum
    base: list[tuple[p.RulePlan, Callable]]
    deltas: list[tuple[p.RulePlan, Callable]]
    whole: bool  # computed again whole when something it reads changes
    reads: frozenset[int]  # every relation its rules read (inline relations seen through)
    occurrences: dict[int, list[Occurrence]]  # by the relation read
    rerun: dict[int, list[tuple[p.RulePlan, Callable]]]  # rules run whole when the relation changes


class Keeper:
    """How to keep the relations ``kept`` of a session plan (the strata holding them, compiled
    once for every session)."""

    def __init__(self, prepared: Any, kept: set[int]) -> None:
        plan: p.Plan = prepared.plan
        compiled = prepared.compiled
        self.prepared = prepared
        self.plan = plan
        self.candidate: int | None = prepared.candidate
        inline_reads = _inline_reads(plan)
        self.units: list[Unit] = []
        for stratum, base, deltas in compiled.strata:
            if not any(r in kept for r in stratum.relations):
                continue
            whole = stratum.recursive or any(r in prepared.seeded for r in stratum.relations)
            reads: set[int] = set()
            occurrences: dict[int, list[Occurrence]] = {}
            rerun: dict[int, list[tuple[p.RulePlan, Callable]]] = {}
            for rule, fn in (*base, *deltas):
                direct, hidden = _reads(rule.steps, inline_reads)
                reads |= direct | hidden
                if whole:
                    continue
                if hidden:  # read inside an aggregate or an inline relation: the rule runs whole
                    for r in direct | hidden:
                        rerun.setdefault(r, []).append((rule, fn))
                    continue
                for position, step in enumerate(rule.steps):
                    if isinstance(step, p.Scan | p.NotExists):
                        occurrences.setdefault(step.relation, []).append(_occurrence(plan, rule, position))
            self.units.append(Unit(stratum, base, deltas, whole, frozenset(reads), occurrences, rerun))
        self.kept = {r for unit in self.units for r in unit.stratum.relations}
        self.seeded = sorted(self.kept & prepared.seeded)  # kept input relations with given facts
        self.reads = set().union(*(unit.reads for unit in self.units)) - self.kept
        if self.candidate in kept:  # read as it is (the action under decision)
            self.reads.add(self.candidate)

    def track(self, session: Any, shown: Iterable[int] = ()) -> Tracker:
        return Tracker(self, session, shown)

    def compute(self, session: Any, action: Any, scratch: Evaluation) -> list[Relation]:
        """The session's relations with the kept ones computed whole (in ``scratch``, whose
        ``errors`` say whether that failed), ``Candidate`` holding ``action`` (None: nothing)."""
        facts = list(session.state.relations)
        for unit in self.units:
            for r in unit.stratum.relations:
                facts[r] = session.seeded(r)
        if self.candidate in self.reads:
            facts[self.candidate] = Relation(1, () if action is None else (action,))
        scratch.relations = facts
        scratch.forget()
        deadline = session.monitor.limits.deadline()
        for unit in self.units:
            scratch.run_stratum(unit.stratum, unit.base, unit.deltas, deadline)
        return facts


class Tracker:
    """The kept relations of one session, brought up to date by :meth:`step`; and for the
    relations ``shown``, their facts in the order they came (:meth:`latest`)."""

    def __init__(self, keeper: Keeper, session: Any, shown: Iterable[int] = ()) -> None:
        self.keeper = keeper
        self.session = session
        self.scratch = Evaluation(keeper.prepared.compiled, session.functors, session.monitor.limits)
        self.facts: list[Relation] | None = None  # None: computed whole at the next step
        self.outputs: dict[int, set] = {}  # what each rule run whole derived last (by rule index)
        self.seeds: dict[int, int] = {}
        self.action: Any = None  # set by the first step
        relations = session.state.relations
        self.arrived: dict[int, dict[Any, None]] = {r: {} for r in shown}
        self.positions: dict[str, int] = {}  # each event's place in the session
        self.added: dict[int, set] = {}
        for r in sorted(keeper.reads | (self.arrived.keys() - keeper.kept)):
            if r != keeper.candidate and r not in keeper.prepared.seeded:
                self.added[r] = set()
                relations[r].watch(self.added[r].update)

    @property
    def errors(self) -> list[EvalError]:
        return self.scratch.errors

    def reset(self) -> None:
        """Compute everything whole at the next step (after a failure)."""
        self.facts = None
        self.scratch.errors.clear()

    def step(self, action: Any) -> list[Relation]:
        """The session's relations with the kept ones up to date, ``Candidate`` holding
        ``action`` (None: nothing), within the time limit
        (:class:`~policyc.runtime.limits.LimitExceeded` when it is hit)."""
        meter = self.scratch.E
        opened = meter.start(what="forecast step")
        try:
            return self._step(action)
        finally:
            if opened:
                meter.stop()

    def _step(self, action: Any) -> list[Relation]:
        if self.facts is None:
            for pending in self.added.values():
                pending.clear()
            return self._start(action)
        facts = self.facts
        changes: dict[int, tuple[set, set]] = {}
        for r, pending in self.added.items():
            if pending:
                changes[r] = (set(pending), set())
                pending.clear()
        candidate = self.keeper.candidate
        if candidate in self.keeper.reads and action != self.action:
            gained = set() if action is None else {action}
            lost = set() if self.action is None else {self.action}
            facts[candidate].discard_all(lost)
            facts[candidate].add_all(set(gained))
            changes[candidate] = (gained, lost)
            self.action = action
        seeds = self._seed_sizes()
        reseeded = {r for r, n in seeds.items() if self.seeds.get(r) != n}
        self.seeds = seeds
        if not changes and not reseeded:
            return facts
        self.scratch.forget()
        for unit in self.keeper.units:
            if unit.whole:
                if reseeded & set(unit.stratum.relations) or unit.reads & changes.keys():
                    self._recompute(unit, changes)
            elif unit.reads & changes.keys():
                self._update(unit, changes)
        for r, arrived in self.arrived.items():
            if r in changes:
                added, removed = changes[r]
                for value in removed:
                    del arrived[value]
                arrived.update(dict.fromkeys(sorted(added, key=self._arrival)))
        return facts

    def _arrival(self, value: Any) -> tuple:
        """Where a fact that came with others goes among them: after the facts about earlier
        events (by the latest event it names), then in a fixed order."""
        positions = self.positions
        for e in self.session.order[len(positions) :]:
            positions[e] = len(positions)
        row = value if isinstance(value, tuple) else (value,)
        latest = max((positions.get(v, -1) for v in row if type(v) is str), default=-1)
        return (latest, _order(value))

    def latest(self, relation: int) -> Iterator[tuple]:
        """The facts of a shown relation, as tuples, the latest to come first."""
        unary = self.keeper.plan.relations[relation].arity == 1
        for value in reversed(self.arrived[relation]):
            yield (value,) if unary else value

    # ------------------------------------------------------------------------- internals

    def _seed_sizes(self) -> dict[int, int]:
        seeds = self.session.seeds
        return {r: len(seeds[r]) for r in self.keeper.seeded}

    def _start(self, action: Any) -> list[Relation]:
        self.action = action
        self.seeds = self._seed_sizes()
        facts = self.keeper.compute(self.session, action, self.scratch)
        self.facts = facts
        for r in self.arrived:
            self.arrived[r] = dict.fromkeys(sorted(facts[r].tuples, key=self._arrival))
        self.outputs = {}
        for unit in self.keeper.units:
            for rules in unit.rerun.values():
                for rule, fn in rules:
                    if rule.rule not in self.outputs:
                        self.outputs[rule.rule] = self._run(rule, fn)
        return facts

    def _run(self, rule: p.RulePlan, fn: Callable) -> set:
        out: set = set()
        self.scratch.call_rule(rule, fn, None, out)
        return out

    def _recompute(self, unit: Unit, changes: dict[int, tuple[set, set]]) -> None:
        facts = self.facts
        assert facts is not None
        old = {r: facts[r].tuples for r in unit.stratum.relations}
        for r in unit.stratum.relations:
            facts[r] = self.session.seeded(r)
        self.scratch.facts = 0  # the limit on facts counts this stratum's
        self.scratch.run_stratum(unit.stratum, unit.base, unit.deltas, self.session.monitor.limits.deadline())
        for r, before in old.items():
            now = facts[r].tuples
            if now != before:
                changes[r] = (now - before, before - now)

    def _update(self, unit: Unit, changes: dict[int, tuple[set, set]]) -> None:
        facts = self.facts
        assert facts is not None
        relations = self.keeper.plan.relations
        gains: dict[int, set] = {r: set() for r in unit.stratum.relations}
        doubts: dict[int, set] = {r: set() for r in unit.stratum.relations}
        ran: set[int] = set()
        for r in unit.reads & changes.keys():
            added, removed = changes[r]
            arity = relations[r].arity
            for occurrence in unit.occurrences.get(r, ()):
                head = occurrence.rule.head
                grow, shrink = (removed, added) if occurrence.negated else (added, removed)
                if grow:
                    delta = {r: Relation.owning(arity, set(grow))}
                    self.scratch.call_rule(occurrence.rule, occurrence.run, delta, gains[head])
                if shrink:
                    doubts[head].update(occurrence.losing(facts[head], shrink, arity))
            for rule, fn in unit.rerun.get(r, ()):
                if rule.rule in ran:
                    continue
                ran.add(rule.rule)
                out = self._run(rule, fn)
                before = self.outputs.get(rule.rule, set())
                self.outputs[rule.rule] = out
                gains[rule.head] |= out
                arity_head = relations[rule.head].arity
                doubts[rule.head].update((v,) if arity_head == 1 else v for v in before - out)
        scratch = self.scratch  # its relations are ``facts``
        for r in unit.stratum.relations:
            relation = facts[r]
            unary = relation.arity == 1
            new = gains[r] - relation.tuples
            gone = set()
            for row in doubts[r]:
                value = row[0] if unary else row
                if value in gains[r] or value not in relation.tuples or value in gone:
                    continue
                if next(scratch.matches(r, row), None) is None:
                    gone.add(value)
            if gone:
                relation.discard_all(gone)
            if new:
                relation.add_all(set(new))
            if new or gone:
                changes[r] = (new, gone)


def _order(value: Any) -> list:
    """Facts that came in the same step, in a fixed order: strings before numbers, by value."""
    row = value if isinstance(value, tuple) else (value,)
    return [(type(v) is not str, v) for v in row]


# ------------------------------------------------------------------------------- planning


def _inline_reads(plan: p.Plan) -> dict[int, set[int]]:
    """For each inline relation, every stored relation its rules read (through other inline
    relations too)."""
    direct: dict[int, set[int]] = {}
    for r, spec in enumerate(plan.relations):
        if spec.inline:
            found: set[int] = set()
            for bound in plan.bound_rules[r]:
                found.update(read for read, _ in p.reads(bound.steps))
            direct[r] = found
    closed: dict[int, set[int]] = {}
    for r in direct:
        seen: set[int] = set()
        todo = [r]
        while todo:
            s = todo.pop()
            for t in direct.get(s, ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        closed[r] = {t for t in seen if t not in direct}
    return closed


def _reads(steps: tuple[p.Step, ...], inline_reads: dict[int, set[int]]) -> tuple[set[int], set[int]]:
    """The relations a rule's atoms read, and those it reads inside aggregates or through
    inline relations."""
    direct: set[int] = set()
    hidden: set[int] = set()
    for r, how in p.reads(steps):
        if how in ("scan", "negation"):
            direct.add(r)
        else:
            hidden |= inline_reads.get(r, {r})
    return direct, hidden


def _occurrence(plan: p.Plan, rule: p.RulePlan, position: int) -> Occurrence:
    step = rule.steps[position]
    assert isinstance(step, p.Scan | p.NotExists)
    variant = starting_from(rule, position)
    binds: dict[int, int] = {}  # slot -> argument position
    constants = []
    for i, arg in enumerate(step.args):
        if isinstance(arg, p.Bind):
            binds.setdefault(arg.slot, i)
        elif isinstance(arg, p.Match) and isinstance(arg.expr, p.Slot):
            binds.setdefault(arg.expr.index, i)
        elif isinstance(arg, p.Match) and isinstance(arg.expr, p.Const):
            constants.append((i, arg.expr.value))
    heads = tuple(
        (j, binds[e.index])
        for j, e in enumerate(rule.head_args)
        if isinstance(e, p.Slot) and e.index in binds
    )
    name = f"v{rule.rule}_{position}"
    return Occurrence(
        rule,
        step.relation,
        isinstance(step, p.NotExists),
        tuple(constants),
        heads,
        codegen.compile_rule(plan, variant, name)[1],
    )


def starting_from(rule: p.RulePlan, position: int) -> p.RulePlan:
    """The rule run from the changed facts of the atom at ``position`` (read from the delta,
    a negated atom's as if it were positive): the same derivations as the rule, restricted to
    those using one of those facts.

    The rest of the body is ordered again for what the atom binds: checks that call no functor
    go as soon as their values are known, then a step that calls functors (a test, a computed
    value, an aggregate) once every step before it in the rule has gone, otherwise the scan with
    the most values known. A step calling functors thus meets only bindings it meets in the rule,
    so functors are called on no value they would not be called on there."""
    atom = rule.steps[position]
    assert isinstance(atom, p.Scan | p.NotExists)
    slots = rule.slots
    bound: set[int] = set()
    first: list[p.Pattern] = []
    checks: list[p.Step] = []  # an argument computed from values bound later: checked where the atom was
    for arg in atom.args:
        if isinstance(arg, p.Bind) or (isinstance(arg, p.Match) and isinstance(arg.expr, p.Slot)):
            slot = arg.slot if isinstance(arg, p.Bind) else arg.expr.index  # type: ignore[union-attr]
            first.append(p.Match(p.Slot(slot)) if slot in bound else p.Bind(slot))
            bound.add(slot)
        elif (isinstance(arg, p.Match) and isinstance(arg.expr, p.Const)) or isinstance(arg, p.Skip):
            first.append(arg)
        else:
            assert isinstance(arg, p.Match)
            first.append(p.Bind(slots))
            checks.append(p.Filter("=", p.Slot(slots), arg.expr))
            slots += 1
    if isinstance(atom, p.NotExists):  # another fact may still match it (`_`, computed values)
        checks.append(atom)
    pending: list[tuple[int, p.Step]] = [(i, step) for i, step in enumerate(rule.steps) if i != position] + [
        (position, check) for check in checks
    ]
    pending.sort(key=lambda item: item[0])
    steps: list[p.Step] = [p.Scan(atom.relation, tuple(first), "delta")]
    while pending:
        earliest = pending[0][0]
        chosen = next(
            (item for item in pending if _pure_check(item[1]) and _needs(item[1]) <= bound), None
        ) or next((item for item in pending if item[0] == earliest and not isinstance(item[1], p.Scan)), None)
        if chosen is None:
            scans = [
                (i, step)
                for i, step in pending
                if isinstance(step, p.Scan) and (i == earliest or _free_scan(step))
            ]
            chosen = max(scans, key=lambda item: (_known(item[1], bound), -item[0]))
        pending.remove(chosen)
        step = chosen[1]
        if isinstance(step, p.Scan):
            args: list[p.Pattern] = []
            for arg in step.args:
                slot = _slot_of(arg)
                if slot is None:
                    args.append(arg)
                elif slot in bound:
                    args.append(p.Match(p.Slot(slot)))
                else:  # a value bound by this scan now (in the rule, perhaps by an earlier step)
                    args.append(p.Bind(slot))
                    bound.add(slot)
            steps.append(p.Scan(step.relation, tuple(args), "full"))
        elif isinstance(step, p.Assign) and step.slot in bound:
            steps.append(p.Filter("=", p.Slot(step.slot), step.expr))
        elif isinstance(step, p.Range) and step.slot in bound:  # each value compared with the known one
            steps.append(p.Range(slots, step.start, step.stop, step.step))
            steps.append(p.Filter("=", p.Slot(step.slot), p.Slot(slots)))
            slots += 1
        elif isinstance(step, p.Aggregate) and step.slot in bound:
            steps.append(p.Aggregate(slots, step.op, step.target, step.body, step.keys))
            steps.append(p.Filter("=", p.Slot(step.slot), p.Slot(slots)))
            slots += 1
        else:
            if isinstance(step, p.Assign | p.Range | p.Aggregate):
                bound.add(step.slot)
            steps.append(step)
    return p.RulePlan(rule.rule, rule.head, rule.head_args, tuple(steps), slots)


def _slot_of(arg: p.Pattern) -> int | None:
    """The slot an atom's argument binds or is matched with (None: a constant, ``_`` or a
    computed value)."""
    if isinstance(arg, p.Bind):
        return arg.slot
    if isinstance(arg, p.Match) and isinstance(arg.expr, p.Slot):
        return arg.expr.index
    return None


def _free_scan(step: p.Scan) -> bool:
    """A scan that calls no functor: it can run whenever (a variable not known yet, it binds)."""
    return all(not isinstance(a, p.Match) or isinstance(a.expr, p.Const | p.Slot) for a in step.args)


def _known(step: p.Scan, bound: set[int]) -> int:
    """How many of a scan's arguments are known before it runs."""
    return sum(
        1
        for a in step.args
        if (isinstance(a, p.Match) and not isinstance(a.expr, p.Slot)) or _slot_of(a) in bound
    )


def _pure_check(step: p.Step) -> bool:
    """A step that binds nothing and calls no functor (it cannot fail, whatever it is given)."""
    if isinstance(step, p.Filter):
        return _pure(step.left) and _pure(step.right)
    if isinstance(step, p.NotExists):
        return all(isinstance(a, p.Skip) or _pure(a.expr) for a in step.args)
    if isinstance(step, p.Scan):
        return all(isinstance(a, p.Match) and _pure(a.expr) for a in step.args)
    return False


def _pure(expr: p.Expr) -> bool:
    return isinstance(expr, p.Slot | p.Const)


def _needs(step: p.Step) -> set[int]:
    if isinstance(step, p.Filter):
        return codegen.slots_read(step.left) | codegen.slots_read(step.right)
    found: set[int] = set()
    for arg in step.args:  # type: ignore[union-attr]
        if isinstance(arg, p.Match):
            found |= codegen.slots_read(arg.expr)
    return found
