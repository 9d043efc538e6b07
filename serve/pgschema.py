"""The tables of the PostgreSQL store (:mod:`.pgstore`), created on first use.

The SQLite store's tables, column for column (session ids as their UTF-8 bytes, ``bytea``; the
other keys ``text`` sorted bytewise, ``COLLATE "C"``, as SQLite sorts them), an ``audit`` table
holding one chain per writer, and ``leases``. Instances starting at once create them once
(under an advisory lock); a database whose tables are of another format, or of another
application, is refused with a :class:`~.store.StoreError`.
"""

from __future__ import annotations

from typing import Any

import psycopg

from .failures import first_line
from .store import StoreError

FORMAT = "postgresql-1"

TABLES = ("meta", "sessions", "events", "decisions", "policies", "answers", "audit", "leases", "instances")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    principal TEXT COLLATE "C" NOT NULL, session BYTEA NOT NULL, roles TEXT NOT NULL,
    policy TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, PRIMARY KEY (principal, session)
);
CREATE TABLE IF NOT EXISTS events (
    principal TEXT COLLATE "C" NOT NULL, session BYTEA NOT NULL, seq BIGINT NOT NULL,
    how TEXT NOT NULL CHECK (how IN ('record', 'facts', 'authorize', 'decide', 'approval')),
    body TEXT NOT NULL, PRIMARY KEY (principal, session, seq)
);
CREATE TABLE IF NOT EXISTS decisions (
    id TEXT COLLATE "C" PRIMARY KEY, principal TEXT COLLATE "C" NOT NULL, session BYTEA NOT NULL,
    seq BIGINT NOT NULL, verdict TEXT NOT NULL, body TEXT NOT NULL, created DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_escalated ON decisions (created) WHERE verdict = 'escalate';
CREATE TABLE IF NOT EXISTS policies (
    digest TEXT COLLATE "C" PRIMARY KEY, origin TEXT NOT NULL, bundle BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS answers (
    decision TEXT COLLATE "C" PRIMARY KEY, approved BOOLEAN NOT NULL, approver TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    writer TEXT COLLATE "C" NOT NULL, seq BIGINT NOT NULL, line BYTEA NOT NULL,
    since INTEGER NOT NULL, final BOOLEAN NOT NULL, PRIMARY KEY (writer, seq)
);
CREATE TABLE IF NOT EXISTS leases (
    principal TEXT COLLATE "C" NOT NULL, session BYTEA NOT NULL, owner TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL, expires TIMESTAMPTZ NOT NULL, PRIMARY KEY (principal, session)
);
CREATE INDEX IF NOT EXISTS leases_expires ON leases (expires);
CREATE INDEX IF NOT EXISTS leases_owner ON leases (owner);
CREATE TABLE IF NOT EXISTS instances (
    name TEXT COLLATE "C" PRIMARY KEY, address TEXT NOT NULL, seen TIMESTAMPTZ NOT NULL
);
"""

SCHEMA_LOCK = 0x706F6C696379  # the advisory lock the instances take to create the tables


def prepare(connection: psycopg.Connection[Any], shown: str) -> None:
    """Create the tables in the connection's schema (once, whichever instance comes first),
    or check that they are a policyc service's of this format (``shown``: the database, as
    messages name it). :class:`StoreError` otherwise."""
    try:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            present = connection.execute(
                "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NOT NULL",
                (list(TABLES),),
            ).fetchall()
            names = {str(name) for (name,) in present}
            if names and "meta" not in names:
                raise StoreError(
                    f"{shown}: the database holds tables of something else ({', '.join(sorted(names))}): "
                    "give the service a database, or a schema, of its own"
                )
            if names != set(TABLES):  # (a role without the right to create tables may use them)
                connection.execute(SCHEMA)
            found = connection.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if found is None:
                connection.execute("INSERT INTO meta VALUES ('format', %s)", (FORMAT,))
            elif found[0] != FORMAT:
                raise StoreError(
                    f"{shown}: a database of format {found[0]}, this policyc reads format {FORMAT}"
                )
    except psycopg.Error as error:
        raise StoreError(f"{shown}: not a database of policyc serve ({first_line(error)})") from None


def session_bytes(session: str) -> bytes:
    """A session id as the tables hold it (its UTF-8 bytes: any text, NUL included)."""
    return session.encode("utf-8")


def session_text(value: Any) -> str:
    """A session id as the tables gave it."""
    return bytes(value).decode("utf-8")
