"""The service's audit log, kept in its database: the runtime's audit records (docs/verdicts.md,
"Audit log") in the table ``audit``, one row per record, chained and checkpointed as the JSON-lines
log is, so that ``policyc audit export DB`` writes a file ``policyc audit verify`` checks.

Whichever process decides writes the records (the server, or the worker holding the session): a
record and its link to the one before are one transaction, so the chain stays whole however the
processes interleave. Replaying a session (when the service starts, a worker restarts, or a
decision is explained) writes nothing: the records of what is replayed are in the log already. A
monitor starting writes a ``header``; one that follows records not closed by a final checkpoint
(another process's monitor, or a service that was killed) is preceded by one, so the log reads as
segments, each closed. A decision is logged when it is made; one whose commit then fails (the
service answers 503 and gives no decision) stays in the log, marked as made.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
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

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, line BLOB NOT NULL, since INTEGER NOT NULL, final INTEGER NOT NULL
);
"""


class DatabaseAudit(AuditLog):
    """An :class:`~policyc.runtime.audit.AuditLog` whose records are rows of the database at
    ``db`` (its own connection: one per process). ``owner``: the server's, which writes the
    closing checkpoint when the service stops; ``sync``: as the service's ``--sync``."""

    def __init__(
        self,
        db: str,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        redact: Iterable[str] = (),
        owner: bool = False,
        sync: str = "normal",
    ) -> None:
        super().__init__(f"{db}#audit", None, checkpoint_every, redact)
        self.db_path = db
        self.owner = owner
        self.muted = 0  # replays in progress: nothing is logged
        self.guard = threading.Lock()
        self.connection = sqlite3.connect(db, isolation_level=None, check_same_thread=False, timeout=30)
        self.connection.execute("PRAGMA busy_timeout=30000")
        self.connection.execute("PRAGMA journal_mode=WAL")
        # as the service's own commits: `normal` outlives the process, `full` a power cut too
        self.connection.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
        self.connection.executescript(SCHEMA)

    @contextmanager
    def quiet(self) -> Any:
        """Nothing is logged inside (a replay)."""
        with self.guard:
            self.muted += 1
        try:
            yield
        finally:
            with self.guard:
                self.muted -= 1

    def open(self) -> None:
        pass

    def append(self, record: Mapping[str, Any]) -> None:
        if self.muted:
            return
        self._rows(dict(record), seal=False)

    def checkpoint(self) -> None:
        self._rows({"type": "checkpoint", "final": False}, seal=True)

    def close(self) -> None:
        with self.guard:
            if self.closed:
                return
            self.closed = True
        try:
            if self.owner:  # a segment left open is closed (an empty log stays empty)
                self._rows({"type": "checkpoint", "final": True}, seal=True)
        finally:
            self.connection.close()

    def _rows(self, record: dict[str, Any], seal: bool) -> None:
        """Append a record (and a checkpoint when one is due, or a closing one before a header
        that follows an open segment), in one transaction."""
        db = self.connection
        try:
            with self.guard:
                db.execute("BEGIN IMMEDIATE")
                try:
                    last = db.execute(
                        "SELECT seq, line, since, final FROM audit ORDER BY seq DESC LIMIT 1"
                    ).fetchone()
                    seq, prev, since, final = (
                        (0, "0" * 64, 0, True)
                        if last is None
                        else (last[0] + 1, hashlib.sha256(bytes(last[1])).hexdigest(), last[2], bool(last[3]))
                    )
                    if record.get("type") == "checkpoint" and record.get("final") and final:
                        db.execute("ROLLBACK")  # nothing to close: an empty log, or a closed segment
                        return
                    if record.get("type") == "header" and not final:
                        seq, prev, since = self._insert(
                            {"type": "checkpoint", "final": True}, seq, prev, since, True
                        )
                    seq, prev, since = self._insert(record, seq, prev, since, seal)
                    if not seal and since >= self.checkpoint_every:
                        self._insert({"type": "checkpoint", "final": False}, seq, prev, since, True)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as error:
            raise AuditError(f"cannot write to the audit log in `{self.db_path}`: {error}") from None

    def _insert(
        self, record: dict[str, Any], seq: int, prev: str, since: int, seal: bool
    ) -> tuple[int, str, int]:
        full = {**record, "seq": seq, "prev": prev, "time": round(time.time(), 6)}
        if seal:
            full["records"] = seq
            full["hash"] = record_hash(full)
        line = canonical(jsonable(full))
        final = bool(seal and record.get("final"))
        self.connection.execute(
            "INSERT INTO audit VALUES (?, ?, ?, ?)", (seq, line, 0 if seal else since + 1, int(final))
        )
        return seq + 1, hashlib.sha256(line).hexdigest(), 0 if seal else since + 1


def export(db: str) -> bytes:
    """The audit log of the database at ``db`` as the JSON-lines file ``policyc audit verify``
    reads (``sqlite3.Error`` if it cannot be read)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT line FROM audit ORDER BY seq").fetchall()
    finally:
        connection.close()
    return b"".join(bytes(line) + b"\n" for (line,) in rows)
