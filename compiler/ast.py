"""The abstract syntax tree: frozen dataclasses, each node with the span it was parsed from.

Spans never take part in equality, so two parses of differently laid-out text compare equal
when they mean the same thing (the formatter relies on that):

>>> Atom("P", (Var("x"),)) == Atom("P", (Var("x"),), span=Span("a.dl", 0, 4, 1, 1, 1, 5))
True

Terms: :class:`Var`, :class:`Wildcard`, :class:`String`, :class:`Integer`, :class:`Float`,
:class:`Call`, :class:`BinOp`, :class:`Negate`, :class:`Aggregate`.
Body literals: :class:`Atom`, :class:`Negation`, :class:`Comparison`.
Statements: :class:`Rule` (a fact is a rule with an empty body) and the directives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .source import SourceFile, Span

NO_SPAN = Span("<none>", 0, 0, 1, 1, 1, 1)


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


# ------------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Wildcard:
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class String:
    value: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Integer:
    value: int
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Float:
    value: float
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """A foreign function applied to terms: ``tool_arg(a, "url")``."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # one of + - * / %
    left: Term
    right: Term
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Term
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``count : { body }``, ``sum t : { body }``, ``min``/``max``/``mean`` likewise."""

    op: str
    target: Term | None
    body: tuple[Literal, ...]
    span: Span = _span()


Term = Var | Wildcard | String | Integer | Float | Call | BinOp | Negate | Aggregate

# ---------------------------------------------------------------------------- literals


@dataclass(frozen=True, slots=True)
class Atom:
    """``R(t1, ..., tn)``: a relation, or a foreign predicate when ``R`` is a bool functor."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Negation:
    atom: Atom
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Comparison:
    op: str  # one of = != < <= > >=
    left: Term
    right: Term
    span: Span = _span()


Literal = Atom | Negation | Comparison

# -------------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Annotation:
    """``@name(arg, ...)`` before a rule; arguments are constants (a bare word is a Var)."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Rule:
    """``head :- body.``; a fact is a rule whose body is empty."""

    head: Atom
    body: tuple[Literal, ...]
    annotations: tuple[Annotation, ...] = ()
    span: Span = _span()

    @property
    def is_fact(self) -> bool:
        return not self.body

    def annotation(self, name: str) -> Annotation | None:
        return next((a for a in self.annotations if a.name == name), None)


@dataclass(frozen=True, slots=True)
class Ident:
    """A name in a directive, with its own span (``.input A, B``)."""

    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    type: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Decl:
    """``.decl R(x: symbol, n: number)``; ``inline`` relations are evaluated on demand."""

    name: Ident
    attributes: tuple[Attribute, ...]
    inline: bool = False
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Input:
    names: tuple[Ident, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Output:
    names: tuple[Ident, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Include:
    path: String
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Import:
    module: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str | None
    type: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Functor:
    """``.functor f(a: symbol): number``; a ``bool`` result makes a foreign predicate."""

    name: Ident
    params: tuple[Parameter, ...]
    returns: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Default:
    verdict: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Role:
    """``.role target budget 0.01 pool high_risk``."""

    name: Ident
    budget: Integer | Float
    pool: Ident | None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class FieldMap:
    """``.field send_money.recipient : target``: a tool argument has a semantic role."""

    tool: str
    argument: str
    role: Ident
    span: Span = _span()
    path_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Misplaced:
    """Annotations in front of a directive (kept so the checker can say so)."""

    annotations: tuple[Annotation, ...]
    statement: Directive  # annotations in front of a rule are the rule's
    span: Span = _span()


Directive = Decl | Input | Output | Include | Import | Functor | Default | Role | FieldMap
Statement = Rule | Directive | Misplaced


@dataclass(frozen=True, slots=True)
class Comment:
    text: str
    span: Span = _span()


@dataclass(frozen=True)
class Module:
    """One parsed file."""

    path: str
    statements: tuple[Statement, ...]
    comments: tuple[Comment, ...] = field(default=(), compare=False)
    source: SourceFile | None = field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------- traversal


def term_children(term: Term) -> tuple[Term, ...]:
    if isinstance(term, Call):
        return term.args
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Negate):
        return (term.operand,)
    return ()


def map_children(term: Term, fn: Callable[[Term], Term]) -> Term:
    """The term with ``fn`` applied to each child of a call or an operation (others as they are)."""
    if isinstance(term, Call):
        return Call(term.name, tuple(fn(a) for a in term.args))
    if isinstance(term, BinOp):
        return BinOp(term.op, fn(term.left), fn(term.right))
    if isinstance(term, Negate):
        return Negate(fn(term.operand))
    return term


def literal_terms(literal: Literal) -> tuple[Term, ...]:
    if isinstance(literal, Atom):
        return literal.args
    if isinstance(literal, Negation):
        return literal.atom.args
    return (literal.left, literal.right)


def walk_term(term: Term, into_aggregates: bool = True) -> Iterator[Term]:
    """The term and every term inside it; aggregates' targets and bodies too unless told not."""
    stack = [term]
    while stack:
        t = stack.pop()
        yield t
        if isinstance(t, Aggregate):
            if into_aggregates:
                if t.target is not None:
                    stack.append(t.target)
                for lit in t.body:
                    stack.extend(literal_terms(lit))
        else:
            stack.extend(term_children(t))


def term_vars(term: Term) -> Iterator[Var]:
    """Variables of a term, including those inside aggregates."""
    return (t for t in walk_term(term) if isinstance(t, Var))
