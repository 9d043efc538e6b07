"""``policyc audit export``: the audit log a service's database holds, as one JSON-lines log that
``policyc audit verify`` checks, whatever the service's shape.

* A SQLite file holds one chain (:func:`.audit.snapshot`). A service of ``--processes N`` keeps
  one file per process (``NAME.EXT``, then ``NAME.pI.EXT`` beside it, :func:`.fleet.database_of`):
  given the first, the others found beside it are exported with it, and each file's tables are
  held against its own chain.
* A PostgreSQL database (``postgresql://``) holds one chain per instance that wrote
  (``audit.writer``); they are read, with the ``decisions`` and ``answers`` tables, in one
  read-only transaction, and the tables are held against all the chains together (a session
  that moved to another instance has its decisions in both chains). Its password comes from
  ``PGPASSWORD`` or a ``PGPASSFILE``, never from the command line.

The log written holds the chains one after the other, each whole from its first record (``seq``
0, the genesis ``prev``), in the order of the files, or of the instances' names; ``verify``
checks them chain by chain, and their head has one entry per chain. A chain whose last segment
its writer has not closed (the service is running, or was killed) is exported as it is,
reported ``open``: what is committed verifies, up to a head the writer published.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from .audit import Difference, Snapshot, compare, snapshot

SCHEMES = ("postgresql://", "postgres://")


class ExportError(Exception):
    """A database that cannot be read (or is named in a way that is refused)."""


@dataclass(frozen=True)
class Source:
    """Where one chain of the export comes from: a file, or an instance of a PostgreSQL
    database; whether its last segment is open; its first line in the export."""

    name: str
    open: bool
    line: int


@dataclass(frozen=True)
class Exported:
    """The merged log, where each chain came from, and the first difference between the
    database's tables and the log (None: none)."""

    log: bytes
    sources: tuple[Source, ...]
    difference: Difference | None


def export_databases(databases: tuple[str, ...]) -> Exported:
    """The export of ``databases``: one ``postgresql://`` URL, or SQLite files (each with the
    files of its other processes found beside it). :class:`ExportError` saying what cannot be
    read."""
    if not databases:
        raise ExportError("name a database: a SQLite file, or a postgresql:// URL")
    urls = [db for db in databases if db.startswith(SCHEMES)]
    if urls:
        if len(databases) != 1:
            raise ExportError(
                "a postgresql:// database is exported alone (its instances' chains are all in it)"
            )
        return _postgres(urls[0])
    files: list[str] = []
    for db in databases:
        for found in process_files(db):
            if found not in files:
                files.append(found)
    chains: list[tuple[str, Snapshot]] = []
    for path in files:
        try:
            chains.append((path, snapshot(path)))
        except sqlite3.Error as error:
            raise ExportError(f"`{path}` holds no audit log of policyc serve: {error}") from None
    log, sources = _merged([(path, taken.log) for path, taken in chains])
    difference: Difference | None = None
    for path, taken in chains:
        differs = compare(taken.log, taken.decisions, taken.answers)
        if differs is not None:
            difference = Difference(differs.code, f"{path}: {differs.message}")
            break
    return Exported(log, sources, difference)


def process_files(db: str) -> list[str]:
    """The database files of a service at ``db``: the file itself, and the files of its other
    processes (``NAME.pI.EXT``, I from 1) beside it while they exist. :class:`ExportError` if
    ``db`` is not a file."""
    from .fleet import database_of

    if not os.path.isfile(db):
        raise ExportError(f"`{db}` is not a file")
    found = [db]
    index = 1
    while os.path.isfile(other := database_of(db, index, index + 1)):
        found.append(other)
        index += 1
    return found


def _merged(chains: list[tuple[str, bytes]]) -> tuple[bytes, tuple[Source, ...]]:
    """The chains one after the other (empty ones left out), and where each came from."""
    from policyc.runtime.audit import head_of_bytes

    parts: list[bytes] = []
    sources = []
    line = 1
    for name, data in chains:
        if not data:
            continue
        try:
            head = head_of_bytes(data, name)
            still_open = any(not entry.final for entry in head.entries)
        except Exception:  # `verify` says what is wrong with it
            still_open = False
        sources.append(Source(name, still_open, line))
        parts.append(data)
        line += data.count(b"\n")
    return b"".join(parts), tuple(sources)


def _postgres(url: str) -> Exported:
    """The export of a PostgreSQL database: every writer's chain and the tables, read in one
    read-only, repeatable-read transaction."""
    from .stores import shown

    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ExportError(
            f"{shown(url)}: a PostgreSQL database needs the `postgres` extra: pip install 'policyc[postgres]'"
        ) from None
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error as error:
        raise ExportError(f"{shown(url)}: not a PostgreSQL connection URL ({_first(error)})") from None
    if given.get("password"):
        raise ExportError(
            f"{shown(url)}: the URL holds a password; give it in PGPASSWORD or a PGPASSFILE, never on "
            "the command line"
        )
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in given:
        options["connect_timeout"] = 10
    try:
        with psycopg.connect(url, **options) as connection:
            with connection.transaction():
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                rows = connection.execute("SELECT writer, line FROM audit ORDER BY writer, seq").fetchall()
                stored = connection.execute(
                    "SELECT id, principal, session, verdict, body FROM decisions ORDER BY created, id"
                ).fetchall()
                answered = connection.execute(
                    "SELECT decision, approved, approver FROM answers ORDER BY created, decision"
                ).fetchall()
    except psycopg.Error as error:
        raise ExportError(f"{shown(url)}: cannot read its audit log: {_first(error)}") from None
    writers: dict[str, list[bytes]] = {}
    for writer, line in rows:
        writers.setdefault(str(writer), []).append(bytes(line) + b"\n")
    log, sources = _merged([(f"instance {name}", b"".join(lines)) for name, lines in writers.items()])
    decisions = [(d, p, bytes(s).decode("utf-8"), v, b) for d, p, s, v, b in stored]
    found = compare(log, decisions, answered)
    difference = None if found is None else Difference(found.code, f"{shown(url)}: {found.message}")
    return Exported(log, sources, difference)


def _first(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
