"""What replaying part of an archive found, in a form any two parts combine into one
(:meth:`Tally.merge`), whatever order they finish in: counts add up, and the lists keep the
first entries by their place in the archive (file, line, decision), so that a report is the
same for every engine and number of workers.

A decision *differs* between two policies when its verdict or the set of rules behind it does;
a difference is counted under each rule that only one of the two decisions names (``(none)``
when both name the same rules: an errored decision, say), with its tool and the verdicts
``old → new``.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

EXAMPLES = 5  # example decisions kept per group of differences
LISTED = 1000  # failed sessions and unreadable lines listed (all are counted)
NONE = "(none)"

Place = tuple[int, int, int]  # (file in the archive, line, decision in the session)


@dataclass
class Group:
    """Differing decisions of one (rule, tool, old verdict, new verdict)."""

    decisions: int = 0
    sessions: int = 0
    examples: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Tally:
    """Counts and first entries of a replay (an accumulator: engines fill one per shard and
    merge them)."""

    sessions: int = 0
    decisions: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    rules: dict[str, Counter[str]] = field(default_factory=dict)
    tools: dict[str, Counter[str]] = field(default_factory=dict)
    failed: int = 0
    failures: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)
    unreadable: int = 0
    unreadables: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)
    shards_failed: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)
    differing: int = 0
    differences: int = 0
    groups: dict[tuple[str, str, str, str], Group] = field(default_factory=dict)
    differing_tools: Counter[str] = field(default_factory=Counter)  # tool -> sessions it differs in
    listing: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)  # with `each`

    # ------------------------------------------------------------------------ filling

    def session(
        self,
        place: Place,
        where: dict[str, Any],
        replayed: dict[str, Any],
        old: dict[str, Any] | None = None,
        each: bool = False,
    ) -> None:
        """A replayed session (``replay_session``'s answer), and the same session replayed by the
        older policy (``old``); ``where``: its file, line and name."""
        self.sessions += 1
        errored = False
        for decision in replayed["decisions"]:
            self.decisions += 1
            verdict = decision["verdict"]
            self.verdicts[verdict] += 1
            self.tools.setdefault(str(decision["tool"]), Counter())[verdict] += 1
            for reason in decision["reasons"]:
                self.rules.setdefault(reason["rule"], Counter())[verdict] += 1
            errored = errored or decision["errored"]
        if replayed["problems"] or errored:
            self.failed += 1
            reasons = list(replayed["problems"]) or sorted(
                {
                    r["message"] or r["rule"]
                    for d in replayed["decisions"]
                    if d["errored"]
                    for r in d["reasons"]
                }
            )
            _keep(self.failures, (place, {**where, "problems": reasons}), LISTED)
        if old is not None:
            self._compare(place, where, old["decisions"], replayed["decisions"])
        if each:
            self.listing.append((place, {**where, **replayed}))

    def _compare(
        self, place: Place, where: dict[str, Any], old: list[dict[str, Any]], new: list[dict[str, Any]]
    ) -> None:
        seen: set[tuple[str, str, str, str]] = set()
        tools: set[str] = set()
        for n in range(max(len(old), len(new))):
            before = old[n] if n < len(old) else None
            after = new[n] if n < len(new) else None
            if _outcome(before) == _outcome(after):
                continue
            self.differences += 1
            rules = _rules(before) ^ _rules(after)
            tool = str((after or before or {}).get("tool"))
            example = {**where, "event": (after or before or {}).get("event")}
            tools.add(tool)
            for rule in sorted(rules) or [NONE]:
                key = (rule, tool, _verdict(before), _verdict(after))
                group = self.groups.setdefault(key, Group())
                group.decisions += 1
                if key not in seen:
                    group.sessions += 1
                    seen.add(key)
                _keep(group.examples, ((place[0], place[1], n), example), EXAMPLES)
        if seen:
            self.differing += 1
        self.differing_tools.update(tools)

    def unreadable_line(self, place: Place, path: str, message: str, column: int | None = None) -> None:
        self.unreadable += 1
        entry: dict[str, Any] = {"source": path, "line": place[1], "message": message}
        if column is not None:
            entry["column"] = column
        _keep(self.unreadables, (place, entry), LISTED)

    def shard_failed(self, place: Place, path: str, message: str) -> None:
        self.shards_failed.append((place, {"source": path, "line": place[1], "message": message}))

    # ------------------------------------------------------------------------ combining

    def merge(self, other: Tally) -> None:
        """Add another part's tally to this one."""
        self.sessions += other.sessions
        self.decisions += other.decisions
        self.verdicts.update(other.verdicts)
        for mine, theirs in ((self.rules, other.rules), (self.tools, other.tools)):
            for name, counts in theirs.items():
                mine.setdefault(name, Counter()).update(counts)
        self.failed += other.failed
        self.failures = _first(self.failures, other.failures, LISTED)
        self.unreadable += other.unreadable
        self.unreadables = _first(self.unreadables, other.unreadables, LISTED)
        self.shards_failed = sorted(self.shards_failed + other.shards_failed, key=_place)
        self.differing += other.differing
        self.differences += other.differences
        self.differing_tools.update(other.differing_tools)
        for key, group in other.groups.items():
            mine_group = self.groups.setdefault(key, Group())
            mine_group.decisions += group.decisions
            mine_group.sessions += group.sessions
            mine_group.examples = _first(mine_group.examples, group.examples, EXAMPLES)
        self.listing = sorted(self.listing + other.listing, key=_place)


def _outcome(decision: dict[str, Any] | None) -> tuple[str, frozenset[str]] | None:
    return None if decision is None else (decision["verdict"], frozenset(_rules(decision)))


def _rules(decision: dict[str, Any] | None) -> set[str]:
    return set() if decision is None else {r["rule"] for r in decision["reasons"]}


def _verdict(decision: dict[str, Any] | None) -> str:
    return "(missing)" if decision is None else str(decision["verdict"])


def _place(entry: tuple[Place, dict[str, Any]]) -> Place:
    return entry[0]


def _keep(kept: list[tuple[Place, dict[str, Any]]], entry: tuple[Place, dict[str, Any]], limit: int) -> None:
    """Add an entry to a list of the first ``limit`` entries by place (kept sorted)."""
    if len(kept) < limit or entry[0] < kept[-1][0]:
        bisect.insort(kept, entry, key=_place)
        del kept[limit:]


def _first(
    a: list[tuple[Place, dict[str, Any]]], b: list[tuple[Place, dict[str, Any]]], limit: int
) -> list[tuple[Place, dict[str, Any]]]:
    return list(heapq.merge(a, b, key=_place))[:limit]
