"""The keys of input relations (``.key``): the facts given for a relation keep them.

A key says that some attributes of a relation determine the others (``.key ToolCall(a)``: a
call has one tool; ``.key Candidate()``: at most one fact). The analyzer's proofs and the
planner rely on the keys, so the runtime refuses given facts that break one, with a
:class:`~policyc.runtime.facts.FactsError` naming the relation, the key and the two facts:

* :func:`~policyc.runtime.facts.check_rows`: the facts of one batch among themselves (``policy.evaluate``, ``policyc
  eval --facts``, and the general check of a session's facts);
* the generated checks of :mod:`.fact_checks` refuse a batch that breaks one at once (and leave
  the explaining to the general check);
* :class:`SessionKeys`: what a host gives a session against what it gave before and what the
  session's events gave, and an event's facts against what the host gave. The events of the
  vocabulary keep its keys by construction (an event has one id, one kind, one tool...), so a
  session compares nothing until the host gives facts of a relation with keys; then it indexes
  that relation's facts by each key, from the events so far, and keeps the index as events come.

"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from policyc.compiler import plan as p
from policyc.stdlib.events import event_facts

from .facts import FactsError, conflict

# per relation with keys, per key: the key's values -> the fact and where it came from (an
# event's id, or None for facts the host gave)
Index = list[dict[tuple, tuple[tuple, Any]]]


class SessionKeys:
    """The keys of a session's input relations: what the host gives is checked against what it
    gave and what the events gave; what an event gives, against what the host gave."""

    def __init__(self, plan: p.Plan, session: Any) -> None:
        self.specs = {r: spec for r, spec in enumerate(plan.relations) if spec.keys and spec.input}
        self.session = session  # its events, their order and the facts given so far are read
        self.index: dict[int, Index] = {}  # the relations the host gave facts of, by key
        self.unary = {r for r, spec in self.specs.items() if len(spec.types) == 1}

    def give(self, facts: Mapping[int, Collection[Any]]) -> None:
        """Note facts the host gives (relation index -> rows, as relations store them), or
        :class:`FactsError` when they break a key (then nothing of them is noted)."""
        staged: list[tuple[dict, dict]] = []
        for r, rows in facts.items():
            spec = self.specs.get(r)
            if spec is None:
                continue
            index = self.index.get(r)
            if index is None:
                index = self.index[r] = self._built(r)
            tuples = [(v,) for v in rows] if r in self.unary else [tuple(t) for t in rows]
            for key, table in zip(spec.keys, index, strict=True):
                new: dict[tuple, tuple[tuple, Any]] = {}
                for row in tuples:
                    at = tuple(row[i] for i in key)
                    before = new.get(at) or table.get(at)
                    if before is not None and before[0] != row:
                        origin = "given earlier" if before[1] is None else f"from event `{before[1]}`"
                        if at in new:
                            origin = "given with it"
                        raise FactsError(
                            f"session {self.session.id}: relation `{spec.name}`: "
                            + conflict(spec, key, row, before[0], ("given now", origin))
                        )
                    new[at] = (row, None)
                staged.append((table, new))
        for table, new in staged:
            table.update(new)

    def event(self, event: dict[str, Any], position: int) -> list[tuple[dict, tuple, tuple]]:
        """What an event gives the relations the host gave facts of, to note once it is
        recorded (:meth:`note`); a :class:`FactsError` when it breaks a key with them."""
        if not self.index:
            return []
        wanted = {self.specs[r].name: r for r in self.index}
        pending = []
        facts = event_facts(event, position, (), wanted)
        for r in wanted.values():
            rows = facts.get(r, ())
            spec = self.specs[r]
            for key, table in zip(spec.keys, self.index[r], strict=True):
                for row in rows:
                    at = tuple(row[i] for i in key)
                    before = table.get(at)
                    if before is not None and before[0] != row:
                        raise FactsError(
                            f"event {event['id']!r} breaks a key with the facts the host gave: relation "
                            f"`{spec.name}`: "
                            + conflict(spec, key, row, before[0], (f"from event `{event['id']}`", "given"))
                        )
                    pending.append((table, at, (row, event["id"])))
        return pending

    @staticmethod
    def note(pending: list[tuple[dict, tuple, tuple]]) -> None:
        """Note what a recorded event gave (from :meth:`event`)."""
        for table, at, entry in pending:
            table.setdefault(at, entry)

    def _built(self, r: int) -> Index:
        """The index of a relation's facts so far: its events' and the host's."""
        spec = self.specs[r]
        session = self.session
        index: Index = [{} for _ in spec.keys]
        for position, e in enumerate(session.order):
            for rows in event_facts(session.events[e], position, (), {spec.name: r}).values():
                for key, table in zip(spec.keys, index, strict=True):
                    for row in rows:
                        table.setdefault(tuple(row[i] for i in key), (row, e))
        for given, rows in session.given:
            if given == r:
                for row in [(v,) for v in rows] if r in self.unary else rows:
                    for key, table in zip(spec.keys, index, strict=True):
                        table.setdefault(tuple(row[i] for i in key), (tuple(row), None))
        return index
