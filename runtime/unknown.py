"""Evaluation where an error blocks only the facts it touches: facts are known, unknown or absent.

The generated code (:mod:`.codegen`) evaluates a policy fast, as long as nothing fails. When a
derivation meets an error — a text compared with a number, a conversion of text that is no
number, a functor that raises — the fact it would derive is neither derived nor known to be
absent: it is **unknown**, with the :class:`~.faults.Fault` saying why. This module evaluates
plans that way (a three-valued evaluation, by interpretation of the plan's steps), for the few
evaluations that meet errors:

* a derivation that uses an unknown fact derives an unknown fact (it is blocked); one that
  does not touch any proceeds as usual, so an error spreads exactly as far as what needs it;
* ``not R(x)`` over an unknown ``R(x)`` is unknown, as is an aggregate over an unknown fact;
* a value that could not be computed is :data:`~.faults.ANY`: a comparison with it is unknown,
  an atom with it matches every fact (binding the value there), and a fact holding it stands
  for facts with any value there.

The result does not depend on the order in which a rule's steps run (the order of the plan, of
a semi-naive variant, or of a rule asked with its head given): a step that could not be
decided because a value was :data:`ANY` is kept aside (*pending*) and decided again once an atom
binds that value. An unknown fact holding :data:`ANY` keeps what was pending when it was derived
(its :class:`Residue`): a value meeting the :data:`ANY` (a fact asked about, an atom with the
value given) is checked against it, so that a fact derived bottom-up, its values unknown, stands
for exactly the facts a rule asked with those values given would find. So a session maintaining its facts incrementally and an evaluation from
scratch find the same unknown facts, which is what lets a session decide every later call
exactly as a from-scratch evaluation would (docs/runtime.md, "Errors").

:class:`Solver` holds the interpreter; :class:`FromScratch` evaluates a whole plan (a batch
evaluation that met errors, and the reference the tests compare sessions with). A monitor
session's own use (its maintained facts, and a decision's volatile relations) is in
:mod:`.session_unknown`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from policyc.compiler import plan as p

from .codegen import FAIL, FALLIBLE, RUNTIME
from .faults import ANY, Describer, Fault
from .functors import wrap
from .limits import TICK, Meter
from .relations import Relation
from .values import Adt, kind, record

Level = Fault | None  # None: known; a Fault: unknown
FREE: Any = type("_Free", (), {"__repr__": lambda self: "<free>"})()


class _NoValue(Exception):
    """An expression has no value (a functor gave none): the binding fails, without an error."""


class _Failed(Exception):
    """An expression failed: the binding goes on with the value unknown, for this fault."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class _Eq:
    """A pending check that an atom's argument equals the value its expression takes, once the
    expression's inputs are known (the atom matched while they were not)."""

    __slots__ = ("expr", "value")

    def __init__(self, expr: p.Expr, value: Any) -> None:
        self.expr = expr
        self.value = value


class _FactCheck:
    """A pending check that the values slots took where an unknown fact held :data:`ANY` are
    values that fact stands for (its residues), once they are known."""

    __slots__ = ("fact", "positions", "relation")

    def __init__(self, relation: int, fact: tuple, positions: tuple[tuple[int, int], ...]) -> None:
        self.relation = relation
        self.fact = fact
        self.positions = positions  # (position in the fact, slot)

    def key(self) -> Any:
        return ("fact", self.relation, self.fact, self.positions)


class Residue:
    """What was pending when an unknown fact holding :data:`ANY` was derived: the rule, the
    binding (its values, its pending steps) and the head's expressions. A value given where the
    fact holds :data:`ANY` is checked by binding it there and deciding the pending steps again."""

    __slots__ = ("args", "key", "rule", "state")

    def __init__(self, rule: Rule, state: State, args: tuple[p.Expr, ...]) -> None:
        self.rule = rule
        self.state = state
        self.args = args
        pending = tuple(_pending_key(item) for item in state.pending)
        self.key = (id(rule), tuple(state.v), pending, args)


def _pending_key(item: Any) -> Any:
    if isinstance(item, _Eq):
        return ("eq", item.expr, item.value)
    if isinstance(item, _FactCheck):
        return item.key()
    return item


Residues = list[Residue] | None  # None: the unknown fact stands for any value where it holds ANY


class State:
    """One binding of a rule's body: slot values, its level, what is pending, what it matched."""

    __slots__ = ("level", "matched", "pending", "v")

    def __init__(self, v: list, level: Level, pending: tuple, matched: tuple) -> None:
        self.v = v
        self.level = level
        self.pending = pending
        self.matched = matched

    def but(self, **changes: Any) -> State:
        state = State(self.v, self.level, self.pending, self.matched)
        for name, value in changes.items():
            setattr(state, name, value)
        return state


class Rule:
    """What the interpreter needs of one rule body: its steps, the rule it comes from and
    how to name its values in messages."""

    __slots__ = ("describer", "rule", "slots", "steps")

    def __init__(self, solver: Solver, rule: int, steps: tuple[p.Step, ...], slots: int) -> None:
        self.rule = rule
        self.steps = steps
        self.slots = slots
        self.describer = Describer(solver.plan, rule, steps, solver.tool_of)


def binding(slots: int) -> list:
    return [FREE] * slots


class Solver:
    """The three-valued interpreter of a plan's rule bodies over a world of facts.

    A world answers, per relation: its known facts (:meth:`known`, a
    :class:`~.relations.Relation`), its unknown facts (:meth:`unknown`, full tuples to their
    fault, possibly holding :data:`ANY`), and for relations answered on demand
    (:meth:`demanded`), whether a fact holds (:meth:`ask`). Subclasses say where each comes
    from."""

    def __init__(self, plan: p.Plan, functors: list[Callable[..., Any]], meter: Meter | None = None) -> None:
        self.plan = plan
        self.meter = meter
        self.errors: list[Any] = []  # what the functor wrappers report, read after each call
        self.F = [wrap(spec, fn, self.errors) for spec, fn in zip(plan.functors, functors, strict=True)]
        self.count = TICK
        self.rules: dict[Any, Rule] = {}
        self.inline_memo: dict[tuple[int, tuple], Level | bool] = {}
        self.fitting: set[Any] = set()  # the checks of residues under way (see fits)
        self.delta: dict[int, tuple[Relation, Mapping[tuple, Fault]]] = {}

    # ------------------------------------------------------------------ what a world answers

    def known(self, relation: int) -> Relation:
        raise NotImplementedError

    def unknown(self, relation: int) -> Mapping[tuple, Fault]:
        raise NotImplementedError

    def demanded(self, relation: int) -> bool:
        return False

    def ask(self, relation: int, values: tuple) -> Level | bool:
        raise NotImplementedError

    def tool_of(self, action: Any) -> str | None:
        return None

    # ------------------------------------------------------------------------ rule bodies

    def rule(self, key: Any, rule: int, steps: tuple[p.Step, ...], slots: int) -> Rule:
        found = self.rules.get(key)
        if found is None:
            found = self.rules[key] = Rule(self, rule, steps, slots)
        return found

    def derive(self, plan: p.RulePlan, variant: Any = None) -> Iterator[tuple[tuple, Level, Residues]]:
        """Each head tuple of a rule plan (as a full tuple) with its level and, for an unknown
        one holding :data:`ANY`, what was pending (once per binding)."""
        rule = self.rule(("rule", id(plan), variant), plan.rule, plan.steps, plan.slots)
        for state in self.run(rule, 0, State(binding(plan.slots), None, (), ())):
            head = self.head(rule, plan.head_args, state)
            if head is not None:
                yield head

    def head(
        self, rule: Rule, args: tuple[p.Expr, ...], state: State
    ) -> tuple[tuple, Level, Residues] | None:
        level = state.level
        values = []
        for expr in args:
            try:
                values.append(self.ev(rule, expr, state.v))
            except _NoValue:
                return None
            except _Failed as failed:
                values.append(ANY)
                level = level or failed.fault
        fact = tuple(values)
        residues: Residues = None
        if level is not None and state.pending and ANY in fact:
            residues = [Residue(rule, state, args)]
        return fact, level, residues

    def matches(self, bound: p.BoundRule, values: tuple, record: bool = False) -> Iterator[State]:
        """The bindings of a rule asked with its head's values given (each a :class:`State`)."""
        rule = self.rule(("bound", id(bound)), bound.rule, bound.steps, bound.slots)
        v = binding(bound.slots)
        deferred: list[tuple[p.Expr, Any]] = []
        for arg, value in zip(bound.head.args, values, strict=True):
            if isinstance(arg, p.Bind):
                if v[arg.slot] is FREE:
                    v[arg.slot] = value
                elif not _agree(v[arg.slot], value):
                    return
            else:
                deferred.append((arg.expr, value))
        state = State(v, None, tuple(_Eq(expr, value) for expr, value in deferred), ())
        settled = self.settle(rule, state) if deferred and self._readable(deferred, v) else state
        if settled is None:
            return
        for found in self.run(rule, 0, settled, record):
            if found.pending:
                again = self.settle(rule, found)
                if again is None:
                    continue
                found = again
                if any(isinstance(item, _Eq) for item in found.pending):
                    found = found.but(level=found.level or _unsettled(rule))
            yield found

    @staticmethod
    def _readable(deferred: list[tuple[p.Expr, Any]], v: list) -> bool:
        from .codegen import slots_read

        return all(all(v[s] is not FREE for s in slots_read(expr)) for expr, _ in deferred)

    def holds(self, relation: int, values: tuple) -> Level | bool:
        """Whether a fact holds: None (known), its fault (unknown) or False."""
        if self.demanded(relation):
            return self.ask(relation, values)
        if self.plan.relations[relation].inline:
            return self.inline(relation, values)
        if any(v is ANY for v in values):
            return _first_level(self._scan_all(relation, "full", [(i, v) for i, v in enumerate(values)]))
        if self.known(relation).contains(values):
            return None
        for fact, fault in self.unknown(relation).items():
            if _unify(fact, values) and self.fits(relation, fact, list(enumerate(values))):
                return fault
        return False

    def residues(self, relation: int) -> Mapping[tuple, Residues]:
        """The residues of a relation's unknown facts (a fact without an entry stands for any
        value where it holds :data:`ANY`)."""
        return _NO_RESIDUES

    def fits(self, relation: int, fact: tuple, values: list[tuple[int, Any]]) -> bool:
        """Whether an unknown fact stands for the given values where it holds :data:`ANY`."""
        residues = self.residues(relation).get(fact)
        if residues is None:
            return True
        given = [(i, value) for i, value in values if fact[i] is ANY and value is not ANY]
        if not given:
            return True
        key = (relation, fact, tuple(given))
        if key in self.fitting:  # a fact whose residue asks about itself: it may hold
            return True
        self.fitting.add(key)
        try:
            return any(self._allows(residue, given) for residue in residues)
        finally:
            self.fitting.discard(key)

    def _allows(self, residue: Residue, given: list[tuple[int, Any]]) -> bool:
        v = list(residue.state.v)
        for i, value in given:
            expr = residue.args[i]
            if isinstance(expr, p.Slot):  # (an expression of an unknown value cannot be checked)
                held = v[expr.index]
                if held is ANY:
                    v[expr.index] = value
                elif not _agree(held, value):
                    return False
        return self.settle(residue.rule, residue.state.but(v=v)) is not None

    def inline(self, relation: int, values: tuple) -> Level | bool:
        key = (relation, values)
        if key in self.inline_memo:
            return self.inline_memo[key]
        self.inline_memo[key] = False  # a cycle through an inline relation does not hold
        found = self.asked(relation, values)
        self.inline_memo[key] = found
        return found

    def asked(self, relation: int, values: tuple) -> Level | bool:
        """A relation's rules asked with its head given: None (a known derivation), the fault of
        an unknown one, or False."""
        level: Level | bool = False
        for bound in self.plan.bound_rules[relation]:
            for state in self.matches(bound, values):
                if state.level is None:
                    return None
                if level is False:
                    level = state.level
        return level

    # ---------------------------------------------------------------------------- steps

    def run(self, rule: Rule, k: int, state: State, record: bool = False) -> Iterator[State]:
        """Every binding the steps from ``k`` on give, from ``state``."""
        steps = rule.steps
        if k == len(steps):
            yield state
            return
        self.count -= 1
        if not self.count:
            self.count = TICK
            if self.meter is not None and self.meter.open:
                self.meter.check()
        step = steps[k]
        for after in self.step(rule, k, step, state, record):
            yield from self.run(rule, k + 1, after, record)

    def step(self, rule: Rule, k: int, step: p.Step, state: State, record: bool) -> Iterable[State]:
        if isinstance(step, p.Scan):
            return self.scan(rule, step, state, record)
        if isinstance(step, p.Range):
            return self.generate(rule, step, state)
        found = self.check(rule, k, step, state)
        return () if found is None else (found,)

    def check(self, rule: Rule, k: int, step: p.Step, state: State) -> State | None:
        """A step that keeps or drops a binding (or binds one slot): the binding after it, or
        None. A step whose inputs are not known yet is pending (the binding goes on, unknown)."""
        v = state.v
        try:
            if isinstance(step, p.Filter):
                x, y = self.ev(rule, step.left, v), self.ev(rule, step.right, v)
                if x is ANY or y is ANY:
                    return state.but(pending=(*state.pending, k))
                try:
                    holds = _compare(step.op, x, y)
                except TypeError:
                    fault = rule.describer.comparison(step.op, step.left, step.right, x, y, v)
                    return state.but(level=state.level or fault)
                return state if holds else None
            if isinstance(step, p.Assign):
                value = self.ev(rule, step.expr, v)
                if value is ANY:
                    if v[step.slot] is FREE:
                        state = _set(state, step.slot, ANY)
                    return state.but(pending=(*state.pending, k))
                current = v[step.slot]
                if current is FREE or current is ANY:
                    return _set(state, step.slot, value)
                return state if _agree(current, value) else None
            if isinstance(step, p.NotExists):
                return self.absent(rule, k, step, state)
            if isinstance(step, p.Test):
                args = tuple(self.ev(rule, a, v) for a in step.args)
                if ANY in args:
                    return state.but(pending=(*state.pending, k))
                answer = self.F[step.functor](*args)
                if answer is FAIL:
                    raise _Failed(rule.describer.functor(step, self._reported(), args, v))
                return state if answer is (not step.negated) else None
            if isinstance(step, p.InlineTest):
                args = tuple(self.ev(rule, a, v) for a in step.args)
                if ANY in args:
                    return state.but(pending=(*state.pending, k))
                level = self.inline(step.relation, args)
                if level is False:
                    return state if step.negated else None
                if level is None:
                    return None if step.negated else state
                return state.but(level=state.level or level)
            if isinstance(step, p.Aggregate):
                return self.aggregate(rule, k, step, state)
        except _NoValue:
            return None
        except _Failed as failed:
            if isinstance(step, p.Assign) and v[step.slot] is FREE:
                state = _set(state, step.slot, ANY)
            if isinstance(step, p.Aggregate) and v[step.slot] is FREE:
                state = _set(state, step.slot, ANY)
            return state.but(level=state.level or failed.fault)
        raise p.PlanError(f"unknown step {step!r}")

    def absent(self, rule: Rule, k: int, step: p.NotExists, state: State) -> State | None:
        v = state.v
        known: list[tuple[int, Any]] = []
        for i, arg in enumerate(step.args):
            if isinstance(arg, p.Match):
                value = self.ev(rule, arg.expr, v)
                if value is ANY:
                    return state.but(pending=(*state.pending, k))
                known.append((i, value))
        relation = step.relation
        if len(known) == len(step.args) and (self.demanded(relation) or self.plan.relations[relation].inline):
            level = self.holds(relation, tuple(value for _, value in known))
            if level is False:
                return state
            return None if level is None else state.but(level=state.level or level)
        found = _first_level(self._scan_all(relation, "full", known))
        if found is False:
            return state
        return None if found is None else state.but(level=state.level or found)

    def aggregate(self, rule: Rule, k: int, step: p.Aggregate, state: State) -> State | None:
        from .prefix import mentions

        v = state.v
        inner_slots = set().union(*(mentions(s) for s in step.body)) if step.body else set()
        if any(v[s] is ANY for s in inner_slots if s < len(v)):
            if v[step.slot] is FREE:
                state = _set(state, step.slot, ANY)
            return state.but(pending=(*state.pending, k))
        inner = Rule.__new__(Rule)
        inner.rule, inner.steps, inner.slots, inner.describer = (
            rule.rule,
            step.body,
            rule.slots,
            rule.describer,
        )
        groups: set[tuple] = set()
        fault: Level = None
        for found in self.run(inner, 0, State(list(v), None, (), ())):
            if found.pending:
                settled = self.settle(inner, found)
                if settled is None:
                    continue
                found = settled
            parts = [found.v[key] for key in step.keys]
            if step.target is not None:
                try:
                    parts.append(self.ev(inner, step.target, found.v))
                except _NoValue:
                    continue
                except _Failed as failed:
                    fault = fault or failed.fault
                    parts.append(ANY)
            if found.level is not None or ANY in parts:
                fault = fault or found.level or _unsettled(rule)
            groups.add(tuple(parts))
        if fault is not None:
            value: Any = ANY
        else:
            value = self._aggregated(rule, step, groups, v)
            if value is _NONE:
                return None
        current = v[step.slot]
        if current is FREE or current is ANY:
            state = _set(state, step.slot, value)
        elif value is not ANY and not _agree(current, value):
            return None
        return state if fault is None else state.but(level=state.level or fault)

    def _aggregated(self, rule: Rule, step: p.Aggregate, groups: set[tuple], v: list) -> Any:
        if step.op == "count":
            return len(groups)
        values = [g[-1] for g in groups]
        try:
            if step.op == "sum":
                return RUNTIME["_sum"](values)
            if not values:
                return _NONE
            if step.op == "min":
                return min(values)
            if step.op == "max":
                return max(values)
            return RUNTIME["_sum"](values) / len(values)
        except TypeError:
            raise _Failed(rule.describer.aggregate(step.op, values)) from None

    def generate(self, rule: Rule, step: p.Range, state: State) -> Iterator[State]:
        v = state.v
        try:
            bounds = [self.ev(rule, e, v) for e in (step.start, step.stop)]
            by = None if step.step is None else self.ev(rule, step.step, v)
        except _NoValue:
            return
        except _Failed as failed:
            yield _set(state, step.slot, ANY).but(level=state.level or failed.fault)
            return
        if ANY in bounds or by is ANY:
            yield _set(state, step.slot, ANY).but(level=state.level or _unsettled(rule))
            return
        problems: list[str] = []

        def wrong(what: str) -> Any:
            problems.append(what)
            return FAIL

        values = RUNTIME["_range"](bounds[0], bounds[1], by, wrong)
        if values is FAIL:
            yield _set(state, step.slot, ANY).but(level=state.level or rule.describer.arithmetic(problems[0]))
            return
        for value in values:
            current = v[step.slot]
            if current is FREE or current is ANY:
                after: State | None = _set(state, step.slot, value)
                if current is ANY and after is not None:
                    after = self.settle(rule, after)
                if after is None:
                    continue
                yield after
            elif _agree(current, value):
                yield state

    def scan(self, rule: Rule, step: p.Scan, state: State, record: bool) -> Iterator[State]:
        from .codegen import slots_read

        v = state.v
        keys: list[tuple[int, Any]] = []  # known values, by position
        refine: list[tuple[int, int]] = []  # positions whose value is unknown and the slot holding it
        eqs: list[tuple[int, p.Expr]] = []  # positions whose expression could not be computed
        binds: list[tuple[int, int]] = []  # positions binding a slot
        later: list[tuple[int, p.Expr]] = []  # positions compared once the atom's slots are bound
        level = state.level
        binding = {arg.slot for arg in step.args if isinstance(arg, p.Bind) and v[arg.slot] is FREE}
        for i, arg in enumerate(step.args):
            if isinstance(arg, p.Skip):
                continue
            if isinstance(arg, p.Bind) and v[arg.slot] is FREE:
                binds.append((i, arg.slot))
                continue
            expr = p.Slot(arg.slot) if isinstance(arg, p.Bind) else arg.expr
            if slots_read(expr) & binding:
                later.append((i, expr))
                continue
            try:
                value = self.ev(rule, expr, v)
            except _NoValue:
                return
            except _Failed as failed:
                value = ANY
                level = level or failed.fault
            if value is ANY:
                if isinstance(expr, p.Slot):
                    refine.append((i, expr.index))
                else:
                    eqs.append((i, expr))
            else:
                keys.append((i, value))
        relation = step.relation
        if self.demanded(relation):
            if binds or later:
                raise p.PlanError(f"relation {relation} is asked on demand with arguments unbound")
            if refine or eqs:  # asked with values unknown: it may hold
                yield state.but(level=level or _unsettled(rule))
                return
            values = tuple(value for _, value in sorted(keys))
            answer = self.ask(relation, values)
            if answer is not False:
                matched = (*state.matched, (relation, values)) if record else state.matched
                yield state.but(level=level or answer, matched=matched)
            return
        exists = not binds and not refine and not eqs and not later and not record
        for fact, fact_level in self._scan_all(relation, step.source, keys):
            after = state
            fact_level = level or fact_level
            if binds or refine or later:
                w = list(v)
                agree = True
                for i, slot in binds:
                    if w[slot] is FREE or w[slot] is ANY:
                        w[slot] = fact[i]
                    elif fact[i] is not ANY and not _agree(w[slot], fact[i]):
                        agree = False
                for i, slot in refine:
                    if fact[i] is not ANY:
                        w[slot] = fact[i]
                pending = state.pending
                for i, expr in later:
                    if not agree:
                        break
                    try:
                        value = self.ev(rule, expr, w)
                    except _NoValue:
                        agree = False
                        break
                    except _Failed as failed:
                        value = ANY
                        fact_level = fact_level or failed.fault
                    if value is ANY:
                        pending = (*pending, _Eq(expr, fact[i]))
                    elif fact[i] is not ANY and not _agree(value, fact[i]):
                        agree = False
                if not agree:
                    continue
                after = state.but(v=w, pending=pending)
            if eqs:
                after = after.but(pending=(*after.pending, *(_Eq(expr, fact[i]) for i, expr in eqs)))
            if fact_level is not level and (binds or refine):  # an unknown fact: what it stands for
                held = [(i, slot) for i, slot in (*binds, *refine) if fact[i] is ANY]
                if held and self.residues(relation).get(fact) is not None:
                    after = after.but(pending=(*after.pending, _FactCheck(relation, fact, tuple(held))))
            after = after.but(level=fact_level)
            if record:
                after = after.but(matched=(*after.matched, (relation, fact)))
            if after.pending and (refine or binds):
                settled = self.settle(rule, after)
                if settled is None:
                    continue
                after = settled
            yield after
            if exists:  # known facts come first: the first match decides whether one holds
                return

    def settle(self, rule: Rule, state: State) -> State | None:
        """Decide again the pending steps of a binding whose values became known; None when one
        of them drops it."""
        while state.pending:
            before = state.pending
            values = list(state.v)
            pending = before
            state = state.but(pending=())
            for item in pending:
                if isinstance(item, _FactCheck):
                    given = [(i, state.v[slot]) for i, slot in item.positions]
                    if not self.fits(item.relation, item.fact, given):
                        return None
                    if any(value is ANY for _, value in given):
                        state = state.but(pending=(*state.pending, item))
                    continue
                if isinstance(item, _Eq):
                    if not _ready(item.expr, state.v):
                        state = state.but(pending=(*state.pending, item))
                        continue
                    try:
                        value = self.ev(rule, item.expr, state.v)
                    except _NoValue:
                        return None
                    except _Failed as failed:
                        state = state.but(level=state.level or failed.fault)
                        continue
                    if value is ANY:
                        state = state.but(pending=(*state.pending, item))
                    elif item.value is not ANY and not _agree(value, item.value):
                        return None
                    continue
                found = self.check(rule, item, rule.steps[item], state)
                if found is None:
                    return None
                state = found
            if state.pending == before and state.v == values:
                break
        return state

    def _reported(self) -> str:
        """What the last failing functor call reported."""
        message = self.errors[-1].message if self.errors else "failed"
        self.errors.clear()
        return message

    # ---------------------------------------------------------------------- expressions

    def ev(self, rule: Rule, e: p.Expr, v: list) -> Any:
        """An expression's value (:data:`ANY` when it reads one); :class:`_NoValue` when a
        functor gives none, :class:`_Failed` when the computation fails."""
        if isinstance(e, p.Slot):
            value = v[e.index]
            if value is FREE:
                raise p.PlanError(f"slot {e.index} read before it is bound")
            return value
        if isinstance(e, p.Const):
            return e.value
        if isinstance(e, p.CallExpr):
            args = tuple(self.ev(rule, a, v) for a in e.args)
            if ANY in args:
                return ANY
            value = self.F[e.functor](*args)
            if value is FAIL:
                if self.errors:
                    raise _Failed(rule.describer.functor(e, self._reported(), args, v))
                raise _NoValue
            return value
        if isinstance(e, p.Arith):
            x, y = self.ev(rule, e.left, v), self.ev(rule, e.right, v)
            if x is ANY or y is ANY:
                return ANY
            return self._arith(rule, e, x, y, v)
        if isinstance(e, p.Neg):
            x = self.ev(rule, e.operand, v)
            if x is ANY:
                return ANY
            try:
                return -x
            except TypeError:
                raise _Failed(rule.describer.operation("-", (e.operand,), (x,), v)) from None
        if isinstance(e, p.Pack):
            fields = [self.ev(rule, a, v) for a in e.args]
            if ANY in fields:
                return ANY
            return Adt((e.tag, *fields)) if e.tag is not None else record(tuple(fields))
        if isinstance(e, p.Field):
            x = self.ev(rule, e.value, v)
            return ANY if x is ANY else x[e.index]
        if isinstance(e, p.Kind):
            x = self.ev(rule, e.value, v)
            return ANY if x is ANY else kind(x)
        raise p.PlanError(f"unknown expression {e!r}")

    def _arith(self, rule: Rule, e: p.Arith, x: Any, y: Any, v: list) -> Any:
        from .evaluator import ARITHMETIC_ERRORS

        op = e.op
        try:
            if op in ("/", "%"):
                if y == 0:
                    raise _Failed(rule.describer.arithmetic(ARITHMETIC_ERRORS[op]))
                return RUNTIME["_div"](x, y) if op == "/" else RUNTIME["_mod"](x, y)
            if op in FALLIBLE:
                value = RUNTIME[FALLIBLE[op]](x, y)
                if value is FAIL:
                    raise _Failed(rule.describer.arithmetic(ARITHMETIC_ERRORS[op]))
                return value
            return _OPERATIONS[op](x, y)
        except TypeError:
            raise _Failed(rule.describer.operation(op, (e.left, e.right), (x, y), v)) from None

    # ------------------------------------------------------------------------- facts

    def _scan_all(
        self, relation: int, source: str, keys: list[tuple[int, Any]]
    ) -> Iterator[tuple[tuple, Level]]:
        """The facts of a relation (or of its delta) agreeing with the known values at their
        positions: its known facts first (level None), then its unknown ones."""
        if source == "delta":
            known, unknown = self.delta[relation]
        else:
            known, unknown = self.known(relation), self.unknown(relation)
        concrete = [(i, value) for i, value in keys if value is not ANY]
        if concrete:
            positions = tuple(i for i, _ in concrete)
            key = concrete[0][1] if len(concrete) == 1 else tuple(value for _, value in concrete)
            facts: Iterable[tuple] = _select(known, positions, key)
        else:
            facts = known.as_tuples() if known.arity == 1 else iter(known.tuples)
        for fact in facts:
            yield fact, None
        for fact, fault in list(unknown.items()):
            if all(fact[i] is ANY or _agree(fact[i], value) for i, value in concrete):
                if self.fits(relation, fact, concrete):
                    yield fact, fault


# what an operator computes, as the generated code does (:mod:`.codegen`)
_OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
    **{name: RUNTIME[helper] for name, helper in {"land": "_land", "lor": "_lor", "lxor": "_lxor"}.items()},
    "max": lambda a, b: b if b > a else a,
    "min": lambda a, b: b if b < a else a,
}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_NONE: Any = object()  # an aggregate with no value (the minimum of nothing)
_NO_RESIDUES: Mapping[tuple, Residues] = {}


def _compare(op: str, x: Any, y: Any) -> bool:
    return _COMPARE[op](x, y)


def _agree(x: Any, y: Any) -> bool:
    """Two values are the same value (``1 == 1.0`` is, as in the generated code)."""
    try:
        return bool(x == y)
    except Exception:
        return False


def unify(fact: tuple, values: tuple) -> bool:
    """Whether a fact (which may hold :data:`ANY`) stands for the given values."""
    return _unify(fact, values)


def _unify(fact: tuple, values: tuple) -> bool:
    return all(f is ANY or v is ANY or _agree(f, v) for f, v in zip(fact, values, strict=True))


def _ready(expr: p.Expr, v: list) -> bool:
    from .codegen import slots_read

    return all(v[s] is not FREE for s in slots_read(expr))


def _set(state: State, slot: int, value: Any) -> State:
    v = list(state.v)
    v[slot] = value
    return state.but(v=v)


def _first_level(found: Iterable[tuple[tuple, Level]]) -> Level | bool:
    """None when a known fact is among ``found``, else the fault of the first unknown one, else
    False."""
    level: Level | bool = False
    for _, fact_level in found:
        if fact_level is None:
            return None
        if level is False:
            level = fact_level
    return level


def _select(relation: Relation, positions: tuple[int, ...], key: Any) -> Iterable[tuple]:
    if len(positions) == relation.arity:
        fact = key if isinstance(key, tuple) and relation.arity > 1 else (key,)
        return [fact] if relation.contains(fact) else []
    return relation.select(positions, key)


def _unsettled(rule: Rule) -> Fault:
    """The fault of a binding that needs a value an earlier error left unknown."""
    info = rule.describer.info
    return Fault("rule", info.id, f"rule `{info.id}` needs a value that could not be computed", None)


# ------------------------------------------------------------------------ from scratch


class Facts:
    """The known and unknown facts of every relation of a plan."""

    def __init__(self, plan: p.Plan) -> None:
        self.known = [Relation(spec.arity) for spec in plan.relations]
        self.unknown: list[dict[tuple, Fault]] = [{} for _ in plan.relations]
        self.residues: list[dict[tuple, Residues]] = [{} for _ in plan.relations]

    def add(self, relation: int, fact: tuple, level: Level, residues: Residues = None) -> bool:
        """Add a fact at its level (an unknown one with what it stands for); whether it is new,
        or stands for more than it did (known beats unknown)."""
        held = self.known[relation]
        if level is None:
            if held.contains(fact):
                return False
            held.add_all(held.store([fact]))
            self.unknown[relation].pop(fact, None)
            self.residues[relation].pop(fact, None)
            return True
        if ANY not in fact and held.contains(fact):
            return False
        return add_unknown(self.unknown[relation], self.residues[relation], fact, level, residues)


def add_unknown(
    unknown: dict[tuple, Fault], kept: dict[tuple, Residues], fact: tuple, level: Fault, residues: Residues
) -> bool:
    """Add an unknown fact, or widen what one stands for; whether anything changed."""
    if fact not in unknown:
        unknown[fact] = level
        if residues is not None:
            kept[fact] = list(residues)
        return True
    had = kept.get(fact)
    if had is None:  # it stands for any value already
        return False
    if residues is None:
        del kept[fact]
        return True
    keys = {r.key for r in had}
    fresh = [r for r in residues if r.key not in keys]
    had.extend(fresh)
    return bool(fresh)


class StrataSolver(Solver):
    """A solver that evaluates whole strata bottom-up into :class:`Facts` (semi-naive, with
    unknown facts as new facts like known ones)."""

    def __init__(
        self,
        plan: p.Plan,
        functors: list[Callable[..., Any]],
        facts: Facts,
        meter: Meter | None = None,
    ) -> None:
        super().__init__(plan, functors, meter)
        self.facts = facts

    def known(self, relation: int) -> Relation:
        return self.facts.known[relation]

    def unknown(self, relation: int) -> Mapping[tuple, Fault]:
        return self.facts.unknown[relation]

    def residues(self, relation: int) -> Mapping[tuple, Residues]:
        return self.facts.residues[relation]

    def run_stratum(self, stratum: p.Stratum, opaque: Callable[[p.Stratum], None] | None = None) -> None:
        """Evaluate one stratum. A stratum whose relations keep a choice of their facts or drop
        dominated ones (``opaque``, the evaluator's own code over the known facts) has all of
        its relations unknown as soon as anything it reads or derives is."""
        members = stratum.relations
        if stratum.subsumptions or any(self.plan.relations[r].choice for r in members):
            self._opaque(stratum, opaque)
            return
        news: dict[int, tuple[set, dict]] = {r: (set(), {}) for r in members}
        for rule in stratum.rules:
            self._emit(rule, news)
        if not stratum.recursive:
            return
        delta = {r: (set(self.facts.known[r].as_tuples()), dict(self.facts.unknown[r])) for r in members}
        while any(known or unknown for known, unknown in delta.values()):
            self.delta = {
                r: (Relation.owning(self.plan.relations[r].arity, self.facts.known[r].store(known)), unknown)
                for r, (known, unknown) in delta.items()
            }
            news = {r: (set(), {}) for r in members}
            for rule in stratum.delta_rules:
                source = _delta_relation(rule)
                if delta[source][0] or delta[source][1]:
                    self._emit(rule, news)
            delta = news
        self.delta = {}

    def _emit(self, rule: p.RulePlan, news: dict[int, tuple[set, dict]]) -> None:
        for fact, level, residues in list(self.derive(rule)):  # (the rule may read its head)
            if self.facts.add(rule.head, fact, level, residues):
                known, unknown = news[rule.head]
                if level is None:
                    known.add(fact)
                else:
                    unknown[fact] = level

    def _opaque(self, stratum: p.Stratum, opaque: Callable[[p.Stratum], None] | None) -> None:
        reads = {r for rule in stratum.rules for r, _ in p.reads(rule.steps)}
        unknown = next((f for r in reads for f in self.facts.unknown[r].values()), None)
        if opaque is not None:
            try:
                opaque(stratum)
            except Exception as error:  # the evaluator's code met an error
                info = self.plan.rules[stratum.rules[0].rule] if stratum.rules else None
                unknown = unknown or Fault(
                    "rule", info.id if info else "", f"{type(error).__name__}: {error}"
                )
        if unknown is not None:
            for r in stratum.relations:
                self.facts.unknown[r][(ANY,) * self.plan.relations[r].arity] = unknown


def _delta_relation(rule: p.RulePlan) -> int:
    for step in rule.steps:
        if isinstance(step, p.Scan) and step.source == "delta":
            return step.relation
    raise p.PlanError("a delta rule scans a delta")


class FromScratch(StrataSolver):
    """A whole plan evaluated three-valued from given input facts (per relation, tuples)."""

    def __init__(
        self,
        plan: p.Plan,
        functors: list[Callable[..., Any]],
        inputs: Mapping[int, Iterable[tuple]],
        meter: Meter | None = None,
        opaque: Callable[[p.Stratum], None] | None = None,
    ) -> None:
        super().__init__(plan, functors, Facts(plan), meter)
        for r, rows in inputs.items():
            held = self.facts.known[r]
            held.add_all(held.store(tuple(row) for row in rows))
        self.opaque = opaque
        for stratum in plan.strata:
            self.run_stratum(stratum, opaque)


def from_scratch(
    compiled: Any, functors: list[Callable[..., Any]], limits: Any, inputs: Mapping[int, Any]
) -> FromScratch:
    """A compiled plan evaluated three-valued from an evaluation's inputs (per relation, tuples
    or a relation), within the limits (:class:`~.limits.LimitExceeded` past them). Strata that
    keep a choice of facts or drop dominated ones run the generated code over the known facts."""
    from .evaluator import EvalError, Evaluation

    rows = {r: (given.as_tuples() if isinstance(given, Relation) else given) for r, given in inputs.items()}
    solver: FromScratch | None = None
    entries = {id(stratum): (base, deltas) for stratum, base, deltas in compiled.strata}

    def opaque(stratum: p.Stratum) -> None:
        assert solver is not None
        evaluation = Evaluation(compiled, functors, limits)
        evaluation.relations = solver.facts.known
        base, deltas = entries[id(stratum)]
        evaluation.run_stratum(stratum, base, deltas)
        if evaluation.errors:
            raise RuntimeError("; ".join(e.message for e in evaluation.errors if isinstance(e, EvalError)))

    meter = Meter(limits, lambda: 0, lambda op: FAIL, bool(compiled.plan.functors))
    opened = meter.start(what="evaluation")
    try:
        solver = FromScratch.__new__(FromScratch)
        FromScratch.__init__(solver, compiled.plan, functors, rows, meter, opaque)
    finally:
        if opened:
            meter.stop()
    return solver
