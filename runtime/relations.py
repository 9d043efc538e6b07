"""Stored relations: a set of facts and the indexes the plan's lookups need.

Representations are chosen by arity, as a hand-written evaluator would choose them: a unary
relation stores its values themselves, any other relation stores tuples. An index maps the
values at some key positions (one value, or a tuple for several) to the list of what the other
positions hold (one value, or a tuple for several), so that a lookup binds the rest without
unpacking whole facts. Indexes are built on first use and kept up to date as facts are added,
so a recursive stratum's lookups see every round's new facts.

>>> r = Relation(2)
>>> sorted(r.add_all({("a", 1), ("b", 2)}))
[('a', 1), ('b', 2)]
>>> r.index((1,))[2]
['b']
>>> r.add_all({("a", 1), ("c", 2)})
{('c', 2)}
>>> sorted(r.index((1,))[2])
['b', 'c']
>>> r.discard_all({("b", 2)}); sorted(r.index((1,))[2]), sorted(r.select((1,), 2))
(['c'], [('c', 2)])
>>> u = Relation(1)
>>> u.add_all({"x"}); u.contains(("x",)), sorted(u.as_tuples())
{'x'}
(True, [('x',)])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from operator import itemgetter
from typing import Any, cast


class Relation:
    """A relation iterates and contains its facts as tuples (``in``, ``iter``)."""

    __slots__ = ("arity", "fillers", "indexes", "rows_index", "tuples")

    def __init__(self, arity: int, items: Iterable[Any] = ()) -> None:
        self.arity = arity
        # values for a unary relation, tuples otherwise (see owning for a dict's keys)
        self.tuples: set[Any] = set(items)
        self.indexes: dict[tuple[int, ...], defaultdict] = {}
        # called with the facts each addition adds: one per index, and any watcher (see watch)
        self.fillers: list[Callable[[Iterable[Any]], None]] = []
        self.rows_index: tuple[int, ...] | None = None  # see from_rows

    @classmethod
    def owning(cls, arity: int, items: set[Any] | dict[Any, None]) -> Relation:
        """A relation over a set the caller hands over (no copy), or the keys of a dict: facts
        in the order they were made, which the relation goes through (to build an index, say)
        faster than through a set, whose order scatters them in memory. Such a relation is read
        as it is and copied into a set of its own when it changes."""
        relation = cls.__new__(cls)
        relation.arity = arity
        relation.tuples = cast(set, items)  # a dict's keys are read like a set's members
        relation.indexes = {}
        relation.fillers = []
        relation.rows_index = None
        return relation

    @classmethod
    def from_rows(cls, arity: int, rows: Iterable[Sequence[Any]], positions: tuple[int, ...]) -> Relation:
        """A relation of checked rows (sequences of ``arity`` values; the same row may come
        twice) that is read through the index over ``positions``: the index is built from the
        rows now, in their order, and keeps their values, not the rows. Its set of facts is
        made from the index the first time something asks for ``tuples``; before a change,
        the indexes are built again from that set (a row given twice is one fact).

        >>> r = Relation.from_rows(2, [["a", "b"], ["c", "b"], ["a", "b"]], (1,))
        >>> sorted(r.index((1,))["b"]), sorted(r.tuples)
        (['a', 'a', 'c'], [('a', 'b'), ('c', 'b')])
        >>> r.add_all({("d", "b")}); sorted(r.index((1,))["b"])
        {('d', 'b')}
        ['a', 'c', 'd']
        """
        relation = cls.__new__(cls)
        relation.arity = arity
        relation.fillers = []
        index: defaultdict = defaultdict(list)
        fill = _filler(index, arity, positions)
        fill(rows)
        relation.indexes = {positions: index}
        relation.fillers.append(fill)
        relation.rows_index = positions
        return relation

    def __getattr__(self, name: str) -> Any:
        """``tuples`` of a relation made :meth:`from_rows`, made when first asked for."""
        if name != "tuples" or self.rows_index is None:
            raise AttributeError(name)
        positions = self.rows_index
        made = {
            fact
            for key, entries in self.indexes[positions].items()
            for fact in _facts(self.arity, positions, key, entries)
        }
        self.tuples = made
        return made

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.as_tuples())

    def __contains__(self, fact: object) -> bool:
        return isinstance(fact, tuple) and len(fact) == self.arity and self.contains(fact)

    def __len__(self) -> int:
        return len(self.tuples)

    def contains(self, fact: tuple) -> bool:
        return (fact[0] if self.arity == 1 else fact) in self.tuples

    def as_tuples(self) -> set[tuple]:
        if self.arity == 1:
            return {(v,) for v in self.tuples}
        return set(self.tuples)

    def store(self, facts: Iterable[tuple]) -> set[Any]:
        """Facts given as tuples, in this relation's representation."""
        if self.arity == 1:
            return set(map(itemgetter(0), facts))
        return set(facts)

    def index(self, positions: tuple[int, ...]) -> defaultdict:
        """What the other positions hold, by the values at ``positions`` (look up with
        ``.get(key, ())``: a missing key must not be created)."""
        found = self.indexes.get(positions)
        if found is None:
            found = defaultdict(list)
            fill = _filler(found, self.arity, positions)
            fill(self.tuples)
            self.indexes[positions] = found
            self.fillers.append(fill)
        return found

    def add_all(self, new: Iterable[Any]) -> set[Any]:
        """Add facts (in this relation's representation); the ones that were not there yet
        (the delta) are returned. A set passed in is consumed (it may become the delta)."""
        fresh = new if isinstance(new, set) else set(new)
        self._writable()
        # through the smaller of the two: `a -= b` goes through b (unless b is much larger),
        # `a - b` through a, so each round of a recursion costs what it derives, not what it holds
        if len(fresh) > len(self.tuples):
            fresh -= self.tuples
        else:
            fresh = fresh - self.tuples
        if fresh:
            self.tuples |= fresh
            for fill in self.fillers:
                fill(fresh)
        return fresh

    def discard_all(self, gone: Iterable[Any]) -> None:
        """Remove facts (in this relation's representation; each must be there) from the
        relation and its indexes. An index entry is found in its key's list: removing costs what
        the lists of the removed facts' keys hold, not the size of the relation."""
        gone = gone if isinstance(gone, set) else set(gone)
        self._writable()
        self.tuples -= gone
        for positions, index in self.indexes.items():
            if self.arity == 1:
                for v in gone:
                    index.pop(v, None)
                continue
            key, rest = _getters(self.arity, positions)
            for t in gone:
                k = key(t)
                entries = index[k]
                entries.remove(rest(t))
                if not entries:
                    del index[k]

    def select(self, positions: tuple[int, ...], key: Any) -> Iterable[tuple]:
        """The facts, as tuples, with ``key`` at ``positions`` (one value for one position, a
        tuple for several), through the relation's index."""
        if not positions:
            yield from self.as_tuples()
            return
        if self.arity == 1:
            if key in self.tuples:
                yield (key,)
            return
        yield from _facts(self.arity, positions, key, self.index(positions).get(key, ()))

    def _writable(self) -> None:
        """Facts handed over in another collection (the facts in the order given, as keys of a
        dict: see :meth:`owning`) become a set of this relation's own before a change, and the
        indexes of a relation made :meth:`from_rows` are built again from its set of facts."""
        if type(self.tuples) is not set:
            self.tuples = set(self.tuples)
        if self.rows_index is not None:
            self.rows_index = None
            for positions, index in self.indexes.items():
                index.clear()
                _filler(index, self.arity, positions)(self.tuples)

    def watch(self, callback: Callable[[Iterable[Any]], None]) -> None:
        """Call ``callback`` with the facts (in this relation's representation) each later
        addition adds, however they are added."""
        self.fillers.append(callback)


def _facts(arity: int, positions: tuple[int, ...], key: Any, entries: Iterable[Any]) -> Iterator[tuple]:
    """The whole facts of an index's entries under ``key`` (one value for one position, a
    tuple for several)."""
    rest = projection(arity, positions)
    keys = (key,) if len(positions) == 1 else key
    for entry in entries:
        row = [None] * arity
        for i, v in zip(positions, keys, strict=True):
            row[i] = v
        for i, v in zip(rest, (entry,) if len(rest) == 1 else entry, strict=True):
            row[i] = v
        yield tuple(row)


def projection(arity: int, positions: tuple[int, ...]) -> tuple[int, ...]:
    """The positions an index over ``positions`` keeps in its entries."""
    return tuple(i for i in range(arity) if i not in positions)


@cache
def _getters(arity: int, positions: tuple[int, ...]) -> tuple[Callable[[tuple], Any], Callable[[tuple], Any]]:
    """The key of a fact and what an index entry keeps of it."""
    return _getter(positions), _getter(projection(arity, positions))


def _getter(positions: tuple[int, ...]) -> Callable[[tuple], Any]:
    if not positions:
        return lambda t: ()
    return itemgetter(*positions)


def _filler(index: defaultdict, arity: int, positions: tuple[int, ...]) -> Callable[[Iterable[Any]], None]:
    """The function adding facts to an index over ``positions``."""
    if arity == 1:  # a unary relation is only ever looked up whole

        def fill(items: Iterable[Any]) -> None:
            for v in items:
                index[v].append(())

    elif arity == 2 and positions == (0,):

        def fill(items: Iterable[Any]) -> None:
            for a, b in items:
                index[a].append(b)

    elif arity == 2 and positions == (1,):

        def fill(items: Iterable[Any]) -> None:
            for a, b in items:
                index[b].append(a)

    else:
        key, rest = _getters(arity, positions)

        def fill(items: Iterable[Any]) -> None:
            for t in items:
                index[key(t)].append(rest(t))

    return fill
