"""The evaluation plan: what the runtime executes, as plain data.

A :class:`Plan` lists the relations (by index), the functors the host must provide, the
strata in evaluation order, and for each rule the order of its steps. Variables are
numbered slots, relations and functors are indices: nothing in a plan is a name the runtime
would have to trust. Plans round-trip through JSON
(:func:`~policyc.compiler.plan_write.to_data`, :func:`~policyc.compiler.plan_read.from_data`)
so that a bundle can carry one; ``from_data`` validates the structure and raises
:class:`PlanError` on anything malformed.

Steps of a rule body, executed in order for each binding of the slots so far:

=================  ==========================================================================
``Scan``           for each fact of a relation matching the known arguments, bind the others
                   (``source`` says whether the full relation or only the last round's
                   new facts — the *delta* of semi-naive evaluation — are scanned)
``NotExists``      no fact of a relation matches (negation; ``_`` matches anything)
``Filter``         a comparison holds
``Assign``         compute a value into a slot
``Range``          for each value of ``range(start, stop[, step])``, bind a slot to it
``Test``           a foreign predicate holds (or, negated, does not)
``InlineTest``     an inline relation holds for the given arguments (or does not)
``Aggregate``      compute count/sum/min/max/mean over the bindings of an inner body
=================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

PLAN_VERSION = 1
OPERATORS = (
    *("+", "-", "*", "/", "%", "^"),
    *("band", "bor", "bxor", "bshl", "bshr", "bshru", "land", "lor", "lxor", "max", "min"),
)
COMPARATORS = ("=", "!=", "<", "<=", ">", ">=")
AGGREGATES = ("count", "sum", "min", "max", "mean")
TYPES = ("symbol", "number", "unsigned", "float", "record")  # "record": records and ADT values
# the types a tool argument is declared (compiler/arguments.py says what each holds)
ARGUMENT_TYPES = ("symbol", "number", "unsigned", "float", "bool", "list", "object", "any")


class PlanError(ValueError):
    """A plan (usually read from a bundle) is not well formed."""


# ------------------------------------------------------------------------------ expressions


@dataclass(frozen=True, slots=True)
class Slot:
    index: int


@dataclass(frozen=True, slots=True)
class Const:
    value: str | int | float


@dataclass(frozen=True, slots=True)
class CallExpr:
    functor: int
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Arith:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Expr


@dataclass(frozen=True, slots=True)
class Pack:
    """A record ``[a, b]`` (``tag`` None; ``nil`` has no fields) or an ADT value ``$A(a)``
    (``tag`` ``"A"``) built from its fields."""

    tag: str | None
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Field:
    """Field ``index`` of a record or ADT value (known to have it: see :class:`Kind`)."""

    value: Expr
    index: int


@dataclass(frozen=True, slots=True)
class Kind:
    """What a structured value is: its number of fields for a record (0 for ``nil``), its
    branch name for an ADT value; a pattern filters on it before taking fields."""

    value: Expr


Expr = Slot | Const | CallExpr | Arith | Neg | Pack | Field | Kind


@dataclass(frozen=True, slots=True)
class Bind:
    """An atom argument that binds a slot (its first occurrence)."""

    slot: int


@dataclass(frozen=True, slots=True)
class Match:
    """An atom argument whose value is known (a bound slot, a constant, an expression)."""

    expr: Expr


@dataclass(frozen=True, slots=True)
class Skip:
    """``_``: any value."""


Pattern = Bind | Match | Skip

# ------------------------------------------------------------------------------------ steps


@dataclass(frozen=True, slots=True)
class Scan:
    relation: int
    args: tuple[Pattern, ...]
    source: str = "full"  # "full" or "delta"


@dataclass(frozen=True, slots=True)
class NotExists:
    relation: int
    args: tuple[Match | Skip, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Assign:
    slot: int
    expr: Expr


@dataclass(frozen=True, slots=True)
class Range:
    """``slot = range(start, stop[, step])``: Soufflé's generator. ``stop`` is excluded; without
    ``step``, it is 1 upwards (``start <= stop``), else -1; a ``step`` of 0 gives ``start`` once
    when ``start != stop``."""

    slot: int
    start: Expr
    stop: Expr
    step: Expr | None = None


@dataclass(frozen=True, slots=True)
class Test:
    functor: int
    args: tuple[Expr, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class InlineTest:
    relation: int
    args: tuple[Expr, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``slot = op target : { body }``; ``keys`` are the inner slots whose distinct values
    (together with the target) are aggregated, so each matching combination counts once."""

    slot: int
    op: str
    target: Expr | None
    body: tuple[Step, ...]
    keys: tuple[int, ...]


Step = Scan | NotExists | Filter | Assign | Range | Test | InlineTest | Aggregate

# ----------------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class RulePlan:
    rule: int  # index into Plan.rules (the source rule this evaluates)
    head: int  # relation
    head_args: tuple[Expr, ...]
    steps: tuple[Step, ...]
    slots: int  # number of variable slots
    delta: bool = False  # reads the delta of its own stratum (semi-naive variant)


@dataclass(frozen=True, slots=True)
class HeadMatch:
    """How a rule head meets given values (inline relations, explanations, reasons):
    ``Bind`` a slot to the value, or ``Match`` the value against an expression."""

    args: tuple[Bind | Match, ...]


@dataclass(frozen=True, slots=True)
class BoundRule:
    """A rule evaluated with its head's values given: the steps run after ``head`` has
    bound or checked the head arguments. Used for inline relations, deny reasons and
    explanations."""

    rule: int
    head: HeadMatch
    steps: tuple[Step, ...]
    slots: int
    literals: tuple[int, ...] = ()  # for each step, the body literal it evaluates (RuleInfo.literals)


@dataclass(frozen=True, slots=True)
class Stratum:
    relations: tuple[int, ...]
    recursive: bool
    rules: tuple[RulePlan, ...]  # evaluated once (for a recursive stratum: the base round)
    delta_rules: tuple[RulePlan, ...] = ()  # evaluated each round on the previous round's delta
    # for maintaining the stratum as facts arrive: one variant per positive atom of each rule,
    # reading that atom's new facts only (incremental insertion)
    insert_rules: tuple[RulePlan, ...] = ()
    # subsumption rules of the stratum's relations: each derives a dominated tuple followed by
    # the one dominating it (``head_args`` twice the relation's arity); after the stratum's
    # rules and after each round, every tuple dominated by another one is dropped
    subsumptions: tuple[RulePlan, ...] = ()


@dataclass(frozen=True, slots=True)
class RelationSpec:
    name: str
    types: tuple[str | None, ...]  # None: unconstrained
    input: bool = False
    output: bool = False
    inline: bool = False
    # `choice-domain`: each domain (attribute positions) a key; a derived tuple whose key a
    # tuple of the relation has already is dropped
    choice: tuple[tuple[int, ...], ...] = ()
    # `.key`: the attribute positions that determine the others, each a key the facts given for
    # the relation keep (checked as they are given); ``attributes``: the relation's attribute
    # names, for the messages about its keys (only a relation with keys has them)
    keys: tuple[tuple[int, ...], ...] = ()
    attributes: tuple[str, ...] = ()
    # `.host`: only the host states its facts; the fronts refuse them from those they serve
    host: bool = False
    # demand-driven (compiler/magic.py): which arguments are bound ("bf"), and the magic
    # relation holding their demanded values
    adornment: str = ""
    magic: int | None = None
    # `.limitsize R(n=N)`: the relation takes the first N facts derived (in the order of
    # evaluation) and no more
    limit: int | None = None

    @property
    def arity(self) -> int:
        return len(self.types)


@dataclass(frozen=True, slots=True)
class FunctorSpec:
    name: str
    params: tuple[str, ...]  # symbol, number, float or any
    returns: str  # symbol, number, float, any or bool


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """What explanations and deny reasons say about a source rule."""

    id: str
    head: str
    file: str
    line: int
    column: int
    text: str
    variables: tuple[str, ...]  # slot -> variable name ('' for hidden slots)
    literals: tuple[str, ...] = ()  # the source text of each body literal
    message: str | None = None
    suggest: str | None = None
    severity: str | None = None
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ArgumentSpec:
    """A declared tool argument (``.arg tool.argument: type [required]``): what the monitor
    checks of every call of the tool before any rule runs."""

    tool: str
    argument: str
    type: str  # one of ARGUMENT_TYPES
    required: bool = False


@dataclass(frozen=True, slots=True)
class Plan:
    relations: tuple[RelationSpec, ...]
    functors: tuple[FunctorSpec, ...]
    strata: tuple[Stratum, ...]
    rules: tuple[RuleInfo, ...]
    bound_rules: tuple[tuple[BoundRule, ...], ...]  # per relation: its rules with the head given
    default: str = "allow"
    arguments: tuple[ArgumentSpec, ...] = ()  # the declared tool arguments, sorted

    def relation_index(self) -> dict[str, int]:
        return {r.name: i for i, r in enumerate(self.relations)}

    @property
    def has_verdict_rules(self) -> bool:
        """Whether a rule or fact of the plan derives a verdict: whether the program is a
        policy (:func:`~.verdict_names.has_verdict_rules`), as its ``Symbols`` say."""
        from .verdict_names import has_verdict_rules

        arity = {r.name: r.arity for r in self.relations}
        return has_verdict_rules((info.head, arity.get(info.head)) for info in self.rules)


def reads(steps: tuple[Step, ...], inside: bool = False) -> Iterator[tuple[int, str]]:
    """The relations a rule body reads and how: scan, negation, aggregate (anything inside an
    aggregate's body), inline, inline-negated."""
    for step in steps:
        if isinstance(step, Scan):
            yield step.relation, "aggregate" if inside else "scan"
        elif isinstance(step, NotExists):
            yield step.relation, "aggregate" if inside else "negation"
        elif isinstance(step, InlineTest):
            yield step.relation, "aggregate" if inside else ("inline-negated" if step.negated else "inline")
        elif isinstance(step, Aggregate):
            yield from reads(step.body, inside=True)
