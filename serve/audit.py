"""The service's audit log, kept in its database: the runtime's audit records (docs/verdicts.md,
"Audit log") in the table ``audit``, one row per record, chained and checkpointed as the JSON-lines
log is, so that ``policyc audit export DB`` writes a file ``policyc audit verify`` checks.

The monitors of whichever process decides (the server, or the worker holding the session) hand
their records to a :class:`DatabaseAudit`, which keeps them until the server commits what they
record: the records of a request are written in the transaction that commits its events or its
decision (:func:`write`), so the log holds a decision exactly when the database does, and the
chain stays whole however processes interleave. Every record of a session names its principal,
and every decision record the id the service answered it with (``decision``), which is how
:func:`differences` holds the ``decisions`` and ``answers`` tables against the log. Replaying a
session (when the service starts, a worker restarts, or a decision is explained) records
nothing: what is replayed is in the log already. A monitor starting writes a ``header``; one
that follows records not closed by a final checkpoint (another process's monitor, or a service
that was killed) is preceded by one, so the log reads as segments, each closed.

How the server writes the log (:class:`Chain`): checkpoints every so many records, signed with
the operator's key when given one (``--audit-key``), and the log's head published after the
commit of every checkpoint (``--audit-head``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from policyc.runtime.audit import (
    DEFAULT_CHECKPOINT_EVERY,
    AuditError,
    AuditLog,
    Head,
    HeadEntry,
    canonical_record,
    jsonable,
    sealed,
)

from .failures import StoreFailure


@dataclass(frozen=True)
class Chain:
    """How the server writes its log: a checkpoint after every ``every`` records, each signed
    with ``key`` (a loaded Ed25519 private key, or None), and the head published to
    ``publish`` (a callable taking the head's JSON line, or None) once a checkpoint is
    committed."""

    every: int = DEFAULT_CHECKPOINT_EVERY
    key: Any = None
    publish: Callable[[str], None] | None = None


class DatabaseAudit(AuditLog):
    """An :class:`~policyc.runtime.audit.AuditLog` that keeps the records its monitors append
    until :meth:`take` hands them to the commit that writes them. ``owner``: the server's, which
    closes the log's segment in the database at ``db`` when the service stops."""

    def __init__(
        self,
        db: str,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        redact: Iterable[str] = (),
        owner: Any = None,
    ) -> None:
        super().__init__(f"{db}#audit", None, checkpoint_every, redact)
        self.db_path = db
        self.owner = owner  # the server's Store, which writes the closing checkpoint (None: a worker's)
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
        if self.owner is None:
            return
        try:
            self.owner.record_audit([{"type": "checkpoint", "final": True}])
        except (sqlite3.Error, StoreFailure) as error:
            raise AuditError(f"cannot close the audit log in `{self.db_path}`: {error}") from None


def tagged(
    records: Sequence[Mapping[str, Any]], principal: str, decision: str | None = None
) -> list[dict[str, Any]]:
    """Records as the service writes them: each of a session naming the session's principal
    (session ids are the principal's own), and with ``decision``, each decision record the id
    the service answered it with."""
    out = []
    for record in records:
        if "session" in record:
            record = {**record, "principal": principal}
            if decision is not None and record.get("type") == "decision":
                record["decision"] = decision
        out.append(dict(record))
    return out


class Rows(Protocol):
    """One chain's rows in a database, read and written inside the caller's open transaction
    (:class:`SQLiteRows`; the PostgreSQL store keeps a chain per writer)."""

    def last(self) -> tuple[int, bytes, int, bool] | None:
        """The chain's last row: seq, line, records since its last checkpoint, whether it
        closes its segment (None: the chain is empty)."""
        ...

    def first(self) -> bytes:
        """The line of the chain's first record (seq 0)."""
        ...

    def insert(self, seq: int, line: bytes, since: int, final: bool) -> None: ...


class Tail:
    """The last record of a writer's chain as the open transaction has it, once read or written
    in it (``known``): the writes of a group after the first read it from here, not from the
    database. Its store forgets it when a transaction begins and when a write is taken back."""

    def __init__(self) -> None:
        self.known = False
        self.last: tuple[int, bytes, int, bool] | None = None

    def forget(self) -> None:
        self.known = False
        self.last = None


@dataclass(frozen=True)
class SQLiteRows:
    """The one chain of a SQLite database's ``audit`` table (with ``tail``: its last record
    kept in memory within a transaction, see :class:`Tail`)."""

    connection: sqlite3.Connection
    tail: Tail | None = None

    def last(self) -> tuple[int, bytes, int, bool] | None:
        if self.tail is not None and self.tail.known:
            return self.tail.last
        found = self.connection.execute(
            "SELECT seq, line, since, final FROM audit ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        last = None if found is None else (int(found[0]), bytes(found[1]), int(found[2]), bool(found[3]))
        if self.tail is not None:
            self.tail.known, self.tail.last = True, last
        return last

    def first(self) -> bytes:
        return bytes(self.connection.execute("SELECT line FROM audit WHERE seq = 0").fetchone()[0])

    def insert(self, seq: int, line: bytes, since: int, final: bool) -> None:
        if self.tail is not None:
            self.tail.forget()  # until the row is in
        self.connection.execute("INSERT INTO audit VALUES (?, ?, ?, ?)", (seq, line, since, int(final)))
        if self.tail is not None:
            self.tail.known, self.tail.last = True, (seq, line, since, final)


def write(
    table: sqlite3.Connection | Rows, records: Sequence[Mapping[str, Any]], chain: Chain | None = None
) -> HeadEntry | None:
    """Append records to a chain (a SQLite connection: its ``audit`` table), inside the caller's
    open transaction: each chained to the one before, a checkpoint after every ``chain.every``
    records, a closing checkpoint before a header that follows an open segment (a closing
    checkpoint with nothing to close is left out). The head at the last checkpoint written
    (None: none was), to publish once the transaction is committed."""
    if not records:
        return None
    chain = chain or Chain()
    rows = SQLiteRows(table) if isinstance(table, sqlite3.Connection) else table
    last = rows.last()
    state = (
        (0, "0" * 64, 0, True)
        if last is None
        else (last[0] + 1, hashlib.sha256(bytes(last[1])).hexdigest(), last[2], bool(last[3]))
    )
    checkpoint: tuple[int, str, bool] | None = None

    def insert(record: dict[str, Any], seal: bool) -> tuple[int, str, int, bool]:
        nonlocal checkpoint
        after = _insert(rows, record, state, seal, chain.key)
        if seal:
            checkpoint = (state[0], after[1], after[3])
        return after

    for record in records:
        kind, final = record.get("type"), bool(record.get("final"))
        if kind == "checkpoint" and final and state[3]:
            continue  # nothing to close: an empty log, or a closed segment
        if kind == "header" and not state[3]:
            state = insert({"type": "checkpoint", "final": True}, True)
        state = insert(dict(record), kind == "checkpoint")
        if kind != "checkpoint" and state[2] >= chain.every:
            state = insert({"type": "checkpoint", "final": False}, True)
    if checkpoint is None:
        return None
    return HeadEntry(hashlib.sha256(rows.first()).hexdigest(), *checkpoint)


def _insert(
    rows: Rows,
    record: dict[str, Any],
    state: tuple[int, str, int, bool],
    seal: bool,
    key: Any = None,
) -> tuple[int, str, int, bool]:
    """Insert one record after ``state`` (next seq, previous hash, records since the last
    checkpoint, whether the last record closed its segment); the state after it."""
    seq, prev, since, _ = state
    full = {**record, "seq": seq, "prev": prev, "time": round(time.time(), 6)}
    if seal:
        full = sealed({**full, "records": seq}, key)
    line = canonical_record(jsonable(full))
    since = 0 if seal else since + 1
    final = bool(seal and record.get("final"))
    rows.insert(seq, line, since, final)
    return seq + 1, hashlib.sha256(line).hexdigest(), since, final


def head(connection: sqlite3.Connection) -> Head:
    """The head of the log in the database (no entry while it is empty)."""
    first = connection.execute("SELECT line FROM audit WHERE seq = 0").fetchone()
    last = connection.execute("SELECT seq, line, final FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    if first is None or last is None:
        return Head(())
    return Head(
        (
            HeadEntry(
                hashlib.sha256(bytes(first[0])).hexdigest(),
                int(last[0]),
                hashlib.sha256(bytes(last[1])).hexdigest(),
                bool(last[2]),
            ),
        )
    )


# what `policyc audit export` finds when it holds the database's tables against its log
DIFFERENCES = {
    "decision-not-logged": "a decision of the `decisions` table is not in the audit log",
    "decision-not-stored": "a decision of the audit log is not in the `decisions` table",
    "decision-differs": "a decision of the `decisions` table says otherwise than the log",
    "answer-not-logged": "an answer to an escalated call (the `answers` table) is not in the audit log",
    "answer-not-stored": "an answer to an escalated call in the audit log is not in the `answers` table",
    "answer-differs": "an answer of the `answers` table says otherwise than the log",
}


@dataclass(frozen=True)
class Difference:
    """The first difference between a database's tables and its audit log (a code of
    :data:`DIFFERENCES`, and what it is about)."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


@dataclass(frozen=True)
class Snapshot:
    """What a database holds of its audit log, read in one transaction (so that a service
    writing meanwhile is seen at one commit): the log as JSON lines, and the rows of its
    ``decisions`` (id, principal, session, verdict, body) and ``answers`` (decision, approved,
    approver) tables."""

    log: bytes
    decisions: tuple[tuple[Any, ...], ...]
    answers: tuple[tuple[Any, ...], ...]


def snapshot(db: str) -> Snapshot:
    """The :class:`Snapshot` of the SQLite database at ``db``, opened read-only (a running
    service's too: its committed transactions, up to the moment of the read; ``sqlite3.Error``
    if it cannot be read)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        connection.execute("BEGIN")  # one read transaction: the log and the tables at one commit
        rows = connection.execute("SELECT line FROM audit ORDER BY seq").fetchall()
        stored = connection.execute(
            "SELECT id, principal, session, verdict, body FROM decisions ORDER BY rowid"
        ).fetchall()
        answered = connection.execute(
            "SELECT decision, approved, approver FROM answers ORDER BY rowid"
        ).fetchall()
        connection.execute("COMMIT")
    finally:
        connection.close()
    log = b"".join(bytes(line) + b"\n" for (line,) in rows)
    return Snapshot(log, tuple(map(tuple, stored)), tuple(map(tuple, answered)))


def differences(db: str, log: bytes) -> Difference | None:
    """Hold the ``decisions`` and ``answers`` tables of the database at ``db`` against its
    exported log (:func:`compare`); ``sqlite3.Error`` if the database cannot be read."""
    taken = snapshot(db)
    return compare(log, taken.decisions, taken.answers)


def compare(
    log: bytes, stored: Iterable[Sequence[Any]], answered: Iterable[Sequence[Any]]
) -> Difference | None:
    """Hold a database's decisions (rows of id, principal, session, verdict, body) and answers
    (decision, approved, approver) against its exported log: every decision and every answer
    stored is logged, saying the same (verdict, whether allowed, action, rules; approved or not,
    by whom), and nothing is logged that is not stored. The first difference (None: there is
    none)."""
    records = list(_log_records(log))
    logged: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {}
    for read in records:
        kind = read.get("type")
        if kind == "decision":
            named = read.get("decision")
            logged.setdefault(named if isinstance(named, str) else f"<no id, seq {read.get('seq')}>", read)
        elif kind == "outcome" and read.get("decision") is not None:
            answers.setdefault(str(read["decision"]), read)
    ids = set()
    for decision, principal, session, verdict, body in stored:
        ids.add(decision)
        where = f"decision `{decision}` (principal {_shown(principal)}, session {_shown(session)})"
        record = logged.get(decision)
        if record is None:
            return Difference("decision-not-logged", f"{where} is in the `decisions` table, not in the log")
        try:
            answer: dict[str, Any] = json.loads(body)
        except ValueError:
            answer = {}
        rules = [r.get("rule") for r in answer.get("reasons", ()) if isinstance(r, dict)]
        table = {
            "principal": principal,
            "session": session,
            "verdict": verdict,
            "verdict of the answer": answer.get("verdict"),
            "allowed": answer.get("allowed"),
            "action": answer.get("action"),
            "rules": rules,
        }
        said = {**{k: record.get(k) for k in table}, "verdict of the answer": record.get("verdict")}
        differs = _first_difference("decision-differs", where, table, said, record)
        if differs is not None:
            return differs
    for name, record in logged.items():
        if name not in ids:
            return Difference(
                "decision-not-stored",
                f"the decision at line {record.get('seq', -1) + 1} of the log (`{name}`, session "
                f"{_shown(record.get('session'))}) is not in the `decisions` table",
            )
    seen = set()
    for decision, approved, approver in answered:
        seen.add(decision)
        record = answers.get(decision)
        where = f"the answer to `{decision}`"
        if record is None:
            return Difference("answer-not-logged", f"{where} is in the `answers` table, not in the log")
        table = {"outcome": "approved" if approved else "refused", "approver": approver}
        differs = _first_difference("answer-differs", where, table, {k: record.get(k) for k in table}, record)
        if differs is not None:
            return differs
    for name, record in answers.items():
        if name not in seen:
            return Difference(
                "answer-not-stored",
                f"the answer at line {record.get('seq', -1) + 1} of the log (to `{name}`) is not in "
                "the `answers` table",
            )
    return None


def _first_difference(
    code: str, where: str, table: dict[str, Any], said: dict[str, Any], record: dict[str, Any]
) -> Difference | None:
    """The first value the table holds that the log's ``record`` says otherwise (``said``)."""
    for name, value in table.items():
        if value != said[name]:
            return Difference(
                code,
                f"{where}: the table says {name} {_shown(value)}, the log (line "
                f"{record.get('seq', -1) + 1}) {_shown(said[name])}",
            )
    return None


def _log_records(data: bytes) -> Iterator[dict[str, Any]]:
    for line in data.split(b"\n"):
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # `policyc audit verify` says what is wrong with it
        if isinstance(record, dict):
            yield record


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)


def export(db: str) -> bytes:
    """The audit log of the database at ``db`` as the JSON-lines file ``policyc audit verify``
    reads (``sqlite3.Error`` if it cannot be read)."""
    return snapshot(db).log
