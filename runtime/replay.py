"""Replaying recorded sessions through a monitor: every tool call is decided where it was made.

A trace is a JSON Lines file: one session per line, an object with an ``events`` list (event
records as the monitor takes them) and optionally ``session``, ``principal``, ``roles`` and
``facts`` (domain facts added before the first event). Other fields are kept out of the way,
so recorded benchmark runs replay as they are.

Decisions have the three verdicts (allow, deny, escalate); no approver is asked. A trace is a
trusted recording: an event of kind ``approval`` or labelled ``approval`` is recorded as the
host's approval (:meth:`~.session.Session.record_approval`, which the approvals library reads,
its approvers from its ``approved-by:BY`` labels), and an ``approval`` event as
:meth:`~.session.Session.approve` records it is an approval of its call again, valid from where
it is recorded for the monitor's ``approval_ttl``, so the escalated call it approved is allowed
once when it is decided again, as it was when recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policyc.compiler.reading import Cursor, FormatError

from .approvals import APPROVAL_KIND, Approval, approval_of_event
from .session import Monitor, Session
from .trust import is_approval
from .verdict import EventRefused


class TraceError(ValueError):
    """A trace line that is not a session; the message is the
    :class:`~policyc.compiler.reading.FormatError`'s: ``file:line: field: problem``."""


def steps(monitor: Monitor, record: dict[str, Any], session_id: str) -> Iterator[tuple[Session, Any, Any]]:
    """A recorded session replayed through a fresh monitor session, step by step: the session
    as it starts (no event), then after each event, with the decision of each tool call,
    made where it was made (and again after an approval of it)."""
    session = monitor.session(session_id, principal=record.get("principal"), roles=record.get("roles") or ())
    if record.get("facts"):
        session.add_facts(record["facts"])
    yield session, None, None
    for event in record["events"]:
        if isinstance(event, dict) and event.get("kind") == "tool_call":
            yield session, event, session.authorize(event)
        else:
            try:
                if isinstance(event, dict) and is_approval(event):  # a trusted recording's
                    session.record_approval(event)
                else:
                    session.record(event)
            except EventRefused:  # noted in session.refusals: the replay reports it
                yield session, event, None
                continue
            approval = _approval(monitor, session, event)
            yield session, event, None
            call = None if approval is None else session.events.get(approval.call)
            if approval is not None and call is not None and call.get("kind") == "tool_call":
                yield session, call, session.decide(approval.call)  # decided again, approved


def _approval(monitor: Monitor, session: Session, event: Any) -> Approval | None:
    """The approval a recorded ``approval`` event holds, kept by the session (None if none)."""
    if not isinstance(event, dict) or event.get("kind") != APPROVAL_KIND:
        return None
    identifier = event.get("id")
    if not isinstance(identifier, str) or identifier not in session.events:  # not recorded: malformed
        return None
    approval = approval_of_event(event, session.id, monitor.approval_clock() + monitor.approval_ttl)
    if approval is not None:
        session.approvals.add(approval)
    return approval


def replay_session(monitor: Monitor, record: dict[str, Any], name: str) -> dict[str, Any]:
    """A session's decisions, and its problems: the events it refused (malformed, or past its
    limit) and what made it fail closed (malformed facts), which a session with no tool call after
    them would otherwise never show."""
    decisions = []
    session_id = str(record.get("session", name))
    session = None
    for current, event, decision in steps(monitor, record, session_id):
        session = current
        if decision is not None:
            decisions.append({"event": event.get("id"), "tool": event.get("tool"), **decision.to_json()})
    problems = (
        []
        if session is None
        else list(dict.fromkeys(e.message for e in (*session.sticky, *session.refusals)))
    )
    return {"session": session_id, "decisions": decisions, "problems": problems}


def read_sessions(path: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The sessions of a trace file: each one's name, line and record (:class:`TraceError`
    for a line that is not a session or a file that is not UTF-8, ``OSError`` if unreadable:
    not a regular file, or larger than :data:`~policyc.compiler.files.DATA_LIMIT`)."""
    from policyc.compiler.files import read_bytes

    from .documents import decode, records

    data = read_bytes(path)
    try:
        for number, at in records(decode(data, path), path):
            yield _session(at, number), number, at.value
    except FormatError as error:
        raise TraceError(str(error)) from None


def session_line(text: str, file: str, line: int) -> tuple[str, dict[str, Any]]:
    """One line of a trace: the session's name and record (:class:`TraceError` at the line
    when it is not JSON or not a session)."""
    from .documents import record

    try:
        at = record(text, file, line)
        return _session(at, line), at.value
    except FormatError as error:
        raise TraceError(str(error)) from None


def _session(at: Cursor, number: int) -> str:
    """The name of a session (its `session`, or the AgentDojo task it ran, or its line)."""
    if not isinstance(at.value, dict):
        raise at.fail("a session is an object with an `events` list")
    at["events"].list()
    record = at.value
    name = (
        record.get("session")
        or "/".join(str(record[k]) for k in ("suite", "user_task", "injection_task") if record.get(k))
        or f"line {number}"
    )
    return str(name)


def replay_file(policy: Any, path: str, **options: Any) -> list[dict[str, Any]]:
    """Every session of a trace file replayed by one monitor (``options``: the monitor's)."""
    monitor = Monitor(policy, **options)
    return [replay_session(monitor, record, name) for name, _, record in read_sessions(path)]
