"""A :class:`~policyc.compiler.plan.Plan` as JSON-compatible data (what a bundle carries).

:func:`to_data` is the inverse of :func:`policyc.compiler.plan_read.from_data`: expressions,
patterns and steps become tagged lists (``["slot", 0]``, ``["scan", 2, [...], "full"]``),
floats are written as their ``repr`` so that a plan round-trips exactly.

>>> from policyc.compiler.plan import Plan
>>> to_data(Plan((), (), (), (), ()))["version"]
1
"""

from __future__ import annotations

from typing import Any

from .plan import (
    PLAN_VERSION,
    Aggregate,
    ArgumentSpec,
    Arith,
    Assign,
    Bind,
    CallExpr,
    Const,
    Expr,
    Field,
    Filter,
    InlineTest,
    Kind,
    Match,
    Neg,
    NotExists,
    Pack,
    Pattern,
    Plan,
    Range,
    RelationSpec,
    RulePlan,
    Scan,
    Slot,
    Step,
    Test,
)


def _relation_data(r: RelationSpec) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": r.name,
        "types": list(r.types),
        "input": r.input,
        "output": r.output,
        "inline": r.inline,
    }
    if r.choice:
        data["choice"] = [list(d) for d in r.choice]
    if r.keys:
        data["keys"] = [list(k) for k in r.keys]
        data["attributes"] = list(r.attributes)
    if r.host:
        data["host"] = True
    if r.limit is not None:
        data["limit"] = r.limit
    if r.magic is not None:  # demand-driven
        data["adornment"] = r.adornment
        data["magic"] = r.magic
    return data


def to_data(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-compatible data."""
    return {
        "version": PLAN_VERSION,
        "default": plan.default,
        "relations": [_relation_data(r) for r in plan.relations],
        "functors": [{"name": f.name, "params": list(f.params), "returns": f.returns} for f in plan.functors],
        "strata": [
            {
                "relations": list(s.relations),
                "recursive": s.recursive,
                "rules": [_rule_data(r) for r in s.rules],
                "delta_rules": [_rule_data(r) for r in s.delta_rules],
                "insert_rules": [_rule_data(r) for r in s.insert_rules],
                **({"subsumptions": [_rule_data(r) for r in s.subsumptions]} if s.subsumptions else {}),
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
        # only when there are some: a plan without them is the plan written before they existed
        **({"arguments": [argument_data(a) for a in plan.arguments]} if plan.arguments else {}),
    }


def argument_data(argument: ArgumentSpec) -> dict[str, Any]:
    """A declared argument as data (a bundle's plan and manifest hold it so)."""
    return {
        "tool": argument.tool,
        "argument": argument.argument,
        "type": argument.type,
        "required": argument.required,
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
    if isinstance(expr, Pack):
        return ["pack", expr.tag, [_expr_data(a) for a in expr.args]]
    if isinstance(expr, Field):
        return ["field", _expr_data(expr.value), expr.index]
    if isinstance(expr, Kind):
        return ["kind", _expr_data(expr.value)]
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
    if isinstance(step, Range):
        by = None if step.step is None else _expr_data(step.step)
        return ["range", step.slot, _expr_data(step.start), _expr_data(step.stop), by]
    if isinstance(step, Test):
        return ["test", step.functor, [_expr_data(a) for a in step.args], step.negated]
    if isinstance(step, InlineTest):
        return ["inline", step.relation, [_expr_data(a) for a in step.args], step.negated]
    if isinstance(step, Aggregate):
        target = None if step.target is None else _expr_data(step.target)
        return ["aggregate", step.slot, step.op, target, [_step_data(s) for s in step.body], list(step.keys)]
    raise AssertionError(f"unknown step {step!r}")
