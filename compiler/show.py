"""Dumps of intermediate forms for ``policyc check --show STAGE`` (text or JSON).

``ast``: the syntax tree of the files the user wrote (library modules are left out);
``strata``: the evaluation order, one stratum per strongly connected component;
``plan``: the evaluation plan, each rule's steps in the order the evaluator runs them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import ast
from . import plan as p
from .magic import NO_MAGIC, Options, is_magic
from .source import Span
from .stages import Parsed, Stratified

SHOWABLE = ("ast", "strata", "plan")


def show_json(what: str, compilation: Parsed, no_magic: bool = False) -> Any:
    if what == "ast":
        return [_node_json(m) for m in _user_modules(compilation)]
    if not isinstance(compilation, Stratified):
        return None
    if what == "plan":
        from .pipeline import plan
        from .plan_write import to_data

        return to_data(plan(compilation, _options(no_magic)).plan) if compilation.ok else None
    symbols = compilation.symbols
    return [
        {
            "index": s.index,
            "relations": list(s.relations),
            "recursive": s.recursive,
            "input": all(r in symbols.inputs for r in s.relations),
            "rules": s.computed,
        }
        for s in compilation.strata.strata
    ]


def show_text(what: str, compilation: Parsed, no_magic: bool = False) -> str:
    if what == "plan":
        return "\n".join(show_plan(compilation, no_magic))
    if what == "ast":
        lines: list[str] = []
        for module in _user_modules(compilation):
            lines.append(f"Module {module.path}")
            for statement in module.statements:
                _node_text(statement, 1, lines)
        return "\n".join(lines)
    if not isinstance(compilation, Stratified):
        return "(no strata: the policy did not parse)"
    symbols = compilation.symbols
    lines = []
    for s in compilation.strata.strata:
        flags = []
        if all(r in symbols.inputs for r in s.relations):
            flags.append("input")
        elif not s.computed:
            flags.append("no rules")
        if s.recursive:
            flags.append("recursive")
        suffix = f"  ({', '.join(flags)})" if flags else ""
        lines.append(f"stratum {s.index}: {', '.join(s.relations)}{suffix}")
    return "\n".join(lines)


def _user_modules(compilation: Parsed) -> list[ast.Module]:
    program = compilation.program
    return [m for m in program.modules if not program.is_library(m.path)]


def _fields(node: Any) -> list[tuple[str, Any]]:
    return [
        (f.name, getattr(node, f.name)) for f in dataclasses.fields(node) if f.compare and f.name != "path"
    ]


def _span_text(span: Span) -> str:
    return f"{span.line}:{span.column}-{span.end_line}:{span.end_column}"


def _node_text(node: Any, depth: int, lines: list[str]) -> None:
    indent = "  " * depth
    scalars = []
    children = []
    for name, value in _fields(node):
        if isinstance(value, ast.Ident):
            scalars.append(f"{name}={value.name}")
        elif value is False:
            continue
        elif dataclasses.is_dataclass(value) or (
            isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0])
        ):
            children.append((name, value))
        elif isinstance(value, tuple) and not value:
            continue
        elif value is not None:
            scalars.append(f"{name}={value!r}")
    span = getattr(node, "span", None)
    where = f" @{_span_text(span)}" if span is not None and span != ast.NO_SPAN else ""
    lines.append(f"{indent}{type(node).__name__}{where}" + (" " + " ".join(scalars) if scalars else ""))
    for name, value in children:
        items = value if isinstance(value, tuple) else (value,)
        lines.append(f"{indent}  {name}:")
        for item in items:
            _node_text(item, depth + 2, lines)


def _node_json(node: Any) -> Any:
    if isinstance(node, tuple):
        return [_node_json(n) for n in node]
    if not dataclasses.is_dataclass(node):
        return node
    out: dict[str, Any] = {"type": type(node).__name__}
    for name, value in _fields(node):
        out[name] = _node_json(value)
    span = getattr(node, "span", None)
    if isinstance(span, Span) and span != ast.NO_SPAN:
        out["span"] = {
            "line": span.line,
            "column": span.column,
            "end_line": span.end_line,
            "end_column": span.end_column,
        }
    if isinstance(node, ast.Module):
        out["path"] = node.path
    return out


# ------------------------------------------------------------------------------------ plan


def _options(no_magic: bool) -> Options | None:
    return NO_MAGIC if no_magic else None


def show_plan(compilation: Parsed, no_magic: bool = False) -> list[str]:
    """The evaluation plan, one block per rule, in evaluation order (without demand-driven
    relations if ``no_magic``)."""
    from .pipeline import plan as planned

    if not compilation.ok or not isinstance(compilation, Stratified):
        return ["(no plan: the policy has errors)"]
    plan = planned(compilation, _options(no_magic)).plan
    lines = [f"default: {plan.default}"]
    for n, stratum in enumerate(plan.strata):
        if not stratum.rules and not stratum.delta_rules:
            continue
        names = ", ".join(plan.relations[r].name for r in stratum.relations)
        lines.append(f"stratum {n}: {names}" + ("  (recursive)" if stratum.recursive else ""))
        for r in stratum.relations:
            spec = plan.relations[r]
            if spec.magic is not None:
                lines.append(
                    f"  demand-driven: {spec.name} (adornment {spec.adornment}: "
                    f"{_bound_text(spec.adornment)}), demanded values in {plan.relations[spec.magic].name}"
                )
        subsumptions = set(map(id, stratum.subsumptions))
        for rule in (*stratum.rules, *stratum.delta_rules, *stratum.subsumptions):
            info = plan.rules[rule.rule]
            kind = "delta" if rule.delta else ("base" if stratum.recursive else "once")
            if id(rule) in subsumptions:
                kind = "subsumption, after each round" if stratum.recursive else "subsumption"
            if is_magic(info.head):
                kind = f"magic rule, {kind}"
            where = f"{info.file}:{info.line}"
            label = info.id if info.id.endswith(where) else f"{info.id} [{where}]"
            lines.append(f"  rule {label} ({kind})")
            names_of = _slot_names(info.variables, rule.slots)
            for step in rule.steps:
                lines.extend("    " + text for text in _step_lines(plan, step, names_of))
            head = ", ".join(_expr_text(plan, e, names_of) for e in rule.head_args)
            name = plan.relations[rule.head].name
            if id(rule) in subsumptions:  # the dominated tuple, then the one dominating it
                width = plan.relations[rule.head].arity
                dominated = ", ".join(_expr_text(plan, e, names_of) for e in rule.head_args[:width])
                dominating = ", ".join(_expr_text(plan, e, names_of) for e in rule.head_args[width:])
                lines.append(f"    drop {name}({dominated}) dominated by {name}({dominating})")
                continue
            lines.append(f"    emit {name}({head})")
    return lines


def _bound_text(adornment: str) -> str:
    """``bf``: which arguments are bound, counted from 1."""
    bound = [str(i + 1) for i, a in enumerate(adornment) if a == "b"]
    return f"argument{'s' if len(bound) > 1 else ''} {', '.join(bound)} bound"


def _slot_names(variables: tuple[str, ...], slots: int) -> list[str]:
    return [variables[i] if i < len(variables) and variables[i] else f"_{i}" for i in range(slots)]


def _expr_text(plan: p.Plan, expr: p.Expr, names: list[str]) -> str:
    if isinstance(expr, p.Slot):
        return names[expr.index]
    if isinstance(expr, p.Const):
        return json_value(expr.value)
    if isinstance(expr, p.CallExpr):
        args = ", ".join(_expr_text(plan, a, names) for a in expr.args)
        return f"{plan.functors[expr.functor].name}({args})"
    if isinstance(expr, p.Arith) and expr.op in ("max", "min"):
        return f"{expr.op}({_expr_text(plan, expr.left, names)}, {_expr_text(plan, expr.right, names)})"
    if isinstance(expr, p.Arith):
        return f"({_expr_text(plan, expr.left, names)} {expr.op} {_expr_text(plan, expr.right, names)})"
    if isinstance(expr, p.Pack):
        fields = ", ".join(_expr_text(plan, a, names) for a in expr.args)
        if expr.tag is not None:
            return f"${expr.tag}({fields})"
        return f"[{fields}]" if expr.args else "nil"
    if isinstance(expr, p.Field):
        return f"{_expr_text(plan, expr.value, names)}.{expr.index}"
    if isinstance(expr, p.Kind):
        return f"kind({_expr_text(plan, expr.value, names)})"
    return f"-{_expr_text(plan, expr.operand, names)}"


def json_value(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def _pattern_text(plan: p.Plan, pattern: p.Pattern, names: list[str]) -> str:
    if isinstance(pattern, p.Bind):
        return names[pattern.slot]
    if isinstance(pattern, p.Match):
        return "=" + _expr_text(plan, pattern.expr, names)
    return "_"


def _step_lines(plan: p.Plan, step: p.Step, names: list[str]) -> list[str]:
    if isinstance(step, p.Scan):
        args = ", ".join(_pattern_text(plan, a, names) for a in step.args)
        keys = [i for i, a in enumerate(step.args) if isinstance(a, p.Match)]
        how = "check" if len(keys) == len(step.args) else (f"lookup on {keys}" if keys else "scan")
        if how != "check" and not any(isinstance(a, p.Bind) for a in step.args):
            how = "exists" if not keys else f"exists, {how}"  # done once: the first fact will do
        delta = "Δ" if step.source == "delta" else ""
        return [f"{how} {delta}{plan.relations[step.relation].name}({args})"]
    if isinstance(step, p.NotExists):
        args = ", ".join(_pattern_text(plan, a, names) for a in step.args)
        return [f"check not {plan.relations[step.relation].name}({args})"]
    if isinstance(step, p.Filter):
        return [
            f"filter {_expr_text(plan, step.left, names)} {step.op} {_expr_text(plan, step.right, names)}"
        ]
    if isinstance(step, p.Assign):
        return [f"let {names[step.slot]} = {_expr_text(plan, step.expr, names)}"]
    if isinstance(step, p.Range):
        bounds = [step.start, step.stop, *([] if step.step is None else [step.step])]
        shown = ", ".join(_expr_text(plan, e, names) for e in bounds)
        return [f"for {names[step.slot]} in range({shown})"]
    if isinstance(step, p.Test | p.InlineTest):
        target = (
            plan.functors[step.functor].name
            if isinstance(step, p.Test)
            else plan.relations[step.relation].name
        )
        args = ", ".join(_expr_text(plan, a, names) for a in step.args)
        kind = "test" if isinstance(step, p.Test) else "inline"
        return [f"{kind} {'not ' if step.negated else ''}{target}({args})"]
    target = "" if step.target is None else " " + _expr_text(plan, step.target, names)
    distinct = ", ".join(names[k] for k in step.keys)
    lines = [f"let {names[step.slot]} = {step.op}{target} over distinct ({distinct}) of:"]
    for inner in step.body:
        lines.extend("  " + text for text in _step_lines(plan, inner, names))
    return lines
