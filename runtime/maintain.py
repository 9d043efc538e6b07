"""Maintaining a session's relations as facts arrive: one generated function per session plan.

A monitor session adds a few facts at a time (one event's) and keeps every incremental relation
up to date by semi-naive insertion: each rule has a variant per positive atom that reads only
that atom's new facts (:attr:`~policyc.compiler.plan.Stratum.insert_rules`). Run stratum by
stratum through generic code, the bookkeeping around the variants (which strata have new
facts to read, views of the new facts, sets for what each rule derives) costs far more than
the variants themselves, because most events touch only one or two relations.

So the whole insertion pass is written as one Python function for the plan, the way one would
write it by hand for that policy: the new facts of each relation are a local variable; a
stratum runs only when a relation its variants read has new facts; each variant's body is
inlined (a scan of new facts comes first and runs through them instead of indexing them); what
the variants derive goes to one buffer per relation, kept by the session, so that a stratum
deriving nothing allocates nothing; and the relations' fact sets and the indexes the variants
look up are bound once per session. A recursive stratum repeats rounds on the facts the
previous round added, as the evaluator does.

``bind(R, F, I, E, fail, J)`` binds the function to one session's relations ``R``, functor
wrappers ``F``, inline relations ``I``, meter ``E`` (arithmetic errors and the time limit, see
:mod:`.limits`), ``fail(rule, error)``, which records a rule whose code raised (the variant
stops there), and ``J``, called with ``(relation, facts)`` for every set of facts the pass adds
(in the relation's representation; a set is not changed afterwards except to grow with facts
the pass also adds), so that a pass that met an error or a limit can be undone
(:meth:`~policyc.runtime.session.Session`'s journal). It returns ``maintain(N, room, stored=False)``: ``N``
maps input relations to new facts as tuples, or with ``stored`` in the form the relations store
them (values for a unary relation: see :mod:`.fact_checks`); the sets are read, not changed.
``room`` is how many facts may still be added. It returns how many facts were added, or raises :class:`Overflow` once more than
``room`` were, counting the facts derived and not yet added, or
:class:`~policyc.runtime.limits.LimitExceeded` when the time is up. Both are checked every
:data:`~policyc.runtime.limits.TICK` iterations of any loop of the variants, so a pass stops
at a limit while a rule is still running.

The relations a session stores are only ever added to in place, so binding their fact sets and
indexes once is sound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from policyc.compiler import plan as p

from . import codegen
from .limits import TICK
from .prefix import mentions, open_variant
from .relations import Relation

Maintain = Callable[..., int]
Bind = Callable[..., Maintain]


class Overflow(Exception):
    """More facts than the session may hold; ``args[0]``: how many the pass added."""


def delta_relation(rule: p.RulePlan) -> int:
    """The relation whose new facts an insertion variant reads."""
    for step in rule.steps:
        if isinstance(step, p.Scan) and step.source == "delta":
            return step.relation
    raise p.PlanError("an insertion variant reads the new facts of one atom")


def compile_pass(
    plan: p.Plan,
    strata: Iterable[p.Stratum],
    inputs: Collection[int],
    name: str = "maintain",
    prefix: int | None = None,
) -> tuple[str, Bind]:
    """The source of ``bind`` and the function, for the given strata (in order, every one
    incremental) fed by the given input relations. With ``prefix`` (``DependsOn``, kept by a
    :class:`~policyc.runtime.prefix.Prefix`), ``N["open"]`` lists the new open events, whose
    ``DependsOn`` facts the variants reading that relation take from the order."""
    strata = list(strata)
    hoisted = _Hoisted()
    w = codegen.Writer(helper_indent=1)  # helpers of deep variants are defined in `bind`
    w.depth = 2
    w.line("added = 0")
    w.line(f"n = {TICK}")
    if prefix is not None:
        w.line('new_open = N.get("open")')
    for r in sorted(inputs):
        w.line(f"new_{r} = N.get({r})")
        w.open(f"if new_{r}:")
        if plan.relations[r].arity == 1:
            w.open("if not stored:")
            w.line(f"new_{r} = {hoisted.name(f'R[{r}].store', 'S')}(new_{r})")
            w.depth -= 1
        w.line(f"new_{r} = new_{r} - {hoisted.name(f'R[{r}].tuples', 'T')}")
        w.open(f"if new_{r}:")
        _add(w, hoisted, r, f"new_{r}")
        w.depth -= 2
    # the relations whose new facts some later stratum reads
    read = {delta_relation(rule) for s in strata for rule in s.insert_rules} - set(inputs)
    defined = set(inputs)
    for stratum in strata:
        _stratum(plan, w, hoisted, stratum, defined, set(inputs), read, prefix)
    w.line("return added")
    helpers = w.helper_source()  # first: it settles the calls of helpers
    pending = "".join(f"len({buffer}) + " for buffer, _ in hoisted.buffers.values())
    lines = [
        "def bind(R, F, I, E, fail, J):",
        *(f"    {line}" for line in hoisted.lines),
        # the check of the limits: the facts added, derived and not yet added, and the time
        "    def M(added, room, *held):",
        f"        if added + {pending}sum(map(len, held)) > room:",
        "            raise Overflow(added)",
        "        return E.tick()",
        *helpers,
        f"    def {name}(N, room, stored=False):",
        *(str(line) for line in w.lines),
        f"    return {name}",
    ]
    source = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = dict(codegen.RUNTIME)
    namespace.update(K=tuple(w.constants), EMPTY=frozenset(), Overflow=Overflow, _index=_index)
    exec(compile(source, f"<policyc {name}>", "exec"), namespace)
    return source, namespace["bind"]


def _stratum(
    plan: p.Plan,
    w: codegen.Writer,
    hoisted: _Hoisted,
    stratum: p.Stratum,
    defined: set[int],
    inputs: set[int],
    read: set[int],
    prefix: int | None,
) -> None:
    members = stratum.relations
    variants = [(rule, delta_relation(rule)) for rule in stratum.insert_rules]
    outside = [(rule, d) for rule, d in variants if d not in members]
    inside = [(rule, d) for rule, d in variants if d in members]
    opening = [rule for rule, d in outside if d == prefix]  # they read new open events too
    for _, d in outside:
        if d not in defined:
            raise p.PlanError(f"an insertion variant reads relation {d} before it is maintained")
    kept = [r for r in members if r in read]  # later strata read their new facts
    for r in kept:
        if r not in defined:
            w.line(f"new_{r} = EMPTY")
    defined.update(members)
    given = [r for r in members if r in inputs]  # facts given directly are new facts too
    triggers = sorted({d for _, d in outside} | set(given))
    if not variants or not triggers:
        return
    names = [f"new_{d}" for d in triggers] + (["new_open"] if opening else [])
    w.open(f"if {' or '.join(names)}:")
    # a variant runs when its relation has new facts (no test needed when it is the only trigger)
    _variants(plan, w, hoisted, outside, "new_", lambda d: names != [f"new_{d}"])
    for rule in opening:
        w.open("if new_open:")
        _open_variant(plan, w, hoisted, rule, prefix)  # type: ignore[arg-type]
        w.depth -= 1
    for r in members:
        if not (stratum.recursive or r in kept or r in given):
            _drain(w, hoisted, r)
            continue
        _merge(w, hoisted, r)
        if r in given:
            w.open(f"if new_{r}:")
            w.line(f"got_{r} |= new_{r}")
            w.depth -= 1
        if r in kept or r in given:
            w.line(f"new_{r} = got_{r}")
    if stratum.recursive and inside:
        for r in members:
            w.line(f"round_{r} = got_{r}")
        w.open(f"while {' or '.join(f'round_{r}' for r in members)}:")
        _variants(plan, w, hoisted, inside, "round_", lambda d: len(members) > 1)
        for r in members:
            _merge(w, hoisted, r, [f"new_{r} |= got_{r}"] if r in kept or r in given else [])
            w.line(f"round_{r} = got_{r}")
        w.depth -= 1
    w.depth -= 1


def _variants(
    plan: p.Plan,
    w: codegen.Writer,
    hoisted: _Hoisted,
    variants: list[tuple[p.RulePlan, int]],
    prefix: str,
    guarded: Callable[[int], bool],
) -> None:
    """The insertion variants, each reading the new facts ``<prefix><relation>``, behind a test
    that there are some when ``guarded(relation)``."""
    for rule, d in variants:
        if guarded(d):
            w.open(f"if {prefix}{d}:")
        _variant(plan, w, hoisted, rule, f"{prefix}{d}")
        if guarded(d):
            w.depth -= 1


def _merge(w: codegen.Writer, hoisted: _Hoisted, relation: int, then: Iterable[str] = ()) -> None:
    """Move what the relation's buffer holds into the relation; ``got_<relation>``: the facts
    it lacked (``EMPTY`` when none), and ``then`` run when there are some."""
    r = relation
    buffer, _ = hoisted.buffer(r)
    tuples = hoisted.name(f"R[{r}].tuples", "T")
    w.line(f"got_{r} = EMPTY")
    w.open(f"if {buffer}:")
    w.line(f"got_{r} = {buffer} - {tuples}")
    w.line(f"{buffer}.clear()")
    w.open(f"if got_{r}:")
    _add(w, hoisted, r, f"got_{r}")
    for line in then:
        w.line(line)
    w.depth -= 2


def _drain(w: codegen.Writer, hoisted: _Hoisted, relation: int) -> None:
    """Move what the relation's buffer holds into the relation (when no one reads which facts
    were new)."""
    r = relation
    buffer, _ = hoisted.buffer(r)
    w.open(f"if {buffer}:")
    w.line(f"got = {buffer} - {hoisted.name(f'R[{r}].tuples', 'T')}")
    w.line(f"{buffer}.clear()")
    w.open("if got:")
    _add(w, hoisted, r, "got")
    w.depth -= 2


def _add(w: codegen.Writer, hoisted: _Hoisted, relation: int, new: str) -> None:
    """Add the facts in the set ``new`` (which the relation lacks) to the relation, and stop
    once there are more facts than the session may hold."""
    r = relation
    w.line(f"J(({r}, {new}))")
    w.line(f"{hoisted.name(f'R[{r}].tuples.update', 'U')}({new})")
    w.open(f"for fill in {hoisted.name(f'R[{r}].fillers', 'I')}:")
    w.line(f"fill({new})")
    w.depth -= 1
    w.line(f"added += len({new})")
    w.open("if added > room:")
    w.line("raise Overflow(added)")
    w.depth -= 1


def _variant(plan: p.Plan, w: codegen.Writer, hoisted: _Hoisted, rule: p.RulePlan, delta: str) -> None:
    """One insertion variant inlined: its new facts in ``delta``, what it derives added to
    the round's set for its head."""
    body = _body(w, delta)
    compiler = _VariantCompiler(plan, body, hoisted, delta)
    compiler.steps(rule.steps, set())
    head = [compiler.expr(e) for e in rule.head_args]
    body.line(f"{hoisted.buffer(rule.head)[1]}({compiler.stored(rule.head, head)})")
    _guarded(w, body, compiler, rule)


def _body(w: codegen.Writer, delta: str) -> codegen.Writer:
    """A writer for the body of a variant inside the pass written by ``w``."""
    body = codegen.Writer(helper_indent=1)
    body.depth = w.depth + 1
    body.counter = w.counter
    body.constants = w.constants
    body.helpers = w.helpers
    body.always.update(("n", "added", "room", "new_open", delta))
    return body


def _guarded(w: codegen.Writer, body: codegen.Writer, compiler: _VariantCompiler, rule: p.RulePlan) -> None:
    """The variant's code (in ``body``) in the pass, where a rule whose code raises fails (and a
    limit stops the pass)."""
    w.counter = body.counter
    w.open("try:")
    for line in compiler.prologue:
        w.line(line)
    w.lines.extend(body.lines)
    w.depth -= 1
    w.open("except (LimitExceeded, Overflow):")
    w.line("raise")
    w.depth -= 1
    w.open("except Exception as error:")
    w.line(f"fail({rule.rule}, error)")
    w.depth -= 1


def _open_variant(
    plan: p.Plan, w: codegen.Writer, hoisted: _Hoisted, rule: p.RulePlan, relation: int
) -> None:
    """An insertion variant reading the new facts of ``DependsOn``, for new open events (see
    :func:`~policyc.runtime.prefix.open_variant`): a loop over them instead of over every event
    before each; the steps that only decide whether the head holds stop at their first match."""
    variant = open_variant(rule, relation)
    body = _body(w, "EMPTY")
    compiler = _VariantCompiler(plan, body, hoisted, "EMPTY")
    bound: set[int] = set()
    compiler.steps(variant.before, bound)
    compiler.loop(f"for v{variant.event} in new_open:")
    bound.add(variant.event)
    compiler.steps(variant.steps[: variant.tail], bound)
    tail = variant.steps[variant.tail :]
    if tail:
        test, params = _exists(plan, hoisted, tail, bound, body)
        body.open(f"if {test}({', '.join(f'v{s}' for s in params)}):")
    head = [compiler.expr(e) for e in rule.head_args]
    body.line(f"{hoisted.buffer(rule.head)[1]}({compiler.stored(rule.head, head)})")
    _guarded(w, body, compiler, rule)


def _exists(
    plan: p.Plan, hoisted: _Hoisted, steps: tuple[p.Step, ...], bound: set[int], outer: codegen.Writer
) -> tuple[str, list[int]]:
    """A function, bound once per session, telling whether the steps have a binding given the
    values of the slots they read that are ``bound`` before them (its parameters)."""
    params = sorted(set().union(*(mentions(s) for s in steps)) & bound)
    arguments = ", ".join(f"v{s}" for s in params)
    name = f"P_{len(hoisted.lines)}"
    for found in ("return True", "yield True"):  # a generator when the steps need helpers
        w = codegen.Writer(helper_indent=1)
        w.counter = outer.counter
        w.constants = outer.constants
        w.always.update(("n", *(f"v{s}" for s in params)))
        compiler = _VariantCompiler(plan, w, hoisted, "EMPTY", local=False)
        compiler.steps(steps, set(params))
        w.line(found)
        if not w.helpers:
            break
    outer.counter = w.counter
    outer.helpers.extend(w.helpers)
    if w.helpers:
        hoisted.lines.append(f"def {name}({arguments}):")
        hoisted.lines.append(f"    return next(G{name}({arguments}), False)")
        name = f"G{name}"
    hoisted.lines.append(f"def {name}({arguments}):")
    hoisted.lines.extend(f"    {line}" for line in [f"n = {TICK}", *compiler.prologue])
    hoisted.lines.extend(w.lines)  # rendered once the helpers' calls are settled
    if not w.helpers:
        hoisted.lines.append("    return False")
    return name if not w.helpers else name[1:], params


class _Hoisted:
    """What the pass binds once per session: expressions over ``R`` and their names, and a
    buffer per derived relation receiving what the variants derive (emptied by each merge)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.lines: list[Any] = []
        self.buffers: dict[int, tuple[str, str]] = {}

    def name(self, source: str, prefix: str) -> str:
        if source not in self.names:
            self.names[source] = f"{prefix}_{len(self.lines)}"
            self.lines.append(f"{self.names[source]} = {source}")
        return self.names[source]

    def buffer(self, relation: int) -> tuple[str, str]:
        """The names of the relation's buffer and of its ``add``."""
        if relation not in self.buffers:
            name = f"B_{len(self.lines)}"
            self.buffers[relation] = (name, f"{name}_add")
            self.lines.append(f"{name} = set()")
            self.lines.append(f"{name}_add = {name}.add")
        return self.buffers[relation]


class _VariantCompiler(codegen.RuleCompiler):
    """A rule body reading stored relations through names bound once per session, and the
    new facts of its delta atom from a local set. ``local``: the body is part of the pass (it
    checks the limits with what the pass has added), not a function bound once per session."""

    def __init__(
        self, plan: p.Plan, w: codegen.Writer, hoisted: _Hoisted, delta: str, local: bool = True
    ) -> None:
        super().__init__(plan, w, record=False)
        self.hoisted = hoisted
        self.delta = delta
        self.local = local
        self.looping = False  # inside a loop: scanning new facts again would cost a pass each time

    def tick(self) -> str:
        if not self.local:
            return super().tick()
        return f"M(added, room{''.join(', ' + held for held in self.held)})"

    def facts(self, source: str, relation: int) -> str:
        if source == "delta":
            return self.delta
        return self.hoisted.name(f"R[{relation}].tuples", "T")

    def indexed(self, step: p.Scan) -> bool:
        return step.source == "full" or self.looping

    def index(self, source: str, relation: int, positions: tuple[int, ...]) -> str:
        if source == "full":
            return self.hoisted.name(f"R[{relation}].index({positions!r}).get", "X")
        name = self.w.fresh("x")
        arity = self.plan.relations[relation].arity
        self.prologue.append(f"{name} = _index({arity}, {self.delta}, {positions!r}).get")
        self.w.always.add(name)
        return name

    def scan(self, step: p.Scan, bound: set[int]) -> None:
        super().scan(step, bound)
        if not all(isinstance(arg, p.Match) for arg in step.args):
            self.looping = True


def _index(arity: int, facts: set, positions: tuple[int, ...]) -> Any:
    return Relation.owning(arity, facts).index(positions)
