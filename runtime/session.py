"""The reference monitor: sessions that record events and decide actions incrementally.

A :class:`Monitor` prepares a policy for sessions once; a :class:`Session` holds the facts of
one execution and decides each candidate action against everything recorded so far.

**What is maintained and what is computed per decision.** A relation is *incremental* when its
rules only join relations that are themselves incremental (inputs, recursion among them,
comparisons, functors): as facts only ever get added to a session, such a relation only gains
facts, so it is maintained as events arrive, by semi-naive evaluation of each new batch of
facts through the rules (every rule has a variant reading one atom's new facts). Everything
else — relations using negation, aggregates or inline relations over facts that may still
grow, and anything depending on the action being decided (``Candidate``) — is *volatile*:
recomputing it after each event would not scale, so a decision asks about it only as far as it
needs. ``Deny(a)`` and ``Allow(a)`` are evaluated with ``a`` given: each rule's body runs with
the action bound, reading the maintained relations through their indexes and asking about
other volatile relations with their arguments bound (on demand, remembered for the decision).
Only a volatile relation that some rule needs *in full* (scanned with unbound arguments,
aggregated over, recursive) is recomputed for the decision, from the maintained relations.
An input relation that also has volatile rules is recomputed the same way, starting from the
facts given for it (kept aside as they arrive).

For a policy whose decisions only look at the action and what it depends on, a decision then
costs the same whatever the length of the session.

**Where the time goes.** Maintenance is one generated function per plan
(:mod:`~policyc.runtime.maintain`): a stratum runs only when a relation its insertion variants
read has new facts. A session stores only the input relations some rule reads: an event becomes
facts of those relations alone (the events themselves are kept, for the event functors and for
explanations, which rebuild every fact from them). When ``Deny`` (and ``Allow`` under
``.default deny``) are maintained and nothing is recomputed per decision, a verdict is a lookup
in the maintained relations; deny reasons are then found as for any other verdict.

**Failing closed.** A malformed event, a failing functor while facts are being maintained or a
limit poisons the session: every later decision is a denial that says why (the maintained facts
may be incomplete). A failure while deciding denies that decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from policyc.compiler import plan as p
from policyc.stdlib.events import SESSION_FUNCTORS, EventError, check_event, event_facts, session_functors

from . import codegen, maintain
from .evaluator import CompiledPlan, EvalError, Evaluation, LimitExceeded, Limits
from .facts import FactsError, FactsInput, validate
from .functors import is_session_placeholder, wrap
from .prefix import Prefix
from .relations import Relation
from .verdict import Decision, Reason, decide

_NOTHING = object()

UNKNOWN_ACTION = Reason(
    "policyc:unknown-action",
    "the action was never recorded in this session, so it cannot be decided and is refused",
    "Record the call (`session.authorize(event)`) before deciding it.",
    "high",
)


class SessionPlan:
    """A plan prepared for sessions: what is maintained, what is asked on demand, what is
    recomputed per decision, and the code for each (shared by every session)."""

    def __init__(self, plan: p.Plan, compiled: CompiledPlan) -> None:
        self.plan = plan
        self.compiled = compiled
        index = plan.relation_index()
        self.candidate = index.get("Candidate")
        relations = plan.relations
        rules_of: dict[int, list[p.RulePlan]] = {r: [] for r in range(len(relations))}
        stratum_of: dict[int, p.Stratum] = {}
        for stratum in plan.strata:
            for r in stratum.relations:
                stratum_of[r] = stratum
            for rule in (*stratum.rules, *stratum.delta_rules):
                rules_of[rule.head].append(rule)

        incremental: set[int] = set()
        for stratum in plan.strata:
            members = [r for r in stratum.relations if not relations[r].inline and r != self.candidate]
            if not members or len(members) != len([r for r in stratum.relations if not relations[r].inline]):
                continue
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
            if stratum_of[r].recursive:
                materialize(r)
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
            and (r in read or spec.name in ("Deny", "Allow"))
        }
        for r in seeded:
            materialize(r)
        self.seeded = frozenset(seeded)
        for name in ("Deny", "Allow"):
            if name in index:
                demand(index[name])
        self.demanded = frozenset(demanded)
        self.materialized = frozenset(materialized)
        self.stratum_of = stratum_of

        # code: one insertion pass over the incremental strata, demand-mode rules of demanded relations
        self.stored = frozenset(
            r
            for r, spec in enumerate(relations)
            if spec.input and r in incremental and (r in read or spec.name in ("Deny", "Allow"))
        )
        maintained = [stratum for stratum in plan.strata if any(r in incremental for r in stratum.relations)]
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
        )
        self.deny, self.allow = deny, (None if plan.default == "allow" else allow)
        self.wanted = {spec.name: r for r, spec in enumerate(relations) if r in self.stored or r in seeded}


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
        for rule in (*stratum.rules, *stratum.delta_rules, *stratum.insert_rules):
            read.update(r for r, _ in p.reads(rule.steps))
    for rules in plan.bound_rules:
        for bound in rules:
            read.update(r for r, _ in p.reads(bound.steps))
    return read


class Monitor:
    """Decides the actions of agent sessions against a policy.

    >>> import policyc
    >>> policy = policyc.load('''
    ... .import events
    ... Tainted(e) :- Label(e, "untrusted").
    ... Tainted(e) :- DependsOn(e, d), Tainted(d).
    ... @id("no-tainted-mail") @message("{a} depends on untrusted input")
    ... Deny(a) :- Action(a), is_tool(a, "send_email"), Tainted(a).
    ... ''')
    >>> session = policyc.Monitor(policy).session("s1")
    >>> session.record({"id": "u1", "kind": "user_message", "text": "Summarize the doc"})
    >>> session.record({"id": "r1", "kind": "tool_result", "text": "...", "labels": ["untrusted"]})
    >>> decision = session.authorize({"id": "a1", "kind": "tool_call", "tool": "send_email"})
    >>> decision.allowed, decision.reasons[0].message
    (False, 'a1 depends on untrusted input')
    """

    def __init__(
        self,
        policy: Any,
        *,
        limits: Limits | None = None,
        thresholds: Any = None,
        detector: Any = None,
        forecast: Any = None,
    ) -> None:
        self.policy = policy
        self.limits = limits or policy.limits
        self.prepared = SessionPlan(policy.plan, policy.compiled)
        from policyc.risk.enforce import enforcement

        # per-field risk budgets (policyc.risk): None unless the policy imports `risk`
        self.risk = enforcement(policy, thresholds, detector)
        # the forecast model (policyc.forecast): None unless one is given
        self.forecaster = None
        if forecast is not None:
            from policyc.forecast.monitor import attach

            self.forecaster = attach(forecast, self)

    def session(
        self, session_id: str, principal: str | None = None, roles: tuple[str, ...] | list[str] = ()
    ) -> Session:
        return Session(self, session_id, principal, tuple(roles))


class Session:
    def __init__(
        self, monitor: Monitor, session_id: str, principal: str | None, roles: tuple[str, ...]
    ) -> None:
        self.monitor = monitor
        self.id = session_id
        self.principal = principal
        self.roles = roles
        prepared = monitor.prepared
        self.prepared = prepared
        self.plan = prepared.plan
        self.events: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.sticky: list[EvalError] = []  # problems that make every later decision a denial
        self.errors: list[EvalError] = []  # what the current question found (the verdict reads it)
        functors = list(monitor.policy.functors)
        answers = session_functors(self.events)
        for i, spec in enumerate(self.plan.functors):
            if spec.name in SESSION_FUNCTORS and is_session_placeholder(functors[i]):
                functors[i] = answers[spec.name]
        self.functors = functors
        self.state = Evaluation(prepared.compiled, functors, monitor.limits)
        self.state.errors = self._sink = []
        self.state.F = [
            wrap(spec, fn, self._sink) for spec, fn in zip(self.plan.functors, functors, strict=True)
        ]
        self.V: dict[int, Callable[..., Any]] = {r: self._demand(r) for r in prepared.demanded}
        self.memo: dict[tuple[int, tuple], Any] = {}
        self.given: list[tuple[int, set[tuple]]] = []  # facts given other than by events, in order
        self.named: set[Any] = set()  # the values given facts hold (actions that can be decided)
        self.seeds: dict[int, set[tuple]] = {r: set() for r in prepared.seeded}  # see SessionPlan
        self.candidate: Any = _NOTHING  # the action decided last
        self.dirty = True  # facts arrived since the volatile relations were last recomputed
        self.index = self.plan.relation_index()
        state = self.state
        self.position: dict[str, int] = {}  # each event's place in the order
        self.depends = None if prepared.prefix is None else Prefix(self.order, self.position)
        if self.depends is not None:
            state.relations[prepared.prefix] = self.depends
        self._maintain = prepared.bind(state.relations, state.F, state.I, state.E, self._rule_failed)
        relations = state.relations
        self._verdict = (
            (
                relations[prepared.deny].tuples,
                None if prepared.allow is None else relations[prepared.allow].tuples,
            )
            if prepared.direct
            else None
        )
        identity: dict[str, set[tuple]] = {}
        if principal is not None:
            identity["Principal"] = {(principal,)}
        if roles:
            identity["HasRole"] = {(role,) for role in roles}
        self._start(identity)
        self.risk = monitor.risk  # scores the arguments with a role of each call (policyc.risk)
        if self.risk is not None and (start := self.risk.start_facts()):
            self.add_facts(start)

    # -------------------------------------------------------------------------- recording

    def record(self, event: Mapping[str, Any]) -> None:
        """Add an event to the session. A malformed one, or any failure while recording it,
        poisons the session: every later decision denies, saying why."""
        try:
            copy = dict(event) if type(event) is dict or isinstance(event, Mapping) else event
            checked = check_event(copy, self.events)
        except EventError as error:
            self.sticky.append(EvalError("event", f"malformed event: {error}"))
            return
        except Exception as error:  # a mapping that fails to copy, a key that fails to hash, ...
            self.sticky.append(EvalError("event", f"malformed event: {type(error).__name__}: {error}"))
            return
        e = checked["id"]
        order = self.order
        self.events[e] = checked
        try:
            # a call is scored against the events before it: before it joins the order (no copy)
            scored = (
                self.risk.facts(checked, self.events, order)
                if self.risk is not None and checked["kind"] == "tool_call"
                else None
            )
            facts = event_facts(checked, len(order), order, self.prepared.wanted, self.depends is not None)
        except Exception as error:  # nothing of the event is kept
            del self.events[e]
            self.sticky.append(
                EvalError("event", f"recording event {e!r} failed: {type(error).__name__}: {error}")
            )
            return
        self.position[e] = len(order)
        order.append(e)
        try:
            if self.depends is not None and checked.get("deps") is None:
                self.depends.open_events((e,))
                facts["open"] = [e]
            if facts:
                if self.seeds:
                    self._seed(facts)
                self._insert_indexed(facts)
            if scored:
                self.add_facts(scored)
        except Exception as error:  # the maintained facts may be incomplete
            self.sticky.append(
                EvalError("event", f"recording event {e!r} failed: {type(error).__name__}: {error}")
            )

    def add_facts(self, facts: FactsInput) -> None:
        """Add domain facts (rows per input relation), checked like evaluation facts. Malformed
        facts poison the session."""
        try:
            checked = validate(self.plan, facts, f"session {self.id}")
        except FactsError as error:
            self.sticky.append(EvalError("facts", str(error)))
            return
        except Exception as error:  # rows that fail to iterate or to hash
            self.sticky.append(
                EvalError("facts", f"session {self.id}: malformed facts: {type(error).__name__}: {error}")
            )
            return
        try:
            self._give(checked)
        except Exception as error:
            self.sticky.append(EvalError("facts", f"adding facts failed: {type(error).__name__}: {error}"))

    def decide(self, action: Any) -> Decision:
        """The verdict on an action, given everything recorded so far. An action that was
        never recorded (no event has its id and no given fact names it) is denied: deciding it
        is a mistake of the host, which must not fail open."""
        started = time.monotonic()
        if not self._known(action) and not self.sticky:  # a poisoned session says why it is
            return self._timed(action, Decision(action, False, (UNKNOWN_ACTION,), True, self), started)
        verdict = self._verdict
        if verdict is None or self.sticky:
            return self._decide(action, started, prepare=True)
        deny, allow = verdict  # the verdict reads maintained relations only: nothing to prepare
        try:
            allowed = action not in deny and (allow is None or action in allow)
        except TypeError:  # an action that cannot be a value of the policy
            return self._decide(action, started, prepare=True)
        self.candidate = action
        if not allowed:
            return self._decide(action, started, prepare=False)
        if self.errors:
            self.errors = []
        return self._timed(action, Decision(action, True, (), False, self.view(action)), started)

    def authorize(self, event: Mapping[str, Any]) -> Decision:
        """Record a candidate action and decide it."""
        self.record(event)
        action = event.get("id") if type(event) is dict or isinstance(event, Mapping) else None
        return self.decide(action)

    # ------------------------------------------------------------------------- internals

    def _known(self, action: Any) -> bool:
        """Whether the action is a recorded event or a value some given fact names."""
        try:
            return action is not None and (action in self.events or action in self.named)
        except TypeError:  # unhashable: no event or fact can name it
            return False

    def _decide(self, action: Any, started: float, prepare: bool) -> Decision:
        self.errors = list(self.sticky)
        state = self.state
        limit = self.monitor.limits.max_seconds
        # the limits hold for the decision as a whole, checked as its rules run
        opened = state.E.start(None if limit is None else started + limit, what="decision")
        held = state.facts  # what is recomputed for a decision counts while it is decided
        try:
            if prepare and not self.errors:
                try:
                    self._prepare(action)
                except LimitExceeded as error:
                    self.errors.append(EvalError("limit", str(error)))
                except Exception as error:
                    self.errors.append(EvalError("rule", f"deciding failed: {type(error).__name__}: {error}"))
            try:
                decision = decide(self, action)
            except LimitExceeded as error:  # asking about a relation on demand hit a limit
                self.errors.append(EvalError("limit", str(error)))
                decision = decide(self, action)
        finally:
            state.facts = held
            if opened:
                state.E.stop()
        self.errors.extend(self._drain())
        if self.errors and not decision.errored:
            decision = decide(self, action)
        return self._timed(action, decision, started)

    def _timed(self, action: Any, decision: Decision, started: float) -> Decision:
        """The decision, or a denial when it took longer than the limit."""
        limit = self.monitor.limits.max_seconds
        if limit is not None and decision.allowed and time.monotonic() - started > limit:
            self.errors.append(
                EvalError("limit", f"the decision took longer than {limit:g} s, the time limit")
            )
            decision = decide(self, action)
        if self.monitor.forecaster is not None:  # a forecaster may stop the session (policyc.forecast)
            decision = self.monitor.forecaster.intervene(self, decision)
        if decision.evaluation is self:
            decision = replace(decision, evaluation=self.view(action))
        return decision

    def forecast(self) -> Any:
        """The probability of staying safe from the current step, by the monitor's forecast
        model (see docs/forecasting.md)."""
        from policyc.forecast.monitor import session_forecast

        return session_forecast(self)

    def view(self, action: Any) -> SessionView:
        """The session as it is now, deciding ``action`` (what a decision's ``explain`` explains)."""
        return SessionView(self, len(self.order), len(self.given), action)

    def _drain(self) -> list[EvalError]:
        found = list(self._sink)
        self._sink.clear()
        return found

    def _start(self, identity: dict[str, set[tuple]]) -> None:
        """What the policy derives before any event (its facts, rules needing no input)."""
        incremental = self.prepared.incremental
        try:
            for stratum, base, deltas in self.prepared.compiled.strata:
                if base and all(r in incremental for r in stratum.relations):
                    self.state.run_stratum(stratum, base, deltas, None)
        except Exception as error:  # a limit, or code failing on the policy's own facts
            self.sticky.append(EvalError("rule", f"starting the session failed: {error}"))
        self._settle()
        self._give({self.index[name]: rows for name, rows in identity.items() if name in self.index})

    def _give(self, facts: dict[int, set[tuple]]) -> None:
        """Facts given other than by events: kept for explanations, and maintained."""
        stored = self.prepared.stored
        named = self.named
        for r, rows in facts.items():
            self.given.append((r, set(rows)))
            for row in rows:
                named.update(row)
        if self.seeds:
            self._seed(facts)
        self._insert_indexed({r: set(rows) for r, rows in facts.items() if r in stored})

    def _seed(self, facts: dict[int, set[tuple]]) -> None:
        """Keep the given facts of relations recomputed per decision (taken out of ``facts``)."""
        for r in [r for r in facts if r in self.seeds]:
            self.seeds[r].update(facts.pop(r))
            self.dirty = True

    def _insert_indexed(self, facts: dict[int, set[tuple]]) -> None:
        """Add new facts of stored input relations (the sets are consumed) and everything
        they derive."""
        state = self.state
        opened = state.E.start(None, "update of the session's facts")  # checked as the rules run
        try:
            added = self._maintain(facts, state.limits.max_facts - state.facts)
        except maintain.Overflow as overflow:
            added = overflow.args[0]
            self.sticky.append(
                EvalError("limit", f"more than {state.limits.max_facts:,} facts in the session")
            )
        except LimitExceeded as limit:  # the maintained facts are incomplete
            added = 0
            self.dirty = True
            self.sticky.append(EvalError("limit", str(limit)))
        finally:
            if opened:
                state.E.stop()
        if added:
            state.facts += added
            self.dirty = True
        if self._sink:
            self._settle()

    def _rule_failed(self, rule: int, error: Exception) -> None:
        info = self.plan.rules[rule]
        self._sink.append(EvalError("rule", f"rule `{info.id}` failed: {type(error).__name__}: {error}"))

    def _settle(self) -> None:
        """Problems found while maintaining facts stay: the maintained state may be incomplete."""
        self.sticky.extend(self._drain())

    def _prepare(self, action: Any) -> None:
        state = self.state
        prepared = self.prepared
        relations = state.relations
        candidate = prepared.candidate
        if candidate is not None:
            relations[candidate] = Relation(relations[candidate].arity, {action})
        self.candidate = action
        self.memo.clear()
        state.forget()
        if prepared.recompute and (self.dirty or candidate in prepared.materialized):
            for r in prepared.materialized:
                if r != candidate:
                    relations[r] = self.seeded(r)
            for stratum, base, deltas in prepared.recompute:
                state.run_stratum(stratum, base, deltas, None)
        self.dirty = False

    def seeded(self, relation: int) -> Relation:
        """A fresh relation holding the facts given for a relation recomputed per decision
        (where computing it starts)."""
        arity = self.plan.relations[relation].arity
        given = self.seeds.get(relation, ())
        return Relation(arity, (f[0] for f in given) if arity == 1 else given)

    def _demand(self, relation: int) -> Callable[..., Any]:
        def holds(*values: Any) -> Any:
            key = (relation, values)
            found = self.memo.get(key)
            if found is not None:
                return found
            found = False
            state = self.state
            for _, match in self.prepared.demand_rules[relation]:
                for _ in match(state.relations, state.F, state.I, state.E, self.V, *values):
                    found = True
                    break
                if found:
                    break
            self.memo[key] = found
            return found

        return holds

    # ------------------------------------------------------------- the questions verdicts ask

    def holds(self, relation: int, values: tuple) -> bool:
        prepared = self.prepared
        if relation in prepared.demanded:
            return self.V[relation](*values) is True
        if self.plan.relations[relation].inline:
            return self.state.I[relation](*values) is True
        return self.state.relations[relation].contains(values)

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[p.BoundRule, tuple, tuple]]:
        state = self.state
        if relation in self.prepared.demanded:
            for bound, match in self.prepared.demand_rules[relation]:
                for slots, matched in match(state.relations, state.F, state.I, state.E, self.V, *values):
                    yield bound, slots, matched
        else:
            yield from state.matches(relation, values)

    def explanation(
        self, events: int | None = None, given: int | None = None, action: Any = _NOTHING
    ) -> Evaluation:
        """The session's facts evaluated from scratch (explanations walk whole relations): the
        first ``events`` events and ``given`` batches of given facts, deciding ``action`` (by
        default, everything so far and the action decided last)."""
        evaluation = Evaluation(self.prepared.compiled, self.functors, self.monitor.limits)
        facts: dict[int, set[tuple]] = {}
        for r, rows in self.given[:given]:
            facts.setdefault(r, set()).update(rows)
        inputs = {spec.name: r for r, spec in enumerate(self.plan.relations) if spec.input}
        order = self.order[:events]
        implicit = self.depends is not None
        for position, e in enumerate(order):
            event = self.events[e]
            earlier = order[:position] if event.get("deps") is None and not implicit else ()
            for r, rows in event_facts(event, position, earlier, inputs, implicit).items():
                facts.setdefault(r, set()).update(rows)
        if implicit:
            events = self.events
            position = self.position

            def depends() -> Prefix:
                made = Prefix(order, position)
                made.open_events(e for e in order if events[e].get("deps") is None)
                return made

            evaluation.keep(self.prepared.prefix, depends)
        candidate = self.prepared.candidate
        if action is _NOTHING:
            action = self.candidate
        if candidate is not None and action is not _NOTHING:
            facts[candidate] = {(action,)}
        evaluation.load(facts)
        evaluation.run()
        return evaluation


class SessionView:
    """A session as it was when it decided an action: what ``Decision.explain`` explains."""

    __slots__ = ("action", "events", "given", "session")

    def __init__(self, session: Session, events: int, given: int, action: Any) -> None:
        self.session = session
        self.events = events
        self.given = given
        self.action = action

    @property
    def plan(self) -> p.Plan:
        return self.session.plan

    def explanation(self) -> Evaluation:
        return self.session.explanation(self.events, self.given, self.action)
