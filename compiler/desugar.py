"""Written forms of several rules, as the plain rules they stand for.

A rule with several heads, or with ``;`` in its body, is a :class:`~.ast.Compound` as
parsed. It means one plain rule per head and per alternative of its body (the body in
disjunctive normal form; ``not (...)`` by De Morgan's laws, a negated comparison the opposite
comparison), as in Soufflé:

>>> from .source import SourceFile
>>> from .parser import parse
>>> module, _ = parse(SourceFile("p.dl", "A(x), B(x) :- (c(x) ; d(x)), e(x)."), surface=True)
>>> [(r.head.name, [lit.name for lit in r.body]) for r in expand(module.statements[0])]
[('A', ['c', 'e']), ('B', ['c', 'e']), ('A', ['d', 'e']), ('B', ['d', 'e'])]

Every rule keeps the spans of its literals and has the compound's span, so that a diagnostic
about one of them points at the text that was written; every rule has the compound's
annotations (one ``@id`` names the rules of one statement, and a deny reason gives it
whichever alternative denied).
"""

from __future__ import annotations

from dataclasses import replace

from . import ast

MAX_RULES = 256  # the plain rules one written rule may stand for


def alternatives(
    body: tuple[tuple[ast.Literal | ast.Disjunction, ...], ...],
) -> list[tuple[ast.Literal, ...]]:
    """The conjunctions of plain literals a written body holds (its disjunctive normal form),
    in the order written; stops growing past :data:`MAX_RULES`."""
    found: list[tuple[ast.Literal, ...]] = []
    for conjunction in body:
        partial: list[tuple[ast.Literal, ...]] = [()]
        for item in conjunction:
            if isinstance(item, ast.Disjunction):
                options = alternatives(item.alternatives)
                if item.negated:
                    options = _negated(options)
                partial = [p + o for p in partial for o in options][: MAX_RULES + 1]
            else:
                partial = [(*p, item) for p in partial]
        found.extend(partial)
        if len(found) > MAX_RULES:
            break
    return found[: MAX_RULES + 1]


def _negated(options: list[tuple[ast.Literal, ...]]) -> list[tuple[ast.Literal, ...]]:
    """``not (A ; B)`` as ``not A, not B``, and ``not (a, b)`` as ``not a ; not b``."""
    found: list[tuple[ast.Literal, ...]] = [()]
    for conjunction in options:
        found = [(*f, _negation(lit)) for f in found for lit in conjunction][: MAX_RULES + 1]
    return found


_OPPOSITE = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def _negation(literal: ast.Literal) -> ast.Literal:
    if isinstance(literal, ast.Atom):
        return ast.Negation(literal, span=literal.span)
    if isinstance(literal, ast.Negation):
        return literal.atom
    return ast.Comparison(_OPPOSITE[literal.op], literal.left, literal.right, span=literal.span)


def expand(compound: ast.Compound) -> list[ast.Rule]:
    """The plain rules of a compound: for each alternative of the body, one rule per head."""
    dominating = compound.dominating
    if dominating is not None:  # a subsumption rule: one per alternative
        return [
            ast.Rule(
                head,
                (head, dominating, *body),
                compound.annotations,
                span=compound.span,
                dominating=dominating,
            )
            for body in alternatives(compound.body)
            for head in compound.heads
        ]
    return [
        ast.Rule(head, body, compound.annotations, span=compound.span)
        for body in alternatives(compound.body)
        for head in compound.heads
    ]


def closable(decl: ast.Decl) -> bool:
    """Whether a declaration is of an ``eqrel`` relation that can be closed: two attributes of
    one type (anything else is an error of the declaration, reported by the symbol table)."""
    attributes = decl.attributes
    return decl.eqrel and len(attributes) == 2 and attributes[0].type.name == attributes[1].type.name


def equivalence_rules(decl: ast.Decl) -> list[ast.Rule]:
    """The rules that make an ``eqrel`` relation an equivalence relation, as Soufflé's is (on
    the values that occur in it, facts included): reflexive, symmetric and transitive. Every
    node has the declaration's span, so a diagnostic about them points at the declaration.

    >>> from .source import SourceFile
    >>> from .parser import parse
    >>> module, _ = parse(SourceFile("p.dl", ".decl Same(a: symbol, b: symbol) eqrel"))
    >>> [(r.head.args, [lit.args for lit in r.body]) for r in module.statements[1:]][1]
    ((Var(name='y'), Var(name='x')), [(Var(name='x'), Var(name='y'))])
    """
    name, span = decl.name.name, decl.span

    def atom(*names: str) -> ast.Atom:
        return ast.Atom(name, tuple(ast.Var(n, span=span) for n in names), span=span)

    return [
        ast.Rule(atom("x", "x"), (atom("x", "_"),), span=span),
        ast.Rule(atom("y", "x"), (atom("x", "y"),), span=span),
        ast.Rule(atom("x", "z"), (atom("x", "y"), atom("y", "z")), span=span),
    ]


def named_results(rule: ast.Rule) -> ast.Rule:
    """The rule with each ``_ = aggregate`` (or ``aggregate = _``) given a variable of its own,
    ``_@1``: Soufflé's way of asking only that the aggregate has a value (``_ = max x : r(x)``
    holds when ``r`` has a fact; ``_ = count : ...`` always). The name is one no source can
    spell, and starts with ``_``, so it may occur once.

    >>> from .source import SourceFile
    >>> from .parser import parse
    >>> module, _ = parse(SourceFile("p.dl", "A(1) :- _ = max x : r(x)."))
    >>> module.statements[0].body[0].left
    Var(name='_@1')
    """
    if not any(_anonymous_result(lit) for lit in rule.body):
        return rule
    body: list[ast.Literal] = []
    for literal in rule.body:
        if _anonymous_result(literal):
            assert isinstance(literal, ast.Comparison)
            name = f"_@{len(body) + 1}"
            left, right = literal.left, literal.right
            if isinstance(left, ast.Wildcard):
                left = ast.Var(name, span=left.span)
            else:
                right = ast.Var(name, span=right.span)
            literal = replace(literal, left=left, right=right)
        body.append(literal)
    return replace(rule, body=tuple(body))


def _anonymous_result(literal: ast.Literal) -> bool:
    return (
        isinstance(literal, ast.Comparison)
        and literal.op == "="
        and (
            (isinstance(literal.left, ast.Wildcard) and isinstance(literal.right, ast.Aggregate))
            or (isinstance(literal.right, ast.Wildcard) and isinstance(literal.left, ast.Aggregate))
        )
    )
