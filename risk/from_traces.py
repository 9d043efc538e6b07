"""Calibration records from labelled recorded sessions (``policyc calibrate --from-traces``).

A labelled session is a trace line (as ``policyc replay`` reads it) that says which calls were
the user's and which an attacker's: ``expect_allow`` and ``expect_deny``, lists of
``{"tool": NAME, "args": {...}}`` (what the AgentDojo exporter of examples/agentdojo writes).
Each argument with a role of those calls becomes a record, scored by the detector exactly as a
monitor scores it:

* a user's call is found where it occurs in the session (the first not yet used with that tool
  and those arguments) and scored against the events before it: not violated;
* an attacker's call is scored as a call after the session's last event (the agent has read
  everything, the injected text included): violated.

A session is an episode (its ``episode``, else its name). Sessions without either list are
skipped; a user's call that the session never makes is an error at its file and line. The
archive is read by :func:`policyc.replay.archive.sessions`, as every bulk reader of recorded
sessions reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .declarations import Declarations
from .errors import RiskError
from .records import Record

LABELS = ("expect_allow", "expect_deny")


def records_of(
    record: dict[str, Any], episode: str, declarations: Declarations, detector: Any, where: str
) -> list[Record]:
    """The calibration records of one labelled session (``where``: its file and line)."""
    from .enforce import score_call

    events = [e for e in record.get("events", ()) if isinstance(e, dict)]
    by_id = {e["id"]: e for e in events if isinstance(e.get("id"), str)}
    order = [e["id"] for e in events if isinstance(e.get("id"), str)]
    out: list[Record] = []

    def add(call: dict[str, Any], before: Sequence[str], violated: bool) -> None:
        for scored in score_call(call, by_id, before, declarations, detector):
            if scored.score is None:
                raise RiskError(
                    f"{where}: the detector could not score `{scored.tool}.{scored.field}`: {scored.error}"
                )
            out.append(
                Record(
                    scored.role, round(scored.score, 6), violated, episode, f"{scored.tool}.{scored.field}"
                )
            )

    used: set[str] = set()
    for n, expected in enumerate(_calls(record, "expect_allow", where)):
        position = next(
            (
                i
                for i, e in enumerate(events)
                if e.get("kind") == "tool_call"
                and e.get("id") not in used
                and e.get("tool") == expected["tool"]
                and (e.get("args") or {}) == expected["args"]
            ),
            None,
        )
        if position is None:
            raise RiskError(
                f"{where}: expect_allow[{n}]: the session makes no call of `{expected['tool']}` "
                "with these arguments"
            )
        used.add(events[position]["id"])
        add(events[position], order[: order.index(events[position]["id"])], violated=False)
    for n, expected in enumerate(_calls(record, "expect_deny", where)):
        add({"id": f"attack{n}", "kind": "tool_call", **expected}, order, violated=True)
    return out


def from_traces(paths: Iterable[str], declarations: Declarations, detector: Any) -> tuple[list[Record], int]:
    """The records of every labelled session of an archive, and how many sessions were skipped
    for carrying no labels (:class:`RiskError` for an archive that cannot be read, a session
    whose labels are malformed, or no records at all)."""
    from policyc.replay.archive import sessions
    from policyc.runtime.replay import TraceError

    paths = list(paths)
    records: list[Record] = []
    skipped = 0
    try:
        for name, path, line, record in sessions(paths):
            if not any(label in record for label in LABELS):
                skipped += 1
                continue
            episode = str(record.get("episode") or name)
            records += records_of(record, episode, declarations, detector, f"{path}:{line}")
    except TraceError as error:
        raise RiskError(str(error)) from None
    except OSError as error:
        raise RiskError(f"cannot read `{error.filename}`: {error.strerror or error}", io=True) from None
    if not records:
        raise RiskError(
            f"{', '.join(paths)}: no calibration records (no session has `expect_allow` or "
            "`expect_deny` calls with arguments of a role)"
        )
    return records, skipped


def _calls(record: dict[str, Any], label: str, where: str) -> list[dict[str, Any]]:
    calls = record.get(label, [])
    if not isinstance(calls, list):
        raise RiskError(f'{where}: `{label}` must be a list of calls {{"tool", "args"}}')
    for n, call in enumerate(calls):
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("tool"), str)
            or not isinstance(call.get("args", {}), dict)
        ):
            raise RiskError(f'{where}: {label}[{n}]: expected {{"tool": NAME, "args": {{...}}}}')
    return [{"tool": c["tool"], "args": c.get("args", {})} for c in calls]
