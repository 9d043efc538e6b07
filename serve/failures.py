"""What a store raises when the database did not do an operation (the PostgreSQL store's; the
SQLite store raises ``sqlite3.Error``): a leaf module, so that whatever catches these does not
import the store that raises them.

A :class:`StoreFailure` of a write means nothing of it was committed, or, when the connection
broke while the database committed it, that the outcome is unknown: either way the service
answers that the write was not recorded and rebuilds the session from the database, which
holds it or not. :class:`LeaseLost` is the one of a session this instance no longer owns.
"""

from __future__ import annotations


class StoreFailure(RuntimeError):
    """An operation the database did not do (it is down, the connection broke, a row it
    refused); the message says which."""


class LeaseLost(StoreFailure):
    """A write of a session whose lease this instance does not hold (any more): another
    instance took the session over, or this one never acquired it. Nothing was written."""


def first_line(error: BaseException) -> str:
    """The first line of a database error's message (the rest is detail for its log)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def not_done() -> tuple[type[BaseException], ...]:
    """The errors a store raises when the database did not do a write (SQLite's and the
    PostgreSQL store's), to catch as one."""
    import sqlite3

    return (sqlite3.Error, StoreFailure)
