"""Containment mappings: when one rule fires, another must fire too.

Rule ``general`` *covers* rule ``specific`` when a substitution θ of ``general``'s variables
maps its head onto ``specific``'s head, each of its positive literals (relations and functor
predicates) onto a positive literal of ``specific``, each negated literal onto a negated literal
of ``specific``, and ``specific``'s comparisons imply θ of ``general``'s comparisons (decided by
z3). Then on every database, every binding that satisfies ``specific``'s body satisfies θ of
``general``'s body, so ``general`` derives whatever ``specific`` derives (Chandra and Merlin's
containment of conjunctive queries, with negation and comparisons checked literal by literal:
sound, not complete). Rules with aggregates are not compared.

:class:`Candidates` finds the rules that may cover a rule through an index of what a mapping
needs, so that a policy of thousands of rules is not compared pair by pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified

from .deadline import Deadline
from .unsat import implies, shape

CONSTANTS = (ast.String, ast.Integer, ast.Float)


def _is_literal_atom(lit: ast.Literal) -> bool:
    return isinstance(lit, ast.Atom | ast.Negation)


def _names(summary: Any) -> frozenset[tuple[bool, str]]:
    """The relations (and functor predicates) a rule's body reads, each with whether negated."""
    return frozenset((negated, atom.name) for atom, negated, inside in summary.atoms if not inside)


def _unify(pattern: ast.Term, target: ast.Term, theta: dict[str, Any]) -> dict[str, Any] | None:
    """Extend θ so that θ(pattern) == target (terms compared without positions)."""
    if isinstance(pattern, ast.Wildcard):
        return theta
    if isinstance(pattern, ast.Var):
        bound = theta.get(pattern.name)
        wanted = shape(target)
        if bound is None:
            if isinstance(target, ast.Wildcard):
                return None  # a named variable cannot stand for a `_`, which is different each time
            return {**theta, pattern.name: wanted}
        return theta if bound == wanted else None
    if isinstance(pattern, ast.Call) and isinstance(target, ast.Call):
        return _unify_args(pattern, target, theta)
    if isinstance(pattern, ast.BinOp) and isinstance(target, ast.BinOp):
        if pattern.op != target.op:
            return None
        found = _unify(pattern.left, target.left, theta)
        return None if found is None else _unify(pattern.right, target.right, found)
    if isinstance(pattern, ast.Negate) and isinstance(target, ast.Negate):
        return _unify(pattern.operand, target.operand, theta)
    if isinstance(pattern, ast.UnaryOp) and isinstance(target, ast.UnaryOp):
        return _unify(pattern.operand, target.operand, theta) if pattern.op == target.op else None
    if isinstance(pattern, ast.String | ast.Integer | ast.Float):
        return theta if shape(pattern) == shape(target) else None
    return None


def _unify_args(
    pattern: ast.Atom | ast.Call, target: ast.Atom | ast.Call, theta: dict[str, Any]
) -> dict[str, Any] | None:
    """Extend θ so that the pattern's name and arguments are the target's."""
    if pattern.name != target.name or len(pattern.args) != len(target.args):
        return None
    for p, t in zip(pattern.args, target.args, strict=True):
        found = _unify(p, t, theta)
        if found is None:
            return None
        theta = found
    return theta


def _mappings(
    literals: list[ast.Literal], targets: list[ast.Literal], theta: dict[str, Any], deadline: Deadline | None
) -> Iterator[dict[str, Any]]:
    if deadline is not None and deadline.passed():
        return  # no more tried
    if not literals:
        yield theta
        return
    first, rest = literals[0], literals[1:]
    negated = isinstance(first, ast.Negation)
    atom = first.atom if isinstance(first, ast.Negation) else first
    for target in targets:
        if isinstance(target, ast.Negation) != negated:
            continue
        other = target.atom if isinstance(target, ast.Negation) else target
        found = _unify_args(atom, other, theta)  # type: ignore[arg-type]
        if found is not None:
            yield from _mappings(rest, targets, found, deadline)


def substitute(term: ast.Term, theta: dict[str, Any], rename: dict[str, str]) -> ast.Term:
    """θ applied to a term of the general rule, in the specific rule's variables."""
    if isinstance(term, ast.Var):
        if term.name in theta:
            return _from_shape(theta[term.name])
        return ast.Var(rename.setdefault(term.name, f"{term.name}__g"))
    return ast.map_children(term, lambda t: substitute(t, theta, rename))


def _from_shape(s: Any) -> ast.Term:
    kind = s[0]
    if kind == "var":
        return ast.Var(s[1])
    if kind == "const":
        return {"String": ast.String, "Integer": ast.Integer, "Float": ast.Float}[s[1]](s[2])
    if kind == "call":
        return ast.Call(s[1], tuple(_from_shape(a) for a in s[2]))
    if kind == "op":
        return ast.BinOp(s[1], _from_shape(s[2]), _from_shape(s[3]))
    if kind == "neg":
        return ast.Negate(_from_shape(s[1]))
    if kind == "unary":
        return ast.UnaryOp(s[1], _from_shape(s[2]))
    raise ValueError(s)


def covers(
    compilation: Stratified,
    general: ast.Rule,
    specific: ast.Rule,
    heads: bool = True,
    deadline: Deadline | None = None,
) -> bool:
    """Whether ``general`` fires (with the same head, when ``heads``) whenever ``specific`` does
    (not shown when ``deadline`` passes first: ask it afterwards whether the answer is one)."""
    program = compilation.program
    outer, inner = program.summary(general), program.summary(specific)
    if not _names(outer) <= _names(inner):
        return False  # some literal of `general` has nothing to map onto
    if outer.aggregates or inner.aggregates:
        return False
    theta: dict[str, Any] | None = {}
    if heads:
        theta = _unify_args(general.head, specific.head, {})
        if theta is None:
            return False
    else:
        if len(general.head.args) != len(specific.head.args):
            return False
        theta = _unify_args(ast.Atom("_", general.head.args), ast.Atom("_", specific.head.args), {})
        if theta is None:
            return False
    atoms = [lit for lit in general.body if _is_literal_atom(lit)]
    comparisons = [lit for lit in general.body if isinstance(lit, ast.Comparison)]
    targets = [lit for lit in specific.body if _is_literal_atom(lit)]
    premises = [lit for lit in specific.body if isinstance(lit, ast.Comparison)]
    # the atoms with fewest candidates first, to fail fast
    atoms.sort(key=lambda lit: sum(1 for t in targets if _same_predicate(lit, t)))
    for mapping in _mappings(atoms, targets, theta, deadline):
        rename: dict[str, str] = {}
        conclusions: list[ast.Literal] = [
            ast.Comparison(c.op, substitute(c.left, mapping, rename), substitute(c.right, mapping, rename))
            for c in comparisons
        ]
        if rename:
            continue  # a comparison on a variable no atom binds: not a containment
        if deadline is not None and deadline.passed():
            return False
        if implies(compilation, specific, premises, conclusions, deadline):
            return True
    return False


class Candidates:
    """The rules of ``generals`` that may cover a rule, found through an index.

    A containment mapping sends each literal of the covering rule onto a literal of the covered
    one with the same polarity, relation and arity, each constant argument onto the same
    constant at the same place, and the head onto the head (its relation too, with ``heads``).
    So the *features* of the covering rule (each literal's polarity, relation and arity, each
    constant's place in a literal or in the head, the head's arity) are among those of the
    covered rule: as a set, since several literals may map onto one. Each rule is indexed under
    its rarest feature; the rules that may cover a rule are among those indexed under one of its
    features, and are those whose features it has. Rules with aggregates cover nothing and are
    covered by nothing (see :func:`covers`).
    """

    def __init__(self, compilation: Stratified, generals: list[ast.Rule], heads: bool = True) -> None:
        self.program = compilation.program
        self.heads = heads
        self.features = [self._features(rule) for rule in generals]
        count = Counter(f for features in self.features if features for f in features)
        self.index: dict[Any, list[int]] = {}
        for n, features in enumerate(self.features):
            if features:
                self.index.setdefault(min(features, key=count.__getitem__), []).append(n)

    def of(self, specific: ast.Rule) -> list[int]:
        """The places in ``generals`` of the rules that may cover ``specific``, in order."""
        mine = self._features(specific)
        if not mine:
            return []
        found = {n for f in mine for n in self.index.get(f, ()) if self.features[n] <= mine}
        return sorted(found)

    def _features(self, rule: ast.Rule) -> frozenset[Any]:
        """What a mapping from ``rule`` needs of the rule it maps onto; none with aggregates."""
        if self.program.summary(rule).aggregates:
            return frozenset()
        head = rule.head
        found: set[Any] = {("head", head.name if self.heads else None, len(head.args))}
        found.update(("head-arg", i, shape(a)) for i, a in enumerate(head.args) if isinstance(a, CONSTANTS))
        for lit in rule.body:
            if isinstance(lit, ast.Atom | ast.Negation):
                negated = isinstance(lit, ast.Negation)
                atom = lit.atom if isinstance(lit, ast.Negation) else lit
                found.add(("literal", negated, atom.name, len(atom.args)))
                found.update(
                    ("argument", negated, atom.name, i, shape(a))
                    for i, a in enumerate(atom.args)
                    if isinstance(a, CONSTANTS)
                )
        return frozenset(found)


def _same_predicate(a: ast.Literal, b: ast.Literal) -> bool:
    if isinstance(a, ast.Negation) != isinstance(b, ast.Negation):
        return False
    x = a.atom if isinstance(a, ast.Negation) else a
    y = b.atom if isinstance(b, ast.Negation) else b
    return isinstance(x, ast.Atom) and isinstance(y, ast.Atom) and x.name == y.name
