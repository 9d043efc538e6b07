"""A :class:`~policyc.compiler.plan.Plan` from JSON data, validated.

:func:`from_data` reads what :func:`policyc.compiler.plan_write.to_data` writes and checks
every index (relation, functor, slot, rule) against the plan's own tables, every arity and
every tag; anything malformed is a :class:`~policyc.compiler.plan.PlanError` that names the
wrong part (read through :mod:`.reading`, so a bundle's plan is refused at its line):

>>> from_data({"version": 0})
Traceback (most recent call last):
...
policyc.compiler.plan.PlanError: plan: version: unsupported plan version 0 (this policyc reads 1)
"""

from __future__ import annotations

from typing import Any

from .plan import (
    AGGREGATES,
    ARGUMENT_TYPES,
    COMPARATORS,
    OPERATORS,
    PLAN_VERSION,
    TYPES,
    Aggregate,
    ArgumentSpec,
    Arith,
    Assign,
    Bind,
    BoundRule,
    CallExpr,
    Const,
    Expr,
    Field,
    Filter,
    FunctorSpec,
    HeadMatch,
    InlineTest,
    Kind,
    Match,
    Neg,
    NotExists,
    Pack,
    Pattern,
    Plan,
    PlanError,
    Range,
    RelationSpec,
    RuleInfo,
    RulePlan,
    Scan,
    Skip,
    Slot,
    Step,
    Stratum,
    Test,
)
from .reading import Cursor, FormatError, Source, show


class _Reader:
    """Rebuilds a plan from data, checking every index against the plan's own tables."""

    def __init__(self) -> None:
        self.relations: tuple[RelationSpec, ...] = ()
        self.functors: tuple[FunctorSpec, ...] = ()
        self.rule_count = 0

    def read(self, top: Cursor) -> Plan:
        top.object()
        version = top.child("version")
        if version.value != PLAN_VERSION or isinstance(version.value, bool):
            raise version.fail(
                f"unsupported plan version {version.value!r} (this policyc reads {PLAN_VERSION})"
            )
        default = top.child("default").choice(("allow", "deny"))
        relations_at = top["relations"]
        self.relations = relations_at.items(self.relation)
        for index, spec in enumerate(self.relations):
            if spec.magic is not None and not (spec.magic < len(self.relations) and spec.magic != index):
                raise (
                    relations_at.child(index)
                    .child("magic")
                    .fail(f"no magic relation {spec.magic} for relation {index}")
                )
        self.functors = top["functors"].items(self.functor)
        rules = top["rules"].items(self.rule_info)
        self.rule_count = len(rules)
        strata = top["strata"].items(self.stratum)
        bound_at = top["bound_rules"]
        bound = bound_at.items(lambda rs: rs.items(self.bound_rule))
        if len(bound) != len(self.relations):
            raise bound_at.fail(
                f"expected a list of rules per relation ({len(self.relations)}), got {len(bound)}"
            )
        none: tuple[ArgumentSpec, ...] = ()
        arguments = top.optional("arguments", self.arguments, none)
        return Plan(self.relations, self.functors, strata, rules, bound, default, arguments)

    @staticmethod
    def arguments(at: Cursor) -> tuple[ArgumentSpec, ...]:
        """The declared tool arguments: each a tool and an argument (non-empty), a type and
        whether it is required, one per tool and argument."""
        found: dict[tuple[str, str], ArgumentSpec] = {}
        for a in at.list():
            a.object(("tool", "argument", "type", "required"))
            spec = ArgumentSpec(
                a.child("tool").string(empty=False),
                a.child("argument").string(empty=False),
                a.child("type").choice(ARGUMENT_TYPES),
                a.child("required").boolean(),
            )
            if (spec.tool, spec.argument) in found:
                raise a.fail(f"argument `{spec.tool}.{spec.argument}` is declared twice")
            found[spec.tool, spec.argument] = spec
        return tuple(found.values())

    def relation(self, r: Cursor) -> RelationSpec:
        r.object()
        types = r.child("types")
        for t in types.list():
            if t.value is not None and t.value not in TYPES:
                raise t.expected(f"null or one of {', '.join(TYPES)}")
        arity = len(types.value)
        adornment = r.optional("adornment", Cursor.string, "")
        if adornment and (
            len(adornment) != len(types.value) or set(adornment) - {"b", "f"} or "b" not in adornment
        ):
            raise r.child("adornment").expected(
                f"b or f for each of the {len(types.value)} arguments, some b"
            )
        magic = r.optional("magic", Cursor.count, None)
        if (magic is None) != (not adornment):
            raise r.fail("a demand-driven relation has both an adornment and a magic relation")
        none: tuple[tuple[int, ...], ...] = ()
        keys = r.optional("keys", lambda c: tuple(self.key(k, arity) for k in c.list()), none)
        attributes: tuple[str, ...] = ()
        if keys:
            names = r.child("attributes")
            attributes = tuple(n.string() for n in names.list())
            if len(attributes) != arity:
                raise names.expected(f"the names of the {arity} attributes")
        return RelationSpec(
            r.child("name").string(),
            tuple(types.value),
            r.child("input").boolean(),
            r.child("output").boolean(),
            r.child("inline").boolean(),
            choice=r.optional("choice", lambda c: tuple(self.domain(d, arity) for d in c.list()), ()),
            keys=keys,
            attributes=attributes,
            host=r.optional("host", Cursor.boolean, False),
            adornment=adornment,
            magic=magic,
            limit=r.optional("limit", lambda c: c.count(), None),
        )

    @staticmethod
    def domain(d: Cursor, arity: int) -> tuple[int, ...]:
        """A choice domain: distinct attribute positions of the relation, at least one."""
        positions = d.list()
        if not positions:
            raise d.expected("a list of attribute positions")
        found = []
        for at in positions:
            if not isinstance(at.value, int) or isinstance(at.value, bool) or not 0 <= at.value < arity:
                raise at.expected(f"an attribute position below {arity}")
            if at.value in found:
                raise at.fail(f"attribute position {at.value} twice in a choice domain")
            found.append(at.value)
        return tuple(found)

    @staticmethod
    def key(k: Cursor, arity: int) -> tuple[int, ...]:
        """A key: distinct attribute positions of the relation, in order, not all of them."""
        found: list[int] = []
        for at in k.list():
            if not isinstance(at.value, int) or isinstance(at.value, bool) or not 0 <= at.value < arity:
                raise at.expected(f"an attribute position below {arity}")
            if found and at.value <= found[-1]:
                raise at.fail("a key's attribute positions are distinct and in order")
            found.append(at.value)
        if len(found) == arity:
            raise k.fail("a key of every attribute says nothing")
        return tuple(found)

    def functor(self, f: Cursor) -> FunctorSpec:
        f.object()
        params = tuple(p.choice((*TYPES, "any")) for p in f.child("params").list())
        returns = f.child("returns").choice((*TYPES, "any", "bool"))
        return FunctorSpec(f.child("name").string(), params, returns)

    def rule_info(self, r: Cursor) -> RuleInfo:
        r.object()
        return RuleInfo(
            id=r.child("id").string(),
            head=r.child("head").string(),
            file=r.child("file").string(),
            line=r.child("line").count(),
            column=r.child("column").count(),
            text=r.child("text").string(),
            variables=r.child("variables").strings(),
            literals=r.child("literals").strings(),
            message=r.optional("message", Cursor.string, None),
            suggest=r.optional("suggest", Cursor.string, None),
            severity=r.optional("severity", Cursor.string, None),
            requirements=r.child("requirements").strings(),
        )

    def stratum(self, s: Cursor) -> Stratum:
        s.object()
        relations = s.child("relations").counts(len(self.relations))
        return Stratum(
            relations,
            s.child("recursive").boolean(),
            s.child("rules").items(self.rule_plan),
            s.child("delta_rules").items(self.rule_plan),
            s.child("insert_rules").items(self.rule_plan),
            s.optional("subsumptions", lambda c: c.items(self.subsumption_plan), ()),
        )

    def subsumption_plan(self, r: Cursor) -> RulePlan:
        """A subsumption rule: its "head" is two tuples of the relation (dominated, dominating)."""
        return self.rule_plan(r, tuples=2)

    def rule_plan(self, r: Cursor, tuples: int = 1) -> RulePlan:
        r.object()
        slots = r.child("slots").count()
        head = r.child("head").count(len(self.relations))
        width = tuples * self.relations[head].arity
        head_args = tuple(self.expr(e, slots) for e in r.child("head_args").list(width))
        return RulePlan(
            r.child("rule").count(self.rule_count),
            head,
            head_args,
            tuple(self.step(s, slots) for s in r.child("steps").list()),
            slots,
            r.child("delta").boolean(),
        )

    def bound_rule(self, b: Cursor) -> BoundRule:
        b.object()
        slots = b.child("slots").count()
        head: list[Bind | Match] = []
        for p in b.child("head").list():
            pattern = self.pattern(p, slots)
            if isinstance(pattern, Skip):
                raise p.fail("a head cannot skip")
            head.append(pattern)
        steps = tuple(self.step(s, slots) for s in b.child("steps").list())
        literals = tuple(self.literal(i) for i in b.child("literals").list(len(steps)))
        return BoundRule(
            b.child("rule").count(self.rule_count),
            HeadMatch(tuple(head)),
            steps,
            slots,
            literals,
        )

    def literal(self, at: Cursor) -> int:
        """A literal index; -1 for a step no single literal owns."""
        if at.value == -1 and not isinstance(at.value, bool):
            return -1
        return at.count(what="a literal index (an integer, 0 or more, or -1)")

    def tagged(self, at: Cursor, what: str) -> tuple[Any, list[Cursor]]:
        """A list whose first element is its tag: the tag and every element."""
        if not isinstance(at.value, list) or not at.value:
            raise at.expected(what)
        parts = at.list()
        return parts[0].value, parts

    def expr(self, e: Cursor, slots: int) -> Expr:
        kind, parts = self.tagged(e, "an expression (a list that starts with its kind)")
        n = len(parts)
        if kind == "slot" and n == 2:
            return Slot(parts[1].count(slots))
        if kind == "const" and n == 2:
            value = parts[1].value
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise parts[1].expected("a string or an integer")
            return Const(value)
        if kind == "float" and n == 2:
            try:
                return Const(float(parts[1].string()))
            except ValueError:
                raise parts[1].expected("a float written as a string") from None
        if kind == "call" and n == 3:
            functor = parts[1].count(len(self.functors))
            arity = len(self.functors[functor].params)
            return CallExpr(functor, tuple(self.expr(a, slots) for a in parts[2].list(arity)))
        if kind == "arith" and n == 4:
            return Arith(parts[1].choice(OPERATORS), self.expr(parts[2], slots), self.expr(parts[3], slots))
        if kind == "neg" and n == 2:
            return Neg(self.expr(parts[1], slots))
        if kind == "pack" and n == 3:
            tag = None if parts[1].value is None else parts[1].string(empty=False)
            return Pack(tag, tuple(self.expr(a, slots) for a in parts[2].list()))
        if kind == "field" and n == 3:
            return Field(self.expr(parts[1], slots), parts[2].count())
        if kind == "kind" and n == 2:
            return Kind(self.expr(parts[1], slots))
        raise e.fail(f"unknown expression {show(kind)} of {n} elements")

    def pattern(self, p: Cursor, slots: int) -> Pattern:
        kind, parts = self.tagged(p, "a pattern (a list that starts with its kind)")
        if kind == "bind" and len(parts) == 2:
            return Bind(parts[1].count(slots))
        if kind == "match" and len(parts) == 2:
            return Match(self.expr(parts[1], slots))
        if kind == "skip" and len(parts) == 1:
            return Skip()
        raise p.fail(f"unknown pattern {show(kind)} of {len(parts)} elements")

    def args(self, relation: int, patterns: Cursor, slots: int) -> tuple[Pattern, ...]:
        return tuple(self.pattern(p, slots) for p in patterns.list(self.relations[relation].arity))

    def step(self, s: Cursor, slots: int) -> Step:
        kind, parts = self.tagged(s, "a step (a list that starts with its kind)")
        n = len(parts)
        if kind == "scan" and n == 4:
            relation = parts[1].count(len(self.relations))
            return Scan(relation, self.args(relation, parts[2], slots), parts[3].choice(("full", "delta")))
        if kind == "not" and n == 3:
            relation = parts[1].count(len(self.relations))
            args = self.args(relation, parts[2], slots)
            for arg, at in zip(args, parts[2].list(), strict=True):
                if isinstance(arg, Bind):
                    raise at.fail("a negation cannot bind")
            return NotExists(relation, args)  # type: ignore[arg-type]
        if kind == "filter" and n == 4:
            return Filter(
                parts[1].choice(COMPARATORS), self.expr(parts[2], slots), self.expr(parts[3], slots)
            )
        if kind == "assign" and n == 3:
            return Assign(parts[1].count(slots), self.expr(parts[2], slots))
        if kind == "range" and n == 5:
            by = None if parts[4].value is None else self.expr(parts[4], slots)
            return Range(parts[1].count(slots), self.expr(parts[2], slots), self.expr(parts[3], slots), by)
        if kind == "test" and n == 4:
            functor = parts[1].count(len(self.functors))
            arity = len(self.functors[functor].params)
            operands = tuple(self.expr(a, slots) for a in parts[2].list(arity))
            return Test(functor, operands, parts[3].boolean())
        if kind == "inline" and n == 4:
            relation = parts[1].count(len(self.relations))
            if not self.relations[relation].inline:
                raise parts[1].fail(f"relation {relation} is not inline")
            arity = self.relations[relation].arity
            operands = tuple(self.expr(a, slots) for a in parts[2].list(arity))
            return InlineTest(relation, operands, parts[3].boolean())
        if kind == "aggregate" and n == 6:
            op = parts[2].choice(AGGREGATES)
            target = None if parts[3].value is None else self.expr(parts[3], slots)
            body = tuple(self.step(b, slots) for b in parts[4].list())
            keys = parts[5].counts(slots)
            return Aggregate(parts[1].count(slots), op, target, body, keys)
        raise s.fail(f"unknown step {show(kind)} of {n} elements")


def from_data(data: Any, at: Cursor | None = None) -> Plan:
    """A plan from JSON data; :class:`PlanError` if it is not one, located when ``at`` (the
    cursor of ``data`` in the file it comes from) is given."""
    top = Cursor.root(data, Source("plan")) if at is None else at
    try:
        return _Reader().read(top)
    except FormatError as error:
        raise PlanError(str(error)) from None
