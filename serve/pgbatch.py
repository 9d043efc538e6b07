"""A group's writes on PostgreSQL sent as one batch with their commit: the rows its writes add
and the leases they fence, gathered while the writes run and sent to the server at once, in the
round trip of the group's ``COMMIT``.

Each statement made alone is a round trip to the server and back, and a wake-up of the writer
thread that waits for it: a write made one statement at a time (its lease's fence, its event,
its decision, each audit record) costs four or five of them. :meth:`.pgstore.PostgresStore.group`
first runs a group's writes with a :class:`Batch` instead: the rows go into its lists, the fences
into one statement that locks every lease of the group at the epoch this instance holds, and
:meth:`Batch.send` queues them all in the connection's pipeline (psycopg's pipeline mode), the
``COMMIT`` after them: ``BEGIN``, then the batch and its ``COMMIT``, two round trips whatever the
group's size.

The fences are checked by the server, in the transaction: when a lease the batch names is no
longer this instance's at the epoch it holds, the statement fails (a division by zero), the
transaction with it, and the ``COMMIT`` after it commits nothing; so does a row the server
refuses. The group's writes then run again one statement at a time, each in a savepoint of its
own, so that the one that fails is found and taken back alone, as without a batch. Nothing of a
batch is committed unless every lease it names was locked at its epoch in the same transaction:
an instance that lost a session still commits nothing of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg

from .pgleases import Key
from .pgschema import session_bytes

EVENTS = "INSERT INTO events VALUES (%s, %s, %s, %s, %s)"
DECISIONS = "INSERT INTO decisions VALUES (%s, %s, %s, %s, %s, %s, %s)"
AUDIT = "INSERT INTO audit VALUES (%s, %s, %s, %s, %s)"
# the leases given locked, each until the transaction ends (as :data:`.pgleases.FENCE` locks
# one), where this instance holds them at the epoch given; a division by zero, which fails the
# transaction, when that is not so of them all
FENCES = (
    "SELECT 1 / (count(*) = %s)::int FROM (SELECT 1 FROM leases"
    " JOIN unnest(%s::text[], %s::bytea[], %s::bigint[]) AS held (principal, session, epoch)"
    " USING (principal, session, epoch) WHERE owner = %s FOR SHARE OF leases) AS locked"
)


def _not_aborted_pipeline(record: logging.LogRecord) -> bool:
    """psycopg warns when a pipeline left with an error cannot sync ("pipeline aborted"): a
    batch the server refused leaves it so, and the group runs again; nothing to warn about."""
    args = record.args if isinstance(record.args, tuple) else ()
    return not (len(args) == 2 and isinstance(args[1], psycopg.errors.PipelineAborted))


logging.getLogger("psycopg").addFilter(_not_aborted_pipeline)


@dataclass
class Batch:
    """The fences and rows of a group's writes, not sent yet."""

    fences: dict[Key, int] = field(default_factory=dict)  # a session's key: the lease's epoch
    events: list[tuple[Any, ...]] = field(default_factory=list)
    decisions: list[tuple[Any, ...]] = field(default_factory=list)
    audit: list[tuple[Any, ...]] = field(default_factory=list)

    def first(self) -> bytes | None:
        """The first record of the chain, when this batch holds it (a chain begun in it)."""
        return next((bytes(row[2]) for row in self.audit if row[1] == 0), None)

    def send(self, connection: psycopg.Connection[Any], owner: str) -> None:
        """Queue in the connection's pipeline: the leases locked (the transaction failing when
        one is no longer ``owner``'s at its epoch), then the rows."""
        with connection.cursor() as cursor:
            if self.fences:
                cursor.execute(
                    FENCES,
                    (
                        len(self.fences),
                        [key[0] for key in self.fences],
                        [session_bytes(key[1]) for key in self.fences],
                        list(self.fences.values()),
                        owner,
                    ),
                    prepare=True,
                )
            for statement, rows in ((EVENTS, self.events), (DECISIONS, self.decisions), (AUDIT, self.audit)):
                if rows:
                    cursor.executemany(statement, rows)
