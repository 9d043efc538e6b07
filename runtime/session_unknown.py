"""A monitor session's unknown facts: maintained as events arrive, and read by its decisions.

A session maintains its facts with generated code (:mod:`.maintain`). When that code meets an
error, what it added for the event is taken back (its journal) and the event's facts are
maintained again by the three-valued interpreter (:mod:`.unknown`), which adds what holds and
keeps, apart, the facts whose derivation met an error, each with its fault. From then on, as
long as a maintained rule reads a relation holding unknown facts, events are maintained by the
interpreter, so that what a new fact derives together with an unknown one is unknown too.

A decision needs the interpreter only when it could read an unknown fact (one of the relations
its verdict depends on holds some) or when its own evaluation met an error:
:class:`DecisionSolver` then computes the relations the decision recomputes, asks the verdict's
relations about the action, and says for each whether it holds, is unknown (and why) or does
not hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from policyc.compiler import plan as p

from .faults import ANY, Fault
from .maintain import delta_relation
from .prefix import Prefix, open_variant
from .relations import Relation
from .unknown import Facts, Level, Residues, Solver, State, StrataSolver, add_unknown, binding
from .verdict import (
    ERROR_CODES,
    ERROR_RULE,
    Decision,
    Reason,
    default_denial,
    deny_reasons,
    escalate_relation,
    session_calls,
)

if TYPE_CHECKING:
    from .session import Session

EMPTY: Mapping[tuple, Fault] = {}
NONE: Mapping[tuple, Residues] = {}
Journal = list[
    tuple[Any, ...]
]  # ("known", relation, stored facts) | ("unknown", relation, fact, fault | None)


class MaintenanceSolver(Solver):
    """The interpreter over a session's maintained relations, adding what one batch of facts
    derives (known facts to the relations, unknown ones to the session's)."""

    def __init__(self, session: Session) -> None:
        super().__init__(session.plan, session.functors, session.state.E)
        self.session = session
        self.relations = session.state.relations
        self.open_relation = len(session.plan.relations)  # a relation of the new open events

    def known(self, relation: int) -> Relation:
        return self.relations[relation]

    def unknown(self, relation: int) -> Mapping[tuple, Fault]:
        return self.session.unknown.get(relation, EMPTY)

    def residues(self, relation: int) -> Mapping[tuple, Residues]:
        return self.session.residues.get(relation, NONE)

    def tool_of(self, action: Any) -> str | None:
        return tool_of(self.session, action)


def tool_of(session: Session, action: Any) -> str | None:
    try:
        event = session.events.get(action)
    except TypeError:
        return None
    return event.get("tool") if event is not None else None


def maintain(session: Session, new: Mapping[Any, Any], stored: bool, room: int, journal: Journal) -> int:
    """Add a batch of facts (per input relation, as tuples or, with ``stored``, in the form the
    relations store them; ``new["open"]``, the new open events) and everything they derive,
    known and unknown; how many facts it added. What it adds goes to ``journal`` as it is added;
    :class:`~.maintain.Overflow` past ``room`` facts."""
    from .maintain import Overflow

    solver = MaintenanceSolver(session)
    relations = session.state.relations
    added = 0
    deltas: dict[int, tuple[set, dict]] = {}
    for r, rows in new.items():
        if r == "open":
            continue
        relation = relations[r]
        facts = set(rows) if stored else relation.store(rows)
        fresh = relation.add_all(facts)
        if fresh:
            journal.append(("known", r, fresh))
            added += len(fresh)
            deltas[r] = ({(f,) for f in fresh} if relation.arity == 1 else set(fresh), {})
    opened = list(new.get("open") or ())
    prefix = session.prepared.prefix
    for stratum in session.prepared.maintained:
        members = stratum.relations
        variants = [(rule, delta_relation(rule)) for rule in stratum.insert_rules]
        news: dict[int, tuple[set, dict]] = {r: (set(), {}) for r in members}
        for r in members:  # facts given for a relation of the stratum are its new facts too
            if r in deltas:
                news[r][0].update(deltas[r][0])
        found: list[tuple[int, tuple, Level, Residues]] = []
        for rule, d in variants:
            if d in members:
                continue
            if d == prefix and opened:
                found.extend(_opened(solver, rule, prefix, opened))
            if d in deltas and (deltas[d][0] or deltas[d][1]):
                found.extend(_variant(solver, rule, d, deltas[d]))
        added += _merge(session, found, news, journal, room - added)
        inside = [(rule, d) for rule, d in variants if d in members]
        if stratum.recursive and inside:
            round_ = {r: (set(news[r][0]), dict(news[r][1])) for r in members}
            while any(k or u for k, u in round_.values()):
                found = []
                for rule, d in inside:
                    if round_[d][0] or round_[d][1]:
                        found.extend(_variant(solver, rule, d, round_[d]))
                step: dict[int, tuple[set, dict]] = {r: (set(), {}) for r in members}
                added += _merge(session, found, step, journal, room - added)
                for r in members:
                    news[r][0].update(step[r][0])
                    news[r][1].update(step[r][1])
                round_ = step
        for r in members:
            if news[r][0] or news[r][1]:
                deltas[r] = news[r]
        if added > room:
            raise Overflow(added)
    return added


def _variant(
    solver: MaintenanceSolver, rule: p.RulePlan, relation: int, delta: tuple[set, dict]
) -> Iterator[tuple[int, tuple, Level, Residues]]:
    known, unknown = delta
    held = solver.relations[relation]
    solver.delta = {relation: (Relation.owning(held.arity, held.store(known)), unknown)}
    try:
        for fact, level, residues in list(solver.derive(rule, "insert")):
            yield rule.head, fact, level, residues
    finally:
        solver.delta = {}


def _opened(
    solver: MaintenanceSolver, rule: p.RulePlan, prefix: int, opened: list[Any]
) -> Iterator[tuple[int, tuple, Level, Residues]]:
    """An insertion variant reading ``DependsOn``, for the facts new open events bring: the
    variant :func:`~.prefix.open_variant` makes, its new event taken from the open events."""
    variant = open_variant(rule, prefix)
    marker = solver.open_relation
    steps = (*variant.before, p.Scan(marker, (p.Bind(variant.event),), "delta"), *variant.steps)
    body = p.RulePlan(rule.rule, rule.head, rule.head_args, steps, variant.slots)
    solver.delta = {marker: (Relation(1, opened), EMPTY)}
    try:
        key = ("open", id(rule))
        compiled = solver.rule(key, body.rule, body.steps, body.slots)
        for state in list(solver.run(compiled, 0, State(binding(body.slots), None, (), ()))):
            head = solver.head(compiled, body.head_args, state)
            if head is not None:
                yield rule.head, *head
    finally:
        solver.delta = {}


def _merge(
    session: Session,
    found: list[tuple[int, tuple, Level, Residues]],
    news: dict[int, tuple[set, dict]],
    journal: Journal,
    room: int,
) -> int:
    """Add what variants derived (known facts to the relations, unknown ones to the
    session's, with what they stand for); how many facts that added."""
    from .maintain import Overflow

    relations = session.state.relations
    added = 0
    known: dict[int, set] = {}
    for r, fact, level, _ in found:
        if level is None:
            known.setdefault(r, set()).add(fact)
    for r, facts in known.items():
        relation = relations[r]
        fresh = relation.add_all(relation.store(facts))
        if fresh:
            journal.append(("known", r, fresh))
            added += len(fresh)
            whole = {(f,) for f in fresh} if relation.arity == 1 else fresh
            news[r][0].update(whole)
            unknown = session.unknown.get(r)
            if unknown:
                for fact in [f for f in whole if f in unknown]:
                    journal.append(("unknown", r, fact, _before(session, r, fact)))
                    del unknown[fact]
                    session.residues.get(r, {}).pop(fact, None)
    for r, fact, level, residues in found:
        if level is None or (ANY not in fact and relations[r].contains(fact)):
            continue
        before = _before(session, r, fact)
        if add_unknown(
            session.unknown.setdefault(r, {}), session.residues.setdefault(r, {}), fact, level, residues
        ):
            journal.append(("unknown", r, fact, before))
            news[r][1][fact] = level
            added += before[0] is None
    session.noted_unknown()
    if added > room:
        raise Overflow(added)
    return added


_MISSING: Any = object()


def _before(session: Session, relation: int, fact: tuple) -> tuple[Fault | None, Any]:
    """What the session holds of an unknown fact (its fault, or None; its residues), to undo."""
    kept = session.residues.get(relation, {})
    residues = kept[fact] if fact in kept else _MISSING
    return session.unknown.get(relation, {}).get(fact), (
        list(residues) if isinstance(residues, list) else residues
    )


def rollback(session: Session, journal: Journal) -> int:
    """Take back what a journal says was added (facts, unknown facts); how many facts."""
    relations = session.state.relations
    gone: dict[int, set] = {}
    taken = 0
    for entry in reversed(journal):
        if len(entry) == 2:  # what the generated pass added: (relation, facts)
            r, facts = entry
            gone.setdefault(r, set()).update(facts)
        elif entry[0] == "known":
            _, r, facts = entry
            gone.setdefault(r, set()).update(facts)
        else:
            _, r, fact, (fault, residues) = entry
            unknown = session.unknown.setdefault(r, {})
            kept = session.residues.setdefault(r, {})
            if fault is None:
                taken += unknown.pop(fact, None) is not None
            else:
                unknown[fact] = fault
            if residues is _MISSING:
                kept.pop(fact, None)
            else:
                kept[fact] = residues
    for r, facts in gone.items():
        relation = relations[r]
        held = relation.base.tuples if isinstance(relation, Prefix) else relation.tuples
        present = {f for f in facts if f in held}
        if present:
            relation.discard_all(present)
            taken += len(present)
    session.noted_unknown()
    return taken


# ---------------------------------------------------------------------------- decisions


class DecisionSolver(StrataSolver):
    """The interpreter over a session deciding ``action``: the maintained relations as the
    session holds them (known and unknown), the relations a decision recomputes computed
    again, the relations asked on demand asked with their arguments given."""

    def __init__(self, session: Session, action: Any) -> None:
        prepared = session.prepared
        plan = session.plan
        facts = Facts.__new__(Facts)
        facts.known = list(session.state.relations)
        facts.unknown = [session.unknown.get(r) or {} for r in range(len(plan.relations))]
        facts.residues = [session.residues.get(r) or {} for r in range(len(plan.relations))]
        for stratum, _, _ in prepared.recompute:
            for r in stratum.relations:
                facts.known[r] = session.seeded(r)
                facts.unknown[r] = {}
                facts.residues[r] = {}
        candidate = prepared.candidate
        if candidate is not None:
            facts.known[candidate] = Relation(plan.relations[candidate].arity, {action})
            facts.unknown[candidate] = {}
            facts.residues[candidate] = {}
        super().__init__(plan, session.functors, facts, session.state.E)
        self.session = session
        # a relation of a stratum the decision recomputes is computed in full, not asked on demand
        computed = {r for stratum, _, _ in prepared.recompute for r in stratum.relations}
        self.demand = prepared.demanded - computed
        self.memo: dict[tuple[int, tuple], Level | bool] = {}

    def prepare(self, opaque: Callable[[p.Stratum], None] | None = None) -> None:
        """Compute the relations the decision recomputes (``opaque``: see
        :meth:`~.unknown.StrataSolver.run_stratum`)."""
        for stratum, _, _ in self.session.prepared.recompute:
            self.run_stratum(stratum, opaque)

    def demanded(self, relation: int) -> bool:
        return relation in self.demand

    def ask(self, relation: int, values: tuple) -> Level | bool:
        key = (relation, values)
        if key not in self.memo:
            self.memo[key] = False  # (asked relations are not recursive)
            self.memo[key] = self.asked(relation, values)
        return self.memo[key]

    def tool_of(self, action: Any) -> str | None:
        return tool_of(self.session, action)


# ------------------------------------------------------------------------------- verdicts

# how to fix what made a call's verdict unknown, when the fault itself does not say
_ADVICE = {
    "rule": "The call's values do not fit the rule: send them with the types the tool documents.",
    "functor": "The call's values cannot be read by the rule: send them in the form the tool documents.",
    "arithmetic": "The call's values make the rule's arithmetic undefined (a division by zero): send other values.",
}


class _Known:
    """A verdict as the interpreter found it, asked as :func:`~.verdict.deny_reasons` asks
    (only known derivations give reasons)."""

    def __init__(self, plan: p.Plan, solver: Solver, derivations: Callable[..., Any]) -> None:
        self.plan = plan
        self.index = plan.relation_index()
        self.errors: list[Any] = []
        self.solver = solver
        self.matches = derivations

    def holds(self, relation: int, values: tuple) -> bool:
        return self.solver.holds(relation, values) is None


def verdict(solver: Solver, action: Any, explains: Any) -> Decision:
    """The decision on ``action`` from what the interpreter finds of its verdict's facts: one
    that holds decides as usual (deny > escalate > allow); one that is unknown refuses the call
    with its fault (an escalation whose verdict is unknown is refused, not put to a person)."""
    plan = solver.plan
    index = plan.relation_index()
    known = _Known(plan, solver, lambda relation, values: derivations(solver, relation, values))
    deny = solver.holds(index["Deny"], (action,))
    if deny is None:
        return Decision(
            action, False, tuple(deny_reasons(known, action, calls=session_calls(explains))), False, explains
        )
    if isinstance(deny, Fault):
        return refusal(action, deny, explains)
    escalate = escalate_relation(plan)
    if escalate is not None:
        level = solver.holds(escalate, (action,))
        if level is None:
            reasons = tuple(deny_reasons(known, action, "Escalate", session_calls(explains)))
            return Decision(action, False, reasons, False, explains, verdict="escalate")
        if isinstance(level, Fault):
            return refusal(action, level, explains)
    if plan.default != "allow":
        level = solver.holds(index["Allow"], (action,))
        if isinstance(level, Fault):
            return refusal(action, level, explains)
        if level is False:
            return default_denial(action, explains)
    return Decision(action, True, (), False, explains)


def refusal(action: Any, fault: Fault, explains: Any) -> Decision:
    """A call refused because its verdict needs a fact an error made unknown."""
    fix = f" ({fault.fix})" if fault.fix else ""
    reason = Reason(
        ERROR_RULE,
        f"the policy could not decide this call, so it is refused: {fault.message}{fix}",
        fault.advice or _ADVICE.get(fault.kind),
        "high",
        code=ERROR_CODES.get(fault.kind, "evaluation-failed"),
        detail=fault.shown,
    )
    return Decision(action, False, (reason,), True, explains)


def derivations(solver: Solver, relation: int, values: tuple) -> Iterator[tuple[p.BoundRule, tuple, tuple]]:
    """The known derivations of a fact, as a match function gives them (deny reasons)."""
    from .unknown import FREE

    for bound in solver.plan.bound_rules[relation]:
        for state in solver.matches(bound, values, record=True):
            if state.level is None:
                yield bound, tuple(None if x is FREE else x for x in state.v), state.matched
