"""Replaying recorded sessions through a monitor: every tool call is decided where it was made.

A trace is a JSON Lines file: one session per line, an object with an ``events`` list (event
records as the monitor takes them) and optionally ``session``, ``principal``, ``roles`` and
``facts`` (domain facts added before the first event). Other fields are kept out of the way,
so recorded benchmark runs replay as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .session import Monitor


class TraceError(ValueError):
    """A trace line that is not a session; the message gives the line."""


def replay_session(monitor: Monitor, record: dict[str, Any], name: str) -> dict[str, Any]:
    session = monitor.session(
        str(record.get("session", name)), record.get("principal"), record.get("roles") or ()
    )
    if record.get("facts"):
        session.add_facts(record["facts"])
    decisions = []
    for event in record["events"]:
        if isinstance(event, dict) and event.get("kind") == "tool_call":
            decision = session.authorize(event)
            decisions.append(
                {
                    "event": event.get("id"),
                    "tool": event.get("tool"),
                    "allowed": decision.allowed,
                    "errored": decision.errored,
                    "reasons": [r.to_json() for r in decision.reasons],
                }
            )
        else:
            session.record(event)
    return {"session": session.id, "decisions": decisions}


def read_sessions(path: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The sessions of a trace file: each one's name, line and record (:class:`TraceError`
    for a line that is not a session or a file that is not UTF-8, ``OSError`` if unreadable)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: not UTF-8 text (byte {error.start})") from None
    # JSON Lines: only `\n` ends a record (a string may hold U+2028 and the like)
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(f"{path}:{number}: not valid JSON: {error.msg}") from None
        if not isinstance(record, dict) or not isinstance(record.get("events"), list):
            raise TraceError(f"{path}:{number}: a session is an object with an `events` list")
        name = (
            record.get("session")
            or "/".join(str(record[k]) for k in ("suite", "user_task", "injection_task") if record.get(k))
            or f"line {number}"
        )
        yield str(name), number, record


def replay_file(policy: Any, path: str) -> list[dict[str, Any]]:
    monitor = Monitor(policy)
    return [replay_session(monitor, record, name) for name, _, record in read_sessions(path)]
