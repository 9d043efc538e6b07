"""Group commit (serve/commits.py, Store.group): the writes of many requests in one transaction,
each taken back alone when it fails, and nobody answered before the commit that holds their
write."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest

from policyc.runtime.audit import FORMAT, verify_bytes
from policyc.serve.audit import export
from policyc.serve.commits import GroupCommit
from policyc.serve.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    made = Store(str(tmp_path / "monitor.db"))
    made.record_audit([{"type": "header", "format": FORMAT, "policy": "sha256:p", "mode": "enforce"}])
    for session in ("s1", "s2", "s3"):
        assert made.create_session("agent", session, (), "sha256:p")
    return made


def _events(path: str, session: str) -> list[tuple[int, str]]:
    """What another connection reads: only what was committed."""
    with sqlite3.connect(path) as other:
        return other.execute(
            "SELECT seq, body FROM events WHERE session = ? ORDER BY seq", (session,)
        ).fetchall()


def test_a_failing_write_of_a_group_is_taken_back_alone(store: Store) -> None:
    record = {"type": "event", "session": "s", "event": {"id": "e"}}
    outcomes = store.group(
        [
            lambda: store.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record]),
            lambda: store.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record]),
            # the same sequence number again: the primary key refuses it
            lambda: store.append("agent", "s1", [("record", '{"id":"c"}')], 0, [record, record]),
            lambda: store.append("agent", "s3", [("record", '{"id":"d"}')], 0, [record]),
        ]
    )
    assert [ok for ok, _ in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2][1], sqlite3.IntegrityError)
    assert _events(store.path, "s1") == [(1, '{"id":"a"}')]
    assert _events(store.path, "s3") == [(1, '{"id":"d"}')]
    # the audit records of the failed write went with it: the chain is whole
    store.record_audit([{"type": "checkpoint", "final": True}])
    verified = verify_bytes(export(store.path))
    assert verified.problem is None and verified.records == 5  # the header, three events, the end


def test_a_write_alone_in_its_group_that_fails_is_taken_back_and_the_store_goes_on(store: Store) -> None:
    """A group of one write runs without a savepoint: its failure takes back the transaction,
    its audit records with it, and the next group writes as before."""
    record = {"type": "event", "session": "s", "event": {"id": "e"}}
    assert store.group([lambda: store.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record])]) == [
        (True, 1)
    ]
    again = store.group([lambda: store.append("agent", "s1", [("record", '{"id":"b"}')], 0, [record])])
    assert [ok for ok, _ in again] == [False] and isinstance(again[0][1], sqlite3.IntegrityError)
    assert not store.db.in_transaction
    assert store.group([lambda: store.append("agent", "s2", [("record", '{"id":"c"}')], 0, [record])]) == [
        (True, 1)
    ]
    assert _events(store.path, "s1") == [(1, '{"id":"a"}')]
    store.record_audit([{"type": "checkpoint", "final": True}])
    verified = verify_bytes(export(store.path))
    assert verified.problem is None and verified.records == 4  # the header, two events, the end


def test_a_failed_commit_fails_every_write_of_the_group(store: Store) -> None:
    def breaks_the_transaction() -> None:
        store.db.execute("COMMIT")  # ends the group's transaction: its own COMMIT then fails

    outcomes = store.group(
        [lambda: store.append("agent", "s1", [("record", '{"id":"a"}')], 0), breaks_the_transaction]
    )
    assert all(not ok for ok, _ in outcomes)
    assert not store.db.in_transaction
    # the store writes on afterwards
    assert store.group([lambda: store.append("agent", "s2", [("record", "{}")], 0)]) == [(True, 1)]


def test_writes_of_one_turn_share_one_commit_and_are_answered_after_it(store: Store) -> None:
    commits = GroupCommit(store)
    seen: dict[str, list[tuple[int, str]]] = {}

    async def request(session: str) -> None:
        await commits.write(lambda: store.append("agent", session, [("record", f'"{session}"')], 0))
        seen[session] = _events(store.path, session)  # answered: the write is in the database

    async def main() -> None:
        await asyncio.gather(*(request(s) for s in ("s1", "s2", "s3")))

    asyncio.run(main())
    assert commits.commits == 1 and commits.writes == 3
    assert seen == {s: [(1, f'"{s}"')] for s in ("s1", "s2", "s3")}


def test_a_cancelled_request_still_waits_for_its_commit(store: Store) -> None:
    commits = GroupCommit(store)

    async def main() -> list[tuple[int, str]]:
        task = asyncio.create_task(commits.write(lambda: store.append("agent", "s1", [("record", "1")], 0)))
        await asyncio.sleep(0)  # the write is waiting for the flush
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return _events(store.path, "s1")  # the cancellation came after the commit, not before

    assert asyncio.run(main()) == [(1, "1")]


def test_a_group_whose_writes_all_succeed_runs_them_without_savepoints(store: Store) -> None:
    """The savepoints are for a write that fails: while none does, a group is its writes and
    one commit; when one fails, the others are still committed once each."""
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    record = {"type": "event", "session": "s", "event": {"id": "e"}}
    outcomes = store.group(
        [lambda s=s: store.append("agent", s, [("record", '{"id":"a"}')], 0, [record]) for s in ("s1", "s2")]
    )
    assert outcomes == [(True, 1), (True, 1)]
    assert not [s for s in statements if "SAVEPOINT" in s or "RELEASE" in s]
    assert statements.count("COMMIT") == 1
    statements.clear()
    failing = store.group(
        [
            lambda: store.append("agent", "s3", [("record", '{"id":"b"}')], 0, [record]),
            lambda: store.append("agent", "s1", [("record", '{"id":"c"}')], 0, [record]),  # seq 1 again
        ]
    )
    store.db.set_trace_callback(None)
    assert [ok for ok, _ in failing] == [True, False]
    assert "ROLLBACK" in statements and any("SAVEPOINT" in s for s in statements)
    assert _events(store.path, "s3") == [(1, '{"id":"b"}')]
    assert _events(store.path, "s1") == [(1, '{"id":"a"}')]
    store.record_audit([{"type": "checkpoint", "final": True}])
    verified = verify_bytes(export(store.path))
    assert verified.problem is None and verified.records == 5  # the header, three events, the end


def test_the_log_is_checkpointed_by_a_thread_of_its_own_which_stops_with_the_store(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from policyc.serve import checkpoints

    assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # no commit checkpoints
    monkeypatch.setattr(checkpoints, "EVERY", 3)
    for n in range(1, 7):
        store.append("agent", "s1", [("record", f'{{"id":"e{n}"}}')], n - 1)
    thread = store.checkpoints.thread
    assert thread is not None and thread.name == "policyc-checkpoints"
    deadline = time.monotonic() + 10
    while store.checkpoints.rounds < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.checkpoints.rounds >= 1 and store.checkpoints.failed is None
    # what the thread copied is the database's: another connection reads every committed row
    assert [seq for seq, _ in _events(store.path, "s1")] == [1, 2, 3, 4, 5, 6]
    store.close()
    assert not thread.is_alive()


def test_the_log_starts_over_while_commits_never_stop(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread's checkpoints copy the log while commits go on appending to it, so none of
    them reaches its end; past LIMIT pages the thread finishes one with the writer kept out, and
    the log starts over instead of growing with every commit."""
    from policyc.serve import checkpoints

    monkeypatch.setattr(checkpoints, "EVERY", 5)
    monkeypatch.setattr(checkpoints, "LIMIT", 100)
    for n in range(6000):
        store.append("agent", "s1", [("record", f'{{"id":"e{n}"}}')], n)
    # a frame of the log is a page (4 KiB) and its header; about 3 a commit: 18,000 frames
    # (74 MB) had the log never started over since the first commit, and half as many had it
    # started over once (how often it does depends on the machine: each finished checkpoint
    # waits for the disk)
    frames = os.path.getsize(store.path + "-wal") // (4096 + 24)
    assert store.checkpoints.finished >= 1
    assert frames < 9000, frames


def test_closing_the_store_while_the_thread_waits_for_its_lock_ends(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread finishing a checkpoint waits for the store's lock, which the writer holds while
    it closes the store (and waits for the thread to end): the thread gives up its checkpoint,
    and both end."""
    import threading

    from policyc.serve import checkpoints

    monkeypatch.setattr(checkpoints, "EVERY", 1)
    monkeypatch.setattr(checkpoints, "LIMIT", -1)  # every checkpoint finished with the lock held

    def writer() -> None:
        with store.lock:
            store.append("agent", "s1", [("record", '{"id":"e"}')], 0)  # wakes the thread
            time.sleep(0.2)  # the thread now waits for the lock
            store.close()

    closing = threading.Thread(target=writer, daemon=True)
    closing.start()
    closing.join(timeout=10)
    assert not closing.is_alive(), "closing the store waits forever"
    assert store.closed and store.checkpoints.thread is not None
    assert not store.checkpoints.thread.is_alive()


def test_a_write_that_fails_after_its_audit_records_leaves_the_chain_whole(store: Store) -> None:
    """The writes of a group after the first take the chain's last record from memory: a write
    taken back after writing its audit records must not leave them there for the next."""
    record = {"type": "event", "session": "s", "event": {"id": "e"}}

    def fails_once_written() -> None:
        store.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record, record])
        raise RuntimeError("the request went wrong after its write")

    outcomes = store.group(
        [
            lambda: store.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record]),
            fails_once_written,
            lambda: store.append("agent", "s3", [("record", '{"id":"d"}')], 0, [record]),
            lambda: store.append("agent", "s3", [("record", '{"id":"e"}')], 1, [record]),
        ]
    )
    assert [ok for ok, _ in outcomes] == [True, False, True, True]
    assert _events(store.path, "s2") == []
    store.record_audit([{"type": "checkpoint", "final": True}])
    verified = verify_bytes(export(store.path))
    assert verified.problem is None and verified.records == 5  # the header, three events, the end
