"""What a policy's plan becomes for monitor sessions, prepared once per monitor.

A relation is *incremental* (maintained as events arrive) when its rules only join relations
that are themselves incremental; every other relation is *volatile*: asked about on demand
with its arguments bound, or recomputed per decision when some rule needs it in full. The
module :mod:`~policyc.runtime.session` explains what each costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from policyc.compiler import plan as p

from . import arguments, codegen, maintain
from .evaluator import CompiledPlan
from .fact_checks import FactChecks
from .verdict import escalate_relation

VERDICT_RELATIONS = ("Deny", "Allow")  # what a decision asks about the action (and a unary Escalate)


class SessionPlan:
    """A plan prepared for sessions: what is maintained, what is asked on demand, what is
    recomputed per decision, and the code for each (shared by every session)."""

    def __init__(self, plan: p.Plan, compiled: CompiledPlan) -> None:
        self.plan = plan
        self.compiled = compiled
        self.arguments = arguments.prepare(plan)  # the declared arguments calls are checked against
        index = plan.relation_index()
        escalate = escalate_relation(plan)
        self.candidate = index.get("Candidate")
        relations = plan.relations
        shape = _Shape.of(plan)
        incremental = _incremental(plan, shape, self.candidate)
        self.incremental = incremental
        self.volatile = frozenset(
            r for r in range(len(relations)) if r not in incremental and not relations[r].inline
        )
        read = _read_relations(plan)
        seeded = _seeded(plan, self.volatile, self.candidate, read, escalate)
        self.seeded = seeded
        needs = _Needs(plan, shape, self.volatile, self.candidate)
        for r in seeded:
            needs.materialize(r)
        for name in VERDICT_RELATIONS:
            if name in index:
                needs.demand(index[name])
        if escalate is not None:
            needs.demand(escalate)
        if "Deny@shadow" in index:  # the rules in shadow mode (runtime/shadow.py asks about them)
            needs.demand(index["Deny@shadow"])
        self.demanded = frozenset(needs.demanded)
        self.materialized = frozenset(needs.materialized)
        self.stratum_of = shape.stratum_of
        self.stored = frozenset(
            r
            for r, spec in enumerate(relations)
            if spec.input
            and r in incremental
            and (r in read or spec.name in VERDICT_RELATIONS or r == escalate)
        )
        self._compile(plan, compiled, index)
        # a verdict read straight from maintained relations (when nothing is recomputed per decision)
        deny, allow = index.get("Deny"), index.get("Allow")
        self.direct = _direct(plan, incremental, not self.recompute, deny, allow, escalate)
        self.deny, self.allow = deny, (None if plan.default == "allow" else allow)
        # what a verdict depends on: a decision reads unknown facts only of these relations
        verdicts = [r for r in (deny, allow, escalate, index.get("Deny@shadow")) if r is not None]
        self.cone = _depends(plan, verdicts)
        self.escalate = escalate
        self.wanted = {spec.name: r for r, spec in enumerate(relations) if r in self.stored or r in seeded}
        # given facts: checked by code generated per input relation, in the form relations store
        self.fact_checks = FactChecks(plan)
        self.keyed = any(spec.keys and spec.input for spec in relations)  # see runtime/keys.py
        self.unary = frozenset(r for r, spec in enumerate(relations) if spec.arity == 1)

    def _compile(self, plan: p.Plan, compiled: CompiledPlan, index: dict[str, int]) -> None:
        """The code sessions run: one insertion pass over the incremental strata, the
        demand-mode rules of the demanded relations, the strata recomputed per decision."""
        incremental = self.incremental
        maintained = [stratum for stratum in plan.strata if any(r in incremental for r in stratum.relations)]
        self.maintained = tuple(maintained)
        # the relations maintained rules read: an unknown fact in one of them makes what new facts
        # derive with it unknown too, so events are then maintained by the interpreter
        self.maintained_reads = frozenset(
            r for stratum in maintained for rule in stratum.insert_rules for r, _ in p.reads(rule.steps)
        )
        # `DependsOn` of the events vocabulary, stored and read only: an event without `deps`
        # depends on every earlier one, which the order says (runtime/prefix.py)
        depends = index.get("DependsOn")
        self.prefix = (
            depends
            if depends is not None
            and depends in self.stored
            and plan.relations[depends].arity == 2
            and depends not in compiled.derived
            else None
        )
        self.maintain_source, self.bind = maintain.compile_pass(
            plan, maintained, self.stored, prefix=self.prefix
        )
        demand_set = self.demanded
        self.demand_rules: dict[int, list[tuple[p.BoundRule, Callable]]] = {
            r: [
                (b, codegen.compile_bound_rule(plan, b, f"q{r}_{b.rule}", demand=demand_set)[1])
                for b in plan.bound_rules[r]
            ]
            for r in self.demanded
        }
        self.recompute = [
            entry for entry in compiled.strata if any(r in self.materialized for r in entry[0].relations)
        ]


@dataclass(frozen=True)
class _Shape:
    """Where each relation's rules are: its rules (``rules_of``), its stratum (``stratum_of``),
    and the relations with subsumption rules (``subsumed``: a tuple dropped once may be needed
    again when the tuple dominating it goes, so they are recomputed, never maintained or asked
    on demand)."""

    rules_of: dict[int, list[p.RulePlan]]
    stratum_of: dict[int, p.Stratum]
    subsumed: set[int]

    @classmethod
    def of(cls, plan: p.Plan) -> _Shape:
        rules_of: dict[int, list[p.RulePlan]] = {r: [] for r in range(len(plan.relations))}
        stratum_of: dict[int, p.Stratum] = {}
        for stratum in plan.strata:
            for r in stratum.relations:
                stratum_of[r] = stratum
            for rule in (*stratum.rules, *stratum.delta_rules, *stratum.subsumptions):
                rules_of[rule.head].append(rule)
        subsumed = {rule.head for stratum in plan.strata for rule in stratum.subsumptions}
        return cls(rules_of, stratum_of, subsumed)


def _incremental(plan: p.Plan, shape: _Shape, candidate: int | None) -> frozenset[int]:
    """The relations maintained as events arrive: whole strata whose rules only join relations
    that are maintained themselves (not the candidate, the rules in shadow mode, choice
    relations or relations with subsumption rules).

    >>> from policyc.runtime.planned import plan_of
    >>> from policyc.compiler.pipeline import compile_source
    >>> plan = plan_of(compile_source(".input E\\nR(x) :- E(x).\\nDeny(x) :- E(x), !R(x)."))
    >>> sorted(plan.relations[r].name for r in _incremental(plan, _Shape.of(plan), None))
    ['Allow', 'E', 'R']
    """
    relations = plan.relations
    incremental: set[int] = set()
    for stratum in plan.strata:
        members = [r for r in stratum.relations if not relations[r].inline and r != candidate]
        if not members or len(members) != len([r for r in stratum.relations if not relations[r].inline]):
            continue
        if any(relations[r].name == "Deny@shadow" for r in members):
            continue  # the rules in shadow mode are asked on demand: their failures poison nothing
        if any(relations[r].choice for r in members):
            continue  # which fact a key keeps depends on the order facts come: recomputed
        if any(r in shape.subsumed for r in members):
            continue  # a dropped tuple is not a fact that cannot come back: recomputed
        allowed = incremental | set(members)
        if all(_monotone(rule, allowed) for r in members for rule in shape.rules_of[r]):
            incremental.update(members)
    return frozenset(incremental)


def _seeded(
    plan: p.Plan, volatile: frozenset[int], candidate: int | None, read: set[int], escalate: int | None
) -> frozenset[int]:
    """The input relations that also have rules and are not maintained: each holds the facts
    given for it plus what its rules derive, recomputed for each decision from those facts
    (its seeds)."""
    return frozenset(
        r
        for r, spec in enumerate(plan.relations)
        if spec.input
        and r in volatile
        and r != candidate
        and (r in read or spec.name in VERDICT_RELATIONS or r == escalate)
    )


class _Needs:
    """Which volatile relations a decision needs whole (``materialized``: recomputed per
    decision) and which it asks about with arguments bound (``demanded``)."""

    def __init__(self, plan: p.Plan, shape: _Shape, volatile: frozenset[int], candidate: int | None) -> None:
        self.plan = plan
        self.shape = shape
        self.volatile = volatile
        self.candidate = candidate
        self.materialized: set[int] = set()
        self.demanded: set[int] = set()

    def materialize(self, r: int) -> None:
        """``r`` is needed whole, and so is every volatile relation its rules read."""
        if r in self.materialized or r not in self.volatile:
            return
        self.materialized.add(r)
        for rule in self.shape.rules_of[r]:
            for step in _referenced(rule.steps):
                self.touch_all(step)

    def touch_all(self, step: p.Step) -> None:
        """A relation read by code that is not demand-aware needs every volatile relation
        it reads in full."""
        if isinstance(step, p.Scan | p.NotExists):
            self.materialize(step.relation)
        elif isinstance(step, p.InlineTest):
            for bound in self.plan.bound_rules[step.relation]:
                for inner in _referenced(bound.steps):
                    self.touch_all(inner)

    def demand(self, r: int) -> None:
        """``r`` is asked about with its arguments bound, where it can be (not a recursive,
        choice or subsumed relation, which is needed whole), and so, on demand or whole, is
        what its bound rules read."""
        if r in self.demanded or r in self.materialized or r not in self.volatile or r == self.candidate:
            if r == self.candidate:
                self.materialized.add(r)
            return
        relations = self.plan.relations
        if self.shape.stratum_of[r].recursive or relations[r].choice or r in self.shape.subsumed:
            self.materialize(r)  # a choice relation's fact for a key depends on all of it, as
            # whether a tuple is subsumed depends on the others
            return
        self.demanded.add(r)
        for bound in self.plan.bound_rules[r]:
            for step in bound.steps:
                if isinstance(step, p.Scan | p.NotExists):
                    if all(isinstance(a, p.Match) for a in step.args) and not (
                        isinstance(step, p.Scan) and step.source != "full"
                    ):
                        self.demand(step.relation)
                    else:
                        self.materialize(step.relation)
                else:
                    for inner in _referenced((step,)):
                        if inner is not step:
                            self.touch_all(inner)
                    if isinstance(step, p.InlineTest):
                        self.touch_all(step)


def _referenced(steps: tuple[p.Step, ...]) -> Iterator[p.Step]:
    """The steps, and those of the aggregates among them, recursively."""
    for step in steps:
        yield step
        if isinstance(step, p.Aggregate):
            yield from _referenced(step.body)


def _direct(
    plan: p.Plan,
    incremental: frozenset[int],
    nothing_recomputed: bool,
    deny: int | None,
    allow: int | None,
    escalate: int | None,
) -> bool:
    """Whether a verdict is read straight from maintained relations: nothing is recomputed per
    decision, and `Deny` (with `Allow` under a default of deny, and a unary `Escalate`) are
    maintained and unary."""

    def unary_maintained(r: int | None) -> bool:
        return r is not None and r in incremental and plan.relations[r].arity == 1

    return (
        nothing_recomputed
        and unary_maintained(deny)
        and (plan.default == "allow" or unary_maintained(allow))
        and (escalate is None or unary_maintained(escalate))
    )


def _monotone(rule: p.RulePlan, allowed: set[int]) -> bool:
    for step in rule.steps:
        if isinstance(step, p.Scan):
            if step.relation not in allowed:
                return False
        elif isinstance(step, p.NotExists | p.Aggregate | p.InlineTest):
            return False
    return True


def _read_relations(plan: p.Plan) -> set[int]:
    """Every relation some rule reads."""
    read: set[int] = set()
    for stratum in plan.strata:
        for rule in (*stratum.rules, *stratum.delta_rules, *stratum.insert_rules, *stratum.subsumptions):
            read.update(r for r, _ in p.reads(rule.steps))
    for rules in plan.bound_rules:
        for bound in rules:
            read.update(r for r, _ in p.reads(bound.steps))
    return read


def _depends(plan: p.Plan, relations: list[int]) -> frozenset[int]:
    """The relations given and every relation they read, transitively."""
    reads: dict[int, set[int]] = {}
    for stratum in plan.strata:
        for rule in (*stratum.rules, *stratum.delta_rules, *stratum.subsumptions):
            reads.setdefault(rule.head, set()).update(r for r, _ in p.reads(rule.steps))
    for r, rules in enumerate(plan.bound_rules):
        for bound in rules:
            reads.setdefault(r, set()).update(x for x, _ in p.reads(bound.steps))
    found: set[int] = set()
    stack = list(relations)
    while stack:
        r = stack.pop()
        if r in found:
            continue
        found.add(r)
        stack.extend(reads.get(r, ()))
    return frozenset(found)
