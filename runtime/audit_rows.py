"""The decisions of an audit log as rows of a table: when, which session, which tool, the
verdict, the rules that decided it, and how an escalation ended (``policyc audit show``).

A decision record names its call by the event's id (``action``); the tool is read from that
event's record, earlier in the same session (or, for an escalated call, from its escalation).
An escalated decision's end is the first ``outcome`` record after it for the same session and
call (in a service's log, the one naming the decision's id): ``approved by NAME``, ``refused
by NAME``, ``timed-out``, ``failed``, ``no-approver``; ``pending`` while none follows.

>>> records = [
...     {"type": "event", "session": "s", "event": {"id": "c1", "kind": "tool_call", "tool": "pay"}},
...     {"type": "decision", "session": "s", "action": "c1", "verdict": "escalate", "time": 0,
...      "reasons": [{"rule": "needs-a-person"}]},
...     {"type": "outcome", "session": "s", "action": "c1", "outcome": "approved", "approver": "ops"},
... ]
>>> row = decision_rows(records)[0]
>>> (row.time, row.tool, row.verdict, row.rules, row.outcome)
('1970-01-01 00:00:00', 'pay', 'escalate', ('needs-a-person',), 'approved by ops')
"""

from __future__ import annotations

import json
import time as _time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

COLUMNS = ("time", "session", "tool", "verdict", "rule", "approval")


@dataclass(frozen=True)
class Row:
    """One decision as ``policyc audit show`` prints it (every text made printable)."""

    line: int | None
    time: str
    session: str
    tool: str
    verdict: str
    rules: tuple[str, ...]
    outcome: str
    shadow: bool = False

    def cells(self) -> tuple[str, ...]:
        """The row's cells, in the order of :data:`COLUMNS`."""
        verdict = self.verdict + (" (shadow)" if self.shadow else "")
        return (self.time, self.session, self.tool, verdict, ", ".join(self.rules), self.outcome)


def decision_rows(
    records: Iterable[Mapping[str, Any]], session: str | None = None, verdict: str | None = None
) -> list[Row]:
    """The rows of the decision records (of one session and one verdict when given), in the
    log's order."""
    every = list(records)
    tools: dict[tuple[Any, Any, Any], Any] = {}
    ends: list[tuple[int, Mapping[str, Any]]] = []
    for place, record in enumerate(every):
        kind = record.get("type")
        if kind == "event":
            event = record.get("event")
            if isinstance(event, Mapping) and "tool" in event:
                tools[(record.get("principal"), record.get("session"), event.get("id"))] = event.get("tool")
        elif kind == "outcome":
            ends.append((place, record))
    rows = []
    used: set[int] = set()
    for place, record in enumerate(every):
        if record.get("type") != "decision":
            continue
        if session is not None and record.get("session") != session:
            continue
        if verdict is not None and record.get("verdict") != verdict:
            continue
        key = (
            record.get("principal"),
            record.get("session"),
            record.get("action"),
        )  # a service's sessions are its principals' own
        escalation = record.get("escalation")
        tool = tools.get(key)
        if tool is None and isinstance(escalation, Mapping):
            tool = escalation.get("tool")
        rules = tuple(
            shown(reason.get("rule")) for reason in _dicts(record.get("reasons")) if reason.get("rule")
        )
        rows.append(
            Row(
                record.get("line"),
                when(record.get("time")),
                shown(record.get("session")),
                "" if tool is None else shown(tool),
                shown(record.get("verdict")),
                tuple(dict.fromkeys(rules)),
                _outcome(record, place, ends, used),
                record.get("mode") == "shadow",
            )
        )
    return rows


def _outcome(
    record: Mapping[str, Any], place: int, ends: list[tuple[int, Mapping[str, Any]]], used: set[int]
) -> str:
    """How the decision's escalation ended (or the approval it was decided with)."""
    approval = record.get("approval")
    if isinstance(approval, Mapping) and approval.get("id") is not None:
        return f"with approval {shown(approval.get('id'))}"
    if record.get("verdict") != "escalate":
        return ""
    named = record.get("decision")
    for at, end in ends:
        if at <= place or at in used:
            continue
        if named is not None and end.get("decision") is not None:
            fits = end.get("decision") == named
        else:
            fits = all(end.get(k) == record.get(k) for k in ("principal", "session", "action"))
        if fits:
            used.add(at)
            said = shown(end.get("outcome"))
            approver = end.get("approver")
            return f"{said} by {shown(approver)}" if approver else said
    return "pending"


def when(value: Any) -> str:
    """A record's ``time`` (seconds since the epoch) as UTC ``YYYY-MM-DD HH:MM:SS``."""
    if type(value) not in (int, float) or not 0 <= value < 253402300800:
        return ""
    return _time.strftime("%Y-%m-%d %H:%M:%S", _time.gmtime(value))


def shown(value: Any) -> str:
    """A value of a log as text, every character that is not printable escaped (a log's text
    never writes control characters to a terminal)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode() for c in text
    )


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
