"""The service's stores, SQLite and PostgreSQL (a real server: tests/support/postgres.py), held
to the same behaviour: sessions added once, events and decisions committed whole or not at
all, escalations answered once, policies and settings kept, the audit log chained,
checkpointed, published and reached as `policyc audit verify` checks it. Then what PostgreSQL
adds for several instances: one owner per session through a lease, and the epoch that fences
an owner that lost it, so that its late writes write nothing."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from policyc.runtime.audit import FORMAT, Head, HeadEntry, private_key, public_key, verify_bytes
from policyc.runtime.bundle import generate_keys
from policyc.serve.audit import Chain, export
from policyc.serve.failures import LeaseLost, StoreFailure
from policyc.serve.pgstore import PostgresStore
from policyc.serve.store import Store, StoreError
from policyc.serve.stores import open_store

from .support.postgres import PostgresServer

HEADER = {"type": "header", "format": FORMAT, "policy": "sha256:p", "mode": "enforce"}
CLOSE = {"type": "checkpoint", "final": True}
KINDS = ["sqlite", "postgresql"]


@dataclass
class Opened:
    """A new database of one kind, and the stores opened on it (closed after the test)."""

    kind: str
    target: str
    stores: list[Any] = field(default_factory=list)

    def open(self, chain: Chain | None = None, instance: str = "a") -> Any:
        store = open_store(self.target, chain=chain, instance=instance)
        self.stores.append(store)
        return store

    def own(self, store: Any, principal: str, session: str) -> None:
        """Make ``store`` the session's owner (PostgreSQL; a SQLite database has one writer)."""
        if isinstance(store, PostgresStore):
            assert store.acquire(principal, session, 60) is not None

    def logs(self, store: Any) -> list[bytes]:
        """The audit log as `policyc audit export` writes it: a file per chain."""
        if isinstance(store, PostgresStore):
            return list(store.chains().values())
        return [export(self.target)]

    def failure(self) -> tuple[type[BaseException], ...]:
        """What a write the database refuses raises."""
        return (sqlite3.Error,) if self.kind == "sqlite" else (StoreFailure,)


def new_database(server: PostgresServer) -> str:
    """The URL of a new, empty schema: a database of its own to a store (and quicker to make)."""
    return server.create_schema(f"t_{uuid.uuid4().hex[:16]}")


@pytest.fixture(params=KINDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    if request.param == "sqlite":
        target = str(tmp_path / "monitor.db")
    else:
        target = new_database(request.getfixturevalue("postgres_server"))
    made = Opened(request.param, target)
    yield made
    for store in made.stores:
        store.close()


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty PostgreSQL database."""
    return new_database(postgres_server)


def snapshot(store: Any, principal: str, session: str) -> tuple[Any, ...]:
    """Everything a write of the session could change."""
    return (
        store.session(principal, session),
        list(store.events(principal, session)),
        store.counts(),
        store.pending(),
        store.audit_head(),
    )


# ------------------------------------------------------------------ the same behaviour on both


def test_a_session_is_added_once_and_read_back_as_it_was(opened: Opened) -> None:
    store = opened.open()
    odd = ["s-1", "nul\x00inside", "é ü 漢字", "'; DROP TABLE sessions; --", "x" * 300]
    for session in odd:
        opened.own(store, "agent", session)
        assert store.create_session("agent", session, ("agent", "reader"), "sha256:p")
        time.sleep(0.002)  # created one after another
    assert not store.create_session("agent", "s-1", (), "sha256:q")
    opened.own(store, "other", "s-1")
    assert store.create_session("other", "s-1", (), "sha256:q")  # ids are each principal's own
    assert [(s.principal, s.session) for s in store.sessions()] == [
        *[("agent", s) for s in odd],
        ("other", "s-1"),
    ]
    found = store.session("agent", "nul\x00inside")
    assert (found.roles, found.policy) == (("agent", "reader"), "sha256:p")
    assert store.session("other", "s-1").policy == "sha256:q"
    assert store.session("agent", "nope") is None and store.session("nul\x00", "s-1") is None


def test_events_are_appended_in_order_and_a_clashing_batch_writes_nothing(opened: Opened) -> None:
    store = opened.open()
    opened.own(store, "agent", "s")
    store.create_session("agent", "s", (), "sha256:p", [HEADER])
    assert store.append("agent", "s", [("record", '{"id":"e1"}'), ("facts", '{"facts":{}}')], 0) == 2
    assert (
        store.append("agent", "s", [("record", '{"id":"e3"}')], 2, [{"type": "event", "session": "s"}]) == 3
    )
    assert list(store.events("agent", "s")) == [
        (1, "record", '{"id":"e1"}'),
        (2, "facts", '{"facts":{}}'),
        (3, "record", '{"id":"e3"}'),
    ]
    before = snapshot(store, "agent", "s")
    with pytest.raises(opened.failure()):  # the second row clashes with seq 3: none of it is kept
        store.append(
            "agent", "s", [("record", '{"id":"e4"}'), ("record", '{"id":"e5"}')], 1, [{"type": "event"}]
        )
    assert snapshot(store, "agent", "s") == before
    assert store.append("agent", "s", [("record", '{"id":"e4"}')], 3) == 4  # and the store goes on


def test_a_decision_and_its_candidate_are_committed_together(opened: Opened) -> None:
    store = opened.open()
    opened.own(store, "agent", "s")
    store.create_session("agent", "s", (), "sha256:p")
    store.append("agent", "s", [("record", '{"id":"e1"}')], 0)
    store.decided("d-1", "agent", "s", 2, "deny", '{"verdict":"deny"}', '{"id":"c1"}')
    store.decided("d-2", "agent", "s", 2, "allow", '{"verdict":"allow"}', None, "decide")
    store.decided("d-3", "agent", "s", 3, "deny", '{"verdict":"deny","n":3}', '{"action":"c1"}', "decide")
    assert list(store.events("agent", "s"))[1:] == [
        (2, "authorize", '{"id":"c1"}'),
        (3, "decide", '{"action":"c1"}'),
    ]
    assert store.decision("agent", "s", "d-1") == '{"verdict":"deny"}'
    assert store.decision("other", "s", "d-1") is None and store.decision("agent", "t", "d-1") is None
    assert store.decision("agent", "s", "d-\x00") is None
    assert store.decision_row("d-3") == ("agent", "s", '{"verdict":"deny","n":3}')
    assert store.decision_row("d-9") is None
    assert store.counts() == {"deny": 2, "allow": 1}
    before = snapshot(store, "agent", "s")
    with pytest.raises(opened.failure()):  # its candidate's row is taken: the decision is not kept either
        store.decided("d-4", "agent", "s", 3, "allow", "{}", '{"id":"c2"}', audit=[{"type": "decision"}])
    assert snapshot(store, "agent", "s") == before and store.decision_row("d-4") is None


def test_an_escalation_is_answered_once_and_leaves_the_pending_list(opened: Opened) -> None:
    store = opened.open()
    opened.own(store, "agent", "s")
    store.create_session("agent", "s", (), "sha256:p")
    for n in (1, 2, 3):
        store.decided(f"d-{n}", "agent", "s", n, "escalate", f'{{"n":{n}}}', f'{{"id":"c{n}"}}')
        time.sleep(0.002)
    store.decided("d-4", "agent", "s", 4, "deny", "{}", '{"id":"c4"}')
    assert [p[0] for p in store.pending()] == ["d-1", "d-2", "d-3"]
    assert store.pending()[0][:4] == ("d-1", "agent", "s", '{"n":1}')
    asked = [p[4] for p in store.pending()]  # when each escalated, in the order they did
    assert asked == sorted(asked) and abs(asked[0] - time.time()) < 60
    approval = ("agent", "s", 5, '{"approval":{"id":"a1"}}')
    assert store.answered("d-2", True, "oncall", approval, [{"type": "outcome", "session": "s"}])
    assert not store.answered("d-2", False, "oncall", None)  # once
    assert store.answered("d-1", False, "oncall", None)
    assert [p[0] for p in store.pending()] == ["d-3"]
    assert list(store.events("agent", "s"))[-1] == (5, "approval", '{"approval":{"id":"a1"}}')


def test_policies_and_settings_are_kept(opened: Opened) -> None:
    store = opened.open()
    store.keep_policy("sha256:a", "policy.dl", b"\x00bundle\xff")
    store.keep_policy("sha256:a", "elsewhere.dl", b"other")  # a digest names one bundle
    assert store.policy("sha256:a") == ("policy.dl", b"\x00bundle\xff")
    assert store.policy("sha256:b") is None and store.policy("sha256:\x00") is None
    store.set_meta("current", "sha256:a")
    store.set_meta("current", "sha256:b")
    assert store.meta("current") == "sha256:b"
    assert store.meta("missing") is None and store.meta("nul\x00") is None


def test_the_audit_log_is_chained_checkpointed_signed_and_published(opened: Opened, tmp_path: Path) -> None:
    private, public = generate_keys(str(tmp_path / "audit"))
    published: list[str] = []
    store = opened.open(Chain(every=3, key=private_key(private), publish=published.append))
    opened.own(store, "agent", "s")
    store.record_audit([HEADER])
    assert [entry.seq for entry in store.audit_head().entries] == [0]
    store.create_session("agent", "s", (), "sha256:p", [{"type": "session", "session": "s"}])
    store.append("agent", "s", [("record", '{"id":"e1"}')], 0, [{"type": "event", "session": "s"}])
    assert len(published) == 1  # the checkpoint after three records, published once committed
    store.decided(
        "d-1", "agent", "s", 2, "deny", "{}", '{"id":"c"}', audit=[{"type": "decision", "session": "s"}]
    )
    with pytest.raises(opened.failure()):  # a failed commit: its records are not in the log
        store.decided(
            "d-2", "agent", "s", 2, "deny", "{}", '{"id":"c"}', audit=[{"type": "decision", "session": "s"}]
        )
    store.record_audit([CLOSE])
    (log,) = opened.logs(store)
    verified = verify_bytes(log, public_key(public))
    assert verified.ok and verified.signed == verified.checkpoints == 2, verified.problem
    records = [json.loads(line) for line in log.splitlines()]
    assert [r["type"] for r in records] == [
        "header",
        "session",
        "event",
        "checkpoint",
        "decision",
        "checkpoint",
    ]
    assert records[1]["principal"] == "agent" and records[4]["decision"] == "d-1"
    head = store.audit_head()
    assert head.entries[0].seq == len(records) - 1 and head.entries[0].final
    assert json.loads(published[-1])["heads"] == [e.to_json() for e in head.entries]
    assert store.reaches(head) is None
    beyond = Head((HeadEntry(head.entries[0].chain, 99, head.entries[0].hash),))
    assert "cut" in store.reaches(beyond)
    rewritten = Head((HeadEntry(head.entries[0].chain, 2, "0" * 64),))
    assert "rewritten" in store.reaches(rewritten)
    assert "does not hold the chain" in store.reaches(Head((HeadEntry("1" * 64, 0, "0" * 64),)))


def test_a_database_opened_again_holds_everything_and_one_of_another_format_is_refused(
    opened: Opened,
) -> None:
    store = opened.open()
    opened.own(store, "agent", "s")
    store.create_session("agent", "s", ("r",), "sha256:p", [HEADER])
    store.append("agent", "s", [("record", '{"id":"e1"}')], 0)
    held = snapshot(store, "agent", "s")
    store.close()
    store.close()  # closing twice is closing
    again = opened.open()
    assert snapshot(again, "agent", "s") == held
    again.set_meta("format", "0")
    with pytest.raises(StoreError, match="format 0"):
        opened.open()


# ------------------------------------------------------------------ opening, and PostgreSQL alone


def test_a_url_names_its_store_and_a_failure_to_open_never_shows_the_password(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path / "m.db")), Store)
    with pytest.raises(StoreError, match=r"a file's path or a postgresql:// URL") as refused:
        open_store("mysql://svc:hunter2@127.0.0.1/x")
    assert "hunter2" not in str(refused.value)
    with pytest.raises(StoreError, match="cannot connect") as refused:
        open_store("postgresql://svc:hunter2@127.0.0.1:1/x?connect_timeout=2")
    assert "hunter2" not in str(refused.value) and "svc:***@127.0.0.1:1" in str(refused.value)
    with pytest.raises(StoreError, match="not a PostgreSQL connection URL"):
        open_store("postgresql://127.0.0.1/x?nonsense=1")


def test_the_password_may_stay_off_the_url(
    postgres_server: PostgresServer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(postgres_server.passfile))
    bare = database.replace(f":{postgres_server.password}@", "@")
    assert postgres_server.password not in bare
    store = open_store(bare, instance="a")
    try:
        store.set_meta("k", "v")
        assert store.meta("k") == "v" and postgres_server.password not in store.path
    finally:
        store.close()


def test_a_database_holding_another_applications_tables_is_refused(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("CREATE TABLE sessions (id int)")
    with pytest.raises(StoreError, match="tables of something else"):
        open_store(database, instance="a")


# ------------------------------------------------------------------ leases and fencing


def test_one_instance_owns_a_session_and_the_others_writes_write_nothing(database: str) -> None:
    a, b = PostgresStore(database, instance="a"), PostgresStore(database, instance="b")
    try:
        lease = a.acquire("agent", "s", 30)
        assert (lease.owner, lease.epoch) == ("a", 1) and 29 < lease.remaining <= 30
        assert b.acquire("agent", "s", 30) is None
        assert (b.lease("agent", "s").owner, b.lease("agent", "t")) == ("a", None)
        with pytest.raises(LeaseLost, match="holds no lease"):
            b.create_session("agent", "s", (), "sha256:p", [HEADER])
        a.create_session("agent", "s", (), "sha256:p", [HEADER])
        a.decided("d-1", "agent", "s", 1, "escalate", "{}", '{"id":"c"}')
        before = snapshot(a, "agent", "s")
        with pytest.raises(LeaseLost):
            b.append("agent", "s", [("record", '{"id":"e"}')], 1, [HEADER])
        with pytest.raises(LeaseLost):
            b.decided("d-2", "agent", "s", 2, "allow", "{}", '{"id":"c2"}', audit=[HEADER])
        with pytest.raises(LeaseLost):
            b.answered("d-1", True, "oncall", ("agent", "s", 2, "{}"), [HEADER])
        assert snapshot(a, "agent", "s") == before and list(b.chains()) == ["a"]
        assert a.acquire("agent", "s", 30).epoch == 1  # the owner asking again renews
    finally:
        a.close()
        b.close()


def test_after_expiry_a_take_over_raises_the_epoch_and_the_old_owner_writes_nothing(database: str) -> None:
    a, b = PostgresStore(database, instance="a"), PostgresStore(database, instance="b")
    try:
        a.acquire("agent", "s", 0.15)
        a.create_session("agent", "s", (), "sha256:p", [HEADER])
        a.append("agent", "s", [("record", '{"id":"e1"}')], 0)
        assert b.take_over_expired(30) == []  # not expired yet
        while a.lease("agent", "s").remaining > 0:
            time.sleep(0.02)
        a.append("agent", "s", [("record", '{"id":"e2"}')], 1)  # expired, not taken: still a's
        (taken,) = b.take_over_expired(30)
        assert (taken.principal, taken.session, taken.owner, taken.epoch) == ("agent", "s", "b", 2)
        before = snapshot(a, "agent", "s")
        with pytest.raises(LeaseLost, match=r"taken over.*epoch 1"):
            a.append("agent", "s", [("record", '{"id":"late"}')], 2, [{"type": "event", "session": "s"}])
        assert snapshot(a, "agent", "s") == before
        assert a.renew("agent", "s", 30) is None and a.holds() == {}
        b.record_audit([HEADER])
        assert (
            b.append("agent", "s", [("record", '{"id":"e3"}')], 2, [{"type": "event", "session": "s"}]) == 3
        )
        for store in (a, b):
            store.record_audit([CLOSE])
        chains = b.chains()
        assert sorted(chains) == ["a", "b"] and len(b.audit_head().entries) == 2
        assert all(verify_bytes(log).ok for log in chains.values())
    finally:
        a.close()
        b.close()


def test_a_commit_waits_for_a_take_over_under_way_and_is_then_refused(database: str) -> None:
    a = PostgresStore(database, instance="a")
    try:
        a.acquire("agent", "s", 30)
        a.create_session("agent", "s", (), "sha256:p")
        outcome: list[BaseException | int] = []
        with psycopg.connect(database) as taker:  # another instance, mid take-over
            taker.execute("UPDATE leases SET owner = 'b', epoch = epoch + 1")
            writer = threading.Thread(
                target=lambda: outcome.append(_attempt(a.append, "agent", "s", [("record", "{}")], 0))
            )
            writer.start()
            writer.join(0.2)
            assert writer.is_alive() and outcome == []  # the commit waits for the take-over
            taker.commit()
        writer.join(10)
        assert isinstance(outcome[0], LeaseLost)
        assert list(a.events("agent", "s")) == []
    finally:
        a.close()


def test_a_group_waits_for_a_take_over_under_way_and_commits_nothing_of_the_session_taken(
    database: str,
) -> None:
    """A group's writes lock their leases together, just before the commit: a take-over under
    way holds the group until it is committed, and then the taken session's write is refused
    and taken back alone."""
    a = PostgresStore(database, instance="a")
    try:
        _owns_three_sessions(a)
        outcome: list[Any] = []
        with psycopg.connect(database) as taker:  # another instance, mid take-over of s2
            taker.execute("UPDATE leases SET owner = 'b', epoch = epoch + 1 WHERE session = 's2'::bytea")
            writer = threading.Thread(
                target=lambda: outcome.append(
                    a.group(
                        [
                            lambda s=s: a.append("agent", s, [("record", f'{{"id":"{s}"}}')], 0)
                            for s in ("s1", "s2", "s3")
                        ]
                    )
                )
            )
            writer.start()
            writer.join(0.2)
            assert writer.is_alive() and outcome == []  # the commit waits for the take-over
            taker.commit()
        writer.join(10)
        ((first, second, third),) = outcome
        assert first == (True, 1) and third == (True, 1), outcome
        assert second[0] is False and isinstance(second[1], LeaseLost)
        assert list(a.events("agent", "s2")) == []
        assert [body for _, _, body in a.events("agent", "s3")] == ['{"id":"s3"}']
    finally:
        a.close()


def test_a_group_goes_to_postgresql_in_two_round_trips_whatever_its_size(
    database: str, tmp_path: Path
) -> None:
    """``BEGIN``, then the group's fences and rows and its ``COMMIT`` in one pipeline: counted in
    libpq's trace of the connection (each round trip ends with a ``Sync`` or is a simple
    ``Query``)."""
    a = PostgresStore(database, instance="a")
    try:
        a.record_audit([HEADER])
        _owns_three_sessions(a)
        record = {"type": "event", "session": "s", "event": {"id": "e"}}
        trace = tmp_path / "libpq.trace"
        for size in (2, 6):
            with open(trace, "w") as sink:
                a.connection.pgconn.trace(sink.fileno())
                a.connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
                outcomes = a.group(
                    [
                        lambda n=n, size=size: a.decided(
                            f"d{size}-{n}",
                            "agent",
                            f"s{n % 3 + 1}",
                            100 * size + n,
                            "allow",
                            "{}",
                            "{}",
                            audit=[record],
                        )
                        for n in range(size)
                    ]
                )
                a.connection.pgconn.untrace()
            assert outcomes == [(True, None)] * size
            sent = re.findall(r"^F\t\d+\t(Sync|Query)\b", trace.read_text(), re.MULTILINE)
            assert sent == ["Query", "Sync"], sent  # BEGIN; the batch and the COMMIT
        assert _closed_chain(a) == 10  # the header, eight decisions, the end
    finally:
        a.close()


def test_the_chain_carried_from_commit_to_commit_is_the_databases_after_a_write_taken_back(
    database: str,
) -> None:
    """A transaction starts from the chain's last record as the last commit left it; one taken
    back (its records with it), alone or in a group, leaves that as it was."""
    a = PostgresStore(database, instance="a")
    try:
        a.record_audit([HEADER])
        _owns_three_sessions(a)
        record = {"type": "event", "session": "s", "event": {"id": "e"}}
        assert a.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record]) == 1
        with pytest.raises(StoreFailure):  # sequence number 1 again: refused, records and all
            a.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record, record])
        assert a.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record]) == 1
        outcomes = a.group(
            [
                lambda: a.append("agent", "s3", [("record", '{"id":"c"}')], 0, [record]),
                lambda: a.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record]),  # refused
            ]
        )
        assert [ok for ok, _ in outcomes] == [True, False], outcomes
        assert (
            a.group([lambda: a.append("agent", "s2", [("record", '{"id":"d"}')], 0, [record])])[0][0] is False
        )
        assert a.append("agent", "s3", [("record", '{"id":"e"}')], 1, [record]) == 2
        assert _closed_chain(a) == 6  # the header, four events, the end
    finally:
        a.close()


def _attempt(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except BaseException as error:
        return error


def test_leases_are_renewed_released_and_taken_back_by_a_restarted_instance(database: str) -> None:
    a, b = PostgresStore(database, instance="a"), PostgresStore(database, instance="b")
    try:
        a.acquire("agent", "s", 0.5)
        a.acquire("agent", "t", 0.5)
        assert a.renew("agent", "s", 30).remaining > 29
        assert a.renew_all(30) == []
        assert a.release("agent", "s") and not a.release("agent", "s")
        assert b.acquire("agent", "s", 30).epoch == 2  # released: free at once, with the next epoch
        b.close()
        with psycopg.connect(database, autocommit=True) as other:  # t taken by someone else
            other.execute("UPDATE leases SET owner = 'c', epoch = epoch + 1 WHERE session = 't'::bytea")
        assert a.renew_all(30) == [("agent", "t")] and a.holds() == {}
        # b again, restarted under its name: it takes its session back at once, fencing its old self
        b_again = PostgresStore(database, instance="b")
        assert b_again.acquire("agent", "s", 30).epoch == 3
        assert b_again.release_all() == 1
        b_again.close()
    finally:
        a.close()
        b.close()


def test_instances_taking_over_at_once_share_the_expired_sessions_out(database: str) -> None:
    dead = PostgresStore(database, instance="dead")
    stores = [PostgresStore(database, instance=name) for name in ("b", "c", "d")]
    try:
        for n in range(30):
            dead.acquire("agent", f"s{n}", 0.05)
        time.sleep(0.1)
        taken: dict[str, list[str]] = {}
        threads = [
            threading.Thread(
                target=lambda s=s: taken.setdefault(
                    s.instance, [x.session for x in s.take_over_expired(30, 12)]
                )
            )
            for s in stores
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        every = [session for sessions in taken.values() for session in sessions]
        assert sorted(every) == sorted(set(every)) and len(every) == 30  # each once: 12 + 12 + 6
        assert {dead.lease("agent", f"s{n}").epoch for n in range(30)} == {2}
    finally:
        dead.close()
        for store in stores:
            store.close()


@pytest.mark.slow  # a server of its own, stopped and started twice: the slow suite
def test_a_restart_of_postgresql_fails_the_writes_while_it_is_down_and_the_store_goes_on() -> None:
    from .support.postgres import start

    server = start()
    store = None
    try:
        url = server.create_database("t")
        store = PostgresStore(url, instance="a")
        store.acquire("agent", "s", 60)
        store.create_session("agent", "s", (), "sha256:p")
        server.stop(remove=False)
        with pytest.raises(StoreFailure):
            store.append("agent", "s", [("record", '{"id":"e1"}')], 0)
        with pytest.raises(StoreFailure):
            store.session("agent", "s")
        server.start()
        assert store.append("agent", "s", [("record", '{"id":"e1"}')], 0) == 1  # on a new connection
        server.kill()  # a crash: what was committed is still there once it is back
        server.start()
        assert store.append("agent", "s", [("record", '{"id":"e2"}')], 1) == 2  # no write is lost to it
        assert [row[2] for row in store.events("agent", "s")] == ['{"id":"e1"}', '{"id":"e2"}']
    finally:
        if store is not None:
            store.close()
        server.stop()


# ------------------------------------------------------------------ group commit on PostgreSQL


def test_a_group_commits_once_and_a_write_whose_lease_was_lost_writes_nothing(database: str) -> None:
    a, b = PostgresStore(database, instance="a"), PostgresStore(database, instance="b")
    try:
        for session in ("s1", "s2"):
            a.acquire("agent", session, 30 if session == "s1" else 0.15)
            a.create_session("agent", session, (), "sha256:p", [HEADER] if session == "s1" else [])
        while a.lease("agent", "s2").remaining > 0:
            time.sleep(0.02)
        (taken,) = b.take_over_expired(30)  # s2 is b's now, s1 still a's
        assert (taken.session, taken.owner) == ("s2", "b")
        event = {"type": "event", "session": "s"}
        outcomes = a.group(
            [
                lambda: a.append("agent", "s1", [("record", '{"id":"a"}')], 0, [event]),
                lambda: a.append("agent", "s2", [("record", '{"id":"late"}')], 0, [event]),
                lambda: a.append("agent", "s1", [("record", '{"id":"b"}')], 1, [event]),
            ]
        )
        assert [ok for ok, _ in outcomes] == [True, False, True], outcomes
        assert isinstance(outcomes[1][1], LeaseLost)
        assert [body for _, _, body in b.events("agent", "s1")] == ['{"id":"a"}', '{"id":"b"}']
        assert list(b.events("agent", "s2")) == []
        assert _closed_chain(a) == 4  # the header, two events, the end
    finally:
        a.close()
        b.close()


def test_a_failed_group_commit_fails_every_write_and_the_store_goes_on(database: str) -> None:
    a = PostgresStore(database, instance="a")
    try:
        for session in ("s1", "s2"):
            a.acquire("agent", session, 30)
            a.create_session("agent", session, (), "sha256:p")

        def breaks_the_connection() -> None:
            a.connection.pgconn.finish()  # as when the server goes away mid-group

        outcomes = a.group([lambda: a.append("agent", "s1", [("record", "1")], 0), breaks_the_connection])
        assert [ok for ok, _ in outcomes] == [False, False], outcomes
        assert all(isinstance(error, StoreFailure) for _, error in outcomes)
        assert list(a.events("agent", "s1")) == []
        assert a.group([lambda: a.append("agent", "s2", [("record", "2")], 0)]) == [(True, 1)]
    finally:
        a.close()


def _closed_chain(store: PostgresStore) -> int:
    """The records of the store's one chain once closed, which must verify."""
    store.record_audit([CLOSE])
    (log,) = store.chains().values()
    verified = verify_bytes(log)
    assert verified.ok, verified.problem
    return verified.records


def _owns_three_sessions(store: PostgresStore) -> None:
    """Sessions s1, s2 and s3 created by ``store``, holding their leases."""
    for session in ("s1", "s2", "s3"):
        store.acquire("agent", session, 30)
        store.create_session("agent", session, (), "sha256:p")


def test_group_commit_on_postgresql_leaves_the_event_loop_free_while_a_commit_runs(database: str) -> None:
    import asyncio

    from policyc.serve.commits import GroupCommit

    a = PostgresStore(database, instance="a")
    try:
        _owns_three_sessions(a)
        commits = GroupCommit(a)
        release = threading.Event()
        answered: list[str] = []

        def slow_write() -> int:
            assert release.wait(10), "the event loop was blocked by the commit"
            return a.append("agent", "s1", [("record", "1")], 0)

        async def request(session: str, work: Any) -> None:
            await commits.write(work)
            answered.append(session)
            assert list(a.events("agent", session)) != []  # answered after its commit

        async def main() -> None:
            first = asyncio.create_task(request("s1", slow_write))
            await asyncio.sleep(0.05)  # the first group is in the writer thread: these wait for the next
            later = [
                asyncio.create_task(request(s, lambda s=s: a.append("agent", s, [("record", "1")], 0)))
                for s in ("s2", "s3")
            ]
            await asyncio.sleep(0.05)
            assert answered == []  # nobody before their commit
            release.set()  # only the loop can set it: it runs while the commit waits
            await asyncio.gather(first, *later)

        asyncio.run(main())
        commits.close()
        assert answered[0] == "s1" and sorted(answered) == ["s1", "s2", "s3"]
        assert (commits.commits, commits.writes) == (2, 3)
    finally:
        a.close()


def test_a_write_that_fails_after_its_audit_records_leaves_the_chain_whole_in_a_postgresql_group(
    database: str,
) -> None:
    """The writes of a group after the first take the chain's last record from memory: a write
    taken back after writing its audit records must not leave them there for the next."""
    a = PostgresStore(database, instance="a")
    try:
        a.record_audit([HEADER])
        _owns_three_sessions(a)
        record = {"type": "event", "session": "s", "event": {"id": "e"}}

        def fails_once_written() -> None:
            a.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record, record])
            raise RuntimeError("the request went wrong after its write")

        outcomes = a.group(
            [
                lambda: a.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record]),
                fails_once_written,
                lambda: a.append("agent", "s3", [("record", '{"id":"d"}')], 0, [record]),
                lambda: a.append("agent", "s3", [("record", '{"id":"e"}')], 1, [record]),
            ]
        )
        assert [ok for ok, _ in outcomes] == [True, False, True, True], outcomes
        assert list(a.events("agent", "s2")) == []
        assert _closed_chain(a) == 5  # the header, three events, the end
    finally:
        a.close()


def test_a_write_the_database_refuses_is_taken_back_alone_in_a_postgresql_group(database: str) -> None:
    a = PostgresStore(database, instance="a")
    try:
        a.record_audit([HEADER])
        _owns_three_sessions(a)
        record = {"type": "event", "session": "s", "event": {"id": "e"}}
        outcomes = a.group(
            [
                lambda: a.append("agent", "s1", [("record", '{"id":"a"}')], 0, [record]),
                lambda: a.append("agent", "s2", [("record", '{"id":"b"}')], 0, [record]),
                # the same sequence number again: the primary key refuses it
                lambda: a.append("agent", "s1", [("record", '{"id":"c"}')], 0, [record, record]),
                lambda: a.append("agent", "s3", [("record", '{"id":"d"}')], 0, [record]),
            ]
        )
        assert [ok for ok, _ in outcomes] == [True, True, False, True], outcomes
        assert isinstance(outcomes[2][1], StoreFailure)
        assert [body for _, _, body in a.events("agent", "s1")] == ['{"id":"a"}']
        assert [body for _, _, body in a.events("agent", "s3")] == ['{"id":"d"}']
        assert _closed_chain(a) == 5  # the header, three events, the end
    finally:
        a.close()
