"""Which store a service keeps its state in: :func:`open_store` opens a SQLite file for a path
and a PostgreSQL database for a ``postgresql://`` URL; :class:`SessionStore` is what both do.

>>> import tempfile, os
>>> store = open_store(os.path.join(tempfile.mkdtemp(), "monitor.db"))
>>> type(store).__name__, store.create_session("agent", "s1", (), "sha256:p")
('Store', True)
>>> shown("postgresql://svc:s3cret@db.internal:5432/policyc?sslmode=require")
'postgresql://svc:***@db.internal:5432/policyc?sslmode=require'
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .audit import Chain
from .store import Records, Store, StoredSession, StoreError

if TYPE_CHECKING:
    from policyc.runtime.audit import Head

    from .pgstore import PostgresStore

SCHEMES = ("postgresql://", "postgres://")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class SessionStore(Protocol):
    """The operations of a service's store, the same on SQLite (:class:`.store.Store`) and on
    PostgreSQL (:class:`.pgstore.PostgresStore`); see the SQLite store for what each means."""

    path: str
    chain: Chain
    closed: bool
    widened: list[tuple[str, int]]

    def create_session(
        self, principal: str, session: str, roles: Sequence[str], policy: str, audit: Records = ()
    ) -> bool: ...

    def append(
        self, principal: str, session: str, rows: Sequence[tuple[str, str]], seq: int, audit: Records = ()
    ) -> int: ...

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
    ) -> None: ...

    def answered(
        self,
        decision: str,
        approved: bool,
        approver: str,
        row: tuple[str, str, int, str] | None,
        audit: Records = (),
    ) -> bool: ...

    def pending(self) -> list[tuple[str, str, str, str, float]]: ...

    def decision_row(self, decision: str) -> tuple[str, str, str] | None: ...

    def record_audit(self, records: Records) -> None: ...

    def decision(self, principal: str, session: str, decision: str) -> str | None: ...

    def keep_policy(self, digest: str, origin: str, bundle: bytes) -> None: ...

    def policy(self, digest: str) -> tuple[str, bytes] | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def meta(self, key: str) -> str | None: ...

    def session(self, principal: str, session: str) -> StoredSession | None: ...

    def sessions(self) -> Iterator[StoredSession]: ...

    def events(self, principal: str, session: str) -> Iterator[tuple[int, str, str]]: ...

    def counts(self) -> dict[str, int]: ...

    def audit_head(self) -> Head: ...

    def reaches(self, expected: Head) -> str | None: ...

    def close(self) -> None: ...


def open_store(
    target: str, sync: str = "normal", chain: Chain | None = None, *, instance: str | None = None
) -> Store | PostgresStore:
    """The store ``target`` names: a ``postgresql://`` (or ``postgres://``) URL opens a
    PostgreSQL database as the instance ``instance`` (a name of its own when None), anything
    else that is no URL a SQLite file. :class:`StoreError` for another kind of URL, and for a
    database that cannot be opened (the message never shows a password)."""
    if target.startswith(SCHEMES):
        try:
            from .pgstore import PostgresStore
        except ImportError:
            raise StoreError(
                f"{shown(target)}: a PostgreSQL database needs the `postgres` extra: "
                "pip install 'policyc[postgres]'"
            ) from None
        return PostgresStore(target, sync, chain, instance=instance)
    if _URL.match(target):
        raise StoreError(
            f"{shown(target)}: a database is a file's path or a postgresql:// URL, not a "
            f"{target.split('://', 1)[0]}:// URL"
        )
    return Store(target, sync, chain)


def shown(url: str) -> str:
    """A URL as a message may show it: a password in it (before the host, or a ``password``
    parameter) replaced by ``***``."""
    if not _URL.match(url):
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        query = parts.query
        if "password" in query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return url.split("://", 1)[0] + "://***"


if TYPE_CHECKING:

    def _conforms(sqlite: Store, postgres: PostgresStore) -> tuple[SessionStore, SessionStore]:
        """Both stores are session stores (mypy checks it here)."""
        return sqlite, postgres
