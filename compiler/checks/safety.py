"""``unsafe-variable``: range restriction, so every rule derives finitely many facts.

A variable is *bound* when it is an argument of a positive relation atom (or a field of a
record or constructor pattern there: ``R([x, _])`` binds ``x``), or assigned with
``x = expr`` (either side; ``[x, y] = expr`` takes a record apart) once every variable of
``expr`` is bound, or assigned the result
of an aggregate whose grouping variables are bound. Every variable in the head, in a
negated literal, in a comparison, in an expression or passed to a functor must be bound.

Aggregates have their own scope (Soufflé's rule, :mod:`..scopes`): variables bound inside
the braces exist only there. A variable that occurs inside an aggregate and is bound outside
it groups the aggregate, unless it is one of the aggregate's target (``a = max a : r(a)``:
the target's ``a`` is the aggregate's own); one that occurs outside but only the aggregate
binds has no value outside — the *witness problem*. A variable two aggregates share and
nothing outside binds is each aggregate's own.

Facts have no body, so they cannot hold variables at all (``Send(v6).`` is almost always
meant as ``Send("v6").``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .. import ast, codes, scopes
from ..diagnostics import Diagnostic, Edit, Fix
from ..summary import RuleSummary
from ..symbols import Symbols
from . import Context


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    for _, rule in context.user_rules():
        diagnostics.extend(_RuleSafety(rule, context.symbols, context.program.summary(rule)).run())
    return diagnostics


def _vars(term: ast.Term) -> Iterable[ast.Var]:
    return ast.term_vars(term)


class _RuleSafety:
    def __init__(self, rule: ast.Rule, symbols: Symbols, summary: RuleSummary) -> None:
        self.rule = rule
        self.symbols = symbols
        self.summary = summary
        self.diagnostics: list[Diagnostic] = []
        self.reported: set[str] = set()
        self.total: Counter[str] = Counter(v.name for v in summary.variables)
        self.inner_bound: set[str] = set()  # bound in some aggregate's scope
        self.scopes: dict[int, scopes.Scope] = {}

    def all_terms(self) -> Iterable[ast.Term]:
        yield from self.rule.head.args
        for literal in self.rule.body:
            yield from ast.literal_terms(literal)

    # --------------------------------------------------------------------- binding

    def is_relation(self, atom: ast.Atom) -> bool:
        return atom.name not in self.symbols.functors

    def binds(self, atom: ast.Atom) -> bool:
        """Positive atoms of stored relations bind; functors and inline relations only test."""
        return atom.name not in self.symbols.functors and not self.symbols.is_inline(atom.name)

    def outer_vars(self, aggregate: ast.Aggregate) -> set[str]:
        """The variables that group an aggregate (:mod:`..scopes`: injected, or witnesses)."""
        scope = self.scopes.get(id(aggregate))
        if scope is not None:
            return set(scope.grouping)
        inside: Counter[str] = Counter(v.name for v in _vars(aggregate))
        return {name for name, n in inside.items() if self.total[name] > n}

    def evaluable(self, term: ast.Term, bound: set[str]) -> bool:
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Wildcard):
                return False
            if isinstance(t, ast.Var) and t.name not in bound:
                return False
            if isinstance(t, ast.Aggregate):
                if not self.outer_vars(t) <= bound:
                    return False
                inner = self.inner(t, bound)
                if t.target is not None and not all(v.name in inner for v in _vars(t.target)):
                    return False
        return True

    def inner(self, aggregate: ast.Aggregate, outer: set[str]) -> set[str]:
        """The variables bound in an aggregate's body: its own (local) ones are bound only there."""
        scope = self.scopes.get(id(aggregate))
        return self.bound(aggregate.body, outer - scope.local if scope else outer)

    def bound(self, literals: tuple[ast.Literal, ...], outer: set[str]) -> set[str]:
        """The variables bound in a scope, given those bound around it."""
        bound = set(outer)
        for literal in literals:
            if isinstance(literal, ast.Atom) and self.binds(literal):
                bound.update(v.name for arg in literal.args for v in ast.pattern_vars(arg))
        assignments = [lit for lit in literals if isinstance(lit, ast.Comparison) and lit.op == "="]
        changed = True
        while changed:
            changed = False
            for literal in assignments:
                for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                    if isinstance(side, ast.Var) and side.name not in bound and self.evaluable(other, bound):
                        bound.add(side.name)
                        changed = True
                    elif ast.is_pattern(side) and self.evaluable(other, bound):
                        new = {v.name for v in ast.pattern_vars(side)} - bound
                        if new:
                            bound |= new
                            changed = True
        return bound

    # -------------------------------------------------------------------- checking

    def run(self) -> list[Diagnostic]:
        rule = self.rule
        if rule.is_fact:
            self.fact()
            return self.diagnostics
        given: set[str] = set()
        if self.symbols.is_inline(rule.head.name):
            # the caller binds every argument of an inline relation
            given = {arg.name for arg in rule.head.args if isinstance(arg, ast.Var)}
        if self.summary.aggregates:
            self.scopes = scopes.scopes(rule, self.binds, given)
        bound = self.bound(rule.body, given)
        if self.summary.aggregates:
            self.collect_inner(rule.body, bound)
        for literal in rule.body:
            self.literal(literal, bound)
        for arg in rule.head.args:
            self.head_term(arg, bound)
        return self.diagnostics

    def outside_occurrence(self, name: str) -> ast.Var | None:
        """The first occurrence of a variable outside every aggregate, if any."""
        for term in self.all_terms():
            for t in ast.walk_term(term, into_aggregates=False):
                if isinstance(t, ast.Var) and t.name == name:
                    return t
        return None

    def collect_inner(self, literals: tuple[ast.Literal, ...], bound: set[str]) -> None:
        for literal in literals:
            for term in ast.literal_terms(literal):
                for t in ast.walk_term(term, into_aggregates=False):
                    if isinstance(t, ast.Aggregate):
                        inner = self.inner(t, bound)
                        self.inner_bound |= inner - bound
                        self.collect_inner(t.body, inner)

    def report(self, var: ast.Var, message: str, help_text: str, fix: Fix | None = None) -> None:
        if var.name in self.reported:
            return
        self.reported.add(var.name)
        if var.name in self.inner_bound:
            message = f"variable `{var.name}` is bound only inside an aggregate, so it has no value here"
            help_text = (
                "an aggregate does not bind the variables of its body (the witness problem); "
                f"bind `{var.name}` outside the braces, or use it only inside them"
            )
            fix = None
        self.diagnostics.append(codes.UNSAFE_VARIABLE(var.span, message, help=help_text, fix=fix))

    def wildcard(self, wildcard: ast.Wildcard, where: str) -> None:
        self.diagnostics.append(
            codes.UNSAFE_VARIABLE(
                wildcard.span,
                f"`_` cannot be used {where}",
                help="`_` matches any value of a relation's argument; it has no value itself",
            )
        )

    def fact(self) -> None:
        for arg in self.rule.head.args:
            for t in ast.walk_term(arg):
                if isinstance(t, ast.Var):
                    self.report(
                        t,
                        f"a fact cannot contain variables, and `{t.name}` is one",
                        f'constants are quoted: write `"{t.name}"` for the string',
                        Fix(f'write `"{t.name}"`', (Edit(t.span, f'"{t.name}"'),), safe=False),
                    )
                elif isinstance(t, ast.Wildcard):
                    self.wildcard(t, "in a fact")

    def head_term(self, term: ast.Term, bound: set[str]) -> None:
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Var) and t.name not in bound:
                self.report(
                    t,
                    f"variable `{t.name}` in the head is not bound in the body",
                    f"every head variable must occur in a positive literal of the body or be assigned "
                    f"with `{t.name} = ...`",
                )
            elif isinstance(t, ast.Wildcard):
                self.wildcard(t, "in a rule head")
            elif isinstance(t, ast.Aggregate):
                self.diagnostics.append(
                    codes.SYNTAX_ERROR(
                        t.span,
                        "an aggregate cannot appear in a rule head",
                        help="assign it in the body, e.g. `n = count : { ... }`, and use `n`",
                    )
                )

    def literal(self, literal: ast.Literal, bound: set[str]) -> None:
        if isinstance(literal, ast.Atom):
            if self.symbols.is_inline(literal.name):
                self.inline_args(literal, bound)
            elif self.is_relation(literal):
                for arg in literal.args:
                    if not isinstance(arg, ast.Var | ast.Wildcard):
                        self.pattern(arg, bound, f"an argument of `{literal.name}`")
            else:
                self.functor_args(literal.name, literal.args, bound)
        elif isinstance(literal, ast.Negation):
            atom = literal.atom
            if not self.is_relation(atom):
                self.functor_args(atom.name, atom.args, bound)
                return
            if self.symbols.is_inline(atom.name):
                self.inline_args(atom, bound)
                return
            self.given_args(
                atom,
                bound,
                "variable `{}` in a negated literal is not bound",
                "negation cannot bind variables: bind `{}` with a positive literal, or write `_` if any "
                "value will do",
                wildcards=True,
            )
        else:
            for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                if (
                    literal.op == "="
                    and isinstance(side, ast.Var)
                    and side.name not in bound
                    and not self.evaluable(other, bound)
                ):
                    # `x = expr` could not assign `x` because `expr` is unbound: report the
                    # cause, inside `expr`, rather than its consequence.
                    self.reported.add(side.name)
            takes_apart = literal.op == "=" and any(
                ast.is_pattern(side) and self.evaluable(other, bound)
                for side, other in ((literal.left, literal.right), (literal.right, literal.left))
            )
            for side in (literal.left, literal.right):
                if isinstance(side, ast.Wildcard):
                    self.wildcard(side, "in a comparison")
                elif takes_apart:
                    self.pattern(side, bound, "a comparison")
                else:
                    self.expression(side, bound, "a comparison")

    def inline_args(self, atom: ast.Atom, bound: set[str]) -> None:
        self.given_args(
            atom,
            bound,
            f"variable `{{}}` is passed to the inline relation `{atom.name}` but not bound",
            "a rule of `" + atom.name + "` leaves its head to the caller, so it is evaluated for given "
            "arguments and cannot bind them (inlined, as Soufflé does, the rule would leave `{0}` "
            "unbound too); bind `{0}` with a positive literal first",
            wildcards=False,
        )

    def given_args(
        self, atom: ast.Atom, bound: set[str], message: str, help_text: str, wildcards: bool
    ) -> None:
        """Arguments that must arrive bound (negation, inline relations); `{}` is the variable."""
        for arg in atom.args:
            if isinstance(arg, ast.Var):
                if arg.name not in bound:
                    self.report(arg, message.format(arg.name), help_text.format(arg.name))
            elif isinstance(arg, ast.Wildcard):
                if not wildcards:
                    self.wildcard(arg, f"as an argument of the inline relation `{atom.name}`")
            elif wildcards and isinstance(arg, ast.Record | ast.Constructor):
                self.given_fields(arg, atom, bound, message, help_text)
            else:
                self.expression(arg, bound, f"an argument of `{atom.name}`")

    def given_fields(
        self,
        term: ast.Record | ast.Constructor,
        atom: ast.Atom,
        bound: set[str],
        message: str,
        help_text: str,
    ) -> None:
        """A record of a negated atom (``!r([x, _])``): ``_`` at a field matches any value,
        a variable must arrive bound, anything else is computed."""
        for arg in term.args:
            if isinstance(arg, ast.Var):
                if arg.name not in bound:
                    self.report(arg, message.format(arg.name), help_text.format(arg.name))
            elif isinstance(arg, ast.Record | ast.Constructor):
                self.given_fields(arg, atom, bound, message, help_text)
            elif not isinstance(arg, ast.Wildcard):
                self.expression(arg, bound, f"an argument of `{atom.name}`")

    def functor_args(self, name: str, args: tuple[ast.Term, ...], bound: set[str]) -> None:
        for arg in args:
            if isinstance(arg, ast.Wildcard):
                self.wildcard(arg, f"as an argument of the functor `{name}`")
            else:
                self.expression(arg, bound, f"an argument of `{name}`")

    def pattern(self, term: ast.Term, bound: set[str], where: str) -> None:
        """A term matched against a value: ``_`` and variables are fine at the field
        positions of records and constructors; anything else is computed."""
        if isinstance(term, ast.Record | ast.Constructor):
            for arg in term.args:
                if not isinstance(arg, ast.Var | ast.Wildcard):
                    self.pattern(arg, bound, where)
                elif isinstance(arg, ast.Var) and arg.name not in bound:
                    self.expression(arg, bound, where)
        else:
            self.expression(term, bound, where)

    def expression(self, term: ast.Term, bound: set[str], where: str) -> None:
        """Every variable of a computed term must be bound; aggregates are checked inside."""
        for t in ast.walk_term(term, into_aggregates=False):
            if isinstance(t, ast.Var) and t.name not in bound:
                self.report(
                    t,
                    f"variable `{t.name}` in {where} is not bound",
                    f"bind `{t.name}` with a positive literal or an assignment `{t.name} = ...` "
                    "before it can be compared, computed with or passed to a function",
                )
            elif isinstance(t, ast.Wildcard):
                self.wildcard(t, f"in {where}")
            elif isinstance(t, ast.Call):
                for arg in t.args:
                    if isinstance(arg, ast.Wildcard):
                        self.wildcard(arg, f"as an argument of the functor `{t.name}`")
            elif isinstance(t, ast.Aggregate):
                self.aggregate(t, bound)

    def aggregate(self, aggregate: ast.Aggregate, bound: set[str]) -> None:
        for name in sorted(self.outer_vars(aggregate) - bound):
            var = self.outside_occurrence(name) or next(v for v in _vars(aggregate) if v.name == name)
            self.report(
                var,
                f"variable `{name}` groups an aggregate but is not bound outside it",
                f"a variable used both inside and outside an aggregate must be bound outside it; "
                f"bind `{name}` with a positive literal outside the braces",
            )
        inner = self.inner(aggregate, bound)
        for literal in aggregate.body:
            self.literal(literal, inner)
        if aggregate.target is not None:
            self.expression(aggregate.target, inner, f"the target of `{aggregate.op}`")
        elif aggregate.op != "count":
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    aggregate.span, f"`{aggregate.op}` needs a target: `{aggregate.op} x : {{ ... }}`"
                )
            )
