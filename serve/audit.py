"""The service's audit log, kept in its database: the runtime's audit records (docs/verdicts.md,
"Audit log") in the table ``audit``, one row per record, chained and checkpointed as the JSON-lines
log is, so that ``policyc audit export DB`` writes a file ``policyc audit verify`` checks.

The monitors of whichever process decides (the server, or the worker holding the session) hand
their records to a :class:`DatabaseAudit`, which keeps them until the server commits what they
record: the records of a request are written in the transaction that commits its events or its
decision (:func:`write`), so the log holds a decision exactly when the database does, and the
chain stays whole however processes interleave. Replaying a session (when the service starts, a
worker restarts, or a decision is explained) records nothing: what is replayed is in the log
already. A monitor starting writes a ``header``; one that follows records not closed by a final
checkpoint (another process's monitor, or a service that was killed) is preceded by one, so the
log reads as segments, each closed.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from policyc.runtime.audit import (
    DEFAULT_CHECKPOINT_EVERY,
    AuditError,
    AuditLog,
    canonical,
    jsonable,
    record_hash,
)


class DatabaseAudit(AuditLog):
    """An :class:`~policyc.runtime.audit.AuditLog` that keeps the records its monitors append
    until :meth:`take` hands them to the commit that writes them. ``owner``: the server's, which
    closes the log's segment in the database at ``db`` when the service stops."""

    def __init__(
        self,
        db: str,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        redact: Iterable[str] = (),
        owner: bool = False,
    ) -> None:
        super().__init__(f"{db}#audit", None, checkpoint_every, redact)
        self.db_path = db
        self.owner = owner
        self.muted = 0  # replays in progress: nothing is recorded
        self.guard = threading.Lock()
        self.pending: list[dict[str, Any]] = []

    @contextmanager
    def quiet(self) -> Any:
        """Nothing is recorded inside (a replay)."""
        with self.guard:
            self.muted += 1
        try:
            yield
        finally:
            with self.guard:
                self.muted -= 1

    def open(self) -> None:
        """Nothing to open: records reach the database with the commit that writes them."""

    def append(self, record: Mapping[str, Any]) -> None:
        with self.guard:
            if not self.muted:
                self.pending.append(dict(record))

    def drop(self) -> None:
        """Forget the records of an operation that failed (nothing of it is committed); a
        monitor's header stays, to be written with the next commit."""
        with self.guard:
            self.pending = [r for r in self.pending if r.get("type") == "header"]

    def take(self) -> list[dict[str, Any]]:
        """The records appended since the last call (to be written with their commit)."""
        with self.guard:
            taken, self.pending = self.pending, []
        return taken

    def checkpoint(self) -> None:
        self.append({"type": "checkpoint", "final": False})

    def close(self) -> None:
        """The owner closes the last segment (an empty log stays empty)."""
        with self.guard:
            if self.closed:
                return
            self.closed = True
        if not self.owner:
            return
        connection = sqlite3.connect(self.db_path, isolation_level=None, timeout=30)
        try:
            connection.execute("BEGIN IMMEDIATE")
            write(connection, [{"type": "checkpoint", "final": True}], self.checkpoint_every)
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            raise AuditError(f"cannot close the audit log in `{self.db_path}`: {error}") from None
        finally:
            connection.close()


def write(
    connection: sqlite3.Connection,
    records: Sequence[Mapping[str, Any]],
    every: int = DEFAULT_CHECKPOINT_EVERY,
) -> None:
    """Append records to the audit table, inside the caller's open transaction: each chained to
    the one before, a checkpoint after every ``every`` records, a closing checkpoint before a
    header that follows an open segment (a closing checkpoint with nothing to close is left out)."""
    if not records:
        return
    last = connection.execute(
        "SELECT seq, line, since, final FROM audit ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    state = (
        (0, "0" * 64, 0, True)
        if last is None
        else (last[0] + 1, hashlib.sha256(bytes(last[1])).hexdigest(), last[2], bool(last[3]))
    )
    for record in records:
        kind, final = record.get("type"), bool(record.get("final"))
        if kind == "checkpoint" and final and state[3]:
            continue  # nothing to close: an empty log, or a closed segment
        if kind == "header" and not state[3]:
            state = _insert(connection, {"type": "checkpoint", "final": True}, state, seal=True)
        state = _insert(connection, dict(record), state, seal=kind == "checkpoint")
        if kind != "checkpoint" and state[2] >= every:
            state = _insert(connection, {"type": "checkpoint", "final": False}, state, seal=True)


def _insert(
    connection: sqlite3.Connection, record: dict[str, Any], state: tuple[int, str, int, bool], seal: bool
) -> tuple[int, str, int, bool]:
    """Insert one record after ``state`` (next seq, previous hash, records since the last
    checkpoint, whether the last record closed its segment); the state after it."""
    seq, prev, since, _ = state
    full = {**record, "seq": seq, "prev": prev, "time": round(time.time(), 6)}
    if seal:
        full["records"] = seq
        full["hash"] = record_hash(full)
    line = canonical(jsonable(full))
    since = 0 if seal else since + 1
    final = bool(seal and record.get("final"))
    connection.execute("INSERT INTO audit VALUES (?, ?, ?, ?)", (seq, line, since, int(final)))
    return seq + 1, hashlib.sha256(line).hexdigest(), since, final


def export(db: str) -> bytes:
    """The audit log of the database at ``db`` as the JSON-lines file ``policyc audit verify``
    reads (``sqlite3.Error`` if it cannot be read)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT line FROM audit ORDER BY seq").fetchall()
    finally:
        connection.close()
    return b"".join(bytes(line) + b"\n" for (line,) in rows)
