"""``duplicate-rule``: a rule (or fact) that repeats an earlier one adds nothing.

Two rules are duplicates when one is the other with its body literals reordered and its
variables renamed consistently. (Subsumption by a more general rule is the deep analyzer's
``redundant-rule``.)
"""

from __future__ import annotations

from typing import Any

from .. import ast, codes
from ..diagnostics import Diagnostic, Related
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    seen: dict[Any, ast.Rule] = {}
    for _, rule in context.user_rules():
        # Literals in a fixed order (by their shape with variables blanked), then variables
        # numbered by first occurrence: the same for rules that differ in both.
        ordered = (
            sorted(rule.body, key=lambda lit: repr(_shape(lit, _BLANK))) if len(rule.body) > 1 else rule.body
        )
        names: dict[str, int] = {}
        key = (_shape(rule.head, names), tuple(_shape(lit, names) for lit in ordered))
        first = seen.get(key)
        if first is not None and first.span == rule.span and first.instance != rule.instance:
            continue  # two instances' copies of a rule of the enclosing program: one rule written
        if first is not None and first.span == rule.span:  # one statement, written twice over
            diagnostics.append(
                codes.DUPLICATE_RULE(
                    rule.head.span,
                    "this rule says the same thing twice (two of its heads or alternatives are the same)",
                    help="remove the repeated head or alternative",
                )
            )
            continue
        if first is not None:
            what = "fact" if rule.is_fact else "rule"
            diagnostics.append(
                codes.DUPLICATE_RULE(
                    rule.head.span,
                    f"this {what} repeats the {what} on line {first.head.span.line}",
                    related=[Related(first.span_from_head, f"the same {what} here")],
                    help=f"remove one of the two; a {what} holds once however often it is written",
                )
            )
            continue
        seen[key] = rule
    return diagnostics


class _Blank(dict):
    """Marker for :func:`_shape`: leave variables out of the picture."""


_BLANK = _Blank()


def _shape(node: Any, names: dict[str, int] | None) -> Any:
    """A hashable picture of a literal or term; with ``names``, variables are numbered in
    order of first occurrence, so that consistently renamed rules get the same picture."""
    if isinstance(node, ast.Var):
        if names is _BLANK:
            return ("var",)
        return ("var", node.name if names is None else names.setdefault(node.name, len(names)))
    if isinstance(node, ast.Atom):
        return ("atom", node.name, tuple(_shape(a, names) for a in node.args))
    if isinstance(node, ast.Negation):
        return ("not", _shape(node.atom, names))
    if isinstance(node, ast.Comparison):
        return ("cmp", node.op, _shape(node.left, names), _shape(node.right, names))
    if isinstance(node, ast.Call):
        return ("call", node.name, tuple(_shape(a, names) for a in node.args))
    if isinstance(node, ast.BinOp):
        return ("op", node.op, _shape(node.left, names), _shape(node.right, names))
    if isinstance(node, ast.Negate):
        return ("neg", _shape(node.operand, names))
    if isinstance(node, ast.UnaryOp):
        return ("unary", node.op, _shape(node.operand, names))
    if isinstance(node, ast.Aggregate):
        target = None if node.target is None else _shape(node.target, names)
        return ("agg", node.op, target, tuple(_shape(lit, names) for lit in node.body))
    if isinstance(node, ast.Wildcard):
        return ("_",)
    if isinstance(node, ast.Record):
        return ("record", tuple(_shape(a, names) for a in node.args))
    if isinstance(node, ast.Constructor):
        return ("adt", node.name, tuple(_shape(a, names) for a in node.args))
    if isinstance(node, ast.Nil):
        return ("nil",)
    if isinstance(node, ast.String | ast.Integer | ast.Float):
        return (type(node).__name__, node.value)
    raise AssertionError(f"unknown node {node!r}")
