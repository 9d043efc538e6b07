"""Who owns each session of a PostgreSQL store shared by several instances: the statements on
the ``leases`` table, each run inside the caller's transaction (:mod:`.pgstore` keeps which
leases its instance holds, and at which epoch).

A lease is a row ``(principal, session) -> owner, epoch, expires``. Every acquisition (a new
session, one released, one whose lease expired, one an earlier run of the same instance held)
raises the epoch by one; renewing keeps it. The epoch is the fencing token: a write of a
session first runs :func:`fence`, which locks the row ``FOR SHARE`` if it still names this
owner and epoch. A take-over is an ``UPDATE`` of that row, so it waits for every commit under
way and every commit after it finds the epoch moved. Times come from the database's clock
(``clock_timestamp()``), so the instances' clocks never have to agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from .pgschema import session_bytes, session_text

Key = tuple[str, str]  # (principal, session id)


@dataclass(frozen=True)
class Lease:
    """Who owns a session: the owner instance, the epoch (the fencing token: raised by every
    acquisition) and when the lease ends, by the database's clock (``expires``, seconds since
    the epoch) and as seen when it was read (``remaining`` seconds, negative once expired)."""

    principal: str
    session: str
    owner: str
    epoch: int
    expires: float
    remaining: float


def _columns(table: str = "") -> str:
    """What a statement answers of a lease (:func:`_lease`), of the table named ``table``."""
    t = f"{table}." if table else ""
    return (
        f"{t}principal, {t}session, {t}owner, {t}epoch, extract(epoch FROM {t}expires)::float8, "
        f"extract(epoch FROM {t}expires - clock_timestamp())::float8"
    )


UNTIL = "clock_timestamp() + make_interval(secs => %s)"  # ttl seconds from now, by the database

ACQUIRE = (
    f"INSERT INTO leases AS l VALUES (%s, %s, %s, 1, {UNTIL}) ON CONFLICT (principal, session) DO UPDATE "
    "SET owner = EXCLUDED.owner, epoch = l.epoch + 1, expires = EXCLUDED.expires "
    "WHERE l.expires <= clock_timestamp() OR l.owner = EXCLUDED.owner "
    f"RETURNING {_columns()}"
)
RENEW = (
    f"UPDATE leases SET expires = {UNTIL} WHERE principal = %s AND session = %s AND owner = %s "
    f"AND epoch = %s RETURNING {_columns()}"
)
RENEW_MANY = (
    f"UPDATE leases AS l SET expires = {UNTIL} FROM unnest(%s::text[], %s::bytea[], %s::bigint[]) "
    "AS h(principal, session, epoch) WHERE l.principal = h.principal AND l.session = h.session "
    "AND l.epoch = h.epoch AND l.owner = %s RETURNING l.principal, l.session"
)
RELEASE = (
    "UPDATE leases SET expires = clock_timestamp() WHERE principal = %s AND session = %s "
    "AND owner = %s AND epoch = %s RETURNING 1"
)
TAKE_OVER = (
    f"UPDATE leases AS l SET owner = %s, epoch = l.epoch + 1, expires = {UNTIL} FROM (SELECT principal, "
    "session FROM leases WHERE expires <= clock_timestamp() ORDER BY expires LIMIT %s "
    "FOR UPDATE SKIP LOCKED) AS x WHERE l.principal = x.principal AND l.session = x.session "
    f"RETURNING {_columns('l')}"
)
READ = f"SELECT {_columns()} FROM leases WHERE principal = %s AND session = %s"
FENCE = "SELECT 1 FROM leases WHERE principal = %s AND session = %s AND owner = %s AND epoch = %s FOR SHARE"


def acquire(connection: psycopg.Connection[Any], owner: str, key: Key, ttl: float) -> Lease | None:
    """Own a session for ``ttl`` seconds if no other instance's lease on it runs; the lease."""
    found = connection.execute(
        ACQUIRE, (key[0], session_bytes(key[1]), owner, float(ttl)), prepare=True
    ).fetchone()
    return None if found is None else _lease(found)


def renew(connection: psycopg.Connection[Any], owner: str, key: Key, epoch: int, ttl: float) -> Lease | None:
    """Extend ``owner``'s lease at ``epoch`` (expired or not, as long as nobody took it over)."""
    found = connection.execute(
        RENEW, (float(ttl), key[0], session_bytes(key[1]), owner, epoch), prepare=True
    ).fetchone()
    return None if found is None else _lease(found)


def renew_many(
    connection: psycopg.Connection[Any], owner: str, held: Mapping[Key, int], ttl: float
) -> set[Key]:
    """Extend every lease of ``held`` (their epochs by session) in one statement; those renewed."""
    keys = list(held)
    rows = connection.execute(
        RENEW_MANY,
        (
            float(ttl),
            [k[0] for k in keys],
            [session_bytes(k[1]) for k in keys],
            [held[k] for k in keys],
            owner,
        ),
        prepare=True,
    ).fetchall()
    return {(str(principal), session_text(session)) for principal, session in rows}


def release(connection: psycopg.Connection[Any], owner: str, key: Key, epoch: int) -> bool:
    """End ``owner``'s lease at ``epoch`` now; whether it was still that."""
    return (
        connection.execute(RELEASE, (key[0], session_bytes(key[1]), owner, epoch), prepare=True).fetchone()
        is not None
    )


def take_over_expired(connection: psycopg.Connection[Any], owner: str, ttl: float, limit: int) -> list[Lease]:
    """Own up to ``limit`` sessions whose lease expired; rows other instances are taking over
    at the same moment are skipped (each session goes to one)."""
    rows = connection.execute(TAKE_OVER, (owner, float(ttl), int(limit)), prepare=True).fetchall()
    return [_lease(row) for row in rows]


def read(connection: psycopg.Connection[Any], key: Key) -> Lease | None:
    found = connection.execute(READ, (key[0], session_bytes(key[1])), prepare=True).fetchone()
    return None if found is None else _lease(found)


def fence(connection: psycopg.Connection[Any], owner: str, key: Key, epoch: int) -> bool:
    """Whether ``owner`` still holds the session at ``epoch``; if so the lease is locked until
    the transaction ends (a take-over waits for it)."""
    return (
        connection.execute(FENCE, (key[0], session_bytes(key[1]), owner, epoch), prepare=True).fetchone()
        is not None
    )


def _lease(row: Sequence[Any]) -> Lease:
    return Lease(str(row[0]), session_text(row[1]), str(row[2]), int(row[3]), float(row[4]), float(row[5]))
