"""``invalid-annotation``: rule annotations are known, well-formed and consistent.

=============  ==============================================  ==========================
annotation     meaning                                         argument
=============  ==============================================  ==========================
``@id``        a stable identifier of the rule (deny reasons)  one string, unique
``@req``       the requirement(s) the rule encodes             one or more strings
``@message``   why the action is denied, for the agent         one string; ``{var}`` ok
``@suggest``   what the agent can do instead                   one string; ``{var}`` ok
``@severity``  how serious a violation is                      low, medium, high, critical
``@mode``      ``shadow``: a ``Deny`` rule that only logs          enforce (default), shadow
=============  ==============================================  ==========================

Placeholders ``{var}`` in ``@message`` and ``@suggest`` must name a variable that the rule
binds outside any aggregate (``{{`` and ``}}`` stand for literal braces).

A rule written with several heads or with ``;`` stands for several rules, each with its
annotations: they share its ``@id``, and each of them must bind the variables its
``@message`` names.

``@mode("shadow")`` makes a ``Deny`` rule log-only: the planner gives it a relation of its own
(:data:`SHADOW_RELATIONS`), which the enforced verdict never reads; a monitor reports its
denials as *would-deny* (docs/verdicts.md, "Shadow rollout").
"""

from __future__ import annotations

import re

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix, Related, replace_name
from ..source import Span
from ..syntax_errors import did_you_mean
from . import Context

SEVERITIES = ("low", "medium", "high", "critical")
ANNOTATIONS = {
    "id": (1, 1),
    "req": (1, None),
    "message": (1, 1),
    "suggest": (1, 1),
    "severity": (1, 1),
    "mode": (1, 1),
}
MODES = ("enforce", "shadow")
# the verdict relations a rule in shadow mode may have as head, and the relation it gets instead
SHADOW_RELATIONS = {"Deny": "Deny@shadow"}
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    ids: dict[str, ast.Annotation] = {}
    for _, rule in context.user_rules():
        seen: dict[str, ast.Annotation] = {}
        for annotation in rule.annotations:
            diagnostics.extend(_annotation(annotation, rule, seen, ids, context))
            seen.setdefault(annotation.name, annotation)
    return diagnostics


def _annotation(
    annotation: ast.Annotation,
    rule: ast.Rule,
    seen: dict[str, ast.Annotation],
    ids: dict[str, ast.Annotation],
    context: Context,
) -> list[Diagnostic]:
    error = codes.INVALID_ANNOTATION
    name = annotation.name
    if name not in ANNOTATIONS:
        close = did_you_mean(name, ANNOTATIONS)
        return [
            error(
                annotation.span,
                f"unknown annotation `@{name}`",
                help=(f"did you mean `@{close}`? " if close else "")
                + "the annotations are "
                + ", ".join(f"`@{a}`" for a in ANNOTATIONS),
                fix=_replace_in(context, annotation.span, name, close),
            )
        ]
    if name in seen:
        return [
            error(
                annotation.span,
                f"`@{name}` is given twice for this rule",
                related=[Related(seen[name].span, "first given here")],
            )
        ]
    low, high = ANNOTATIONS[name]
    n = len(annotation.args)
    if n < low or (high is not None and n > high):
        wanted = "one string" if high == 1 else "one or more strings"
        return [error(annotation.span, f"`@{name}` takes {wanted}, not {n} argument{'s' if n != 1 else ''}")]
    problems: list[Diagnostic] = []
    for arg in annotation.args:
        if isinstance(arg, ast.Var):
            problems.append(
                error(
                    arg.span,
                    f'annotation arguments are strings: write `"{arg.name}"`',
                    fix=Fix(f'write `"{arg.name}"`', (Edit(arg.span, f'"{arg.name}"'),), safe=True),
                )
            )
        elif not isinstance(arg, ast.String):
            problems.append(error(arg.span, f"`@{name}` takes a string"))
    if problems:
        return problems
    first = annotation.args[0]
    if not isinstance(first, ast.String):  # not reached: every argument is a string by now
        return []
    value = first.value
    if name == "id":
        if not value.strip():
            return [error(annotation.args[0].span, "a rule id cannot be empty")]
        if value in ids and ids[value].span != annotation.span:  # the rules of one `;` share it
            return [
                error(
                    annotation.args[0].span,
                    f"rule id `{value}` is already used",
                    related=[Related(ids[value].span, "first used here")],
                    help="deny reasons are reported by rule id, so ids are unique",
                )
            ]
        ids[value] = annotation
    elif name == "severity" and value not in SEVERITIES:
        close = did_you_mean(value, SEVERITIES)
        return [
            error(
                annotation.args[0].span,
                f"unknown severity `{value}`",
                help=(f"did you mean `{close}`? " if close else "")
                + "the severities are "
                + ", ".join(f"`{s}`" for s in SEVERITIES),
                fix=_replace_in(context, annotation.args[0].span, value, close),
            )
        ]
    elif name == "mode":
        return _mode(annotation, value, rule, context)
    elif name in ("message", "suggest"):
        return _placeholders(annotation, context.program.summary(rule).outer_variables, context)
    return []


def _mode(annotation: ast.Annotation, value: str, rule: ast.Rule, context: Context) -> list[Diagnostic]:
    """``@mode`` names a mode, and only a verdict rule can be in shadow mode."""
    span = annotation.args[0].span
    if value not in MODES:
        close = did_you_mean(value, MODES)
        return [
            codes.INVALID_ANNOTATION(
                span,
                f"unknown mode `{value}`",
                help=(f"did you mean `{close}`? " if close else "") + "the modes are `enforce` and `shadow`",
                fix=_replace_in(context, span, value, close),
            )
        ]
    if value == "shadow" and rule.head.name not in SHADOW_RELATIONS:
        heads = ", ".join(f"`{h}`" for h in SHADOW_RELATIONS)
        return [
            codes.INVALID_ANNOTATION(
                span,
                f'`@mode("shadow")` applies to {heads} rules, not to `{rule.head.name}`',
                help="a rule in shadow mode reports its denials as would-deny without enforcing them",
            )
        ]
    return []


def rule_mode(rule: ast.Rule) -> str:
    """The rule's ``@mode`` (``enforce`` unless it says ``shadow``)."""
    found = rule.annotation("mode")
    if found and found.args and isinstance(found.args[0], ast.String) and found.args[0].value == "shadow":
        return "shadow"
    return "enforce"


def placeholder_names(rule: ast.Rule) -> set[str]:
    """The variables the rule's ``@message`` and ``@suggest`` name (a use of each)."""
    names: set[str] = set()
    for annotation in rule.annotations:
        if (
            annotation.name in ("message", "suggest")
            and annotation.args
            and isinstance(annotation.args[0], ast.String)
        ):
            names.update(
                m.group(1).strip().removesuffix(".id")
                for m in _PLACEHOLDER.finditer(annotation.args[0].value)
                if m.group(1)
            )
    return names


def _placeholders(
    annotation: ast.Annotation, variables: frozenset[str], context: Context
) -> list[Diagnostic]:
    arg = annotation.args[0]
    assert isinstance(arg, ast.String)
    problems = []
    for match in _PLACEHOLDER.finditer(arg.value):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if token in ("{", "}"):
            problems.append(
                codes.INVALID_ANNOTATION(
                    arg.span,
                    f"unmatched `{token}` in `@{annotation.name}`",
                    help="write `{{` or `}}` for a literal brace",
                )
            )
            continue
        var = match.group(1).strip()
        if var.endswith(".id") and var[:-3] in variables:  # the value itself, not the call it names
            continue
        if var not in variables:
            close = did_you_mean(var, variables)
            problems.append(
                codes.INVALID_ANNOTATION(
                    arg.span,
                    f"`{{{var}}}` in `@{annotation.name}` is not a variable of this rule",
                    help=(f"did you mean `{{{close}}}`? " if close else "")
                    + "placeholders name variables of the rule's head or body",
                    fix=_replace_in(context, arg.span, match.group(0), close and f"{{{close}}}"),
                )
            )
    return problems


def _replace_in(context: Context, span: Span, old: str, new: str | None) -> Fix | None:
    """The fix of a "did you mean": ``new`` in place of the first ``old`` in the text of ``span``."""
    source = context.program.source(span.file)
    if new is None or source is None:
        return None
    at = source.text.find(old, span.start, span.end)
    return replace_name(source.span(at, at + len(old)), old, new) if at >= 0 else None
