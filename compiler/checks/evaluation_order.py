"""Soufflé's constructs whose results depend on the order of evaluation.

``autoinc()`` numbers its calls, ``recursive_iteration_cnt()`` is the round of the recursion
a rule runs in, and ``.limitsize R(n=N)`` keeps the first N facts derived. policyc evaluates
them as Soufflé's single-threaded evaluation does where the program defines that order (the
nested loops of a rule in the order written, facts ascending: see docs/language.md), but the
values depend on how the evaluation proceeds, not on the facts alone:

* in a policy (a program with verdict rules) each is ``order-dependent``, an error: a
  monitor session evaluates a policy as events arrive and its answers must be those of an
  evaluation from scratch;
* in a program without verdicts (a Soufflé program) each is an ``evaluation-order`` warning:
  it is evaluated, and the warning says where its values may differ from Soufflé's.
"""

from __future__ import annotations

from collections.abc import Iterator

from .. import ast, codes
from ..diagnostics import Diagnostic
from ..source import Span
from . import Context

_WHAT = {
    "autoinc": "`autoinc()` numbers its calls in the order they are evaluated",
    "recursive_iteration_cnt": "`recursive_iteration_cnt()` is the round of the recursion a rule runs in",
}


def check(context: Context) -> list[Diagnostic]:
    policy = context.symbols.has_verdict_rules
    found: list[tuple[Span, str]] = []
    for _, rule in context.user_rules():
        for call in _calls(rule):
            signature = context.symbols.functors.get(call.name)
            if call.name in _WHAT and signature is not None and signature.library:
                found.append((call.span, _WHAT[call.name]))
    for module, statement in context.program.statements():
        if isinstance(statement, ast.LimitSize) and not context.program.is_library(module.path):
            found.append(
                (
                    statement.span,
                    f"`.limitsize` keeps the first {statement.size} facts of `{statement.relation.name}` "
                    "in the order they are derived",
                )
            )
    diagnostics = []
    for span, what in found:
        if policy:
            diagnostics.append(
                codes.ORDER_DEPENDENT(
                    span,
                    f"{what}, which a policy cannot depend on",
                    help="a monitor decides as events arrive, and must decide as an evaluation from scratch "
                    "would; derive the value from the facts instead (an aggregate, a `range`)",
                )
            )
        else:
            diagnostics.append(
                codes.EVALUATION_ORDER(
                    span,
                    f"{what}: policyc follows Soufflé's single-threaded order where the program defines it, "
                    "its own elsewhere",
                    help='see docs/language.md, "Coming from Soufflé", for the order of evaluation',
                )
            )
    return diagnostics


def _calls(rule: ast.Rule) -> Iterator[ast.Call]:
    terms = [*rule.head.args, *(t for lit in rule.body for t in ast.literal_terms(lit))]
    for term in terms:
        for inner in ast.walk_term(term):
            if isinstance(inner, ast.Call):
                yield inner
