"""Which sessions this service decides: all of its database's (:class:`Sole`: a SQLite file, or a
PostgreSQL database with this one instance), or those it holds the lease of (:class:`Leased`: a
PostgreSQL database several instances may share).

An instance on PostgreSQL takes the lease of every session it creates, and at start of every
session whose lease expired or that an earlier run of the same instance name held; it renews its
leases every third of their time (:meth:`Leased.renew`), and a session it was not able to renew
(another instance took it over) is dropped from memory: every write of it would be refused
anyway, as every write is fenced by the lease's epoch (:mod:`.pgleases`). A request about a
session another instance holds is refused 503 ``session-elsewhere``, naming the instance.
"""

from __future__ import annotations

from typing import Any, Protocol

Key = tuple[str, str]  # (principal, session id)

LEASE_TTL = 10.0  # seconds a lease runs without renewal


class Ownership(Protocol):
    def claim(self, key: Key) -> str | None:
        """Own a session (a new one, or one no one holds): None when this service owns it now,
        else the instance that holds it."""
        ...

    def start(self) -> None:
        """Own what this service may own when it starts."""
        ...

    def owns(self, key: Key) -> bool: ...

    def renew(self) -> list[Key]:
        """Keep what this service owns; the sessions it lost."""
        ...

    def stop(self) -> None: ...


class Sole:
    """Every session of the database is this service's."""

    def claim(self, key: Key) -> str | None:
        return None

    def start(self) -> None:
        pass

    def owns(self, key: Key) -> bool:
        return True

    def renew(self) -> list[Key]:
        return []

    def stop(self) -> None:
        pass


class Leased:
    """The sessions whose lease this instance holds in a PostgreSQL store."""

    def __init__(self, store: Any, ttl: float = LEASE_TTL) -> None:
        self.store = store
        self.ttl = ttl

    def claim(self, key: Key) -> str | None:
        if self.store.acquire(*key, self.ttl) is not None:
            return None
        lease = self.store.lease(*key)
        return "another instance" if lease is None else str(lease.owner)

    def start(self) -> None:
        """The sessions an earlier run of this instance held, and those whose lease expired."""
        for stored in self.store.sessions():
            lease = self.store.lease(stored.principal, stored.session)
            if lease is None or lease.owner == self.store.instance or lease.remaining <= 0:
                self.store.acquire(stored.principal, stored.session, self.ttl)

    def owns(self, key: Key) -> bool:
        return key in self.store.held

    def renew(self) -> list[Key]:
        lost: list[Key] = self.store.renew_all(self.ttl)
        return lost

    def stop(self) -> None:
        self.store.release_all()
