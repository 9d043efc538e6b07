"""The evaluation plan: what the runtime executes, as plain data.

A :class:`Plan` lists the relations (by index), the functors the host must provide, the
strata in evaluation order, and for each rule the order of its steps. Variables are
numbered slots, relations and functors are indices: nothing in a plan is a name the runtime
would have to trust. Plans round-trip through JSON (:func:`to_data`, :func:`from_data`) so
that a bundle can carry one; :func:`from_data` validates the structure and raises
:class:`PlanError` on anything malformed.

Steps of a rule body, executed in order for each binding of the slots so far:

=================  ==========================================================================
``Scan``           for each fact of a relation matching the known arguments, bind the others
                   (``source`` says whether the full relation or only the last round's
                   new facts — the *delta* of semi-naive evaluation — are scanned)
``NotExists``      no fact of a relation matches (negation; ``_`` matches anything)
``Filter``         a comparison holds
``Assign``         compute a value into a slot
``Test``           a foreign predicate holds (or, negated, does not)
``InlineTest``     an inline relation holds for the given arguments (or does not)
``Aggregate``      compute count/sum/min/max/mean over the bindings of an inner body
=================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PLAN_VERSION = 1
OPERATORS = ("+", "-", "*", "/", "%")
COMPARATORS = ("=", "!=", "<", "<=", ">", ">=")
AGGREGATES = ("count", "sum", "min", "max", "mean")
TYPES = ("symbol", "number", "float")


class PlanError(ValueError):
    """A plan (usually read from a bundle) is not well formed."""


# ------------------------------------------------------------------------------ expressions


@dataclass(frozen=True, slots=True)
class Slot:
    index: int


@dataclass(frozen=True, slots=True)
class Const:
    value: str | int | float


@dataclass(frozen=True, slots=True)
class CallExpr:
    functor: int
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Arith:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Expr


Expr = Slot | Const | CallExpr | Arith | Neg


@dataclass(frozen=True, slots=True)
class Bind:
    """An atom argument that binds a slot (its first occurrence)."""

    slot: int


@dataclass(frozen=True, slots=True)
class Match:
    """An atom argument whose value is known (a bound slot, a constant, an expression)."""

    expr: Expr


@dataclass(frozen=True, slots=True)
class Skip:
    """``_``: any value."""


Pattern = Bind | Match | Skip

# ------------------------------------------------------------------------------------ steps


@dataclass(frozen=True, slots=True)
class Scan:
    relation: int
    args: tuple[Pattern, ...]
    source: str = "full"  # "full" or "delta"


@dataclass(frozen=True, slots=True)
class NotExists:
    relation: int
    args: tuple[Match | Skip, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Assign:
    slot: int
    expr: Expr


@dataclass(frozen=True, slots=True)
class Test:
    functor: int
    args: tuple[Expr, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class InlineTest:
    relation: int
    args: tuple[Expr, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``slot = op target : { body }``; ``keys`` are the inner slots whose distinct values
    (together with the target) are aggregated, so each matching combination counts once."""

    slot: int
    op: str
    target: Expr | None
    body: tuple[Step, ...]
    keys: tuple[int, ...]


Step = Scan | NotExists | Filter | Assign | Test | InlineTest | Aggregate

# ----------------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class RulePlan:
    rule: int  # index into Plan.rules (the source rule this evaluates)
    head: int  # relation
    head_args: tuple[Expr, ...]
    steps: tuple[Step, ...]
    slots: int  # number of variable slots
    delta: bool = False  # reads the delta of its own stratum (semi-naive variant)


@dataclass(frozen=True, slots=True)
class HeadMatch:
    """How a rule head meets given values (inline relations, explanations, reasons):
    ``Bind`` a slot to the value, or ``Match`` the value against an expression."""

    args: tuple[Bind | Match, ...]


@dataclass(frozen=True, slots=True)
class BoundRule:
    """A rule evaluated with its head's values given: the steps run after ``head`` has
    bound or checked the head arguments. Used for inline relations, deny reasons and
    explanations."""

    rule: int
    head: HeadMatch
    steps: tuple[Step, ...]
    slots: int
    literals: tuple[int, ...] = ()  # for each step, the body literal it evaluates (RuleInfo.literals)


@dataclass(frozen=True, slots=True)
class Stratum:
    relations: tuple[int, ...]
    recursive: bool
    rules: tuple[RulePlan, ...]  # evaluated once (for a recursive stratum: the base round)
    delta_rules: tuple[RulePlan, ...] = ()  # evaluated each round on the previous round's delta
    # for maintaining the stratum as facts arrive: one variant per positive atom of each rule,
    # reading that atom's new facts only (incremental insertion)
    insert_rules: tuple[RulePlan, ...] = ()


@dataclass(frozen=True, slots=True)
class RelationSpec:
    name: str
    types: tuple[str | None, ...]  # None: unconstrained
    input: bool = False
    output: bool = False
    inline: bool = False

    @property
    def arity(self) -> int:
        return len(self.types)


@dataclass(frozen=True, slots=True)
class FunctorSpec:
    name: str
    params: tuple[str, ...]  # symbol, number, float or any
    returns: str  # symbol, number, float, any or bool


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """What explanations and deny reasons say about a source rule."""

    id: str
    head: str
    file: str
    line: int
    column: int
    text: str
    variables: tuple[str, ...]  # slot -> variable name ('' for hidden slots)
    literals: tuple[str, ...] = ()  # the source text of each body literal
    message: str | None = None
    suggest: str | None = None
    severity: str | None = None
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    relations: tuple[RelationSpec, ...]
    functors: tuple[FunctorSpec, ...]
    strata: tuple[Stratum, ...]
    rules: tuple[RuleInfo, ...]
    bound_rules: tuple[tuple[BoundRule, ...], ...]  # per relation: its rules with the head given
    default: str = "allow"

    def relation_index(self) -> dict[str, int]:
        return {r.name: i for i, r in enumerate(self.relations)}


def reads(steps: tuple[Step, ...], inside: bool = False) -> Iterator[tuple[int, str]]:
    """The relations a rule body reads and how: scan, negation, aggregate (anything inside an
    aggregate's body), inline, inline-negated."""
    for step in steps:
        if isinstance(step, Scan):
            yield step.relation, "aggregate" if inside else "scan"
        elif isinstance(step, NotExists):
            yield step.relation, "aggregate" if inside else "negation"
        elif isinstance(step, InlineTest):
            yield step.relation, "aggregate" if inside else ("inline-negated" if step.negated else "inline")
        elif isinstance(step, Aggregate):
            yield from reads(step.body, inside=True)


# ------------------------------------------------------------------------------ to and from data


def to_data(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-compatible data."""
    return {
        "version": PLAN_VERSION,
        "default": plan.default,
        "relations": [
            {"name": r.name, "types": list(r.types), "input": r.input, "output": r.output, "inline": r.inline}
            for r in plan.relations
        ],
        "functors": [{"name": f.name, "params": list(f.params), "returns": f.returns} for f in plan.functors],
        "strata": [
            {
                "relations": list(s.relations),
                "recursive": s.recursive,
                "rules": [_rule_data(r) for r in s.rules],
                "delta_rules": [_rule_data(r) for r in s.delta_rules],
                "insert_rules": [_rule_data(r) for r in s.insert_rules],
            }
            for s in plan.strata
        ],
        "rules": [
            {
                "id": i.id,
                "head": i.head,
                "file": i.file,
                "line": i.line,
                "column": i.column,
                "text": i.text,
                "variables": list(i.variables),
                "literals": list(i.literals),
                "message": i.message,
                "suggest": i.suggest,
                "severity": i.severity,
                "requirements": list(i.requirements),
            }
            for i in plan.rules
        ],
        "bound_rules": [
            [
                {
                    "rule": b.rule,
                    "head": [_pattern_data(p) for p in b.head.args],
                    "steps": [_step_data(s) for s in b.steps],
                    "slots": b.slots,
                    "literals": list(b.literals),
                }
                for b in rules
            ]
            for rules in plan.bound_rules
        ],
    }


def _rule_data(rule: RulePlan) -> dict[str, Any]:
    return {
        "rule": rule.rule,
        "head": rule.head,
        "head_args": [_expr_data(e) for e in rule.head_args],
        "steps": [_step_data(s) for s in rule.steps],
        "slots": rule.slots,
        "delta": rule.delta,
    }


def _expr_data(expr: Expr) -> Any:
    if isinstance(expr, Slot):
        return ["slot", expr.index]
    if isinstance(expr, Const):
        value = expr.value
        if isinstance(value, float):
            return ["float", repr(value)]  # exact, and JSON has no inf or nan
        return ["const", value]
    if isinstance(expr, CallExpr):
        return ["call", expr.functor, [_expr_data(a) for a in expr.args]]
    if isinstance(expr, Arith):
        return ["arith", expr.op, _expr_data(expr.left), _expr_data(expr.right)]
    if isinstance(expr, Neg):
        return ["neg", _expr_data(expr.operand)]
    raise AssertionError(f"unknown expression {expr!r}")


def _pattern_data(pattern: Pattern) -> Any:
    if isinstance(pattern, Bind):
        return ["bind", pattern.slot]
    if isinstance(pattern, Match):
        return ["match", _expr_data(pattern.expr)]
    return ["skip"]


def _step_data(step: Step) -> Any:
    if isinstance(step, Scan):
        return ["scan", step.relation, [_pattern_data(p) for p in step.args], step.source]
    if isinstance(step, NotExists):
        return ["not", step.relation, [_pattern_data(p) for p in step.args]]
    if isinstance(step, Filter):
        return ["filter", step.op, _expr_data(step.left), _expr_data(step.right)]
    if isinstance(step, Assign):
        return ["assign", step.slot, _expr_data(step.expr)]
    if isinstance(step, Test):
        return ["test", step.functor, [_expr_data(a) for a in step.args], step.negated]
    if isinstance(step, InlineTest):
        return ["inline", step.relation, [_expr_data(a) for a in step.args], step.negated]
    if isinstance(step, Aggregate):
        target = None if step.target is None else _expr_data(step.target)
        return ["aggregate", step.slot, step.op, target, [_step_data(s) for s in step.body], list(step.keys)]
    raise AssertionError(f"unknown step {step!r}")


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
