"""What replaying part of an archive found, in a form any two parts combine into one
(:meth:`Tally.merge`), whatever order they finish in: counts add up, and the lists keep the
first entries by their place in the archive (file, line, decision), so that a report is the
same for every engine and number of workers.

A decision *differs* between two policies when its verdict or the set of rules behind it does;
a difference is counted under each rule that only one of the two decisions names (``(none)``
when both name the same rules: an errored decision, say), with its tool and the verdicts
``old → new``. Each session an example is taken from keeps its drill-down (:func:`detail`: its
events and both policies' decisions), and a replay asked for them lists every session whose
decisions differ, with its first differing call.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

EXAMPLES = 5  # example decisions kept per group of differences
LISTED = 1000  # failed sessions and unreadable lines listed (all are counted)
NONE = "(none)"
EVENTS_SHOWN = 200  # events of an example session kept for its drill-down
TEXT_SHOWN = 300  # characters of an event's text or arguments kept for it

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
    # the events and both policies' decisions of each session an example is taken from, by
    # (file, line); and with `differing`, every session whose decisions differ
    details: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    differing_sessions: list[tuple[Place, dict[str, Any]]] = field(default_factory=list)

    # ------------------------------------------------------------------------ filling

    def session(
        self,
        place: Place,
        where: dict[str, Any],
        replayed: dict[str, Any],
        old: dict[str, Any] | None = None,
        each: bool = False,
        events: list[Any] | None = None,
        differing: bool = False,
    ) -> None:
        """A replayed session (``replay_session``'s answer), and the same session replayed by the
        older policy (``old``); ``where``: its file, line and name; ``events``: the session's
        events (kept for the drill-down of a session an example is taken from); ``differing``:
        list the session if its decisions differ."""
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
            self._compare(place, where, old["decisions"], replayed["decisions"], events, differing)
        if each:
            self.listing.append((place, {**where, **replayed}))

    def _compare(
        self,
        place: Place,
        where: dict[str, Any],
        old: list[dict[str, Any]],
        new: list[dict[str, Any]],
        events: list[Any] | None = None,
        differing: bool = False,
    ) -> None:
        seen: set[tuple[str, str, str, str]] = set()
        tools: set[str] = set()
        first: tuple[dict[str, Any] | None, dict[str, Any] | None] | None = None
        count = 0
        kept = False
        for n in range(max(len(old), len(new))):
            before = old[n] if n < len(old) else None
            after = new[n] if n < len(new) else None
            if _outcome(before) == _outcome(after):
                continue
            self.differences += 1
            count += 1
            first = first or (before, after)
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
                kept = _keep(group.examples, ((place[0], place[1], n), example), EXAMPLES) or kept
        if seen:
            self.differing += 1
        self.differing_tools.update(tools)
        if kept and events is not None:
            self.details[(place[0], place[1])] = detail(where, events, old, new)
        if differing and first is not None:
            before, after = first
            call = after or before or {}
            self.differing_sessions.append(
                (
                    place,
                    {
                        **where,
                        "event": call.get("event"),
                        "tool": call.get("tool"),
                        "old": summary(before),
                        "new": summary(after),
                        "decisions": count,
                    },
                )
            )

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
        self.differing_sessions = list(
            heapq.merge(self.differing_sessions, other.differing_sessions, key=_place)
        )
        self.details.update(other.details)
        shown = {(p[0], p[1]) for group in self.groups.values() for p, _ in group.examples}
        self.details = {at: found for at, found in self.details.items() if at in shown}


def summary(decision: dict[str, Any] | None) -> dict[str, Any] | None:
    """A replayed decision as a list of differences shows it: its verdict and reasons (None: the
    policy made no such decision)."""
    if decision is None:
        return None
    return {
        "verdict": decision["verdict"],
        "allowed": decision["allowed"],
        "errored": decision["errored"],
        "reasons": [{"rule": r["rule"], "message": r.get("message")} for r in decision["reasons"]],
    }


def detail(
    where: dict[str, Any], events: list[Any], old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> dict[str, Any]:
    """A session's drill-down: its events (the first :data:`EVENTS_SHOWN`, their texts and
    arguments cut to :data:`TEXT_SHOWN` characters) and each call's decision by both policies."""
    calls = []
    for n in range(max(len(old), len(new))):
        before = old[n] if n < len(old) else None
        after = new[n] if n < len(new) else None
        call = after or before or {}
        calls.append(
            {
                "event": call.get("event"),
                "tool": call.get("tool"),
                "old": summary(before),
                "new": summary(after),
                "differs": _outcome(before) != _outcome(after),
            }
        )
    shown = [_event(event) for event in events[:EVENTS_SHOWN]]
    return {**where, "events": shown, "omitted": max(0, len(events) - EVENTS_SHOWN), "calls": calls}


def _event(event: Any) -> dict[str, Any]:
    """What the drill-down shows of a recorded event (any JSON value: a trace may hold anything)."""
    if not isinstance(event, dict):
        return {
            "id": "",
            "kind": "(not an event)",
            "tool": None,
            "shown": _cut(json.dumps(event)),
            "labels": [],
        }
    if "args" in event:
        shown = json.dumps(event["args"], ensure_ascii=False, sort_keys=True)
    else:
        text = event.get("text")
        shown = (
            text if isinstance(text, str) else "" if text is None else json.dumps(text, ensure_ascii=False)
        )
    labels = event.get("labels")
    return {
        "id": str(event.get("id", "")),
        "kind": str(event.get("kind", "")),
        "tool": None if event.get("tool") is None else str(event.get("tool")),
        "shown": _cut(shown),
        "labels": [str(label) for label in labels] if isinstance(labels, list) else [],
    }


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 1] + "\u2026"


def _outcome(decision: dict[str, Any] | None) -> tuple[str, frozenset[str]] | None:
    return None if decision is None else (decision["verdict"], frozenset(_rules(decision)))


def _rules(decision: dict[str, Any] | None) -> set[str]:
    return set() if decision is None else {r["rule"] for r in decision["reasons"]}


def _verdict(decision: dict[str, Any] | None) -> str:
    return "(missing)" if decision is None else str(decision["verdict"])


def _place(entry: tuple[Place, dict[str, Any]]) -> Place:
    return entry[0]


def _keep(kept: list[tuple[Place, dict[str, Any]]], entry: tuple[Place, dict[str, Any]], limit: int) -> bool:
    """Add an entry to a list of the first ``limit`` entries by place (kept sorted); whether it
    was kept."""
    if len(kept) < limit or entry[0] < kept[-1][0]:
        bisect.insort(kept, entry, key=_place)
        del kept[limit:]
        return True
    return False


def _first(
    a: list[tuple[Place, dict[str, Any]]], b: list[tuple[Place, dict[str, Any]]], limit: int
) -> list[tuple[Place, dict[str, Any]]]:
    return list(heapq.merge(a, b, key=_place))[:limit]
