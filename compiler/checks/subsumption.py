"""``invalid-subsumption``: what a subsumption rule ``r(a) <= r(b) :- conditions.`` may be.

Both atoms are of one relation, whose tuples the rule compares; that relation is derived by
rules or facts of the program (there is nothing to drop otherwise) and is held as a set of
tuples policyc may drop from: not an ``.input`` (the host's facts are kept as given), not a
verdict (a dropped ``Deny`` fact would allow what it denied), not ``inline`` (evaluated on
demand, never held), not ``eqrel`` or with a ``choice-domain`` (which decide on their own what
the relation holds). The arity of each atom, the types and the safety
of the variables are checked as in any rule: the two atoms bind the variables of the head.

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source('''
... .decl r(x: number)
... .decl q(x: number)
... r(1).
... q(1).
... r(x) <= q(y) :- x < y.''') if d.name == "invalid-subsumption"]
['a subsumption rule compares tuples of one relation: `r` is dominated by `q`']
"""

from __future__ import annotations

from .. import codes
from ..diagnostics import Diagnostic
from ..symbols import Relation, is_verdict
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    derived = {rule.head.name for _, rule in context.program.rules() if not rule.is_subsumption}
    for _, rule in context.program.rules():
        dominating = rule.dominating
        if dominating is None:
            continue
        name = rule.head.name
        if dominating.name != name:
            diagnostics.append(
                codes.INVALID_SUBSUMPTION(
                    dominating.span,
                    f"a subsumption rule compares tuples of one relation: `{name}` is dominated by `{dominating.name}`",
                    help=f"write `{name}(...) <= {name}(...) :- ...`: the tuple on the left is dropped when the one on the right is there",
                )
            )
            continue
        relation = context.symbols.relations.get(name)
        if relation is None:
            continue  # undefined-relation says so
        problem = _why_not(relation, name in derived)
        if problem is not None:
            diagnostics.append(codes.INVALID_SUBSUMPTION(rule.head.span, problem[0], help=problem[1]))
    return diagnostics


def _why_not(relation: Relation, derived: bool) -> tuple[str, str] | None:
    """Why the tuples of a relation cannot be dropped by a subsumption rule, if they cannot."""
    name = relation.name
    if is_verdict(name, relation.arity):
        return (
            f"`{name}` is a verdict: a subsumption rule cannot drop its facts",
            "a dropped `Deny` fact would allow what it denied; subsume a relation the verdict rules read",
        )
    if relation.is_input:
        return (
            f"`{name}` is an input relation: its facts are kept as given",
            "derive a relation from it and subsume that one: `best(x, d) :- given(x, d).`",
        )
    if relation.inline:
        return (f"`{name}` is inline: it holds no tuples to drop", "remove `inline` from its declaration")
    if relation.eqrel or relation.choice:
        qualifier = "`eqrel`" if relation.eqrel else "a `choice-domain`"
        return (
            f"`{name}` has {qualifier}: it cannot also drop subsumed tuples",
            "subsume a relation derived from it instead",
        )
    if not derived:
        return (
            f"no rule or fact derives `{name}`: a subsumption rule has no tuple of it to drop",
            f"add the rules or facts of `{name}`, or remove this rule",
        )
    return None
