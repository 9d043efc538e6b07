"""What a PostgreSQL transaction of the service costs when the event loop does not wait for it:
made by one writer thread (a synchronous psycopg connection, ``run_in_executor``: what the
service does), or by psycopg's ``AsyncConnection`` on the event loop (one shared by the requests,
as the service's one connection, or one per request). CPU (the whole process)
and wall time per transaction, each way in turn, on a PostgreSQL server the run starts
(tests/support/postgres.py, ``fsync = off``).

A transaction is a write's shape: ``BEGIN``, the lease's fence (a ``SELECT ... FOR SHARE``), an
insert, the audit chain's last record, an audit insert, ``COMMIT``; ``--concurrent`` requests
at once, each awaiting its transaction (the thread takes them one after the other, as the
service's one connection does).

    python benchmarks/bench_pg_calls.py [--transactions 2000] [--concurrent 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = """
CREATE TABLE leases (k int PRIMARY KEY, epoch int);
CREATE TABLE rows (k int, n int, body text, PRIMARY KEY (k, n));
CREATE TABLE audit (seq bigint PRIMARY KEY, line bytea);
INSERT INTO leases SELECT g, 1 FROM generate_series(0, 63) g;
"""
FENCE = "SELECT 1 FROM leases WHERE k = %s AND epoch = 1 FOR SHARE"
INSERT = "INSERT INTO rows VALUES (%s, %s, %s)"
LAST = "SELECT seq, line FROM audit ORDER BY seq DESC LIMIT 1"
AUDIT = "INSERT INTO audit VALUES (%s, %s)"
NUMBERS = itertools.count()  # the rows' numbers, each used once


def threaded(url: str, count: int, concurrent: int) -> tuple[float, float]:
    import psycopg

    connection = psycopg.connect(url, autocommit=True)
    writer = ThreadPoolExecutor(max_workers=1)
    seq = [connection.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0]]  # type: ignore[index]

    def transaction(k: int, n: int) -> None:
        with connection.transaction():
            connection.execute(FENCE, (k,), prepare=True).fetchone()
            connection.execute(INSERT, (k, n, "x" * 200), prepare=True)
            connection.execute(LAST, prepare=True).fetchone()
            seq[0] += 1
            connection.execute(AUDIT, (seq[0], b"y" * 300), prepare=True)

    async def request(k: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(count // concurrent):
            await loop.run_in_executor(writer, transaction, k, next(NUMBERS))

    return _timed(
        lambda: asyncio.run(_all(request, concurrent)), count, lambda: (writer.shutdown(), connection.close())
    )


def asynchronous(url: str, count: int, concurrent: int, shared: bool = False) -> tuple[float, float]:
    import psycopg

    seq = [0]

    async def main() -> None:
        made = 1 if shared else concurrent
        connections = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(made)]
        locks = [asyncio.Lock() for _ in connections]
        async with connections[0].cursor() as cursor:
            await cursor.execute("SELECT coalesce(max(seq), 0) FROM audit")
            seq[0] = (await cursor.fetchone())[0]  # type: ignore[index]

        async def request(k: int) -> None:
            connection, lock = connections[k % made], locks[k % made]
            for _ in range(count // concurrent):
                async with lock, connection.transaction():
                    await (await connection.execute(FENCE, (k + 32,), prepare=True)).fetchone()
                    await connection.execute(INSERT, (k + 32, next(NUMBERS), "x" * 200), prepare=True)
                    await (await connection.execute(LAST, prepare=True)).fetchone()
                    seq[0] += 1
                    await connection.execute(AUDIT, (seq[0], b"y" * 300), prepare=True)

        await _all(request, concurrent)
        for connection in connections:
            await connection.close()

    return _timed(lambda: asyncio.run(main()), count, lambda: None)


async def _all(request: Any, concurrent: int) -> None:
    await asyncio.gather(*(request(k) for k in range(concurrent)))


def _timed(run: Any, count: int, finish: Any) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finish()
    return cpu / count, wall / count


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import psycopg

    from tests.support.postgres import start

    server = start()
    try:
        ways: list[tuple[str, Any]] = [
            ("writer thread", threaded),
            ("AsyncConnection x1", lambda *a: asynchronous(*a, shared=True)),
            (f"AsyncConnection x{args.concurrent}", asynchronous),
        ]
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in ways}
        for number in range(args.rounds):
            url = server.create_schema(f"calls{number}")
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute(SCHEMA)
            for name, way in ways[number % 3 :] + ways[: number % 3]:
                figures[name].append(way(url, args.transactions, args.concurrent))
        print(
            f"{args.transactions} transactions, {args.concurrent} at once, {args.rounds} rounds (median, range):"
        )
        for name, found in figures.items():
            cpu = [c * 1e3 for c, _ in found]
            wall = [w * 1e3 for _, w in found]
            print(
                f"{name:20} CPU {statistics.median(cpu):.3f} ms ({min(cpu):.3f}-{max(cpu):.3f}), "
                f"wall {statistics.median(wall):.3f} ms ({min(wall):.3f}-{max(wall):.3f}) per transaction"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
