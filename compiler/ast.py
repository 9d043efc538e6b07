"""The abstract syntax tree: frozen dataclasses, each node with the span it was parsed from.

Spans never take part in equality, so two parses of differently laid-out text compare equal
when they mean the same thing (the formatter relies on that):

>>> Atom("P", (Var("x"),)) == Atom("P", (Var("x"),), span=Span("a.dl", 0, 4, 1, 1, 1, 5))
True

Terms: :class:`Var`, :class:`Wildcard`, :class:`String`, :class:`Integer`, :class:`Float`,
:class:`Call`, :class:`BinOp`, :class:`Negate`, :class:`UnaryOp`, :class:`Aggregate`,
:class:`Record`, :class:`Nil`, :class:`Constructor`.
Body literals: :class:`Atom`, :class:`Negation`, :class:`Comparison`.
Statements: :class:`Rule` (a fact is a rule with an empty body) and the directives.

A rule written with several heads or with ``;`` in its body is a :class:`Compound` as parsed;
the parser desugars it into the plain rules it stands for (:mod:`.desugar`) unless asked for
the text's own form (the formatter is). Likewise a :class:`Component` and its :class:`Init`
instances are expanded into the plain statements of each instance (:mod:`.components`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from .source import SourceFile, Span

NO_SPAN = Span("<none>", 0, 0, 1, 1, 1, 1)


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


# ------------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class Var:
    """A variable: ``x``, ``e'``."""

    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Wildcard:
    """``_``: any value, bound to nothing."""

    span: Span = _span()


@dataclass(frozen=True, slots=True)
class String:
    """A string constant: ``"untrusted"``."""

    value: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Integer:
    """An integer constant: ``42``; ``5u`` is one of type ``unsigned``."""

    value: int
    span: Span = _span()
    unsigned: bool = False


@dataclass(frozen=True, slots=True)
class Float:
    """A float constant: ``0.5``."""

    value: float
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """A foreign function applied to terms: ``tool_arg(a, "url")``."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()
    name_span: Span = _span()


# binary operators on numbers besides + - * / %: Soufflé's bitwise and logical ones, power
BITWISE = ("band", "bor", "bxor", "bshl", "bshr", "bshru")
LOGICAL = ("land", "lor", "lxor")
POWER = "^"
# `max(a, b, c)` and `min(...)`: the greater (lesser) of values of one type, nested to the left
EXTREMA = ("max", "min")
BINARY = ("+", "-", "*", "/", "%", POWER, *BITWISE, *LOGICAL, *EXTREMA)
UNARY = ("bnot", "lnot")


@dataclass(frozen=True, slots=True)
class BinOp:
    """An operation on two terms: ``n + 1``, ``flags band 4``, ``2 ^ n``, ``max(a, b)``."""

    op: str  # one of BINARY
    left: Term
    right: Term
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Negate:
    """A negated term: ``-n``."""

    operand: Term
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class UnaryOp:
    """``bnot n`` (bitwise complement) or ``lnot n`` (1 if ``n`` is 0, else 0)."""

    op: str  # one of UNARY
    operand: Term
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``count : { body }``, ``sum t : { body }``, ``min``/``max``/``mean`` likewise."""

    op: str
    target: Term | None
    body: tuple[Literal, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Record:
    """A record: ``[x, "a"]``; in a body atom or an equality, a pattern its fields match."""

    args: tuple[Term, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Nil:
    """``nil``: the record value of no fields (the end of a list)."""

    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Constructor:
    """A branch of an algebraic data type applied to terms: ``$Leaf(1)``, ``$Empty``."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Cast:
    """``as(x, City)``: Soufflé's type conversion, the value of ``x`` taken as a value of the
    type named. The type checker checks it; the stages after it see only ``x`` (a value is
    the same value whatever its type's name: :func:`without_casts`)."""

    operand: Term
    type: Ident
    span: Span = _span()


Term = (
    Var
    | Wildcard
    | String
    | Integer
    | Float
    | Call
    | BinOp
    | Negate
    | UnaryOp
    | Aggregate
    | Record
    | Nil
    | Constructor
    | Cast
)
STRUCTURED = (Record, Nil, Constructor)  # the terms that build (or, as patterns, take apart) records

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
    """``!R(...)``: the atom does not hold."""

    atom: Atom
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Comparison:
    """A comparison of two terms: ``n > 100``, ``x != y``."""

    op: str  # one of = != < <= > >=
    left: Term
    right: Term
    span: Span = _span()


Literal = Atom | Negation | Comparison


@dataclass(frozen=True, slots=True)
class Disjunction:
    """``(a(x) ; b(x), c(x))`` in a written body: one of the alternatives holds (``negated``:
    ``not (...)``, none holds).

    Each alternative is a conjunction of literals and nested disjunctions; a parenthesised
    conjunction without ``;`` is a disjunction of one alternative."""

    alternatives: tuple[tuple[Literal | Disjunction, ...], ...]
    negated: bool = False
    span: Span = _span()


# -------------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Annotation:
    """``@name(arg, ...)`` before a rule; arguments are constants (a bare word is a Var)."""

    name: str
    args: tuple[Term, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Rule:
    """``head :- body.``; a fact is a rule whose body is empty.

    A subsumption rule ``r(a) <= r(b) :- conditions.`` has the dominated atom ``r(a)`` as
    ``head`` and the dominating atom ``r(b)`` as ``dominating``; as in Soufflé, its body starts
    with both atoms (``r(a), r(b), conditions``): a tuple ``a`` of ``r`` is dropped when another
    tuple ``b`` of ``r`` is there and the conditions hold."""

    head: Atom
    body: tuple[Literal, ...]
    annotations: tuple[Annotation, ...] = ()
    span: Span = _span()
    dominating: Atom | None = None
    # the instance of a component this rule was copied for (`g.`, `outer.inner.`; "" when
    # written at the top level): two instances' copies of one rule share its span
    instance: str = field(default="", compare=False, repr=False, kw_only=True)

    @property
    def is_fact(self) -> bool:
        return not self.body

    @property
    def is_subsumption(self) -> bool:
        return self.dominating is not None

    @property
    def conditions(self) -> tuple[Literal, ...]:
        """The body as written: without the two atoms of a subsumption rule."""
        return self.body[2:] if self.dominating is not None else self.body

    def annotation(self, name: str) -> Annotation | None:
        return next((a for a in self.annotations if a.name == name), None)

    @property
    def span_from_head(self) -> Span:
        """The rule from its head to its end, without the annotations written before it."""
        head, whole = self.head.span, self.span
        return Span(
            head.file, head.start, whole.end, head.line, head.column, whole.end_line, whole.end_column
        )


@dataclass(frozen=True, slots=True)
class Compound:
    """A rule as written with several heads or with ``;``: ``A(x), B(x) :- (c(x) ; d(x)).``

    It stands for one plain rule per head and per alternative of its body, each with the
    compound's annotations (:mod:`.desugar`); ``body`` lists the top-level alternatives."""

    heads: tuple[Atom, ...]
    body: tuple[tuple[Literal | Disjunction, ...], ...]
    annotations: tuple[Annotation, ...] = ()
    span: Span = _span()
    dominating: Atom | None = None  # a subsumption rule (one head, the dominated atom)


@dataclass(frozen=True, slots=True)
class Ident:
    """A name in a directive, with its own span (``.input A, B``)."""

    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute of a ``.decl``: ``n: number``."""

    name: str
    type: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Decl:
    """``.decl R(x: symbol, n: number)``; ``inline`` relations are evaluated on demand, an
    ``eqrel`` relation is an equivalence relation (closed under reflexivity, symmetry and
    transitivity) and ``choice-domain x, (y, z)`` makes each domain (attribute names, one or
    several) a key: of the tuples derived with one key's values, the first is kept."""

    name: Ident
    attributes: tuple[Attribute, ...]
    inline: bool = False
    overridable: bool = False  # a component that inherits it may `.override` its rules
    span: Span = _span()
    eqrel: bool = False
    choice: tuple[tuple[Ident, ...], ...] = ()
    storage: Ident | None = None  # Soufflé's `btree`, `brie` or `btree_delete`, kept for `fmt`
    hints: tuple[Ident, ...] = ()  # Soufflé's planner hints `magic`, `no_magic`, `no_inline`
    io: tuple[Ident, ...] = ()  # Soufflé's older `input`, `output`, `printsize` qualifiers


@dataclass(frozen=True, slots=True)
class IoOption:
    """``filename="edge.csv"`` in ``.input edge(filename="edge.csv")``: one of Soufflé's I/O
    options, kept so that the formatter writes it back; policyc reads no files of its own
    (facts come from the session or ``--facts``), so ``check`` reports it as ignored."""

    key: Ident
    value: String | Integer | Float | Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Input:
    """``.input A, B``: relations whose facts are given. ``options``, when written, holds
    each relation's I/O options (``.input A(IO=file)``), one tuple per name."""

    names: tuple[Ident, ...]
    span: Span = _span()
    options: tuple[tuple[IoOption, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Output:
    """``.output A, B``: relations whose facts are printed (``options`` as for
    :class:`Input`); ``printsize``: Soufflé's ``.printsize A, B``, which prints their sizes
    (``policyc eval`` prints a relation under its size)."""

    names: tuple[Ident, ...]
    span: Span = _span()
    options: tuple[tuple[IoOption, ...], ...] = ()
    printsize: bool = False


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """``.plan 0:(1,2), 1:(2,1)``: Soufflé's join orders (per version of the rule before it,
    the 1-based positions of its atoms); policyc's planner orders atoms itself, so ``check``
    reports it as ignored and ``fmt`` keeps it."""

    orders: tuple[tuple[int, tuple[int, ...]], ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Pragma:
    """``.pragma "key" "value"``: a Soufflé command-line option set in the program; reported as
    ignored and kept by ``fmt``."""

    key: String
    value: String | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Once:
    """``.once``: Soufflé reads the file it is in once however often it is included; policyc
    reads every file once, so it changes nothing (kept by ``fmt``)."""

    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Include:
    """``.include "other.dl"``: another file of the policy."""

    path: String
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Import:
    """``.import events``: a module of the standard library."""

    module: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a ``.functor``: ``a: symbol`` (or a type alone)."""

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
    stateful: Ident | None = None  # Soufflé's `stateful` (its C++ functor gets its tables)


@dataclass(frozen=True, slots=True)
class Default:
    """``.default deny``: the verdict when no rule decides."""

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
class ArgDecl:
    """``.arg pay.amount : number required``: the type of a tool argument's value, and whether
    every call must give it (``presence``: ``required`` or ``optional`` as written, None when
    not written: optional)."""

    tool: str
    argument: str
    type: Ident
    presence: Ident | None = None
    span: Span = _span()
    path_span: Span = _span()

    @property
    def required(self) -> bool:
        return self.presence is not None and self.presence.name == "required"


@dataclass(frozen=True, slots=True)
class Branch:
    """One branch of an algebraic data type: ``Leaf {value: number}``."""

    name: Ident
    fields: tuple[Attribute, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class TypeDecl:
    """``.type``: a subtype (``Id <: symbol``), an alias or union (``N = number``,
    ``U = A | B``: ``members``), a record type (``P = [x: number, y: symbol]``: ``fields``) or
    an algebraic data type (``T = A {x: number} | B {}``: ``branches``)."""

    name: Ident
    kind: str  # "subtype", "union", "record" or "adt"
    members: tuple[Ident, ...] = ()
    fields: tuple[Attribute, ...] = ()
    branches: tuple[Branch, ...] = ()
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class CompType:
    """A component applied to type arguments: ``Graph<symbol>``, ``Base``."""

    name: Ident
    args: tuple[Ident, ...] = ()
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Component:
    """``.comp Graph<N> : Base<N> { ... }``: declarations, rules, facts, types, components and
    instances that each ``.init`` of it copies under the instance's name (:mod:`.components`)."""

    name: Ident
    params: tuple[Ident, ...]
    bases: tuple[CompType, ...]
    body: tuple[Statement, ...]
    span: Span = _span()
    close_span: Span = _span()  # the closing `}`


@dataclass(frozen=True, slots=True)
class Init:
    """``.init g = Graph<symbol>``: an instance of a component, its relations ``g.rel``."""

    name: Ident
    component: CompType
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Override:
    """``.override reach`` in a component: the rules its bases give ``reach`` are dropped."""

    name: Ident
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Key:
    """``.key ToolArg(a, key)``: the ``attributes`` named determine the relation's others (no
    two facts agree on them and differ elsewhere); ``.key Candidate()``: at most one fact. The
    runtime refuses given facts that break it, and the analyzer and the planner rely on it."""

    relation: Ident
    attributes: tuple[Ident, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Host:
    """``.host HasRole, Principal``: relations only the host states: the monitor's fronts refuse
    facts of them from anyone they serve (an agent's key, a client), while the host's own code,
    the policy's rules and facts, and the monitor itself may state them."""

    names: tuple[Ident, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class LimitSize:
    """``.limitsize R(n=5)``: Soufflé's bound on a relation's size; ``R`` stops growing at 5
    facts (the first derived, in the order of evaluation)."""

    relation: Ident
    size: int
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Misplaced:
    """Annotations in front of a directive (kept so the checker can say so)."""

    annotations: tuple[Annotation, ...]
    statement: Directive  # annotations in front of a rule are the rule's
    span: Span = _span()


Directive = (
    Decl
    | Input
    | Output
    | Include
    | Import
    | Functor
    | Default
    | Role
    | FieldMap
    | ArgDecl
    | TypeDecl
    | QueryPlan
    | Pragma
    | Once
    | Init
    | Override
    | Key
    | Host
    | LimitSize
)
Statement = Rule | Compound | Directive | Misplaced | Component


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment, kept for the formatter: ``// why``."""

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
    if isinstance(term, Call | Record | Constructor):
        return term.args
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Negate | UnaryOp | Cast):
        return (term.operand,)
    return ()


def map_children(term: Term, fn: Callable[[Term], Term]) -> Term:
    """The term with ``fn`` applied to each child of a call, a record, a constructor or an
    operation, its spans kept (others as they are)."""
    if isinstance(term, Call | Record | Constructor):
        return replace(term, args=tuple(fn(a) for a in term.args))
    if isinstance(term, BinOp):
        return replace(term, left=fn(term.left), right=fn(term.right))
    if isinstance(term, Negate | UnaryOp | Cast):
        return replace(term, operand=fn(term.operand))
    return term


def map_literal(literal: Literal, fn: Callable[[Term], Term]) -> Literal:
    """The literal with ``fn`` applied to each of its terms, its spans kept."""
    if isinstance(literal, Atom):
        return replace(literal, args=tuple(fn(a) for a in literal.args))
    if isinstance(literal, Negation):
        return replace(literal, atom=replace(literal.atom, args=tuple(fn(a) for a in literal.atom.args)))
    return replace(literal, left=fn(literal.left), right=fn(literal.right))


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


def is_pattern(term: Term) -> bool:
    """A record or constructor that takes a value apart: it has a variable or ``_`` inside."""
    return isinstance(term, Record | Constructor) and any(
        isinstance(t, Var | Wildcard) for t in walk_term(term, into_aggregates=False)
    )


def pattern_vars(term: Term) -> Iterator[Var]:
    """The variables a term binds when it is matched against a value: itself if it is a
    variable, the variables at field positions of a record or constructor (recursively)."""
    if isinstance(term, Var):
        yield term
    elif isinstance(term, Record | Constructor):
        for arg in term.args:
            yield from pattern_vars(arg)


def map_deep(term: Term, fn: Callable[[Term], Term]) -> Term:
    """The term rebuilt from the bottom up with ``fn`` applied to every term inside it and to
    itself, aggregates' targets and bodies included, spans kept."""
    if isinstance(term, Aggregate):
        target = None if term.target is None else map_deep(term.target, fn)
        body = tuple(map_literal(lit, lambda t: map_deep(t, fn)) for lit in term.body)
        return fn(replace(term, target=target, body=body))
    return fn(map_children(term, lambda t: map_deep(t, fn)))


def map_rule_literals(rule: Rule, fn: Callable[[Literal], Literal]) -> Rule:
    """The rule with ``fn`` applied to its head and to each literal of its body (a subsumption
    rule's dominating atom is the second literal of its body, and stays so); ``fn`` keeps an
    atom an atom."""
    head = fn(rule.head)
    body = tuple(fn(lit) for lit in rule.body)
    dominating = body[1] if rule.dominating is not None else None
    assert isinstance(head, Atom) and (dominating is None or isinstance(dominating, Atom))
    return replace(rule, head=head, body=body, dominating=dominating)


def map_rule(rule: Rule, fn: Callable[[Term], Term]) -> Rule:
    """The rule with :func:`map_deep` ``fn`` applied to the terms of its head and body."""
    return map_rule_literals(rule, lambda lit: map_literal(lit, lambda t: map_deep(t, fn)))


def without_casts(term: Term) -> Term:
    """The term with every ``as(x, T)`` inside it (aggregates too) replaced by ``x``."""
    return map_deep(term, lambda t: t.operand if isinstance(t, Cast) else t)


def has_cast(term: Term) -> bool:
    return any(isinstance(t, Cast) for t in walk_term(term))
