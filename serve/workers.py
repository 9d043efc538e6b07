"""Evaluator processes: the service's sessions sharded over ``--workers`` processes.

A session lives in one worker, chosen by a hash of its principal and id. Each worker opens the
database, loads the policies its sessions run from it and rebuilds the sessions of its shard;
the server process keeps answering HTTP and writing the database. A request for a session goes
to its worker over a pipe and waits for the answer. A worker that dies (killed, crashed) is
started again and rebuilds its shard from the database while the requests for it wait; the
request that was being answered is asked once more (nothing of it was committed: the server
commits only what a worker has answered), and when the new worker fails on it too the request
is refused (:class:`~.errors.Unavailable` ``worker-failed``), never answered by a guess. A
refusal crosses the pipe as its kind, code and message (:func:`~.errors.named`).
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import threading
from multiprocessing.connection import Connection
from typing import Any

from .errors import ServiceError, Unavailable, named
from .sessions import Key, Operation, committed
from .store import Store

RESTARTS = 1  # times a request is asked again of a restarted worker


def shard(key: Key, count: int) -> int:
    digest = hashlib.sha256(f"{key[0]}\0{key[1]}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def _serve_shard(functors: str | None, db: str, sync: str, index: int, count: int, pipe: Connection) -> None:
    """A worker's life: rebuild its shard, answer requests until the pipe closes."""
    from policyc.runtime.functors import load_module

    from .audit import DatabaseAudit
    from .sessions import Sessions
    from .store import Store

    chosen = load_module(functors) if functors else None
    sessions = Sessions(Store(db, sync), chosen, lambda key: shard(key, count) == index, DatabaseAudit(db))
    pipe.send(("ready", sessions.restore()))
    while True:
        try:
            operation, args = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            answer: Any = ("ok", sessions.ask(operation, *args))
        except ServiceError as refused:
            answer = ("refused", (type(refused).__name__, refused.code, refused.message))
        except Exception as error:  # the request fails; the worker goes on
            answer = (
                "refused",
                ("Failed", "internal-error", f"the worker failed: {type(error).__name__}: {error}"),
            )
        pipe.send(answer)


class Worker:
    """One evaluator process and the pipe to it (one request at a time)."""

    def __init__(
        self, index: int, count: int, functors: str | None, db: str, sync: str, store: Store
    ) -> None:
        self.index = index
        self.count = count
        self.spec = (functors, db, sync)
        self.store = store  # the server's: audit records no change carries are written there
        self.lock = threading.Lock()
        self.process: Any = None
        self.pipe: Connection | None = None
        self.seqs: dict[Key, int] = {}

    def start(self) -> dict[Key, int]:
        """Start the process; the last sequence number of every session of its shard."""
        context = multiprocessing.get_context("spawn")
        here, there = context.Pipe()
        self.process = context.Process(
            target=_serve_shard, args=(*self.spec, self.index, self.count, there), daemon=True
        )
        self.process.start()
        there.close()
        self.pipe = here
        kind, seqs = here.recv()
        if kind != "ready":
            raise RuntimeError(f"worker {self.index} did not start")
        return dict(seqs)

    def call(self, operation: Operation, key: Key, *args: Any, then: Any = None) -> Any:
        """Ask the worker about a session (restarting it, and asking again, when it died); then,
        while no other request reaches the worker, ``then(answer)`` (the commit): if that
        fails, the worker rebuilds the session from the database before the error goes on."""
        with self.lock:
            value, records = self._ask(operation, key, *args)
            return committed(value, records, then, self.store, lambda: self._ask("rebuild", key))

    def _ask(self, operation: str, *args: Any) -> Any:
        for attempt in range(RESTARTS + 1):
            try:
                assert self.pipe is not None
                self.pipe.send((operation, args))
                kind, value = self.pipe.recv()
            except (EOFError, OSError):
                self._restart()
                if attempt == RESTARTS:
                    raise Unavailable(
                        "worker-failed", f"worker {self.index} failed on this request"
                    ) from None
                continue
            if kind == "refused":
                raise named(*value)
            return value
        raise AssertionError("unreachable")

    def _restart(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join(timeout=10)
        self.start()

    def stop(self) -> None:
        if self.pipe is not None:
            self.pipe.close()
        if self.process is not None:
            self.process.join(timeout=10)
            if self.process.is_alive():
                self.process.kill()


class Pool:
    """The workers of a service, asked from the event loop without blocking it."""

    def __init__(
        self, count: int, functors: str | None, db: str, store: Store, audit: Any = None, sync: str = "normal"
    ) -> None:
        self.workers = [Worker(i, count, functors, db, sync, store) for i in range(count)]
        self.audit = audit  # the server's instance of the audit log: it closes it

    def start(self) -> dict[Key, int]:
        seqs: dict[Key, int] = {}
        for worker in self.workers:
            seqs.update(worker.start())
        return seqs

    def adopt(self, key: Key) -> int:
        seq: int = self.of(key).call("rebuild", key)
        return seq

    def forget(self, key: Key) -> None:
        self.of(key).call("forget", key)

    def of(self, key: Key) -> Worker:
        return self.workers[shard(key, len(self.workers))]

    async def call(self, key: Key, operation: Operation, *args: Any, then: Any = None) -> Any:
        return await asyncio.to_thread(self.of(key).call, operation, key, *args, then=then)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.audit is not None:
            self.audit.close()
