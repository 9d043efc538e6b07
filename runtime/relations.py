"""Stored relations: a set of tuples and the indexes the plan's lookups need.

An index maps the values at some positions (one value, or a tuple of values for several
positions) to the list of tuples having them. Indexes are built on first use and kept up to
date as facts are added, so a recursive stratum's lookups see every round's new facts.

>>> r = Relation()
>>> sorted(r.add_all({("a", 1), ("b", 2)}))
[('a', 1), ('b', 2)]
>>> r.index((1,))[2]
[('b', 2)]
>>> r.add_all({("a", 1), ("c", 2)})
{('c', 2)}
>>> sorted(r.index((1,))[2])
[('b', 2), ('c', 2)]
"""

from __future__ import annotations

from collections.abc import Iterable


class Relation:
    __slots__ = ("indexes", "tuples")

    def __init__(self, tuples: Iterable[tuple] = ()) -> None:
        self.tuples: set[tuple] = set(tuples)
        self.indexes: dict[tuple[int, ...], dict] = {}

    def __len__(self) -> int:
        return len(self.tuples)

    def index(self, positions: tuple[int, ...]) -> dict:
        found = self.indexes.get(positions)
        if found is None:
            found = {}
            _fill(found, positions, self.tuples)
            self.indexes[positions] = found
        return found

    def add_all(self, new: Iterable[tuple]) -> set[tuple]:
        """Add facts; the ones that were not there yet (the delta) are returned."""
        fresh = set(new)
        fresh -= self.tuples
        if fresh:
            self.tuples |= fresh
            for positions, index in self.indexes.items():
                _fill(index, positions, fresh)
        return fresh


def _fill(index: dict, positions: tuple[int, ...], tuples: Iterable[tuple]) -> None:
    if len(positions) == 1:
        (p,) = positions
        for t in tuples:
            key = t[p]
            bucket = index.get(key)
            if bucket is None:
                index[key] = [t]
            else:
                bucket.append(t)
    else:
        for t in tuples:
            key = tuple(t[p] for p in positions)
            bucket = index.get(key)
            if bucket is None:
                index[key] = [t]
            else:
                bucket.append(t)
