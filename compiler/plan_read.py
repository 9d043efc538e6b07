"""A :class:`~policyc.compiler.plan.Plan` from JSON data, validated.

:func:`from_data` reads what :func:`policyc.compiler.plan_write.to_data` writes and checks
every index (relation, functor, slot, rule) against the plan's own tables, every arity and
every tag; anything malformed is a :class:`~policyc.compiler.plan.PlanError`.

>>> from_data({"version": 0})
Traceback (most recent call last):
...
policyc.compiler.plan.PlanError: malformed plan: unsupported plan version 0
"""

from __future__ import annotations

from typing import Any

from .plan import (
    AGGREGATES,
    COMPARATORS,
    OPERATORS,
    PLAN_VERSION,
    TYPES,
    Aggregate,
    Arith,
    Assign,
    Bind,
    BoundRule,
    CallExpr,
    Const,
    Expr,
    Filter,
    FunctorSpec,
    HeadMatch,
    InlineTest,
    Match,
    Neg,
    NotExists,
    Pattern,
    Plan,
    PlanError,
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


class _Reader:
    """Rebuilds a plan from data, checking every index against the plan's own tables."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.relations: tuple[RelationSpec, ...] = ()
        self.functors: tuple[FunctorSpec, ...] = ()
        self.rule_count = 0

    def fail(self, what: str) -> PlanError:
        return PlanError(f"malformed plan: {what}")

    def read(self) -> Plan:
        data = self.data
        if not isinstance(data, dict):
            raise self.fail("not an object")
        if data.get("version") != PLAN_VERSION:
            raise self.fail(f"unsupported plan version {data.get('version')!r}")
        default = data.get("default")
        if default not in ("allow", "deny"):
            raise self.fail("default must be allow or deny")
        self.relations = tuple(self.relation(r) for r in self.list(data.get("relations"), "relations"))
        self.functors = tuple(self.functor(f) for f in self.list(data.get("functors"), "functors"))
        rules = tuple(self.rule_info(r) for r in self.list(data.get("rules"), "rules"))
        self.rule_count = len(rules)
        strata = tuple(self.stratum(s) for s in self.list(data.get("strata"), "strata"))
        bound = tuple(
            tuple(self.bound_rule(b) for b in self.list(rs, "bound rules"))
            for rs in self.list(data.get("bound_rules"), "bound_rules")
        )
        if len(bound) != len(self.relations):
            raise self.fail("bound_rules does not match the relations")
        return Plan(self.relations, self.functors, strata, rules, bound, default)

    def list(self, value: Any, what: str) -> list:
        if not isinstance(value, list):
            raise self.fail(f"{what} is not a list")
        return value

    def string(self, value: Any, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{what} is not a string")
        return value

    def integer(self, value: Any, what: str, below: int | None = None) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(f"{what} is not an index")
        if below is not None and value >= below:
            raise self.fail(f"{what} {value} is out of range")
        return value

    def literal(self, value: Any) -> int:
        """A literal index; -1 for a step no single literal owns."""
        if value == -1 and not isinstance(value, bool):
            return -1
        return self.integer(value, "literal")

    def boolean(self, value: Any, what: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(f"{what} is not a boolean")
        return value

    def relation(self, r: Any) -> RelationSpec:
        if not isinstance(r, dict):
            raise self.fail("relation is not an object")
        types = tuple(self.list(r.get("types"), "relation types"))
        if any(t is not None and t not in TYPES for t in types):
            raise self.fail("unknown attribute type")
        return RelationSpec(
            self.string(r.get("name"), "relation name"),
            types,
            self.boolean(r.get("input"), "input"),
            self.boolean(r.get("output"), "output"),
            self.boolean(r.get("inline"), "inline"),
        )

    def functor(self, f: Any) -> FunctorSpec:
        if not isinstance(f, dict):
            raise self.fail("functor is not an object")
        params = tuple(self.string(p, "parameter type") for p in self.list(f.get("params"), "params"))
        returns = self.string(f.get("returns"), "functor result")
        if any(p not in (*TYPES, "any") for p in params) or returns not in (*TYPES, "any", "bool"):
            raise self.fail("unknown functor type")
        return FunctorSpec(self.string(f.get("name"), "functor name"), params, returns)

    def rule_info(self, r: Any) -> RuleInfo:
        if not isinstance(r, dict):
            raise self.fail("rule is not an object")

        def optional(key: str) -> str | None:
            value = r.get(key)
            return None if value is None else self.string(value, key)

        return RuleInfo(
            id=self.string(r.get("id"), "rule id"),
            head=self.string(r.get("head"), "rule head"),
            file=self.string(r.get("file"), "rule file"),
            line=self.integer(r.get("line"), "rule line"),
            column=self.integer(r.get("column"), "rule column"),
            text=self.string(r.get("text"), "rule text"),
            variables=tuple(self.string(v, "variable") for v in self.list(r.get("variables"), "variables")),
            literals=tuple(self.string(v, "literal") for v in self.list(r.get("literals"), "literals")),
            message=optional("message"),
            suggest=optional("suggest"),
            severity=optional("severity"),
            requirements=tuple(
                self.string(q, "requirement") for q in self.list(r.get("requirements"), "reqs")
            ),
        )

    def stratum(self, s: Any) -> Stratum:
        if not isinstance(s, dict):
            raise self.fail("stratum is not an object")
        relations = tuple(
            self.integer(r, "relation", len(self.relations))
            for r in self.list(s.get("relations"), "relations")
        )
        return Stratum(
            relations,
            self.boolean(s.get("recursive"), "recursive"),
            tuple(self.rule_plan(r) for r in self.list(s.get("rules"), "rules")),
            tuple(self.rule_plan(r) for r in self.list(s.get("delta_rules"), "delta rules")),
            tuple(self.rule_plan(r) for r in self.list(s.get("insert_rules"), "insert rules")),
        )

    def rule_plan(self, r: Any) -> RulePlan:
        if not isinstance(r, dict):
            raise self.fail("rule plan is not an object")
        slots = self.integer(r.get("slots"), "slot count")
        head = self.integer(r.get("head"), "head relation", len(self.relations))
        head_args = tuple(self.expr(e, slots) for e in self.list(r.get("head_args"), "head arguments"))
        if len(head_args) != self.relations[head].arity:
            raise self.fail("head arity")
        return RulePlan(
            self.integer(r.get("rule"), "rule", self.rule_count),
            head,
            head_args,
            tuple(self.step(s, slots) for s in self.list(r.get("steps"), "steps")),
            slots,
            self.boolean(r.get("delta"), "delta"),
        )

    def bound_rule(self, b: Any) -> BoundRule:
        if not isinstance(b, dict):
            raise self.fail("bound rule is not an object")
        slots = self.integer(b.get("slots"), "slot count")
        head = tuple(self.pattern(p, slots) for p in self.list(b.get("head"), "head"))
        if any(isinstance(p, Skip) for p in head):
            raise self.fail("a head cannot skip")
        steps = tuple(self.step(s, slots) for s in self.list(b.get("steps"), "steps"))
        literals = tuple(self.literal(i) for i in self.list(b.get("literals"), "literals"))
        if len(literals) != len(steps):
            raise self.fail("literals do not match the steps")
        return BoundRule(
            self.integer(b.get("rule"), "rule", self.rule_count),
            HeadMatch(head),  # type: ignore[arg-type]
            steps,
            slots,
            literals,
        )

    def expr(self, e: Any, slots: int) -> Expr:
        if not isinstance(e, list) or not e:
            raise self.fail("expression is not a list")
        kind = e[0]
        if kind == "slot" and len(e) == 2:
            return Slot(self.integer(e[1], "slot", slots))
        if kind == "const" and len(e) == 2:
            value = e[1]
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise self.fail("constant is not a string or an integer")
            return Const(value)
        if kind == "float" and len(e) == 2:
            try:
                return Const(float(self.string(e[1], "float")))
            except ValueError:
                raise self.fail("float constant") from None
        if kind == "call" and len(e) == 3:
            functor = self.integer(e[1], "functor", len(self.functors))
            args = tuple(self.expr(a, slots) for a in self.list(e[2], "call arguments"))
            if len(args) != len(self.functors[functor].params):
                raise self.fail("call arity")
            return CallExpr(functor, args)
        if kind == "arith" and len(e) == 4 and e[1] in OPERATORS:
            return Arith(e[1], self.expr(e[2], slots), self.expr(e[3], slots))
        if kind == "neg" and len(e) == 2:
            return Neg(self.expr(e[1], slots))
        raise self.fail(f"unknown expression {kind!r}")

    def pattern(self, p: Any, slots: int) -> Pattern:
        if not isinstance(p, list) or not p:
            raise self.fail("pattern is not a list")
        if p[0] == "bind" and len(p) == 2:
            return Bind(self.integer(p[1], "slot", slots))
        if p[0] == "match" and len(p) == 2:
            return Match(self.expr(p[1], slots))
        if p[0] == "skip" and len(p) == 1:
            return Skip()
        raise self.fail(f"unknown pattern {p[0]!r}")

    def args(self, relation: int, patterns: Any, slots: int) -> tuple[Pattern, ...]:
        args = tuple(self.pattern(p, slots) for p in self.list(patterns, "arguments"))
        if len(args) != self.relations[relation].arity:
            raise self.fail("atom arity")
        return args

    def step(self, s: Any, slots: int) -> Step:
        if not isinstance(s, list) or not s:
            raise self.fail("step is not a list")
        kind = s[0]
        if kind == "scan" and len(s) == 4 and s[3] in ("full", "delta"):
            relation = self.integer(s[1], "relation", len(self.relations))
            return Scan(relation, self.args(relation, s[2], slots), s[3])
        if kind == "not" and len(s) == 3:
            relation = self.integer(s[1], "relation", len(self.relations))
            args = self.args(relation, s[2], slots)
            if any(isinstance(a, Bind) for a in args):
                raise self.fail("negation cannot bind")
            return NotExists(relation, args)  # type: ignore[arg-type]
        if kind == "filter" and len(s) == 4 and s[1] in COMPARATORS:
            return Filter(s[1], self.expr(s[2], slots), self.expr(s[3], slots))
        if kind == "assign" and len(s) == 3:
            return Assign(self.integer(s[1], "slot", slots), self.expr(s[2], slots))
        if kind == "test" and len(s) == 4:
            functor = self.integer(s[1], "functor", len(self.functors))
            args = tuple(self.expr(a, slots) for a in self.list(s[2], "arguments"))
            if len(args) != len(self.functors[functor].params):
                raise self.fail("test arity")
            return Test(functor, args, self.boolean(s[3], "negated"))
        if kind == "inline" and len(s) == 4:
            relation = self.integer(s[1], "relation", len(self.relations))
            args = tuple(self.expr(a, slots) for a in self.list(s[2], "arguments"))
            if len(args) != self.relations[relation].arity or not self.relations[relation].inline:
                raise self.fail("inline test")
            return InlineTest(relation, args, self.boolean(s[3], "negated"))
        if kind == "aggregate" and len(s) == 6 and s[2] in AGGREGATES:
            target = None if s[3] is None else self.expr(s[3], slots)
            body = tuple(self.step(b, slots) for b in self.list(s[4], "aggregate body"))
            keys = tuple(self.integer(k, "key slot", slots) for k in self.list(s[5], "keys"))
            return Aggregate(self.integer(s[1], "slot", slots), s[2], target, body, keys)
        raise self.fail(f"unknown step {kind!r}")


def from_data(data: Any) -> Plan:
    """A plan from JSON data; :class:`PlanError` if it is not one."""
    return _Reader(data).read()
