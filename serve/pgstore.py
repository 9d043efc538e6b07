"""The service's state in PostgreSQL: the operations of the SQLite :class:`~.store.Store`, with
the same meaning, on a database that several instances of the service share, and the leases by
which each session is owned by one instance at a time.

**Tables** (:mod:`.pgschema`, created on first use in the connection's schema: give the
service a database, or a schema through ``options=-csearch_path=NAME``, of its own): ``meta``,
``sessions``, ``events``, ``decisions``, ``answers`` and ``policies`` hold what the SQLite
tables hold, row for row; ``audit`` holds one chain per writer (``writer``, ``seq``): each
instance writes its own, as :mod:`.audit` chains the SQLite log; ``leases`` says which instance
owns each session.

**Leases and fencing** (:mod:`.pgleases`). A session is written only by the instance that holds
its lease. :meth:`PostgresStore.acquire` takes a session no one holds, one whose lease expired,
or one an earlier run of this instance held, and :meth:`~PostgresStore.take_over_expired` takes
the sessions of an instance that stopped renewing; every acquisition raises the lease's epoch by
one. Every transaction that writes a session (:meth:`~PostgresStore.create_session`,
:meth:`~PostgresStore.append`, :meth:`~PostgresStore.decided`, an approval of
:meth:`~PostgresStore.answered`) locks the lease at the epoch this instance acquired before it
commits, and writes nothing (:class:`~.failures.LeaseLost`) when the epoch moved: an instance
that lost a session commits nothing of it. Expiry only says when others may take over: an owner
that nobody took over still holds the newest epoch, and commits.

Statements are prepared (``prepare=True``). A group commit's writes (:meth:`PostgresStore.group`)
send their rows and fences as one batch with the ``COMMIT`` (:mod:`.pgbatch`): ``BEGIN``, then
the batch and its ``COMMIT``, two round trips to the server whatever the group's size; and a
transaction starts from the chain's last record as the last commit left it, rather than reading
it back. A connection the server closed (a restart) is made
anew: a read whose connection broke is tried again once on a new one, and so is a transaction
whose ``BEGIN`` found the connection closed (nothing of it was sent); a transaction that broke
later is not: its :class:`~.failures.StoreFailure` may mean it was committed or not, which the
database then says. The connection's password is
never on a command line: it comes from the URL the program was given, or, better, from libpq's
``PGPASSWORD`` or ``PGPASSFILE``.

Session ids are kept as their UTF-8 bytes (``bytea``): any text a session id may be (NUL
included, which PostgreSQL's ``text`` cannot hold) comes back as it was, sorted as SQLite sorts
it; every other text column sorts bytewise too (``COLLATE "C"``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, TypeVar

import psycopg

from policyc.runtime.audit import Head, HeadEntry

from . import pgbatch
from . import pgleases as leases
from .audit import Chain, Tail, tagged, write
from .failures import LeaseLost, StoreFailure, first_line
from .pgbatch import Batch
from .pgleases import Key, Lease
from .pgschema import prepare, session_bytes, session_text
from .store import Records, StoredSession, StoreError
from .stores import shown

T = TypeVar("T")


class PostgresStore:
    """One connection to the database, used by one thread at a time (a lock says so), as the
    instance ``instance`` (the owner its leases name, and the writer of its audit chain: one
    running instance per name)."""

    def __init__(
        self, url: str, sync: str = "normal", chain: Chain | None = None, *, instance: str | None = None
    ) -> None:
        if sync not in ("normal", "full"):
            raise ValueError(f"sync is `normal` or `full`, not {sync!r}")
        self.url = url
        self.path = shown(url)  # what messages name: the URL without its password
        self.sync = sync
        self.instance = default_instance() if instance is None else instance
        if not self.instance or len(self.instance) > 128 or "\x00" in self.instance:
            raise StoreError(f"an instance's name is 1-128 characters, not {self.instance!r}")
        self.chain = chain or Chain()
        self.closed = False
        self.lock = threading.RLock()
        self.grouped = False  # inside group(): a write's transaction is a savepoint of the group's
        self.batch: Batch | None = None  # inside group()'s first run: the rows and fences not sent yet
        self.sealed: HeadEntry | None = None
        self.tail = Tail()  # the last record of its chain, once known in the open transaction
        # the chain's last record as the last commit left it, if known (this instance alone
        # writes its chain): a transaction starts from it rather than reading it back
        self.committed: tuple[bool, tuple[int, bytes, int, bool] | None] = (False, None)
        self.widened: list[tuple[str, int]] = []  # (a SQLite store's files made private)
        self.held: dict[Key, int] = {}  # the epochs of the leases this instance holds
        self.connection = self._connect()
        prepare(self.connection, self.path)

    # ------------------------------------------------------------------ connection and schema

    def _connect(self) -> psycopg.Connection[Any]:
        from psycopg.conninfo import conninfo_to_dict

        try:
            given = conninfo_to_dict(self.url)
        except psycopg.Error as error:
            raise StoreError(f"{self.path}: not a PostgreSQL connection URL ({first_line(error)})") from None
        options: dict[str, Any] = {}
        if "connect_timeout" not in given:
            options["connect_timeout"] = 10
        if "application_name" not in given:
            options["application_name"] = f"policyc serve {self.instance}"[:63]
        try:
            connection = psycopg.connect(self.url, autocommit=True, **options)
            if self.sync == "full":
                connection.execute("SET synchronous_commit = on")
        except psycopg.Error as error:
            raise StoreError(f"{self.path}: cannot connect: {first_line(error)}") from None
        return connection

    def _failure(self, error: BaseException) -> StoreFailure:
        """A database's error as the store's (naming the database), a store's as it is."""
        return error if isinstance(error, StoreFailure) else StoreFailure(f"{self.path}: {first_line(error)}")

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, made anew if the last one broke."""
        if self.closed:
            raise StoreFailure(f"{self.path}: the store is closed")
        if self.connection.closed or self.connection.broken:
            try:
                self.connection = self._connect()
            except StoreError as error:
                raise StoreFailure(str(error)) from None
        return self.connection

    def _read(self, query: Callable[[psycopg.Connection[Any]], T]) -> T:
        """A read: tried again once on a new connection when the connection broke."""
        for attempt in (1, 2):
            connection = self._live()
            try:
                return query(connection)
            except psycopg.OperationalError as error:
                if attempt == 2 or not connection.broken:
                    raise self._failure(error) from None
            except psycopg.Error as error:
                raise self._failure(error) from None
        raise AssertionError("unreachable")

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """``BEGIN`` … ``COMMIT`` (``ROLLBACK`` when the block raises); a database error is a
        :class:`StoreFailure`; after a commit, the audit log's head is published if a
        checkpoint was written. Inside :meth:`group`, the group's transaction (each write's
        savepoint is made by :meth:`group`)."""
        if self.grouped:
            try:
                yield self.connection
            except psycopg.Error as error:
                raise self._failure(error) from None
            return
        connection, transaction = self._begun()
        self.sealed = None
        try:
            yield connection
        except BaseException as error:
            self.sealed = None
            try:
                transaction.__exit__(type(error), error, error.__traceback__)  # ROLLBACK
            except psycopg.Error:
                pass  # the connection is gone, and the transaction with it
            if isinstance(error, psycopg.Error):
                raise self._failure(error) from None
            raise
        try:
            transaction.__exit__(None, None, None)  # COMMIT
        except psycopg.Error as error:
            self.sealed = None
            self.committed = (False, None)  # committed or not: the database says
            raise self._failure(error) from None
        self._committed()

    def _begun(self) -> tuple[psycopg.Connection[Any], AbstractContextManager[psycopg.Transaction]]:
        """A connection and its transaction, begun: a ``BEGIN`` the server did not take because
        it closed the connection since its last use (a restart) is sent again on a new one, as
        nothing of the transaction was sent."""
        for attempt in (1, 2):
            connection = self._live()
            transaction = connection.transaction()
            self.tail.known, self.tail.last = self.committed
            try:
                transaction.__enter__()
            except psycopg.OperationalError as error:
                if attempt == 2 or not connection.broken:
                    raise self._failure(error) from None
                continue
            except psycopg.Error as error:
                raise self._failure(error) from None
            return connection, transaction
        raise AssertionError("unreachable")

    def _fence(self, connection: psycopg.Connection[Any], principal: str, session: str) -> None:
        """Lock the session's lease for the transaction, if this instance still holds it at the
        epoch it acquired; :class:`LeaseLost` (the transaction rolls back) if not."""
        key = (principal, session)
        epoch = self.held.get(key)
        if epoch is None:
            raise LeaseLost(f"this instance ({self.instance}) holds no lease on the session {_key(key)}")
        if self.batch is not None:  # locked with the batch's others, before the commit
            self.batch.fences[key] = epoch
            return
        if not leases.fence(connection, self.instance, key, epoch):
            del self.held[key]
            raise LeaseLost(
                f"the session {_key(key)} was taken over: this instance's lease (epoch {epoch}) is "
                "no longer current, so nothing was written"
            )

    def _audit(
        self,
        connection: psycopg.Connection[Any],
        records: Records,
        principal: str | None = None,
        decision: str | None = None,
    ) -> None:
        if records:
            written = write(
                _WriterRows(connection, self.instance, self.tail, self.batch),
                records if principal is None else tagged(records, principal, decision),
                self.chain,
            )
            if written is not None:
                self.sealed = written

    def _committed(self) -> None:
        """After a commit: the chain's last record kept for the next transaction, and the head
        published at the checkpoint it wrote, if it wrote one."""
        self.committed = (self.tail.known, self.tail.last)
        sealed, self.sealed = self.sealed, None
        if sealed is not None and self.chain.publish is not None:
            self.chain.publish(Head((sealed,)).line())

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.connection.close()

    # ------------------------------------------------------------------ the SQLite store's operations

    def create_session(
        self, principal: str, session: str, roles: Sequence[str], policy: str, audit: Records = ()
    ) -> bool:
        """Add a session (and its audit records); False when the principal has one of that id
        already. This instance must hold the session's lease (:meth:`acquire`)."""
        with self.lock, self._transaction() as connection:
            self._fence(connection, principal, session)
            added = connection.execute(
                "INSERT INTO sessions VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (principal, session_bytes(session), json.dumps(list(roles)), policy, time.time()),
                prepare=True,
            ).fetchone()
            if added is None:
                return False
            self._audit(connection, audit, principal)
        return True

    def append(
        self, principal: str, session: str, rows: Sequence[tuple[str, str]], seq: int, audit: Records = ()
    ) -> int:
        """Add events (``(how, JSON text)``) after sequence number ``seq``, the session's last;
        the new last sequence number. All of them or none are committed."""
        with self.lock, self._transaction() as connection:
            self._fence(connection, principal, session)
            added = [
                (principal, session_bytes(session), seq + n, how, body)
                for n, (how, body) in enumerate(rows, 1)
            ]
            if self.batch is not None:
                self.batch.events += added
            else:
                with connection.cursor() as cursor:
                    cursor.executemany(pgbatch.EVENTS, added)
            self._audit(connection, audit, principal)
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
        as the session's row ``seq``, in the same transaction."""
        with self.lock, self._transaction() as connection:
            self._fence(connection, principal, session)
            event = None if candidate is None else (principal, session_bytes(session), seq, how, candidate)
            row = (decision, principal, session_bytes(session), seq, verdict, body, time.time())
            if self.batch is not None:
                self.batch.events += [event] if event is not None else []
                self.batch.decisions.append(row)
            else:
                if event is not None:
                    connection.execute(pgbatch.EVENTS, event, prepare=True)
                connection.execute(pgbatch.DECISIONS, row, prepare=True)
            self._audit(connection, audit, principal, decision)

    def answered(
        self,
        decision: str,
        approved: bool,
        approver: str,
        row: tuple[str, str, int, str] | None,
        audit: Records = (),
    ) -> bool:
        """Answer an escalated decision (False when it was answered before); with ``row``
        (principal, session, seq, JSON text), the approval recorded in the session, whose
        lease this instance must hold."""
        if "\x00" in decision:
            return False  # no decision has such an id
        with self.lock, self._transaction() as connection:
            if row is not None:
                self._fence(connection, row[0], row[1])
            added = connection.execute(
                "INSERT INTO answers VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (decision, approved, approver, time.time()),
                prepare=True,
            ).fetchone()
            if added is None:
                return False
            if row is not None:
                connection.execute(
                    "INSERT INTO events VALUES (%s, %s, %s, 'approval', %s)",
                    (row[0], session_bytes(row[1]), row[2], row[3]),
                    prepare=True,
                )
            self._audit(connection, audit, None if row is None else row[0])
        return True

    def pending(self) -> list[tuple[str, str, str, str, float]]:
        """Escalated decisions no one answered yet: (id, principal, session, JSON text, when it
        was made: seconds since the epoch), oldest first."""
        with self.lock:
            rows = self._read(
                lambda c: c.execute(
                    "SELECT id, principal, session, body, created FROM decisions d WHERE verdict = 'escalate' "
                    "AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.decision = d.id) ORDER BY created, id",
                    prepare=True,
                ).fetchall()
            )
        return [(str(a), str(b), session_text(c), str(d), float(e)) for a, b, c, d, e in rows]

    def decision_row(self, decision: str) -> tuple[str, str, str] | None:
        """(principal, session, JSON text) of a decision, whoever's it is."""
        if "\x00" in decision:
            return None
        with self.lock:
            found = self._read(
                lambda c: c.execute(
                    "SELECT principal, session, body FROM decisions WHERE id = %s", (decision,), prepare=True
                ).fetchone()
            )
        return None if found is None else (str(found[0]), session_text(found[1]), str(found[2]))

    def record_audit(self, records: Records) -> None:
        """Write audit records that no change of the database carries (a monitor's header)."""
        if records:
            with self.lock, self._transaction() as connection:
                self._audit(connection, records)

    def decision(self, principal: str, session: str, decision: str) -> str | None:
        if "\x00" in decision or "\x00" in principal:
            return None
        with self.lock:
            found = self._read(
                lambda c: c.execute(
                    "SELECT body FROM decisions WHERE id = %s AND principal = %s AND session = %s",
                    (decision, principal, session_bytes(session)),
                    prepare=True,
                ).fetchone()
            )
        return None if found is None else str(found[0])

    def keep_policy(self, digest: str, origin: str, bundle: bytes) -> None:
        """Store a policy's bundle (once: a digest names one bundle)."""
        with self.lock, self._transaction() as connection:
            connection.execute(
                "INSERT INTO policies VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (digest, origin, bundle, time.time()),
                prepare=True,
            )

    def policy(self, digest: str) -> tuple[str, bytes] | None:
        """A stored policy's origin and bundle."""
        if "\x00" in digest:
            return None
        with self.lock:
            found = self._read(
                lambda c: c.execute(
                    "SELECT origin, bundle FROM policies WHERE digest = %s", (digest,), prepare=True
                ).fetchone()
            )
        return None if found is None else (str(found[0]), bytes(found[1]))

    def set_meta(self, key: str, value: str) -> None:
        with self.lock, self._transaction() as connection:
            connection.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (key, value),
                prepare=True,
            )

    def meta(self, key: str) -> str | None:
        if "\x00" in key:
            return None
        with self.lock:
            found = self._read(
                lambda c: c.execute("SELECT value FROM meta WHERE key = %s", (key,), prepare=True).fetchone()
            )
        return None if found is None else str(found[0])

    def session(self, principal: str, session: str) -> StoredSession | None:
        if "\x00" in principal:
            return None
        with self.lock:
            found = self._read(
                lambda c: c.execute(
                    "SELECT roles, policy FROM sessions WHERE principal = %s AND session = %s",
                    (principal, session_bytes(session)),
                    prepare=True,
                ).fetchone()
            )
        return (
            None
            if found is None
            else StoredSession(principal, session, tuple(json.loads(found[0])), str(found[1]))
        )

    def sessions(self) -> Iterator[StoredSession]:
        with self.lock:
            rows = self._read(
                lambda c: c.execute(
                    "SELECT principal, session, roles, policy FROM sessions ORDER BY created, principal, session"
                ).fetchall()
            )
        for principal, session, roles, policy in rows:
            yield StoredSession(str(principal), session_text(session), tuple(json.loads(roles)), str(policy))

    def events(self, principal: str, session: str) -> Iterator[tuple[int, str, str]]:
        """A session's events in order: ``(seq, how, JSON text)``."""
        if "\x00" in principal:
            return
        with self.lock:
            rows = self._read(
                lambda c: c.execute(
                    "SELECT seq, how, body FROM events WHERE principal = %s AND session = %s ORDER BY seq",
                    (principal, session_bytes(session)),
                    prepare=True,
                ).fetchall()
            )
        for seq, how, body in rows:
            yield int(seq), str(how), str(body)

    def counts(self) -> dict[str, int]:
        with self.lock:
            rows = self._read(
                lambda c: c.execute("SELECT verdict, count(*) FROM decisions GROUP BY verdict").fetchall()
            )
        return {str(verdict): int(n) for verdict, n in rows}

    # ------------------------------------------------------------------ the audit log: a chain per writer

    def audit_head(self) -> Head:
        """The head of the audit log as committed: an entry per writer's chain."""
        with self.lock:
            rows = self._read(
                lambda c: c.execute(
                    "SELECT f.line, a.seq, a.line, a.final FROM (SELECT DISTINCT ON (writer) writer, seq, "
                    "line, final FROM audit ORDER BY writer, seq DESC) a JOIN audit f ON f.writer = a.writer "
                    "AND f.seq = 0"
                ).fetchall()
            )
        return Head.of(
            HeadEntry(_sha256(first), int(seq), _sha256(line), bool(final))
            for first, seq, line, final in rows
        )

    def reaches(self, expected: Head) -> str | None:
        """Whether the audit log holds every record of ``expected`` (each entry in the chain
        it names): None when it does, else what is wrong."""
        with self.lock:
            firsts = self._read(
                lambda c: c.execute("SELECT writer, line FROM audit WHERE seq = 0").fetchall()
            )
            writers = {_sha256(line): str(writer) for writer, line in firsts}
            for entry in expected.entries:
                writer = writers.get(entry.chain)
                if writer is None:
                    return f"it does not hold the chain {entry.chain[:12]}… (another log, or one rewritten from its start)"
                found, last = self._read(partial(_record_and_last, writer=writer, seq=entry.seq))
                if found is None:
                    return f"it ends at seq {last[0] if last else None}, before the head's seq {entry.seq} (it was cut)"
                if _sha256(found[0]) != entry.hash:
                    return f"its record at seq {entry.seq} is not the head's (it was rewritten)"
        return None

    def chains(self) -> dict[str, bytes]:
        """Each writer's chain as the JSON-lines file ``policyc audit verify`` reads, by writer."""
        with self.lock:
            rows = self._read(
                lambda c: c.execute("SELECT writer, line FROM audit ORDER BY writer, seq").fetchall()
            )
        out: dict[str, list[bytes]] = {}
        for writer, line in rows:
            out.setdefault(str(writer), []).append(bytes(line) + b"\n")
        return {writer: b"".join(lines) for writer, lines in out.items()}

    # the writes wait on a server: group commit runs them in a writer thread (:mod:`.commits`)
    blocking = True

    def group(self, writes: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """Run ``writes`` (each calling this store's write methods) in one transaction and commit
        once: each write's outcome, ``(True, value)`` or ``(False, error)``. The writes first run
        with a :class:`~.pgbatch.Batch`, their rows and fences sent at once with the ``COMMIT``
        (:meth:`_batched`); when one raises, a lease moved or the server refuses a row, nothing
        of them is committed and they run again one statement at a time, each in a savepoint of
        its own (a write changes nothing but the database, the leases it found lost and the
        checkpoint to publish, so running it again is safe), so a write that fails is taken back
        alone: one whose session's lease was lost (:class:`LeaseLost`, found by its fence) writes
        nothing, and the others of the group still commit. When the connection is lost during
        the commit, every write's outcome is that error (a :class:`StoreFailure`: the group was
        committed or not, which the database then says)."""
        with self.lock:
            batched = self._batched(writes)
        if batched is not None:
            return batched
        if len(writes) == 1:  # a transaction of its own, without a savepoint
            try:
                return [(True, writes[0]())]
            except Exception as error:
                return [(False, error)]
        with self.lock:
            try:
                connection, transaction = self._begun()
            except StoreFailure as error:
                return [(False, error)] * len(writes)
            self.sealed = None
            try:
                self.grouped = True
                outcomes = [self._savepoint(connection, work) for work in writes]
                self.grouped = False
            except BaseException as error:
                self.grouped = False
                self.sealed = None
                # ROLLBACK; on a broken connection it fails too, and the first error is the one said
                with contextlib.suppress(psycopg.Error):
                    transaction.__exit__(type(error), error, error.__traceback__)
                if isinstance(error, psycopg.Error):
                    return [(False, self._failure(error))] * len(writes)
                raise
            failure = self._commit(connection, transaction)
        return outcomes if failure is None else [(False, failure)] * len(writes)

    def _batched(self, writes: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]] | None:
        """The writes run with a batch, sent with the commit: every write's outcome, or None when
        they are to run again one statement at a time (nothing of them committed)."""
        try:
            connection, transaction = self._begun()
        except StoreFailure as error:
            return [(False, error)] * len(writes)
        self.sealed = None
        batch = self.batch = Batch()
        self.grouped = True
        try:
            try:
                values = [work() for work in writes]
            finally:
                self.grouped, self.batch = False, None
        except BaseException as error:
            self.sealed = None
            broken = connection.broken or connection.closed
            with contextlib.suppress(psycopg.Error):  # ROLLBACK (it fails too on a broken connection)
                transaction.__exit__(type(error), error, error.__traceback__)
            if not isinstance(error, Exception):
                raise
            if broken:  # the transaction went with the connection: nothing of the group is in
                return [(False, self._failure(error))] * len(writes)
            return None
        committing = False
        try:
            with connection.pipeline():  # the batch and the COMMIT in one round trip
                batch.send(connection, self.instance)
                committing = True
                transaction.__exit__(None, None, None)
        except psycopg.Error as error:
            self.sealed = None
            broken = connection.broken or connection.closed
            if committing and broken:  # the COMMIT was sent: committed or not, the database says
                self.committed = (False, None)
            else:  # a lease moved, or a row was refused: the transaction commits nothing
                with contextlib.suppress(psycopg.Error):
                    if not committing:
                        transaction.__exit__(type(error), error, error.__traceback__)  # ROLLBACK
                    elif connection.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        connection.execute("ROLLBACK")
            return [(False, self._failure(error))] * len(writes) if broken else None
        self._committed()
        return [(True, value) for value in values]

    def _commit(
        self, connection: psycopg.Connection[Any], transaction: AbstractContextManager[psycopg.Transaction]
    ) -> StoreFailure | None:
        """``COMMIT`` the group's transaction, and publish its checkpoint; the failure, if it failed."""
        try:
            if connection.pgconn.status != psycopg.pq.ConnStatus.OK:  # psycopg would not say
                raise psycopg.OperationalError("the connection was lost before the commit")
            transaction.__exit__(None, None, None)  # COMMIT
        except psycopg.Error as error:
            self.sealed = None
            self.committed = (False, None)  # committed or not: the database says
            return self._failure(error)
        self._committed()
        return None

    def _savepoint(self, connection: psycopg.Connection[Any], work: Callable[[], Any]) -> tuple[bool, Any]:
        """One write of a group, taken back alone if it raises (a broken connection breaks the
        group: its error goes on)."""
        sealed = self.sealed
        try:
            with connection.transaction():  # SAVEPOINT … RELEASE (ROLLBACK TO when it raises)
                value = work()
        except Exception as error:
            self.sealed = sealed
            self.tail.forget()  # its records were taken back with it
            if connection.broken or connection.closed:
                raise psycopg.OperationalError(str(error)) from error
            return False, error
        return True, value

    # ------------------------------------------------------------------ instances

    def announce(self, address: str) -> None:
        """Say where this instance answers (the URL the others forward its sessions' requests to)."""
        with self.lock, self._transaction() as connection:
            connection.execute(
                "INSERT INTO instances VALUES (%s, %s, clock_timestamp()) ON CONFLICT (name) DO UPDATE "
                "SET address = EXCLUDED.address, seen = EXCLUDED.seen",
                (self.instance, address),
            )

    def address_of(self, instance: str) -> str | None:
        """Where the instance ``instance`` said it answers (None: it never said)."""
        with self.lock:
            found = self._read(
                lambda c: c.execute("SELECT address FROM instances WHERE name = %s", (instance,)).fetchone()
            )
        return None if found is None else str(found[0])

    # ------------------------------------------------------------------ leases (:mod:`.pgleases`)

    def acquire(self, principal: str, session: str, ttl: float) -> Lease | None:
        """Own a session for ``ttl`` seconds: one no instance holds (never leased, released,
        or expired), or one an earlier run of this instance held, with the next epoch; a lease
        this store holds is renewed. None while another instance's lease runs."""
        key = (principal, session)
        with self.lock:
            if key in self.held:
                with self._transaction() as connection:
                    lease = leases.renew(connection, self.instance, key, self.held[key], ttl)
                if lease is not None:
                    return lease
            with self._transaction() as connection:
                lease = leases.acquire(connection, self.instance, key, ttl)
            self._hold(key, lease)
        return lease

    def renew(self, principal: str, session: str, ttl: float) -> Lease | None:
        """Hold a lease of this store ``ttl`` seconds more (expired or not, as long as nobody
        took it over); None if it is no longer this instance's."""
        key = (principal, session)
        with self.lock:
            if key not in self.held:
                return None
            with self._transaction() as connection:
                lease = leases.renew(connection, self.instance, key, self.held[key], ttl)
            self._hold(key, lease)
        return lease

    def renew_all(self, ttl: float) -> list[Key]:
        """Renew every lease this store holds for ``ttl`` seconds, in one statement; the
        sessions that were taken over (no longer held)."""
        with self.lock:
            if not self.held:
                return []
            with self._transaction() as connection:
                renewed = leases.renew_many(connection, self.instance, self.held, ttl)
            lost = [key for key in self.held if key not in renewed]
            for key in lost:
                del self.held[key]
        return lost

    def release(self, principal: str, session: str) -> bool:
        """Give a lease up now (another instance may acquire the session at once, with the next
        epoch); False if it was no longer this instance's."""
        key = (principal, session)
        with self.lock:
            epoch = self.held.pop(key, None)
            if epoch is None:
                return False
            with self._transaction() as connection:
                return leases.release(connection, self.instance, key, epoch)

    def release_all(self) -> int:
        """Give up every lease this store holds (a clean stop); how many were still its own."""
        return sum(self.release(*key) for key in self.holds())

    def take_over_expired(self, ttl: float, limit: int = 1000) -> list[Lease]:
        """Own up to ``limit`` sessions whose lease expired (their owner stopped renewing, or
        released them), each with the next epoch, for ``ttl`` seconds. Instances taking over at
        once share them out: each session goes to one."""
        with self.lock:
            with self._transaction() as connection:
                taken = leases.take_over_expired(connection, self.instance, ttl, limit)
            for lease in taken:
                self._hold((lease.principal, lease.session), lease)
        return taken

    def lease(self, principal: str, session: str) -> Lease | None:
        """The session's lease as the database holds it, whoever's it is (None: never leased)."""
        if "\x00" in principal:
            return None
        with self.lock:
            return self._read(lambda c: leases.read(c, (principal, session)))

    def holds(self) -> dict[Key, int]:
        """The sessions this store holds the lease of, with their epochs (as it last knew)."""
        with self.lock:
            return dict(self.held)

    def _hold(self, key: Key, lease: Lease | None) -> None:
        if lease is None:
            self.held.pop(key, None)
        else:
            self.held[key] = lease.epoch


class _WriterRows:
    """One writer's chain in the ``audit`` table (:class:`.audit.Rows`)."""

    def __init__(
        self, connection: psycopg.Connection[Any], writer: str, tail: Tail, batch: Batch | None = None
    ) -> None:
        self.connection = connection
        self.writer = writer
        self.tail = tail
        self.batch = batch  # rows are added to it rather than sent (the tail is known then)

    def last(self) -> tuple[int, bytes, int, bool] | None:
        if self.tail.known:
            return self.tail.last
        found = self.connection.execute(
            "SELECT seq, line, since, final FROM audit WHERE writer = %s ORDER BY seq DESC LIMIT 1",
            (self.writer,),
            prepare=True,
        ).fetchone()
        last = None if found is None else (int(found[0]), bytes(found[1]), int(found[2]), bool(found[3]))
        self.tail.known, self.tail.last = True, last
        return last

    def first(self) -> bytes:
        held = self.batch.first() if self.batch is not None else None
        if held is not None:
            return held
        found = self.connection.execute(
            "SELECT line FROM audit WHERE writer = %s AND seq = 0", (self.writer,), prepare=True
        ).fetchone()
        assert found is not None, "a chain with a checkpoint has a first record"
        return bytes(found[0])

    def insert(self, seq: int, line: bytes, since: int, final: bool) -> None:
        self.tail.forget()  # until the row is in
        if self.batch is not None:
            self.batch.audit.append((self.writer, seq, line, since, final))
        else:
            self.connection.execute(pgbatch.AUDIT, (self.writer, seq, line, since, final), prepare=True)
        self.tail.known, self.tail.last = True, (seq, line, since, final)


def default_instance() -> str:
    """A name no other running instance has: the host's, the process's id and random digits."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _sha256(line: Any) -> str:
    return hashlib.sha256(bytes(line)).hexdigest()


def _record_and_last(
    connection: psycopg.Connection[Any], writer: str, seq: int
) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """A writer's record at ``seq`` (its line), and the chain's last seq."""
    found = connection.execute(
        "SELECT line FROM audit WHERE writer = %s AND seq = %s", (writer, seq)
    ).fetchone()
    last = connection.execute("SELECT max(seq) FROM audit WHERE writer = %s", (writer,)).fetchone()
    return found, last


def _key(key: Key) -> str:
    return f"{json.dumps(key[1])} of {json.dumps(key[0])}"
