"""WAL checkpoints, mostly off the writer's thread.

In WAL mode SQLite appends every commit to the ``-wal`` file and copies the pages back into the
database file at a checkpoint; left to itself, the commit that finds the log past 1,000 pages
runs the checkpoint, and with it the disk syncs it waits for (``synchronous=NORMAL`` syncs the
log and the database there), on the event loop that commits. A :class:`Checkpointer` runs them
instead on a thread of its own, with a connection of its own, every :data:`EVERY` commits: a
``PASSIVE`` checkpoint, which copies what no reader needs and never blocks a writer, so the
event loop goes on answering while the pages are copied and synced (SQLite lets go of Python's
lock while it works).

Such a checkpoint never reaches the end of a log that commits keep appending to, and the log
starts over only after one has: so when the log holds more than :data:`LIMIT` pages, the thread
checkpoints once more holding the store's lock, which keeps the writer out meanwhile: that one
copies what was logged since its last (little), reaches the end, and the next commit starts the
log over. A commit that comes meanwhile waits for it: once per :data:`LIMIT` pages of the log, as
with SQLite's own, but for the little left to copy and the syncs rather than every page.

What a commit means does not change: it is durable once in the log, as before; a checkpoint
only moves it into the database file. A checkpoint of the thread that fails (the disk full, say)
is said once in the log and tried again at the next round; the log then grows until one
succeeds, as it would with SQLite's own checkpoints.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

# commits between the thread's checkpoints, and the pages of the log past which it finishes one
# with the writer kept out (SQLite's own checkpoints come every 1,000 pages)
EVERY = 100
LIMIT = 1000

log = logging.getLogger("policyc.serve")


class Checkpointer:
    """Checkpoints of the database at ``path`` on a thread started at the first round."""

    def __init__(self, path: str, sync: str, lock: Any) -> None:
        self.path = path
        self.sync = sync
        self.lock = lock  # the store's: held, nothing is written
        self.commits = 0
        self.wake = threading.Event()
        self.stopping = False
        self.thread: threading.Thread | None = None
        self.failed: str | None = None  # the last checkpoint's error, said once
        self.rounds = 0  # checkpoints run
        self.finished = 0  # of which to the log's end

    def committed(self) -> None:
        """A commit was made (by the writer, holding the store's lock)."""
        self.commits += 1
        if self.commits % EVERY or self.stopping:
            return
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="policyc-checkpoints", daemon=True)
            self.thread.start()
        self.wake.set()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        while True:
            self.wake.wait()
            self.wake.clear()
            if self.stopping:
                break
            try:
                if connection is None:
                    connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                    connection.execute(f"PRAGMA synchronous={self.sync.upper()}")
                    connection.execute("PRAGMA busy_timeout=5000")
                _, pages, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                if pages > LIMIT and self._locked():  # the writer kept out: the log starts over
                    try:
                        connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    finally:
                        self.lock.release()
                    self.finished += 1
                self.rounds += 1
                self.failed = None
            except sqlite3.Error as error:
                if self.failed is None:
                    log.warning(
                        "%s: a checkpoint of the log failed (tried again later): %s", self.path, error
                    )
                self.failed = str(error)
        if connection is not None:
            connection.close()

    def _locked(self) -> bool:
        """The store's lock, taken; False when the store is being closed meanwhile (whoever
        closes it may hold the lock while waiting for this thread to end)."""
        while not self.lock.acquire(timeout=0.05):
            if self.stopping:
                return False
        return True

    def stop(self) -> None:
        """Stop the thread, once the checkpoint it runs is done."""
        self.stopping = True
        self.wake.set()
        if self.thread is not None:
            self.thread.join()
