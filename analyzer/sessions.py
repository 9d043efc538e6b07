"""An execution the analyzer found, as a session a monitor can replay, and its replay.

A witness over the event vocabulary is a database: ``ToolCall``, ``ToolArg``, ``ToolResult``,
``Message``, ``Text``, ``DependsOn``, ... facts. :func:`to_session` writes it as the event
records a host would have recorded (docs/events.md): one event per id, in an order where what
an event depends on comes first, each with explicit ``deps``, and the decided action last (what
depends on the action happens after the decision and is left out). The other relations become
the session's domain facts. The result is a ``policyc replay`` record; :func:`replayed` gives
a monitor's decision on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from policyc.stdlib import events as vocabulary

from .replay import table_function

# the relations a monitor session fills from its events, its action and its principal
EVENT_RELATIONS = (*vocabulary.RELATIONS, "Candidate", "Principal", "HasRole")
MESSAGE_KINDS = {role: kind for kind, role in vocabulary.MESSAGE_KINDS.items()}  # role -> event kind


def to_session(
    facts: dict[str, list[tuple]],
    action: Any,
    name: str,
    uses_events: bool,
    numbers: list[tuple] | tuple = (),
) -> dict[str, Any]:
    """A database of the event vocabulary as a session of events, the decided call last; other
    relations become the session's domain facts. ``numbers`` are the ``(call, key, number)``
    tool arguments that are JSON numbers (their ``ToolArg`` fact holds the number's text)."""
    domain = {
        rel: [list(row) for row in rows]
        for rel, rows in sorted(facts.items())
        if not uses_events or rel not in EVENT_RELATIONS
    }
    record: dict[str, Any] = {"session": name}
    if not uses_events:
        record["facts"] = domain
        record["events"] = []
        record["action"] = action
        return record
    rows = {rel: facts.get(rel, []) for rel in EVENT_RELATIONS}
    ids: list[Any] = []
    positions = {
        "Event": (0,), "Position": (0,), "DependsOn": (0, 1), "Text": (0,), "Agent": (0,), "Label": (0,),
        "Message": (0,), "Action": (0,), "ToolCall": (0,), "ToolArg": (0,), "ToolResult": (0, 1), "Candidate": (0,),
    }  # fmt: skip
    for rel, columns in positions.items():
        for row in rows[rel]:
            for column in columns:
                if row[column] not in ids:
                    ids.append(row[column])
    if action is not None and action not in ids:
        ids.append(action)
    events: dict[Any, dict[str, Any]] = {e: {"id": str(e), "kind": "event"} for e in ids}
    for e, kind in rows["Event"]:
        events[e]["kind"] = kind
    for e, role in rows["Message"]:
        if role in MESSAGE_KINDS:
            events[e]["kind"] = MESSAGE_KINDS[role]
        else:
            events[e]["kind"], events[e]["role"] = "message", role
    for r, call, tool in rows["ToolResult"]:
        events[r].update(kind="tool_result", of=str(call), tool=tool)
    for a, tool in rows["ToolCall"]:
        events[a].update(kind="tool_call", tool=tool)
    for a in [a for (a,) in rows["Action"]] + [a for (a,) in rows["Candidate"]]:
        if "tool" not in events[a]:
            events[a].update(kind="tool_call", tool="tool")
    for e, text in rows["Text"]:
        events[e]["text"] = text
    for e, agent in rows["Agent"]:
        events[e]["agent"] = agent
    for e, label in rows["Label"]:
        events[e].setdefault("labels", []).append(label)
    typed = {(a, key): n for a, key, n in numbers}
    for a, key, value in rows["ToolArg"]:
        if events[a]["kind"] == "tool_call":
            events[a].setdefault("args", {})[key] = typed.get((a, key), value)
    for event in events.values():
        if event["kind"] == "tool_call" and "tool" not in event:
            event["tool"] = "tool"
    order = _order(ids, rows, action)
    placed: set[Any] = set()
    listed = []
    depends = {e: [d for (x, d) in rows["DependsOn"] if x == e] for e in ids}
    for e in order:
        event = events[e]
        event["deps"] = [str(d) for d in depends[e] if d in placed]
        if event.get("of") is not None and _key(event["of"], ids) not in placed:
            del event["of"]
        placed.add(e)
        listed.append(event)
    record["principal"] = rows["Principal"][0][0] if rows["Principal"] else None
    record["roles"] = [r for (r,) in rows["HasRole"]]
    record["facts"] = domain
    record["events"] = listed
    record["action"] = str(action) if action is not None else None
    return record


def _key(text: str, ids: list[Any]) -> Any:
    return next((e for e in ids if str(e) == text), text)


def _order(ids: list[Any], rows: dict[str, list[tuple]], action: Any) -> list[Any]:
    """Events in an order where what an event depends on comes first, the action last (and
    what depends on the action, which happens after the decision, left out)."""
    position = {e: n for e, n in rows["Position"]}
    before: dict[Any, set[Any]] = {e: set() for e in ids}
    for e, d in rows["DependsOn"]:
        if e != d:
            before[e].add(d)
    for r, call, _ in rows["ToolResult"]:
        if r != call:
            before[r].add(call)
    after_action: set[Any] = set()
    if action is not None:
        changed = True
        while changed:
            changed = False
            for e in ids:
                if (
                    e not in after_action
                    and e != action
                    and (action in before[e] or before[e] & after_action)
                ):
                    after_action.add(e)
                    changed = True
    remaining = [e for e in ids if e != action and e not in after_action]
    order: list[Any] = []
    done: set[Any] = set()

    def rank(e: Any) -> tuple:
        return (position.get(e, 1 << 30), _natural(str(e)))

    while remaining:
        ready = [e for e in remaining if before[e] <= done | after_action | {action}]
        ready = [e for e in ready if not (before[e] & ({action} | after_action))] or ready
        pick = min(ready or remaining, key=rank)
        order.append(pick)
        done.add(pick)
        remaining.remove(pick)
    if action is not None:
        order.append(action)
    return order


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def replayed(policy: Any, record: dict[str, Any], action: Any, uses_events: bool) -> Any:
    """The decision on ``action`` of a monitor that replays a session record (:func:`to_session`):
    its principal, roles and domain facts, then its events, the action's own recorded by
    ``authorize`` when it comes last; without the event vocabulary, an evaluation of its facts."""
    if not uses_events:
        return policy.evaluate(record.get("facts") or {}).decide(action)
    from policyc.runtime.session import Monitor

    session = Monitor(policy).session(
        str(record["session"]), principal=record.get("principal"), roles=record.get("roles") or ()
    )
    if record.get("facts"):
        session.add_facts(record["facts"])
    events = record["events"]
    last = events[-1] if events else None
    if last is not None and last.get("id") == str(action) and last.get("kind") == "tool_call":
        for event in events[:-1]:
            session.record(event)
        return session.authorize(last)
    for event in events:
        session.record(event)
    return session.decide(action)


def session_tables(
    functors: Iterable[tuple[str, bool]], tables: dict[str, list[list[Any]]]
) -> dict[str, Any]:
    """Implementations answering from the search's tables, for every functor the policy declares
    (``(name, whether it is a predicate)``) that is neither a builtin nor answered by a session
    (no entry: no value)."""
    from policyc.stdlib.builtins import BUILTINS
    from policyc.stdlib.events import SESSION_FUNCTORS

    found: dict[str, Any] = {}
    for name, predicate in functors:
        if name in BUILTINS or name in SESSION_FUNCTORS:
            continue
        rows = tables.get(name, [])  # a predicate's rows as shown end in `True`
        found[name] = table_function([row[:-1] for row in rows] if predicate else rows, predicate)
    return found
