"""Group commit: the writes of the requests that reach their commit in the same turn of the event
loop go to the database as one transaction (:meth:`~.store.Store.group`), each in a savepoint of
its own, and nobody is answered before the commit that holds their write.

A request hands its write to :meth:`GroupCommit.write` and waits; the first write of a turn
schedules the flush at the end of that turn, so that every request that became ready meanwhile
joins it; requests arriving while a flush runs go into the next one. With ``--sync full`` each
commit waits for the disk, once per group instead of once per request: an answer still means its
write outlives a power cut.

A write's outcome is known to its request only once the commit is done, and the request waits
for it even when it is cancelled meanwhile (then it raises ``CancelledError`` after the commit),
so that what the server process keeps of a session (its sequence number) never runs ahead of or
behind the database.

A store whose commits wait on a server (PostgreSQL: ``store.blocking``) is written from one
writer thread of its own, so that the event loop goes on taking requests while a commit runs:
those requests go into the next group, which the writer starts as soon as the commit before it
is done. One thread is enough, as a store has one connection and one transaction at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .store import Store


class GroupCommit:
    """The writes waiting for the next commit of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.waiting: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.scheduled = False
        self.commits = 0  # commits made (each of one or more writes)
        self.writes = 0
        self.writer: Any = None  # the writer thread of a blocking store (made on first use)
        self.running = False  # a group is being committed by the writer thread

    async def write(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` (a write of the store) in the next group; its value once committed, or
        its error (a ``sqlite3.Error`` when the commit failed: nothing of it was written)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.waiting.append((work, future))
        if not self.scheduled and not self.running:
            self.scheduled = True
            loop.call_soon(self._flush)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():  # the write is in the next commit: wait for its outcome
                await asyncio.wait([future])
            if not future.cancelled():
                future.exception()  # seen: the request that made it is gone
            raise

    def _flush(self) -> None:
        self.scheduled = False
        batch, self.waiting = self.waiting, []
        if not batch:
            return
        if getattr(self.store, "blocking", False):
            self._start(batch)
            return
        self._settle(batch, self.store.group([work for work, _ in batch]))

    def _start(self, batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]]) -> None:
        """Commit ``batch`` in the writer thread; when it is done, answer it and start the next."""
        if self.writer is None:
            from concurrent.futures import ThreadPoolExecutor

            self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policyc-writer")
        self.running = True
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(self.writer, self.store.group, [work for work, _ in batch])

        def finished(outcomes: asyncio.Future[list[tuple[bool, Any]]]) -> None:
            self.running = False
            error = asyncio.CancelledError() if outcomes.cancelled() else outcomes.exception()
            if error is not None:  # not a write's error: group() itself failed
                self._settle(batch, [(False, error)] * len(batch))
            else:
                self._settle(batch, outcomes.result())
            if self.waiting and not self.scheduled:  # what arrived meanwhile: the next group
                self.scheduled = True
                loop.call_soon(self._flush)

        done.add_done_callback(finished)

    def _settle(
        self, batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]], outcomes: list[tuple[bool, Any]]
    ) -> None:
        self.commits += 1
        self.writes += len(batch)
        for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def close(self) -> None:
        """Stop the writer thread (once the commit it runs is done)."""
        if self.writer is not None:
            self.writer.shutdown(wait=True)
            self.writer = None
