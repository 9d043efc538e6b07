"""``DependsOn`` of a session kept implicitly: an event recorded without ``deps`` depends on
every earlier event, and the session's order already says which those are.

Stored as facts, that default is quadratic (a session of 4,000 such events holds 8 million
``DependsOn`` facts). :class:`Prefix` holds instead the facts given explicitly (``deps``, a
result's ``of``, facts a host adds) and the events that depend on all earlier ones (*open*
events), and answers every question the generated code asks of a relation from the order:

* ``(e, d) in tuples``: an explicit fact, or ``e`` open and ``d`` recorded before it;
* ``index((0,)).get(e)``: what ``e`` depends on (the explicit ones, then the events before it,
  latest first); ``index((1,)).get(d)``: what depends on ``d`` (the explicit ones, then the
  open events after it);
* iterating every fact (a rule that scans ``DependsOn`` with nothing known) enumerates them.

The facts are exactly those the events would give (:func:`policyc.stdlib.events.event_facts`);
an explicit fact that the order implies is not stored twice.

When an open event arrives, what it adds to ``DependsOn`` is every pair ``(e, d)`` with ``d``
before it. A session's maintenance must not run the rules that read ``DependsOn`` through each
of them: :func:`open_variant` turns such an insertion variant into one driven by the new open
event, in which ``DependsOn(e, d)`` is a membership test placed after the first step that binds
``d`` otherwise (so ``Tainted(e) :- DependsOn(e, d), Tainted(d)`` runs through ``Tainted``, not
through the history), and :func:`existential_tail` finds the steps after which nothing the head
needs is bound, which may stop at the first binding that reaches the head.

>>> order, position = [], {}
>>> deps = Prefix(order, position)
>>> for e in ("u", "r", "c"):
...     position[e] = len(order); order.append(e)
>>> deps.open_events(["r", "c"])
>>> sorted(deps.tuples), ("c", "u") in deps.tuples, ("u", "c") in deps.tuples
([('c', 'r'), ('c', 'u'), ('r', 'u')], True, False)
>>> list(deps.index((0,)).get("c", ())), list(deps.index((1,)).get("u", ()))
(['r', 'u'], ['r', 'c'])
>>> deps.add_all({("u", "x"), ("c", "r")})  # (c, r) the order implies: not stored
{('u', 'x')}
>>> len(deps)
4
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from policyc.compiler import plan as p

from .codegen import slots_read
from .relations import Relation


class _Facts:
    """The facts of a :class:`Prefix`, as the set its generated code reads (membership,
    iteration, size, ``update`` of explicit facts, ``set - facts``)."""

    __slots__ = ("explicit", "owner")

    def __init__(self, owner: Prefix) -> None:
        self.owner = owner
        self.explicit: set[tuple] = set()

    def __contains__(self, fact: Any) -> bool:
        if fact in self.explicit:
            return True
        owner = self.owner
        try:
            e, d = fact
        except (TypeError, ValueError):
            return False
        if e not in owner.open:
            return False
        position = owner.position
        before = position.get(d)
        return before is not None and before < position[e]

    def __iter__(self) -> Iterator[tuple]:
        yield from self.explicit
        owner = self.owner
        order = owner.order
        for at in owner.opened:
            e = order[at]
            for d in order[:at]:
                yield (e, d)

    def __len__(self) -> int:
        return len(self.explicit) + self.owner.implied

    def __bool__(self) -> bool:
        return bool(self.explicit) or self.owner.implied > 0

    def __rsub__(self, other: Iterable[tuple]) -> set[tuple]:
        if not self.owner.open and type(other) is set:  # no fact is implied yet: the explicit ones
            return other - self.explicit
        return {fact for fact in other if fact not in self}

    def update(self, facts: Iterable[tuple]) -> None:
        """Add explicit facts (which the order does not imply: see :meth:`Prefix.add_all`)."""
        self.explicit.update(facts)


class _Span(Sequence):
    """What an index lookup gives: some explicit values, then a stretch of the order."""

    __slots__ = ("explicit", "picks")

    def __init__(self, explicit: Sequence[Any], picks: Sequence[Any]) -> None:
        self.explicit = explicit
        self.picks = picks

    def __len__(self) -> int:
        return len(self.explicit) + len(self.picks)

    def __getitem__(self, i: Any) -> Any:  # Sequence's protocol; iteration does not use it
        return list(self)[i]

    def __iter__(self) -> Iterator[Any]:
        yield from self.explicit
        yield from self.picks


class _Before:
    """``index((0,))``: what an event depends on."""

    __slots__ = ("explicit", "owner")

    def __init__(self, owner: Prefix) -> None:
        self.owner = owner
        self.explicit = owner.base.index((0,))

    def get(self, e: Any, default: Any = ()) -> Any:
        owner = self.owner
        if not owner.open:  # no open event: the explicit facts (an index has no empty entry)
            return self.explicit.get(e, default)
        given = self.explicit.get(e, ())
        if e not in owner.open:
            return given or default
        order = owner.order
        at = owner.position[e]
        return _Span(given, _Reversed(order, at))


class _Reversed(Sequence):
    """``order[:stop]``, latest first, without copying it."""

    __slots__ = ("order", "stop")

    def __init__(self, order: list[Any], stop: int) -> None:
        self.order = order
        self.stop = stop

    def __len__(self) -> int:
        return self.stop

    def __getitem__(self, i: Any) -> Any:
        if not 0 <= i < self.stop:
            raise IndexError(i)
        return self.order[self.stop - 1 - i]

    def __iter__(self) -> Iterator[Any]:
        order = self.order
        for i in range(self.stop - 1, -1, -1):
            yield order[i]


class _After:
    """``index((1,))``: what depends on an event."""

    __slots__ = ("explicit", "owner")

    def __init__(self, owner: Prefix) -> None:
        self.owner = owner
        self.explicit = owner.base.index((1,))

    def get(self, d: Any, default: Any = ()) -> Any:
        owner = self.owner
        if not owner.opened:  # no open event: the explicit facts (an index has no empty entry)
            return self.explicit.get(d, default)
        given = self.explicit.get(d, ())
        at = owner.position.get(d)
        if at is None:
            return given or default
        start = bisect_right(owner.opened, at)
        if start == len(owner.opened):
            return given or default
        return _Span(given, _Picked(owner.order, owner.opened, start))


class _Picked(Sequence):
    """The events at ``positions[start:]`` of the order."""

    __slots__ = ("order", "positions", "start")

    def __init__(self, order: list[Any], positions: list[int], start: int) -> None:
        self.order = order
        self.positions = positions
        self.start = start

    def __len__(self) -> int:
        return len(self.positions) - self.start

    def __getitem__(self, i: Any) -> Any:
        return self.order[self.positions[self.start + i]]

    def __iter__(self) -> Iterator[Any]:
        order = self.order
        positions = self.positions
        for i in range(self.start, len(positions)):
            yield order[positions[i]]


class Prefix(Relation):
    """``DependsOn(e, d)``: explicit facts, and ``(e, d)`` for every open event ``e`` and every
    event ``d`` recorded before it. ``order`` and ``position`` are the session's (shared, only
    ever appended to); open events are added with :meth:`open_events`."""

    __slots__ = ("base", "implied", "merged", "open", "opened", "order", "position", "watchers")

    def __init__(self, order: list[Any], position: dict[Any, int]) -> None:
        self.arity = 2
        self.rows_index = None
        self.order = order
        self.position = position
        self.opened: list[int] = []  # the positions of the open events, increasing
        self.open: set[Any] = set()
        self.implied = 0  # how many facts the order implies (an open event at position n: n)
        self.merged: set[tuple] = set()  # explicit facts the last open event's opening implied
        self.watchers: list[Callable[[Iterable[Any]], None]] = []
        facts = _Facts(self)
        self.base = Relation.owning(2, facts.explicit)  # the explicit facts and their indexes
        self.tuples = facts  # type: ignore[assignment]
        self.indexes = {}
        # what the generated maintenance calls with the explicit facts it adds: the base's
        # index fillers, then the watchers
        self.fillers = self.base.fillers

    def open_events(self, events: Iterable[Any]) -> None:
        """Events (recorded, the latest last) that depend on every event before them."""
        new = []
        for e in events:
            if e in self.open:
                continue
            at = self.position[e]
            if self.opened and at <= self.opened[-1]:
                raise ValueError(f"event {e!r} opens before the last open event")
            self.open.add(e)
            self.opened.append(at)
            self.implied += at
            new.append(e)
        explicit = self.base.index((0,))
        implied = {(e, d) for e in new for d in explicit.get(e, ()) if (e, d) in self.tuples}
        self.merged = implied
        if implied:  # explicit facts the order now implies: kept once
            self.implied -= len(implied)  # counted among the implied ones now
            self.base.discard_all(implied)
        if self.watchers and new:  # someone follows every fact: they are told each (a cost per event)
            order = self.order
            pairs = [(e, d) for e in new for d in order[: self.position[e]]]
            for watch in self.watchers:
                watch(pairs)

    def close_last(self, e: Any) -> None:
        """Take back the open event opened last (an event that was not recorded after all),
        with the explicit facts its opening merged into the order."""
        if not self.opened or e not in self.open or self.order[self.opened[-1]] != e:
            raise ValueError(f"event {e!r} is not the last open event")
        self.open.discard(e)
        self.implied -= self.opened.pop()
        if self.merged:
            self.implied += len(self.merged)
            self.base.add_all(set(self.merged))
            self.merged = set()

    def index(self, positions: tuple[int, ...]) -> Any:
        found: Any = self.indexes.get(positions)
        if found is None:
            if positions == (0,):
                found = _Before(self)
            elif positions == (1,):
                found = _After(self)
            else:  # every argument, or none: generated code tests or runs through the facts
                raise ValueError(f"no index of `DependsOn` over {positions}")
            self.indexes[positions] = found
        return found

    def add_all(self, new: Iterable[Any]) -> set[Any]:
        fresh = {t for t in new if t not in self.tuples}
        if fresh:
            self.base.add_all(set(fresh))
        return fresh

    def discard_all(self, gone: Iterable[Any]) -> None:
        gone = set(gone)
        if not gone.issubset(self.base.tuples):
            raise ValueError("facts the order implies cannot be removed")
        self.base.discard_all(gone)

    def as_tuples(self) -> set[tuple]:
        return set(self.tuples)

    def select(self, positions: tuple[int, ...], key: Any) -> Iterable[tuple]:
        if positions == (0,):
            return ((key, d) for d in self.index((0,)).get(key, ()))
        if positions == (1,):
            return ((e, key) for e in self.index((1,)).get(key, ()))
        if positions == (0, 1):
            return [key] if key in self.tuples else []
        return iter(self.tuples)

    def watch(self, callback: Callable[[Iterable[Any]], None]) -> None:
        self.watchers.append(callback)
        self.base.watch(callback)


# -------------------------------------------------------------------------- rule variants


@dataclass(frozen=True)
class OpenVariant:
    """An insertion variant reading the new facts of ``DependsOn``, for the facts a new open
    event brings: the ``before`` steps of the rule, then, for each new open event in slot
    ``event``, the ``steps``; from ``steps[tail]`` on, the steps only decide whether the head
    holds (nothing the head reads is bound there, and they call no functor), so they may stop
    at the first binding."""

    before: tuple[p.Step, ...]
    event: int
    steps: tuple[p.Step, ...]
    tail: int
    slots: int


def open_variant(rule: p.RulePlan, relation: int) -> OpenVariant:
    """The variant of an insertion variant of ``rule`` that reads the new facts of
    ``relation`` (``DependsOn(e, d)``), for new open events: ``e`` is the new event, and the
    atom becomes a test once ``d`` is bound by the first later step that reads it, or, if no
    step can bind it, a lookup of the events before ``e``.

    >>> deps, tainted = 0, 1
    >>> rule = p.RulePlan(0, tainted, (p.Slot(0),), (
    ...     p.Scan(deps, (p.Bind(0), p.Bind(1)), "delta"), p.Scan(tainted, (p.Match(p.Slot(1)),))), 2)
    >>> variant = open_variant(rule, deps)
    >>> variant.event, [type(s).__name__ for s in variant.steps], variant.tail
    (0, ['Scan', 'Scan'], 0)
    >>> variant.steps[0].args, variant.steps[1].args
    ((Bind(slot=1),), (Match(expr=Slot(index=0)), Match(expr=Slot(index=1))))
    """
    at = next(i for i, s in enumerate(rule.steps) if isinstance(s, p.Scan) and s.source == "delta")
    atom = rule.steps[at]
    assert isinstance(atom, p.Scan) and atom.relation == relation and len(atom.args) == 2
    before = rule.steps[:at]
    rest = list(rule.steps[at + 1 :])
    slots = rule.slots
    first, second = atom.args
    checks: list[p.Step] = []
    if isinstance(first, p.Bind):
        event = first.slot
    else:  # the new event matched against a known value, or `_`
        event = slots
        slots += 1
        if isinstance(first, p.Match):
            checks.append(p.Filter("=", p.Slot(event), first.expr))
    e = p.Match(p.Slot(event))
    if isinstance(second, p.Bind) and second.slot != event:
        d = second.slot
        binder = next((i for i, s in enumerate(rest) if d in mentions(s)), None)
        step = rest[binder] if binder is not None else None
        if binder is not None and isinstance(step, p.Scan) and p.Match(p.Slot(d)) in step.args:
            k = step.args.index(p.Match(p.Slot(d)))
            args = (*step.args[:k], p.Bind(d), *step.args[k + 1 :])
            rest[binder : binder + 1] = [
                p.Scan(step.relation, args, step.source),
                p.Scan(relation, (e, p.Match(p.Slot(d))), "full"),
            ]
        else:  # nothing else binds `d`: the events before `e`
            rest.insert(0, p.Scan(relation, (e, second), "full"))
    elif isinstance(second, p.Bind):  # `DependsOn(x, x)`: the second is the same event
        rest.insert(0, p.Scan(relation, (e, p.Match(p.Slot(event))), "full"))
    elif isinstance(second, p.Skip):  # any event before it: a test, after everything else
        rest.append(p.Scan(relation, (e, second), "full"))
    else:  # a value known before the atom
        rest.insert(0, p.Scan(relation, (e, second), "full"))
    steps = (*checks, *rest)
    return OpenVariant(before, event, steps, existential_tail(rule.head_args, before, event, steps), slots)


def existential_tail(
    head: tuple[p.Expr, ...], before: tuple[p.Step, ...], event: int, steps: tuple[p.Step, ...]
) -> int:
    """The first step from which on the steps bind nothing the head reads and call no functor
    (``len(steps)`` if there is none)."""
    needed: set[int] = set()
    for expr in head:
        needed |= slots_read(expr)
    bound = {event} | _bound_by(before)
    tail = len(steps)
    for k in range(len(steps) - 1, -1, -1):
        if not _pure(steps[k]):
            break
        if needed <= bound | _bound_by(steps[:k]):
            tail = k
    return tail


def _bound_by(steps: Iterable[p.Step]) -> set[int]:
    bound: set[int] = set()
    for step in steps:
        if isinstance(step, p.Scan):
            bound.update(a.slot for a in step.args if isinstance(a, p.Bind))
        elif isinstance(step, p.Assign | p.Range | p.Aggregate):
            bound.add(step.slot)
    return bound


def mentions(step: p.Step) -> set[int]:
    """Every slot a step binds or reads."""
    if isinstance(step, p.Scan | p.NotExists):
        found = set()
        for a in step.args:
            if isinstance(a, p.Bind):
                found.add(a.slot)
            elif isinstance(a, p.Match):
                found |= slots_read(a.expr)
        return found
    if isinstance(step, p.Filter):
        return slots_read(step.left) | slots_read(step.right)
    if isinstance(step, p.Assign):
        return {step.slot} | slots_read(step.expr)
    if isinstance(step, p.Range):
        bounds = (step.start, step.stop) if step.step is None else (step.start, step.stop, step.step)
        return {step.slot}.union(*(slots_read(e) for e in bounds))
    if isinstance(step, p.Test | p.InlineTest):
        return set().union(*(slots_read(a) for a in step.args)) if step.args else set()
    if isinstance(step, p.Aggregate):
        found = {step.slot}
        for inner in step.body:
            found |= mentions(inner)
        return found
    return set()


def _pure(step: p.Step) -> bool:
    """A step that calls nothing that can fail: a scan or negation with plain arguments, a
    comparison of plain values."""
    simple = (p.Slot, p.Const)
    if isinstance(step, p.Scan | p.NotExists):
        return all(not isinstance(a, p.Match) or isinstance(a.expr, simple) for a in step.args)
    if isinstance(step, p.Filter):
        return isinstance(step.left, simple) and isinstance(step.right, simple) and step.op in ("=", "!=")
    return False
