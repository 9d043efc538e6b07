"""From a checked, stratified program to an evaluation :class:`~policyc.compiler.plan.Plan`.

For every rule the planner numbers the variables (slots) and orders the body greedily:
whatever can be decided with the slots bound so far runs first (comparisons, assignments,
negations, foreign predicates, inline relations, aggregates whose grouping variables are
bound), then the atom with the most known arguments is scanned (first one whose known
arguments hold a key of its relation, ``.key``: it finds at most one fact; in a semi-naive
variant, the delta atom always comes first: it is the smallest). Arguments known at a scan become
index lookups at runtime. An atom that binds nothing the rule uses (``e(_)``, ``e(x, _)``
with ``x`` known; a variable occurring once counts as ``_``) is an existence check, placed
where it can first run and done once there. When every atom left has an argument computed
from variables only another binds (``e(x + 1, y), e(y + 1, x)``), one is scanned with those
arguments bound apart and compared with their expressions once these can be computed.

A recursive stratum gets *base* rules (no atom of the stratum in the body), evaluated once,
and one *delta variant* per recursive atom of every other rule, evaluated each round with
that atom reading only the facts derived in the previous round (semi-naive evaluation).

A rule in shadow mode (``@mode("shadow")`` on a ``Deny`` rule) is planned with a relation of
its own as head (``Deny@shadow``, in a stratum of its own right after ``Deny``'s): the enforced
verdict never reads it, and a monitor reports what it derives as would-deny.

Every rule is also planned with its head given (:class:`~policyc.compiler.plan.BoundRule`):
that is how inline relations are evaluated, and how deny reasons and explanations find the
bindings that derive a particular fact.

>>> from policyc.compiler.pipeline import compile_source
>>> plan = build_plan(compile_source("T(e) :- U(e).\\nT(e) :- D(e, f), T(f).\\n.input U, D\\n.output T"))
>>> [(p.relations, p.recursive, len(p.rules), len(p.delta_rules)) for p in plan.strata if p.rules]
[((2,), True, 1, 1)]
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import ast, scopes
from . import magic as demand
from . import plan as p
from .checks.rule_annotations import SHADOW_RELATIONS, rule_mode
from .generators import generator
from .loader import Program
from .stages import Stratified
from .summary import summarize
from .symbols import Symbols, is_verdict

UNTRANSFORMED = ("Candidate", "DependsOn")  # relations the session engine reads by name


class PlanningError(Exception):
    """A rule cannot be planned (only for programs the checker did not accept)."""


def build_plan(compilation: Stratified, magic: demand.Options | None = None) -> p.Plan:
    """The plan of a policy without errors (the ``plan`` stage of the pipeline gives it
    with the rest of the compilation); :class:`PlanningError` for one with errors. ``magic``
    says which relations may be evaluated demand-driven (:mod:`.magic`)."""
    if not compilation.ok:
        raise PlanningError("only a policy without errors can be planned")
    return _Planner(compilation, magic or demand.Options()).run()


@dataclass
class _Context:
    """Where a rule stands while it is being planned."""

    slots: dict[str, int]
    bound: set[int]
    hidden: int  # number of slots so far (named and hidden)
    occurrences: Counter[str]  # how often each variable occurs in the whole rule
    prelude: list[p.Step] = field(default_factory=list)  # aggregates an expression needs first
    # whether a variable occurring once is a wildcard (evaluation), or binds all the same (a
    # rule with its head given: deny reasons and explanations name every value)
    singletons: bool = True
    after: list[p.Step] = field(default_factory=list)  # record patterns taken apart after a step
    guard: int | None = None  # the literal scanned first when it can be (a magic atom)
    # scan the atoms in the order written (a rule of a `choice-domain` relation: which tuple a
    # key keeps is the first one Soufflé's nested loops, in that order, derive)
    written: bool = False


class _Planner:
    def __init__(self, compilation: Stratified, magic: demand.Options) -> None:
        self.magic = magic
        self.program: Program = compilation.program
        self.symbols: Symbols = compilation.symbols
        self.strata = compilation.strata
        self.types = compilation.types
        # a relation nothing uses or declares has no arity, and nothing to evaluate: left out
        # the rules in shadow mode, by index, with the relation they derive instead of their head
        self.heads = {
            index: SHADOW_RELATIONS[rule.head.name]
            for index, (_, rule) in enumerate(self.program.rules())
            if rule.head.name in SHADOW_RELATIONS and rule_mode(rule) == "shadow"
        }
        self.shadowed = {SHADOW_RELATIONS[name]: name for name in SHADOW_RELATIONS}
        shadows = set(self.heads.values())
        order = [
            member
            for s in self.strata.strata
            for name in s.relations
            if name in self.symbols.relations and self.symbols.relations[name].arity is not None
            for member in (name, *[n for n in shadows if self.shadowed[n] == name])
        ]
        self.relation_names = order
        self.rel = {name: i for i, name in enumerate(order)}
        self.functor_names: list[str] = []
        self.fun: dict[str, int] = {}
        root_dir = min((os.path.dirname(r) for r in self.program.roots), default="")
        self.root_dir = root_dir

    # ------------------------------------------------------------------------ program

    def run(self) -> p.Plan:
        modules = [module for module, _ in self.program.rules()]
        rules = [self.localized(rule) for _, rule in self.program.rules()]
        infos = [self.rule_info(i, module, rules[i]) for i, module in enumerate(modules)]
        heads = [self.heads.get(index, rule.head.name) for index, rule in enumerate(rules)]
        found = self.demand_driven(rules, heads) if self.magic.enabled else None
        planned = list(rules)  # what the strata evaluate; `rules`: what bound rules evaluate
        if found is not None:
            for index, guarded in found.guarded.items():
                planned[index] = guarded
            for extra in found.rules:
                planned.append(extra.rule)
                rules.append(extra.rule)
                heads.append(extra.rule.head.name)
                module = modules[extra.origin]
                text = module.source.text if module.source else ""
                infos.append(self.magic_info(infos[extra.origin], extra, rules[extra.origin], text))
        by_head: dict[str, list[int]] = {}
        for index, head in enumerate(heads):
            by_head.setdefault(head, []).append(index)
        strata = []
        if found is not None:
            for component in self.components(planned, heads, found):
                strata.append(
                    self.stratum(
                        list(component.relations),
                        component.recursive,
                        frozenset(component.relations),
                        planned,
                        by_head,
                        guarded=frozenset(found.guarded),
                    )
                )
        else:
            for stratum in self.strata.strata:
                members = [r for r in stratum.relations if r in self.rel]
                strata.append(
                    self.stratum(members, stratum.recursive, frozenset(stratum.relations), rules, by_head)
                )
                # the rules in shadow mode of its relations: a stratum of their own, right after it
                for name in members:
                    for shadow in self.with_shadow(name)[1:]:
                        strata.append(self.stratum([shadow], False, frozenset(), rules, by_head))
        bound = tuple(
            tuple(self.bound_rule(i, rules[i]) for i in by_head.get(name, []) if not rules[i].is_subsumption)
            for name in self.relation_names
        )
        relations = tuple(self.relation_spec(name, found) for name in self.relation_names)
        functors = tuple(
            p.FunctorSpec(
                name,
                tuple(t or "any" for t in self.symbols.functors[name].params),
                self.symbols.functors[name].returns or "any",
            )
            for name in self.functor_names
        )
        arguments = tuple(
            p.ArgumentSpec(a.tool, a.argument, a.type, a.required)
            for _, a in sorted(self.symbols.arguments.items())
        )
        return p.Plan(
            relations, functors, tuple(strata), tuple(infos), bound, self.symbols.default, arguments
        )

    # ------------------------------------------------------------------ demand-driven

    def demand_driven(self, rules: list[ast.Rule], heads: list[str]) -> demand.Demand | None:
        """The magic-set transformation of the relations it pays for (see :mod:`.magic`),
        None when there is none: with it, the program stays stratified."""
        recursive = {name for s in self.strata.strata if s.recursive for name in s.relations}
        relations = self.symbols.relations
        candidates = {
            name
            for name in recursive
            if name in self.rel
            and name in self.symbols.defined
            and not relations[name].is_input
            and not relations[name].is_output
            and not self.symbols.is_inline(name)
            and not relations[name].choice  # which tuple a key keeps depends on what is derived
            and relations[name].limit is None  # so do the tuples a size limit keeps
            and not is_verdict(name, relations[name].arity)
            and name not in SHADOW_RELATIONS
            and name not in self.shadowed
            and name not in UNTRANSFORMED
            and name not in self.magic.observed
            and len(self.types.get(name, ())) >= 2  # a unary one is no larger than its demand
        }
        # inline relations' rules, and subsumption rules (their relation and whatever their
        # conditions read are computed in full: a tuple is dropped for any other)
        skipped = {
            i for i, head in enumerate(heads) if self.symbols.is_inline(head) or rules[i].is_subsumption
        }
        while candidates:
            found = demand.transform(
                rules, heads, candidates, lambda name: len(self.types.get(name, ())), self.body_order, skipped
            )
            if not found.bound:
                return None
            planned = [found.guarded.get(i, rule) for i, rule in enumerate(rules)]
            planned.extend(extra.rule for extra in found.rules)
            names = heads + [extra.rule.head.name for extra in found.rules]
            broken = {
                name
                for component in self.components(planned, names, found, keep=False)
                if not component.monotone
                for name in component.relations
            }
            unstratified = {c for c in found.bound if c in broken or found.magic[c] in broken}
            if not unstratified:
                return found
            candidates = set(found.bound) - unstratified
        return None

    def body_order(self, rule: ast.Rule, given: frozenset[str]) -> list[int]:
        """The body literals of a rule in the order the planner evaluates them, with the
        ``given`` variables bound first."""
        ctx = self.new_context(rule)
        ctx.bound.update(ctx.slots[name] for name in given)
        _, origins = self.order(list(enumerate(rule.body)), ctx, None)
        return list(dict.fromkeys(o for o in origins if o >= 0))

    def components(
        self, rules: list[ast.Rule], heads: list[str], found: demand.Demand, keep: bool = True
    ) -> list[demand.Component]:
        """The strata of the transformed program (each magic relation ranked right before its
        relation); with ``keep``, its relations become the plan's, in that order."""
        rank = {name: float(i) for i, name in enumerate(self.relation_names)}
        for name, magic in found.magic.items():
            rank[magic] = rank[name] - 0.5
        nodes = sorted(rank, key=rank.__getitem__)
        edges = [
            (head, atom.name, not negated and not inside)
            for head, rule in zip(heads, rules, strict=True)
            for atom, negated, inside in summarize(rule).atoms
        ]
        ordered = demand.components(nodes, edges, rank.__getitem__)
        if keep:
            self.relation_names = [name for c in ordered for name in c.relations]
            self.rel = {name: i for i, name in enumerate(self.relation_names)}
        return ordered

    def relation_spec(self, name: str, found: demand.Demand | None) -> p.RelationSpec:
        if found is not None and demand.is_magic(name):
            base = next(c for c, m in found.magic.items() if m == name)
            types = tuple(self.types.get(base, ()))
            return p.RelationSpec(name, tuple(types[j] for j in found.bound[base]))
        source = self.shadowed.get(name, name)
        keys = () if name in self.shadowed else self.symbols.relations[name].keys
        adornment, magic = "", None
        if found is not None and name in found.bound:
            adornment = demand.adornment_text(len(self.types.get(name, ())), found.bound[name])
            magic = self.rel[found.magic[name]]
        return p.RelationSpec(
            name,
            tuple(self.types.get(source, ())),
            name not in self.shadowed and self.symbols.relations[name].is_input,
            name not in self.shadowed and self.symbols.relations[name].is_output,
            name not in self.shadowed and self.symbols.is_inline(name),
            choice=() if name in self.shadowed else self.symbols.relations[name].choice,
            limit=None if name in self.shadowed else self.symbols.relations[name].limit,
            keys=keys,
            attributes=self.symbols.relations[name].attributes if keys else (),
            host=name not in self.shadowed and self.symbols.relations[name].host,
            adornment=adornment,
            magic=magic,
        )

    def magic_info(
        self, origin: p.RuleInfo, extra: demand.MagicRule, rule: ast.Rule, source: str
    ) -> p.RuleInfo:
        """What a magic rule is said to be: the demand of a rule's literal, where that rule is."""
        literals = tuple(
            origin.literals[_position(rule.body, lit)]
            if _position(rule.body, lit) >= 0
            else _atom_text(lit, source)
            for lit in extra.rule.body
        )
        head = _atom_text(extra.rule.head, source)
        text = head + (" :- " + ", ".join(literals) if literals else "") + "."
        return replace(
            origin,
            id=f"{extra.rule.head.name}<-{origin.id}#{extra.literal + 1}",
            head=extra.rule.head.name,
            text=text,
            variables=tuple(self.slot_names(extra.rule)),
            literals=literals,
            message=None,
            suggest=None,
            severity=None,
            requirements=(),
        )

    def stratum(
        self,
        members: list[str],
        recursive: bool,
        relations: frozenset[str],
        rules: list[ast.Rule],
        by_head: dict[str, list[int]],
        guarded: frozenset[int] = frozenset(),
    ) -> p.Stratum:
        """The plan of a stratum: its relations (``relations``: the names of the stratum's
        relations, read in rounds when it is ``recursive``); the rules ``guarded`` by a magic
        atom scan it first."""
        base: list[p.RulePlan] = []
        deltas: list[p.RulePlan] = []
        inserts: list[p.RulePlan] = []
        subsumptions: list[p.RulePlan] = []
        for name in [r for r in members if not self.symbols.is_inline(self.shadowed.get(r, r))]:
            for index in by_head.get(name, []):
                rule = rules[index]
                if rule.is_subsumption:
                    subsumptions.append(self.subsumption_plan(index, rule))
                    continue
                rounds = [
                    i
                    for i, lit in enumerate(rule.body)
                    if isinstance(lit, ast.Atom) and recursive and lit.name in relations
                ]
                guard = 0 if index in guarded else None
                if not rounds:
                    base.append(self.rule_plan(index, rule, delta_literal=None, guard=guard))
                for i in rounds:
                    deltas.append(self.rule_plan(index, rule, delta_literal=i, guard=guard))
                for i, lit in enumerate(rule.body):
                    if isinstance(lit, ast.Atom) and self.binds(lit) and lit.name in self.rel:
                        inserts.append(self.rule_plan(index, rule, delta_literal=i, guard=guard))
        return p.Stratum(
            tuple(self.rel[r] for r in members),
            recursive,
            tuple(base),
            tuple(deltas),
            tuple(inserts),
            tuple(subsumptions),
        )

    def localized(self, rule: ast.Rule) -> ast.Rule:
        """The rule with its aggregates' own variables renamed apart (:mod:`.scopes`)."""
        given = None
        if self.symbols.is_inline(rule.head.name):
            given = {a.name for a in rule.head.args if isinstance(a, ast.Var)}
        return scopes.localized(rule, self.binds, given)

    def with_shadow(self, name: str) -> list[str]:
        """A relation and the relation of its rules in shadow mode, if it has any."""
        return [name, *[s for s, base in self.shadowed.items() if base == name and s in self.rel]]

    def rule_info(self, index: int, module: ast.Module, rule: ast.Rule) -> p.RuleInfo:
        path = (
            os.path.relpath(module.path, self.root_dir)
            if not self.program.is_library(module.path)
            else module.path
        )
        source = module.source
        text = source.text[rule.head.span.start : rule.span.end] if source else ""  # without annotations
        literals = tuple(source.text[lit.span.start : lit.span.end] if source else "" for lit in rule.body)
        slots = self.slot_names(rule)

        def annotation(name: str) -> str | None:
            found = rule.annotation(name)
            if found and found.args and isinstance(found.args[0], ast.String):
                return found.args[0].value
            return None

        requirement = rule.annotation("req")
        requirements = (
            tuple(a.value for a in requirement.args if isinstance(a, ast.String)) if requirement else ()
        )
        return p.RuleInfo(
            id=annotation("id") or f"{rule.head.name}@{path}:{rule.head.span.line}",
            head=self.heads.get(index, rule.head.name),
            file=path,
            line=rule.head.span.line,
            column=rule.head.span.column,
            text=text,
            variables=tuple(slots),
            literals=literals,
            message=annotation("message"),
            suggest=annotation("suggest"),
            severity=annotation("severity"),
            requirements=requirements,
        )

    def slot_names(self, rule: ast.Rule) -> list[str]:
        names: list[str] = []
        for var in summarize(rule).variables:
            if var.name not in names:
                names.append(var.name)
        return names

    def functor(self, name: str) -> int:
        if name not in self.fun:
            self.fun[name] = len(self.functor_names)
            self.functor_names.append(name)
        return self.fun[name]

    # ------------------------------------------------------------------------- rules

    def new_context(self, rule: ast.Rule, singletons: bool = True) -> _Context:
        names = self.slot_names(rule)
        occurrences = Counter(v.name for v in summarize(rule).variables)
        return _Context(
            {n: i for i, n in enumerate(names)}, set(), len(names), occurrences, singletons=singletons
        )

    def subsumption_plan(self, index: int, rule: ast.Rule) -> p.RulePlan:
        """A subsumption rule's plan: its body (the two atoms of the relation read in full, then
        the conditions) with, as "head", the dominated tuple followed by the dominating one
        (so a variable written once in an atom binds all the same)."""
        ctx = self.new_context(rule, singletons=False)
        steps, _ = self.order(list(enumerate(rule.body)), ctx, None)
        pair = [lit for lit in rule.body[:2] if isinstance(lit, ast.Atom)]
        head_args = tuple(self.expr(arg, ctx) for atom in pair for arg in atom.args)
        steps.extend(self.take_prelude(ctx))
        return p.RulePlan(index, self.rel[rule.head.name], head_args, tuple(steps), ctx.hidden)

    def rule_plan(
        self, index: int, rule: ast.Rule, delta_literal: int | None, guard: int | None = None
    ) -> p.RulePlan:
        ctx = self.new_context(rule)
        ctx.guard = guard
        head = self.symbols.relations.get(self.heads.get(index, rule.head.name))
        ctx.written = (head is not None and (bool(head.choice) or head.limit is not None)) or _counts(rule)
        steps, _ = self.order(list(enumerate(rule.body)), ctx, delta_literal)
        head_args = tuple(self.expr(arg, ctx) for arg in rule.head.args)
        steps.extend(self.take_prelude(ctx))
        return p.RulePlan(
            index,
            self.rel[self.heads.get(index, rule.head.name)],
            head_args,
            tuple(steps),
            ctx.hidden,
            delta_literal is not None,
        )

    def bound_rule(self, index: int, rule: ast.Rule) -> p.BoundRule:
        ctx = self.new_context(rule, singletons=False)
        head: list[p.Bind | p.Match] = []
        deferred: list[int] = []
        for position, arg in enumerate(rule.head.args):
            if isinstance(arg, ast.Var) and ctx.slots[arg.name] not in ctx.bound:
                slot = ctx.slots[arg.name]
                ctx.bound.add(slot)
                head.append(p.Bind(slot))
            elif self.ready(arg, ctx) and not any(isinstance(t, ast.Aggregate) for t in ast.walk_term(arg)):
                head.append(p.Match(self.expr(arg, ctx)))
            else:
                head.append(p.Match(p.Const(0)))  # placeholder, replaced below
                deferred.append(position)
        steps, literals = self.order(list(enumerate(rule.body)), ctx, None)
        for position in deferred:  # computed from the body: checked after it
            head[position] = p.Match(self.expr(rule.head.args[position], ctx))
        tail = self.take_prelude(ctx)
        steps.extend(tail)
        literals.extend([-1] * len(tail))
        return p.BoundRule(index, p.HeadMatch(tuple(head)), tuple(steps), ctx.hidden, tuple(literals))

    # --------------------------------------------------------------------- ordering

    def order(
        self, literals: list[tuple[int, ast.Literal]], ctx: _Context, delta_literal: int | None
    ) -> tuple[list[p.Step], list[int]]:
        """The steps of a body, and for each the index of the literal it comes from."""
        steps: list[p.Step] = []
        origins: list[int] = []
        pending = list(literals)
        while pending:
            # a stored atom whose arguments are all known is a membership check: it filters
            # before computed values are, so a functor never sees bindings the check excludes;
            # one that binds nothing (`e(_)`, `e(x, _)` with `x` known) is an existence check,
            # done once where it can first be (not once per binding of later literals)
            ready = (
                self.first_scan(
                    pending,
                    ctx,
                    delta_literal,
                    lambda atom: all(
                        not isinstance(a, ast.Wildcard) and self.ready(a, ctx) for a in atom.args
                    ),
                )
                or self.first_scan(pending, ctx, delta_literal, lambda atom: self.checks_only(atom, ctx))
                or self.first_ready(pending, ctx)
            )
            if ready is not None:
                pending.remove(ready)
                new = self.step(ready[1], ctx, "full")
                steps.extend(new)
                origins.extend([ready[0]] * len(new))
                continue
            atoms = [(i, lit) for i, lit in pending if isinstance(lit, ast.Atom) and self.scannable(lit, ctx)]
            if not atoms:
                if self.defer(pending, ctx, delta_literal):
                    continue
                raise PlanningError("a literal can never be evaluated (unsafe variables)")
            if ctx.written:
                chosen = min(atoms, key=lambda item: item[0])
            else:
                chosen = max(atoms, key=lambda item: self.score(item, ctx, delta_literal))
            pending.remove(chosen)
            source = "delta" if chosen[0] == delta_literal else "full"
            new = self.step(chosen[1], ctx, source)
            steps.extend(new)
            origins.extend([chosen[0]] * len(new))
        return steps, origins

    def defer(self, pending: list[tuple[int, ast.Literal]], ctx: _Context, delta_literal: int | None) -> bool:
        """When no atom can be scanned because each has an argument computed from variables
        another binds (``e(x + 1, y), e(y + 1, x)``): scan the best of them with those arguments
        bound to hidden slots, and compare each with its expression once that can be computed
        (a filter). Whether there was such an atom."""
        atoms = [
            (i, lit)
            for i, lit in pending
            if isinstance(lit, ast.Atom)
            and self.binds(lit)
            and any(isinstance(a, ast.Var | ast.Wildcard) or ast.is_pattern(a) for a in lit.args)
        ]
        if not atoms:
            return False
        index, atom = max(atoms, key=lambda item: self.score(item, ctx, delta_literal))
        here = {ctx.slots[v.name] for a in atom.args for v in ast.pattern_vars(a)}
        extended = _Context(
            ctx.slots, ctx.bound | here, ctx.hidden, ctx.occurrences, singletons=ctx.singletons
        )
        checks: list[tuple[int, ast.Literal]] = []

        def apart(arg: ast.Term) -> ast.Term:
            """The argument with each expression it cannot compute yet (at any depth of a
            record pattern) replaced by a hidden variable, compared with it afterwards."""
            if isinstance(arg, ast.Var | ast.Wildcard) or self.ready(arg, extended):
                return arg
            if isinstance(arg, ast.Record | ast.Constructor) and ast.is_pattern(arg):
                return replace(arg, args=tuple(apart(a) for a in arg.args))
            name = f"#{ctx.hidden}"  # no variable of the source is spelt so
            ctx.slots[name] = ctx.hidden
            ctx.hidden += 1
            ctx.occurrences[name] = 2
            hidden = ast.Var(name, span=arg.span)
            checks.append((index, ast.Comparison("=", hidden, arg, span=arg.span)))
            return hidden

        args = tuple(apart(arg) for arg in atom.args)
        position = pending.index((index, atom))
        pending[position : position + 1] = [(index, replace(atom, args=args)), *checks]
        return True

    def first_ready(
        self, pending: list[tuple[int, ast.Literal]], ctx: _Context
    ) -> tuple[int, ast.Literal] | None:
        """The first literal that can be decided now; a generator (``range``) only when nothing
        else can: it multiplies the bindings that follow."""
        ready = [item for item in pending if self.is_ready(item[1], ctx)]
        plain = next((i for i in ready if generator(i[1], self.symbols.functors) is None), None)
        if plain is not None:
            return plain
        atoms = [lit for _, lit in pending if isinstance(lit, ast.Atom) and self.binds(lit)]
        for item in ready:
            # before a scan only when an atom uses what it binds (then looked up, not scanned)
            target = generator(item[1], self.symbols.functors)[0]  # type: ignore[index]
            names = {v.name for v in ast.term_vars(target)}
            if not any(self.scannable(a, ctx) for a in atoms) or any(
                names & {v.name for arg in a.args for v in ast.term_vars(arg)} for a in atoms
            ):
                return item
        return None

    def take_prelude(self, ctx: _Context) -> list[p.Step]:
        prelude = list(ctx.prelude)
        ctx.prelude.clear()
        return prelude

    def score(self, item: tuple[int, ast.Atom], ctx: _Context, delta_literal: int | None) -> tuple:
        index, atom = item
        known = sum(
            1
            for arg in atom.args
            if (isinstance(arg, ast.Var) and self.is_bound(arg, ctx))
            or (not isinstance(arg, ast.Var | ast.Wildcard) and self.ready(arg, ctx))
        )
        free = sum(1 for arg in atom.args if isinstance(arg, ast.Var) and not self.is_bound(arg, ctx))
        return (index == delta_literal, self.keyed(atom, ctx), known, index == ctx.guard, -free, -index)

    def keyed(self, atom: ast.Atom, ctx: _Context) -> bool:
        """Whether the known arguments of an atom hold one of its relation's keys: a scan of it
        finds at most one fact, so it goes before those that may find several."""
        return any(
            all(
                (isinstance(arg, ast.Var) and self.is_bound(arg, ctx))
                or (not isinstance(arg, ast.Var | ast.Wildcard) and self.ready(arg, ctx))
                for arg in (atom.args[i] for i in key)
            )
            for key in self.symbols.keys_of(atom.name)
        )

    def scannable(self, atom: ast.Atom, ctx: _Context) -> bool:
        """A stored relation's atom can be scanned once each argument that is an expression
        can be computed: from variables bound before, or bound by the atom's own arguments."""
        if not self.binds(atom):
            return False
        here = {ctx.slots[v.name] for a in atom.args for v in ast.pattern_vars(a)}
        extended = _Context(
            ctx.slots, ctx.bound | here, ctx.hidden, ctx.occurrences, singletons=ctx.singletons
        )
        return all(self.matchable(a, extended) for a in atom.args)

    def matchable(self, term: ast.Term, ctx: _Context) -> bool:
        """A term can be matched against a value once its pattern variables are bound:
        variables and ``_`` at field positions, anything else computable."""
        if isinstance(term, ast.Var | ast.Wildcard):
            return True
        if ast.is_pattern(term):
            return all(self.matchable(a, ctx) for a in term.args)  # type: ignore[union-attr]
        return self.ready(term, ctx)

    def first_scan(
        self,
        pending: list[tuple[int, ast.Literal]],
        ctx: _Context,
        delta_literal: int | None,
        wanted: Callable[[ast.Atom], bool],
    ) -> tuple[int, ast.Literal] | None:
        """The first pending stored atom (not the delta one) that can be scanned and is ``wanted``."""
        return next(
            (
                item
                for item in pending
                if isinstance(item[1], ast.Atom)
                and item[0] != delta_literal
                and self.binds(item[1])
                and self.scannable(item[1], ctx)
                and wanted(item[1])
            ),
            None,
        )

    def checks_only(self, atom: ast.Atom, ctx: _Context) -> bool:
        """Whether scanning an atom binds nothing the rule uses: each argument is `_`, a
        variable occurring nowhere else, or known."""
        return all(
            isinstance(a, ast.Wildcard)
            or (isinstance(a, ast.Var) and (self.is_bound(a, ctx) or self.singleton(a, ctx)))
            or (not isinstance(a, ast.Var) and self.ready(a, ctx))
            for a in atom.args
        )

    @staticmethod
    def singleton(var: ast.Var, ctx: _Context) -> bool:
        """A variable occurring once in the rule, when that makes it a wildcard."""
        return ctx.singletons and ctx.occurrences[var.name] == 1

    def binds(self, atom: ast.Atom) -> bool:
        return atom.name not in self.symbols.functors and not self.symbols.is_inline(atom.name)

    def is_bound(self, var: ast.Var, ctx: _Context) -> bool:
        return ctx.slots[var.name] in ctx.bound

    def ready(self, term: ast.Term, ctx: _Context) -> bool:
        """All variables of a term (outside aggregates) are bound, and its aggregates can run."""
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Wildcard):
                return False
            if isinstance(t, ast.Var) and not self.is_bound(t, ctx):
                return False
            if isinstance(t, ast.Aggregate) and not self.aggregate_ready(t, ctx):
                return False
        return True

    def aggregate_ready(self, aggregate: ast.Aggregate, ctx: _Context) -> bool:
        """The variables that group the aggregate (also used outside it) are bound."""
        inside = Counter(v.name for v in ast.term_vars(aggregate))
        return all(ctx.slots[n] in ctx.bound for n, k in inside.items() if ctx.occurrences[n] > k)

    def is_ready(self, literal: ast.Literal, ctx: _Context) -> bool:
        if isinstance(literal, ast.Comparison):
            if literal.op == "=":
                for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                    if isinstance(side, ast.Var) and not self.is_bound(side, ctx) and self.ready(other, ctx):
                        return True
                    if self.takes_apart(side, other, ctx):
                        return True
            return self.ready(literal.left, ctx) and self.ready(literal.right, ctx)
        atom = literal.atom if isinstance(literal, ast.Negation) else literal
        if isinstance(literal, ast.Atom) and self.binds(atom):
            return False
        if isinstance(literal, ast.Negation) and _nested_wildcard(atom):  # `!r([x, _])`
            return all(self.is_bound(v, ctx) for a in atom.args for v in ast.pattern_vars(a)) and all(
                self.matchable(a, ctx) for a in atom.args
            )
        return all(isinstance(arg, ast.Wildcard) or self.ready(arg, ctx) for arg in atom.args)

    # ------------------------------------------------------------------------- steps

    def step(self, literal: ast.Literal, ctx: _Context, source: str) -> list[p.Step]:
        """The step of a literal, after the aggregates its expressions need."""
        found = generator(literal, self.symbols.functors)
        if found is not None:
            return self.range_steps(*found, ctx)
        step = self.literal_step(literal, ctx, source)
        after = list(ctx.after)
        ctx.after.clear()
        return [*self.take_prelude(ctx), step, *after]

    def range_steps(self, target: ast.Term, call: ast.Call, ctx: _Context) -> list[p.Step]:
        """``x = range(...)``: bind ``x`` to each value; with the other side known, each value
        is compared with it."""
        bounds = [self.expr(a, ctx) for a in call.args]
        by = bounds[2] if len(bounds) == 3 else None
        if isinstance(target, ast.Var) and not self.is_bound(target, ctx):
            slot = ctx.slots[target.name]
            ctx.bound.add(slot)
            return [*self.take_prelude(ctx), p.Range(slot, bounds[0], bounds[1], by)]
        value = self.expr(target, ctx)
        slot = ctx.hidden
        ctx.hidden += 1
        ctx.bound.add(slot)
        return [
            *self.take_prelude(ctx),
            p.Range(slot, bounds[0], bounds[1], by),
            p.Filter("=", p.Slot(slot), value),
        ]

    def literal_step(self, literal: ast.Literal, ctx: _Context, source: str) -> p.Step:
        if isinstance(literal, ast.Comparison):
            if literal.op == "=":
                for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                    if isinstance(side, ast.Var) and not self.is_bound(side, ctx) and self.ready(other, ctx):
                        expr = self.expr(other, ctx)
                        slot = ctx.slots[side.name]
                        ctx.bound.add(slot)
                        return p.Assign(slot, expr)
                    if self.takes_apart(side, other, ctx):
                        slot = self.hidden_slot(ctx)
                        assign = p.Assign(slot, self.expr(other, ctx))
                        ctx.after.extend(self.destructure(p.Slot(slot), side, ctx))
                        return assign
            return p.Filter(literal.op, self.expr(literal.left, ctx), self.expr(literal.right, ctx))
        negated = isinstance(literal, ast.Negation)
        atom = literal.atom if isinstance(literal, ast.Negation) else literal
        if atom.name in self.symbols.functors:
            return p.Test(self.functor(atom.name), tuple(self.expr(a, ctx) for a in atom.args), negated)
        if self.symbols.is_inline(atom.name):
            return p.InlineTest(self.rel[atom.name], tuple(self.expr(a, ctx) for a in atom.args), negated)
        if negated and _nested_wildcard(atom):
            # `!r([x, _])`: no fact matches the pattern, i.e. none is counted
            count = self.aggregate(ast.Aggregate("count", None, (atom,), span=atom.span), ctx)
            return p.Filter("=", count, p.Const(0))
        if negated:
            args = tuple(
                p.Skip() if isinstance(a, ast.Wildcard) else p.Match(self.expr(a, ctx)) for a in atom.args
            )
            return p.NotExists(self.rel[atom.name], args)
        return p.Scan(self.rel[atom.name], self.patterns(atom, ctx, hidden_wildcards=False), source)

    def takes_apart(self, side: ast.Term, other: ast.Term, ctx: _Context) -> bool:
        """``[x, y] = e``: a record pattern not yet computable, matched against a value."""
        return (
            ast.is_pattern(side)
            and not self.ready(side, ctx)
            and self.ready(other, ctx)
            and self.matchable(side, self.with_pattern(side, ctx))
        )

    def with_pattern(self, pattern: ast.Term, ctx: _Context) -> _Context:
        here = {ctx.slots[v.name] for v in ast.pattern_vars(pattern)}
        return _Context(ctx.slots, ctx.bound | here, ctx.hidden, ctx.occurrences)

    def hidden_slot(self, ctx: _Context) -> int:
        slot = ctx.hidden
        ctx.hidden += 1
        ctx.bound.add(slot)
        return slot

    def destructure(self, value: p.Expr, pattern: ast.Term, ctx: _Context) -> list[p.Step]:
        """Steps matching ``value`` against a record or constructor pattern: the value has
        the pattern's shape, its fields bind the pattern's variables (first occurrences) and
        equal its other fields."""
        if isinstance(pattern, ast.Constructor):
            steps: list[p.Step] = [p.Filter("=", p.Kind(value), p.Const(pattern.name))]
            offset = 1  # an ADT value holds its branch name first
        else:
            assert isinstance(pattern, ast.Record)
            steps = [p.Filter("=", p.Kind(value), p.Const(len(pattern.args)))]
            offset = 0
        later: list[tuple[p.Expr, ast.Term]] = []
        for i, arg in enumerate(pattern.args):
            field_value: p.Expr = p.Field(value, i + offset)
            if isinstance(arg, ast.Var) and not self.is_bound(arg, ctx):
                slot = ctx.slots[arg.name]
                ctx.bound.add(slot)
                steps.append(p.Assign(slot, field_value))
            elif not isinstance(arg, ast.Wildcard):
                later.append((field_value, arg))
        for field_value, arg in later:
            if ast.is_pattern(arg) and not self.ready(arg, ctx):
                steps.extend(self.destructure(field_value, arg, ctx))
            else:
                steps.append(p.Filter("=", field_value, self.expr(arg, ctx)))
        return steps

    def patterns(self, atom: ast.Atom, ctx: _Context, hidden_wildcards: bool) -> tuple[p.Pattern, ...]:
        """Arguments of a scanned atom. Plain unbound variables bind; the rest are matched
        after them (an expression may use a variable the same atom binds)."""
        patterns: list[p.Pattern | None] = [None] * len(atom.args)
        for i, arg in enumerate(atom.args):
            if isinstance(arg, ast.Var) and not hidden_wildcards and self.singleton(arg, ctx):
                patterns[i] = p.Skip()  # a variable occurring nowhere else: any value
            elif isinstance(arg, ast.Var) and not self.is_bound(arg, ctx):
                slot = ctx.slots[arg.name]
                ctx.bound.add(slot)
                patterns[i] = p.Bind(slot)
            elif isinstance(arg, ast.Wildcard):
                if hidden_wildcards:  # inside an aggregate every matched value counts
                    slot = ctx.hidden
                    ctx.hidden += 1
                    ctx.bound.add(slot)
                    patterns[i] = p.Bind(slot)
                else:
                    patterns[i] = p.Skip()
        taken: list[tuple[int, ast.Term]] = []
        for i, arg in enumerate(atom.args):
            if patterns[i] is None and ast.is_pattern(arg) and not self.ready(arg, ctx):
                slot = self.hidden_slot(ctx)  # the whole value, taken apart after the scan
                patterns[i] = p.Bind(slot)
                taken.append((slot, arg))
        before = set(ctx.bound)
        for slot, arg in taken:
            ctx.after.extend(self.destructure(p.Slot(slot), arg, ctx))
        for i, arg in enumerate(atom.args):
            if patterns[i] is None and taken and {ctx.slots[v.name] for v in ast.term_vars(arg)} - before:
                slot = self.hidden_slot(ctx)  # needs a variable a pattern of this atom binds
                patterns[i] = p.Bind(slot)
                ctx.after.append(p.Filter("=", p.Slot(slot), self.expr(arg, ctx)))
            elif patterns[i] is None:
                patterns[i] = p.Match(self.expr(arg, ctx))
        return tuple(patterns)  # type: ignore[arg-type]

    def aggregate(self, aggregate: ast.Aggregate, ctx: _Context) -> p.Expr:
        outer = set(ctx.bound)
        inner = _Context(ctx.slots, set(ctx.bound), ctx.hidden, ctx.occurrences, singletons=ctx.singletons)
        steps: list[p.Step] = []
        pending = list(enumerate(aggregate.body))
        while pending:
            ready = next((item for item in pending if self.is_ready(item[1], inner)), None)
            if ready is not None:
                pending.remove(ready)
                steps.extend(self.step(ready[1], inner, "full"))
                continue
            atoms = [
                (i, lit) for i, lit in pending if isinstance(lit, ast.Atom) and self.scannable(lit, inner)
            ]
            if not atoms:
                if self.defer(pending, inner, None):
                    continue
                raise PlanningError("an aggregate body can never be evaluated")
            chosen = max(atoms, key=lambda item: self.score(item, inner, None))
            pending.remove(chosen)
            steps.append(
                p.Scan(self.rel[chosen[1].name], self.patterns(chosen[1], inner, hidden_wildcards=True))
            )
            steps.extend(inner.after)
            inner.after.clear()
        target = None if aggregate.target is None else self.expr(aggregate.target, inner)
        steps.extend(self.take_prelude(inner))
        ctx.hidden = inner.hidden
        slot = ctx.hidden
        ctx.hidden += 1
        keys = tuple(sorted(inner.bound - outer))
        ctx.prelude.append(p.Aggregate(slot, aggregate.op, target, tuple(steps), keys))
        return p.Slot(slot)

    # ------------------------------------------------------------------- expressions

    def expr(self, term: ast.Term, ctx: _Context) -> p.Expr:
        if isinstance(term, ast.Var):
            return p.Slot(ctx.slots[term.name])
        if isinstance(term, ast.String | ast.Integer | ast.Float):
            return p.Const(term.value)
        if isinstance(term, ast.Call):
            return p.CallExpr(self.functor(term.name), tuple(self.expr(a, ctx) for a in term.args))
        if isinstance(term, ast.BinOp):
            return p.Arith(term.op, self.expr(term.left, ctx), self.expr(term.right, ctx))
        if isinstance(term, ast.Negate):
            return p.Neg(self.expr(term.operand, ctx))
        if isinstance(term, ast.UnaryOp):  # `bnot n` is `-n - 1`; `lnot n` is `1 - (n lor 0)`
            operand = self.expr(term.operand, ctx)
            if term.op == "bnot":
                return p.Arith("-", p.Neg(operand), p.Const(1))
            return p.Arith("-", p.Const(1), p.Arith("lor", operand, p.Const(0)))
        if isinstance(term, ast.Aggregate):
            return self.aggregate(term, ctx)
        if isinstance(term, ast.Record):
            return p.Pack(None, tuple(self.expr(a, ctx) for a in term.args))
        if isinstance(term, ast.Nil):
            return p.Pack(None, ())
        if isinstance(term, ast.Constructor):
            return p.Pack(term.name, tuple(self.expr(a, ctx) for a in term.args))
        raise PlanningError(f"cannot evaluate {term!r}")


COUNTERS = frozenset({"autoinc", "recursive_iteration_cnt"})  # Soufflé's, by evaluation order


def _counts(rule: ast.Rule) -> bool:
    """Whether a rule calls ``autoinc()`` (then its loops run in Soufflé's order, so that the
    numbers follow it)."""
    terms = [*rule.head.args, *(t for lit in rule.body for t in ast.literal_terms(lit))]
    return any(isinstance(t, ast.Call) and t.name == "autoinc" for term in terms for t in ast.walk_term(term))


def _nested_wildcard(atom: ast.Atom) -> bool:
    """``_`` inside a record or constructor argument (``r([x, _])``), not as an argument."""
    return any(
        isinstance(t, ast.Wildcard)
        for arg in atom.args
        if isinstance(arg, ast.Record | ast.Constructor)
        for t in ast.walk_term(arg)
    )


def _atom_text(atom: ast.Literal, text: str) -> str:
    """A generated atom as text: its arguments are terms of the source ``text``."""
    assert isinstance(atom, ast.Atom)
    args = []
    for arg in atom.args:
        if isinstance(arg, ast.Var):
            args.append(arg.name)
        elif isinstance(arg, ast.String | ast.Integer | ast.Float):
            args.append(json.dumps(arg.value) if isinstance(arg, ast.String) else str(arg.value))
        else:
            args.append(text[arg.span.start : arg.span.end] if text else "…")
    return f"{atom.name}({', '.join(args)})"


def _position(body: tuple[ast.Literal, ...], literal: ast.Literal) -> int:
    """Where a literal (the very object) is in a body, -1 if it is not."""
    return next((i for i, lit in enumerate(body) if lit is literal), -1)
