"""The service's only state: a SQLite database of sessions, their events and the decisions.

Every session is a row (its principal, id, roles and the digest of the policy it runs); every
event a row numbered by its sequence number within the session (``seq``, from 1), with whether
it was recorded or authorized; every decision a row with its verdict and its JSON answer. A
write is committed before the service answers, in WAL mode: an answer means the rows are in the
database file's log, whatever happens to the process afterwards (``kill -9`` included), and on
start the sessions are rebuilt from these rows alone. With ``sync="full"`` every commit also
waits for the disk (``synchronous=FULL``), so an answer outlives a power cut too; by default
(``synchronous=NORMAL``) the log is synced at checkpoints, and a power cut may lose the last
commits (never corrupt the database). The log is copied into the database file by a thread of
its own (:mod:`.checkpoints`), not by the commit that finds it long. A decision and the
candidate it decided are one transaction.

Writes may be grouped (:meth:`Store.group`): the writes of many requests in one transaction, one
that fails taken back alone, committed once. Whoever made a write of a group learns its outcome
only after that commit (see :mod:`.commits`).

The database holds what the sessions were given, argument values of the ``credential`` role
included, in clear (the audit log in it holds their hashes): its file and SQLite's ``-wal`` and
``-shm`` files beside it are made readable and writable by their owner only (0600), whatever
the umask, and an existing one that others could read is made so too (:attr:`Store.widened`
says which were).

>>> import tempfile, os
>>> store = Store(os.path.join(tempfile.mkdtemp(), "monitor.db"))
>>> store.create_session("agent", "s1", ("agent",), "sha256:p")
True
>>> store.create_session("agent", "s1", (), "sha256:p")
False
>>> store.append("agent", "s1", [("record", '{"id":"e1"}')], 0)
1
>>> [(s.session, s.roles) for s in store.sessions()], list(store.events("agent", "s1"))
([('s1', ('agent',))], [(1, 'record', '{"id":"e1"}')])
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from policyc.runtime.audit import Head, HeadEntry

from .audit import Chain, SQLiteRows, Tail, head, tagged, write
from .checkpoints import Checkpointer

Records = Sequence[dict[str, Any]]  # audit records written with a commit (see .audit)

FORMAT = "3"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    principal TEXT NOT NULL, session TEXT NOT NULL, roles TEXT NOT NULL, policy TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (principal, session)
);
CREATE TABLE IF NOT EXISTS events (
    principal TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
    how TEXT NOT NULL CHECK (how IN ('record', 'facts', 'authorize', 'decide', 'approval')), body TEXT NOT NULL,
    PRIMARY KEY (principal, session, seq)
);
CREATE TABLE IF NOT EXISTS decisions (
    id TEXT PRIMARY KEY, principal TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
    verdict TEXT NOT NULL, body TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS policies (
    digest TEXT PRIMARY KEY, origin TEXT NOT NULL, bundle BLOB NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, line BLOB NOT NULL, since INTEGER NOT NULL, final INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS answers (
    decision TEXT PRIMARY KEY REFERENCES decisions (id), approved INTEGER NOT NULL,
    approver TEXT NOT NULL, created REAL NOT NULL
);
"""


class StoreError(RuntimeError):
    """A database that is not a policyc service's, or of another format."""


@dataclass(frozen=True)
class StoredSession:
    """A session as the database holds it."""

    principal: str
    session: str
    roles: tuple[str, ...]
    policy: str


class Store:
    """One connection to the database, used by one thread at a time (a lock says so)."""

    def __init__(self, path: str, sync: str = "normal", chain: Chain | None = None) -> None:
        if sync not in ("normal", "full"):
            raise ValueError(f"sync is `normal` or `full`, not {sync!r}")
        self.path = path
        self.chain = chain or Chain()  # how the audit log is written (signed, its head published)
        self.closed = False
        self.lock = threading.RLock()
        self.tail = Tail()  # the last record of the audit chain, once known in the open transaction
        self.checkpoints = Checkpointer(path, sync, self.lock)
        self.sealed: HeadEntry | None = None  # a checkpoint of the open transaction, to publish
        self.grouped = False  # inside group(): a write's transaction is the group's savepoint
        if os.path.lexists(path) and not os.path.isfile(path):
            raise StoreError(f"{path}: not a regular file, so not a database")
        self.widened = private(path)
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._prepare(sync)
        except sqlite3.Error as error:
            raise StoreError(f"{path}: not a database of policyc serve ({error})") from None

    def _prepare(self, sync: str) -> None:
        path = self.path
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={sync.upper()}")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run on a thread of their own
        self.db.executescript(SCHEMA)
        found = self.db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if found is None:
            self.db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        elif found[0] != FORMAT:
            raise StoreError(f"{path}: a database of format {found[0]}, this policyc reads format {FORMAT}")

    def _begin(self) -> None:
        self.tail.forget()
        self.db.execute("BEGIN IMMEDIATE")

    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _audit(self, records: Records, principal: str | None = None, decision: str | None = None) -> None:
        """Write audit records in the open transaction (those of a session naming its principal)."""
        if records:
            written = write(
                SQLiteRows(self.db, self.tail),
                records if principal is None else tagged(records, principal, decision),
                self.chain,
            )
            if written is not None:
                self.sealed = written

    def _committed(self) -> None:
        """After a commit: publish the head at the checkpoint it wrote, if it wrote one."""
        self.checkpoints.committed()
        sealed, self.sealed = self.sealed, None
        if sealed is not None and self.chain.publish is not None:
            self.chain.publish(Head((sealed,)).line())

    def group(self, writes: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """Run ``writes`` (each calling this store's write methods) in one transaction and commit
        once: each write's outcome, ``(True, value)`` or ``(False, error)``. A write that raises
        is taken back alone (:meth:`_together`); when the commit fails, every write's outcome is
        that error (none of them is in the database)."""
        outcomes: list[tuple[bool, Any]] = []
        with self.lock:
            self.sealed = None
            try:
                self._begin()
                self.grouped = True
                if len(writes) == 1:  # alone: its transaction is its savepoint
                    outcomes.append(self._alone(writes[0]))
                else:
                    outcomes = self._together(writes)
                self.grouped = False
                self.db.execute("COMMIT")
            except BaseException as error:
                self.grouped = False
                self.sealed = None
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                if not isinstance(error, sqlite3.Error):
                    raise
                return [(False, error)] * len(writes)
            self._committed()
        return outcomes

    def _together(self, writes: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """The writes of a group in the open transaction, without a savepoint each while none of
        them raises (the common case: two statements fewer per write); when one does, the
        transaction is taken back and every write runs again, each in a savepoint of its own,
        so that the one that raises is taken back alone. A write changes nothing but the
        database and the checkpoint to publish (restored here), so running it again is safe."""
        try:
            return [(True, write()) for write in writes]
        except Exception:
            self.sealed = None
            if self.db.in_transaction:  # some errors of SQLite take it back themselves
                self.db.execute("ROLLBACK")
            self._begin()
        return [self._savepoint(write) for write in writes]

    def _alone(self, write: Callable[[], Any]) -> tuple[bool, Any]:
        """The only write of a group: one that raises takes back the transaction (which commits
        nothing then), as a savepoint of its own would."""
        sealed = self.sealed
        try:
            return True, write()
        except Exception as error:
            self.db.execute("ROLLBACK")
            self._begin()
            self.sealed = sealed
            return False, error

    def _savepoint(self, write: Callable[[], Any]) -> tuple[bool, Any]:
        """One write of a group, taken back alone if it raises."""
        sealed = self.sealed
        self.db.execute("SAVEPOINT write")
        try:
            value = write()
        except Exception as error:
            self.db.execute("ROLLBACK TO write")
            self.tail.forget()  # its records were taken back with it
            self.db.execute("RELEASE write")
            self.sealed = sealed
            return False, error
        self.db.execute("RELEASE write")
        return True, value

    def audit_head(self) -> Head:
        """The head of the audit log as committed."""
        with self.lock:
            return head(self.db)

    def reaches(self, expected: Head) -> str | None:
        """Whether the audit log holds every record of ``expected``: None when it does, else
        what is wrong (a log cut or rewritten since the head was published)."""
        with self.lock:
            first = self.db.execute("SELECT line FROM audit WHERE seq = 0").fetchone()
            last = self.db.execute("SELECT max(seq) FROM audit").fetchone()
            for entry in expected.entries:
                if first is None or hashlib.sha256(bytes(first[0])).hexdigest() != entry.chain:
                    return f"it does not hold the chain {entry.chain[:12]}… (another log, or one rewritten from its start)"
                found = self.db.execute("SELECT line FROM audit WHERE seq = ?", (entry.seq,)).fetchone()
                if found is None:
                    return f"it ends at seq {last[0]}, before the head's seq {entry.seq} (it was cut)"
                if hashlib.sha256(bytes(found[0])).hexdigest() != entry.hash:
                    return f"its record at seq {entry.seq} is not the head's (it was rewritten)"
        return None

    def close(self) -> None:
        self.checkpoints.stop()  # outside the lock: its last checkpoint may be waiting for it
        with self.lock:
            if not self.closed:
                self.closed = True
                self.db.close()

    def create_session(
        self, principal: str, session: str, roles: Sequence[str], policy: str, audit: Records = ()
    ) -> bool:
        """Add a session (and its audit records); False when the principal has one of that id already."""
        with self.lock, self._transaction():
            try:
                self.db.execute(
                    "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                    (principal, session, json.dumps(list(roles)), policy, time.time()),
                )
            except sqlite3.IntegrityError:
                return False
            self._audit(audit, principal)
        return True

    def append(
        self, principal: str, session: str, rows: Sequence[tuple[str, str]], seq: int, audit: Records = ()
    ) -> int:
        """Add events (``(how, JSON text)``) after sequence number ``seq``, the session's last;
        the new last sequence number. All of them or none are committed."""
        with self.lock, self._transaction():
            self.db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                [(principal, session, seq + n, how, body) for n, (how, body) in enumerate(rows, 1)],
            )
            self._audit(audit, principal)
        return seq + len(rows)

    def decided(
        self,
        decision: str,
        principal: str,
        session: str,
        seq: int,
        verdict: str,
        body: str,
        candidate: str | None = None,
        how: str = "authorize",
        audit: Records = (),
    ) -> None:
        """Add a decision; with ``candidate`` (its JSON text), what it changed in the session
        as the session's row ``seq`` (``how``: a candidate ``authorize``d, or an action
        ``decide``d again), in the same transaction."""
        with self.lock, self._transaction():
            if candidate is not None:
                self.db.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?)", (principal, session, seq, how, candidate)
                )
            self.db.execute(
                "INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?)",
                (decision, principal, session, seq, verdict, body, time.time()),
            )
            self._audit(audit, principal, decision)

    def answered(
        self,
        decision: str,
        approved: bool,
        approver: str,
        row: tuple[str, str, int, str] | None,
        audit: Records = (),
    ) -> bool:
        """Answer an escalated decision (False when it was answered before); with ``row``
        (principal, session, seq, JSON text), the approval recorded in the session."""
        with self.lock, self._transaction():
            try:
                self.db.execute(
                    "INSERT INTO answers VALUES (?, ?, ?, ?)",
                    (decision, int(approved), approver, time.time()),
                )
            except sqlite3.IntegrityError:
                return False
            if row is not None:
                self.db.execute("INSERT INTO events VALUES (?, ?, ?, 'approval', ?)", row)
            self._audit(audit, None if row is None else row[0])
        return True

    def pending(self) -> list[tuple[str, str, str, str, float]]:
        """Escalated decisions no one answered yet: (id, principal, session, JSON text, when it
        was made: seconds since the epoch), oldest first."""
        with self.lock:
            rows = self.db.execute(
                "SELECT id, principal, session, body, created FROM decisions WHERE verdict = 'escalate' "
                "AND id NOT IN (SELECT decision FROM answers) ORDER BY created"
            ).fetchall()
        return [(str(a), str(b), str(c), str(d), float(e)) for a, b, c, d, e in rows]

    def decision_row(self, decision: str) -> tuple[str, str, str] | None:
        """(principal, session, JSON text) of a decision, whoever's it is."""
        with self.lock:
            found = self.db.execute(
                "SELECT principal, session, body FROM decisions WHERE id = ?", (decision,)
            ).fetchone()
        return None if found is None else (str(found[0]), str(found[1]), str(found[2]))

    def record_audit(self, records: Records) -> None:
        """Write audit records that no change of the database carries (a monitor's header)."""
        if records:
            with self.lock, self._transaction():
                self._audit(records)

    def decision(self, principal: str, session: str, decision: str) -> str | None:
        with self.lock:
            found = self.db.execute(
                "SELECT body FROM decisions WHERE id = ? AND principal = ? AND session = ?",
                (decision, principal, session),
            ).fetchone()
        return None if found is None else str(found[0])

    def keep_policy(self, digest: str, origin: str, bundle: bytes) -> None:
        """Store a policy's bundle (once: a digest names one bundle)."""
        with self.lock, self._transaction():
            self.db.execute(
                "INSERT OR IGNORE INTO policies VALUES (?, ?, ?, ?)", (digest, origin, bundle, time.time())
            )

    def policy(self, digest: str) -> tuple[str, bytes] | None:
        """A stored policy's origin and bundle."""
        with self.lock:
            found = self.db.execute(
                "SELECT origin, bundle FROM policies WHERE digest = ?", (digest,)
            ).fetchone()
        return None if found is None else (str(found[0]), bytes(found[1]))

    def set_meta(self, key: str, value: str) -> None:
        with self.lock, self._transaction():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        with self.lock:
            found = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def session(self, principal: str, session: str) -> StoredSession | None:
        with self.lock:
            found = self.db.execute(
                "SELECT roles, policy FROM sessions WHERE principal = ? AND session = ?", (principal, session)
            ).fetchone()
        return (
            None
            if found is None
            else StoredSession(principal, session, tuple(json.loads(found[0])), found[1])
        )

    def sessions(self) -> Iterator[StoredSession]:
        with self.lock:
            rows = self.db.execute(
                "SELECT principal, session, roles, policy FROM sessions ORDER BY created, principal, session"
            ).fetchall()
        for principal, session, roles, policy in rows:
            yield StoredSession(principal, session, tuple(json.loads(roles)), policy)

    def events(self, principal: str, session: str) -> Iterator[tuple[int, str, str]]:
        """A session's events in order: ``(seq, how, JSON text)``."""
        with self.lock:
            rows = self.db.execute(
                "SELECT seq, how, body FROM events WHERE principal = ? AND session = ? ORDER BY seq",
                (principal, session),
            ).fetchall()
        yield from rows

    def counts(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT verdict, count(*) FROM decisions GROUP BY verdict").fetchall()
        return {str(verdict): int(n) for verdict, n in rows}


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` when the block raises); after a commit,
    the audit log's head is published if a checkpoint was written."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> None:
        if self.store.grouped:  # the group's savepoint is the transaction
            return
        self.store.sealed = None
        self.store._begin()

    def __exit__(self, kind: object, *_: object) -> None:
        if self.store.grouped:
            return
        if kind is not None:
            self.store.sealed = None
            self.store.db.execute("ROLLBACK")
            return
        self.store.db.execute("COMMIT")
        self.store._committed()


def private(path: str) -> list[tuple[str, int]]:
    """Make the database at ``path`` (created empty if missing) and its ``-wal`` and ``-shm``
    files its owner's only (SQLite gives the files it creates beside a database the
    database's permissions); the files others could read or write before, with their old
    permissions. ``StoreError`` when they cannot be made so."""
    from policyc.compiler.files import make_private, open_private

    widened = []
    try:
        fd, wider = open_private(path, os.O_RDWR)
        os.close(fd)
        if wider is not None:
            widened.append((path, wider))
        for companion in (f"{path}-wal", f"{path}-shm", f"{path}-journal"):
            wider = make_private(companion)
            if wider is not None:
                widened.append((companion, wider))
    except OSError as error:
        raise StoreError(
            f"{path}: cannot make the database its owner's only: {error.strerror or error}"
        ) from None
    return widened
