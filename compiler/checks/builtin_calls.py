r"""Calls of builtins whose constant arguments can be checked before the policy runs.

``invalid-pattern``: in a policy (a program with verdict rules), a constant pattern of
``match`` that ``match`` cannot run (invalid in its dialect, a backreference or lookaround,
which RE2 does not have, or too long); at run time such a call would be an error of every
decision that reaches it. ``souffle-difference``: a policy's pattern that Soufflé's
``std::regex`` rejects or reads otherwise (RE2's flags, ``\pL``).

``unmatched-pattern``: in a program without verdicts, ``match`` reads patterns as Soufflé does
and one it cannot use matches nothing: a warning where Soufflé warns when it runs.

``contains-order``: ``contains(part, text)`` takes the part first, as in Soufflé. A call whose
second argument is a string constant and whose first is not, ``contains(url, "evil.com")``,
asks whether the URL occurs in ``"evil.com"``: in a ``Deny`` rule written for the order
``(text, part)`` that policyc had before, the rule would stop firing. The fix swaps the two
arguments; it is a guess at what was meant, so not safe.
"""

from __future__ import annotations

from collections.abc import Iterator

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix
from ..regex import SOUFFLE, pattern_error, pattern_problem, souffle_reading
from ..source import Span
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    functors = context.symbols.functors
    for _, rule in context.user_rules():
        for name, args, span in _calls(rule):
            functor = functors.get(name)
            if functor is None or not functor.library or len(args) != 2:
                continue
            if name == "match" and isinstance(args[0], ast.String):
                found = _pattern(args[0], context.symbols.has_verdict_rules)
                if found is not None:
                    diagnostics.append(found)
            elif (
                name == "contains" and isinstance(args[1], ast.String) and not isinstance(args[0], ast.String)
            ):
                first, second = context.text(args[0].span), context.text(args[1].span)
                diagnostics.append(
                    codes.CONTAINS_ORDER(
                        span,
                        f"`contains({first}, {second})` holds when `{first}` occurs in {second}; "
                        f"`contains` takes the part first",
                        help=f"to ask whether {second} occurs in `{first}`, write "
                        f"`contains({second}, {first})`",
                        fix=Fix(
                            "swap the arguments",
                            (Edit(args[0].span, second), Edit(args[1].span, first)),
                            safe=False,
                        ),
                    )
                )
    return diagnostics


_SEE = 'see docs/language.md, "Regular expressions"'


def _pattern(pattern: ast.String, policy: bool) -> Diagnostic | None:
    """What ``check`` says of a constant pattern of ``match``: in a policy, whether ``match``
    can run it and whether Soufflé reads it alike; elsewhere, whether it can match at all."""
    if policy:
        problem = pattern_problem(pattern.value)
        if problem is not None:
            return codes.INVALID_PATTERN(
                pattern.span,
                f"`match` cannot use this pattern: {problem}",
                help=f"patterns are Soufflé's (ECMAScript) regular expressions, run by RE2; {_SEE}",
            )
        reading = souffle_reading(pattern.value)
        if reading is None:
            return None
        return codes.SOUFFLE_DIFFERENCE(
            pattern.span,
            f"Soufflé answers this pattern otherwise: {reading}",
            help="a policy reads patterns as ECMAScript with RE2's extensions; write the pattern in the "
            f"part both read alike if it must mean the same to Soufflé; {_SEE}",
        )
    error = pattern_error(pattern.value, SOUFFLE)
    if error is None:
        return None
    if error.kind == "invalid":
        message = (
            f"Soufflé's std::regex rejects this pattern ({error.reason}): `match` is false for every "
            "text, as in Soufflé, which warns when it runs"
        )
    else:
        message = (
            f"`match` cannot run this pattern ({error.reason}), so it is false for every text; "
            "Soufflé, which backtracks, may match"
        )
    return codes.UNMATCHED_PATTERN(
        pattern.span,
        message,
        help=f"a program with `Deny`, `Allow` or `Escalate` rules refuses such a pattern instead; {_SEE}",
    )


def _calls(rule: ast.Rule) -> Iterator[tuple[str, tuple[ast.Term, ...], Span]]:
    """Every functor call and foreign predicate of a rule: name, arguments and span."""
    yield from _term_calls(ast.Call(rule.head.name, rule.head.args), top=True)
    for literal in rule.body:
        yield from _literal_calls(literal)


def _literal_calls(literal: ast.Literal) -> Iterator[tuple[str, tuple[ast.Term, ...], Span]]:
    atom = literal.atom if isinstance(literal, ast.Negation) else literal
    if isinstance(atom, ast.Atom):
        yield atom.name, atom.args, atom.span
    for term in ast.literal_terms(literal):
        yield from _term_calls(term)


def _term_calls(term: ast.Term, top: bool = False) -> Iterator[tuple[str, tuple[ast.Term, ...], Span]]:
    for t in ast.walk_term(term, into_aggregates=False):
        if isinstance(t, ast.Call) and not (top and t is term):
            yield t.name, t.args, t.span
        elif isinstance(t, ast.Aggregate):
            if t.target is not None:
                yield from _term_calls(t.target)
            for literal in t.body:
                yield from _literal_calls(literal)
