"""What a policy's plan becomes for monitor sessions, prepared once per monitor.

A relation is *incremental* (maintained as events arrive) when its rules only join relations
that are themselves incremental; every other relation is *volatile*: asked about on demand
with its arguments bound, or recomputed per decision when some rule needs it in full. The
module :mod:`~policyc.runtime.session` explains what each costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

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
        rules_of: dict[int, list[p.RulePlan]] = {r: [] for r in range(len(relations))}
        stratum_of: dict[int, p.Stratum] = {}
        for stratum in plan.strata:
            for r in stratum.relations:
                stratum_of[r] = stratum
            for rule in (*stratum.rules, *stratum.delta_rules, *stratum.subsumptions):
                rules_of[rule.head].append(rule)
        # relations with subsumption rules: a tuple dropped once may be needed again when the
        # tuple dominating it goes, so they are recomputed, never maintained or asked on demand
        subsumed = {rule.head for stratum in plan.strata for rule in stratum.subsumptions}

        incremental: set[int] = set()
        for stratum in plan.strata:
            members = [r for r in stratum.relations if not relations[r].inline and r != self.candidate]
            if not members or len(members) != len([r for r in stratum.relations if not relations[r].inline]):
                continue
            if any(relations[r].name == "Deny@shadow" for r in members):
                continue  # the rules in shadow mode are asked on demand: their failures poison nothing
            if any(relations[r].choice for r in members):
                continue  # which fact a key keeps depends on the order facts come: recomputed
            if any(r in subsumed for r in members):
                continue  # a dropped tuple is not a fact that cannot come back: recomputed
            allowed = incremental | set(members)
            if all(_monotone(rule, allowed) for r in members for rule in rules_of[r]):
                incremental.update(members)
        self.incremental = frozenset(incremental)
        self.volatile = frozenset(
            r for r in range(len(relations)) if r not in incremental and not relations[r].inline
        )

        materialized: set[int] = set()
        demanded: set[int] = set()

        def referenced(steps: tuple[p.Step, ...]) -> Iterator[p.Step]:
            for step in steps:
                yield step
                if isinstance(step, p.Aggregate):
                    yield from referenced(step.body)

        def materialize(r: int) -> None:
            if r in materialized or r not in self.volatile:
                return
            materialized.add(r)
            for rule in rules_of[r]:
                for step in referenced(rule.steps):
                    touch_all(step)

        def touch_all(step: p.Step) -> None:
            """A relation read by code that is not demand-aware needs every volatile relation
            it reads in full."""
            if isinstance(step, p.Scan | p.NotExists):
                materialize(step.relation)
            elif isinstance(step, p.InlineTest):
                for bound in plan.bound_rules[step.relation]:
                    for inner in referenced(bound.steps):
                        touch_all(inner)

        def demand(r: int) -> None:
            if r in demanded or r in materialized or r not in self.volatile or r == self.candidate:
                if r == self.candidate:
                    materialized.add(r)
                return
            if stratum_of[r].recursive or relations[r].choice or r in subsumed:
                materialize(r)  # a choice relation's fact for a key depends on all of it, as
                # whether a tuple is subsumed depends on the others
                return
            demanded.add(r)
            for bound in plan.bound_rules[r]:
                for step in bound.steps:
                    if isinstance(step, p.Scan | p.NotExists):
                        if all(isinstance(a, p.Match) for a in step.args) and not (
                            isinstance(step, p.Scan) and step.source != "full"
                        ):
                            demand(step.relation)
                        else:
                            materialize(step.relation)
                    else:
                        for inner in referenced((step,)):
                            if inner is not step:
                                touch_all(inner)
                        if isinstance(step, p.InlineTest):
                            touch_all(step)

        # An input relation that also has rules and is not maintained holds the facts given for
        # it plus what its rules derive: recomputed for each decision from those facts (seeds).
        read = _read_relations(plan)
        seeded = {
            r
            for r, spec in enumerate(relations)
            if spec.input
            and r in self.volatile
            and r != self.candidate
            and (r in read or spec.name in VERDICT_RELATIONS or r == escalate)
        }
        for r in seeded:
            materialize(r)
        self.seeded = frozenset(seeded)
        for name in VERDICT_RELATIONS:
            if name in index:
                demand(index[name])
        if escalate is not None:
            demand(escalate)
        if "Deny@shadow" in index:  # the rules in shadow mode (runtime/shadow.py asks about them)
            demand(index["Deny@shadow"])
        self.demanded = frozenset(demanded)
        self.materialized = frozenset(materialized)
        self.stratum_of = stratum_of

        # code: one insertion pass over the incremental strata, demand-mode rules of demanded relations
        self.stored = frozenset(
            r
            for r, spec in enumerate(relations)
            if spec.input
            and r in incremental
            and (r in read or spec.name in VERDICT_RELATIONS or r == escalate)
        )
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
            and relations[depends].arity == 2
            and depends not in compiled.derived
            else None
        )
        self.maintain_source, self.bind = maintain.compile_pass(
            plan, maintained, self.stored, prefix=self.prefix
        )
        demand_set = frozenset(self.demanded)
        self.demand_rules: dict[int, list[tuple[p.BoundRule, Callable]]] = {
            r: [
                (b, codegen.compile_bound_rule(plan, b, f"q{r}_{b.rule}", demand=demand_set)[1])
                for b in plan.bound_rules[r]
            ]
            for r in self.demanded
        }
        self.recompute = [
            entry for entry in compiled.strata if any(r in materialized for r in entry[0].relations)
        ]
        # a verdict read straight from maintained relations (when nothing is recomputed per decision)
        deny, allow = index.get("Deny"), index.get("Allow")

        def unary_maintained(r: int | None) -> bool:
            return r is not None and r in incremental and relations[r].arity == 1

        self.direct = (
            not self.recompute
            and unary_maintained(deny)
            and (plan.default == "allow" or unary_maintained(allow))
            and (escalate is None or unary_maintained(escalate))
        )
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
