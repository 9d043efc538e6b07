"""The sessions a service decides with: runtime sessions by (principal, id), rebuilt from the
database, in the server process.

What a request asks of them is checked before anything changes: a batch with a malformed event
changes nothing (:class:`~.errors.Invalid` naming it), nor one with an event only the host records (an
approval, the result of an approval tool: ``host-only-event``), nor facts only the host states
(a relation marked ``.host``: ``host-only-relation``); an approval is given at the approvals
endpoints alone (:mod:`policyc.runtime.trust`, docs/security.md). A session whose memory may differ from the
database (a commit that failed after the change) is rebuilt from the database
(:meth:`Sessions.rebuild`), so memory never holds what was not recorded.

What can be asked of them is :data:`OPERATIONS`, by name (an :data:`Operation`): the table
says what each does. They refuse in the service's own terms
(:mod:`.errors`); the application gives those their HTTP status.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from policyc.runtime.session import Monitor, Session
from policyc.runtime.verdict import Decision, EventRefused
from policyc.stdlib.events import EventError, check_event

from . import jsontext
from .errors import Failed, Invalid, NotFound, Unavailable
from .failures import not_done
from .store import Store

Key = tuple[str, str]  # (principal, session id)

# what a request may ask of a session (:data:`OPERATIONS`)
Operation = Literal[
    "create",
    "record",
    "add_facts",
    "authorize",
    "decide",
    "approve",
    "behind",
    "rebuild",
    "forget",
    "explain",
]


class Sessions:
    """Runtime sessions, those of the database that ``mine`` accepts, each with the monitor of
    the policy it was created with (a bundle of the database, loaded once per process)."""

    def __init__(
        self,
        store: Store,
        functors: Any = None,
        mine: Callable[[Key], bool] = lambda key: True,
        audit: Any = None,
    ) -> None:
        self.store = store
        self.functors = functors
        self.mine = mine
        self.audit = audit  # a DatabaseAudit its monitors log to (None: no log)
        self.held: dict[Key, Session] = {}
        self.monitors: dict[str, Monitor] = {}

    def quiet(self) -> Any:
        """What a replay runs inside: nothing it does is logged again."""
        return self.audit.quiet() if self.audit is not None else contextlib.nullcontext()

    def ask(self, operation: Operation, key: Key, *args: Any) -> tuple[Any, list[dict[str, Any]]]:
        """Do ``operation`` on a session; its answer and the audit records it made, for the
        commit that writes them (an operation that fails leaves none but a monitor's header)."""
        try:
            value = OPERATIONS[operation](self, key, *args)
        except BaseException:
            if self.audit is not None:
                self.audit.drop()
            raise
        return value, self.audit.take() if self.audit is not None else []

    def monitor(self, digest: str) -> Monitor:
        """The monitor of a stored policy."""
        found = self.monitors.get(digest)
        if found is None:
            from policyc.runtime.opener import policy_of

            stored = self.store.policy(digest)
            if stored is None:
                raise Failed("policy-missing", f"the database holds no policy {digest}")
            policy = policy_of(stored[1], stored[0], self.functors)
            found = self.monitors[digest] = Monitor(policy, audit=self.audit)
        return found

    def restore(self) -> dict[Key, int]:
        """Rebuild every session of the database that is ``mine``; each one's last sequence number."""
        seqs = {}
        for stored in self.store.sessions():
            key = (stored.principal, stored.session)
            if self.mine(key):
                self.held[key], seqs[key] = self._replayed(key, stored.roles, stored.policy)
        return seqs

    def create(self, key: Key, roles: tuple[str, ...], digest: str) -> None:
        self.held[key] = self.monitor(digest).session(key[1], principal=key[0], roles=roles)

    def drop(self, key: Key) -> None:
        self.held.pop(key, None)

    def session(self, key: Key) -> Session:
        """The session, rebuilt from the database if this process does not hold it yet."""
        found = self.held.get(key)
        if found is None:
            stored = self.store.session(*key)
            if stored is None:
                raise NotFound("not-found", "no such session")
            found, _ = self._replayed(key, stored.roles, stored.policy)
            self.held[key] = found
        return found

    def record(self, key: Key, batch: list[Any]) -> list[dict[str, Any]]:
        """Record a batch (all of it, or nothing when an event is malformed or the session
        refuses one: :class:`~.errors.Invalid` naming it); the events as checked."""
        session = self.session(key)
        checked = check_batch(batch, session.events, session)
        for n, event in enumerate(checked):
            try:
                session.record(event)
            except EventRefused as refused:
                if n:  # what the batch recorded before is taken back with it
                    self.rebuild(key)
                raise Invalid(refused.code, f"event {n + 1} of the batch: {refused}") from None
        return checked

    def add_facts(self, key: Key, facts: Any) -> list[dict[str, Any]]:
        """Give the session domain facts (rows per input relation), checked first: malformed
        facts change nothing (:class:`~.errors.Invalid` naming the relation); the row the database keeps of them."""
        from policyc.runtime.facts import FactsError, validate
        from policyc.runtime.trust import approval_tool, facts_problem

        session = self.session(key)
        try:
            validate(session.plan, facts, "facts")
        except FactsError as error:
            raise Invalid("malformed-facts", str(error)) from None
        refused = facts_problem(session.plan, facts, approval_tool(session))
        if refused is not None:
            raise Invalid("host-only-relation", f"facts: relation `{refused[0]}`: {refused[1]}: {HOST_ONLY}")
        session.add_facts(facts)
        return [{"facts": facts}]

    def authorize(self, key: Key, event: Any, seq: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Record a candidate and decide it; the candidate as checked and the decision's JSON
        (``seq``: the candidate's sequence number)."""
        session = self.session(key)
        (checked,) = check_batch([event], session.events, session)
        # a candidate the session refuses to record (past its limit) is kept as asked: replayed,
        # the session refuses it again, as the refusal depends only on what it held before
        return checked, decision_json(session.authorize(checked), seq)

    def decide(self, key: Key, action: Any, seq: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Decide a recorded candidate again (after an approval, say); what is kept of it, and the
        decision's JSON (``seq``: the decision's sequence number: it may use an approval)."""
        session = self.session(key)
        if not isinstance(action, str) or action not in session.events:
            raise Invalid("malformed-request", "`action` must be the id of an event of the session")
        return {"action": action}, decision_json(session.decide(action), seq)

    def approve(self, key: Key, request: dict[str, Any], ttl: float, approver: str) -> dict[str, Any]:
        """Approve the escalated call ``request`` (an escalation's JSON) for ``ttl`` seconds;
        what the database keeps of it (the approval, its event and when it expires)."""
        from policyc.runtime.approvals import EscalationRequest

        session = self.session(key)
        approval = session.approve(
            EscalationRequest(
                key[1],
                request["call"],
                request["tool"],
                dict(request["arguments"] or {}),
                frozenset(request["rules"]),
                tuple(request["messages"]),
                request.get("feedback", ""),
            ),
            ttl,
            approver,
        )
        return {
            "approval": approval.to_json(),
            "event": session.events[approval.id],
            "expires_at": time.time() + ttl,
        }

    def behind(self, key: Key, operation: str, given: Any, seq: int, message: str) -> dict[str, Any]:
        """The denial of a request made after events the session does not hold (yet): for
        ``authorize``, of the candidate ``given`` (checked, not recorded), for ``decide``, of the
        action ``given``; logged as every decision is. Its JSON (``seq``: the session's last)."""
        from policyc.runtime.verdict import Reason

        session = self.session(key)
        action = given
        if operation == "authorize":
            (checked,) = check_batch([given], session.events, session)
            action = checked["id"]
        decision = Decision(action, False, (Reason("<service>", message, "send the missing events first"),))
        if session.watched is not None:  # the shadow results, the mode, the audit log
            decision = session.watched.decided(decision)
        return decision_json(decision, seq)

    def rebuild(self, key: Key) -> int:
        """The session again from the database (what memory holds may not have been recorded);
        its last sequence number. When the database cannot be read, the session is forgotten
        (the next request about it rebuilds it), so memory never keeps what was not recorded."""
        try:
            stored = self.store.session(*key)
            if stored is None:
                self.held.pop(key, None)
                return 0
            self.held[key], seq = self._replayed(key, stored.roles, stored.policy)
        except BaseException:
            self.held.pop(key, None)
            raise
        return seq

    def explain(self, key: Key, seq: int) -> Any:
        """The explanation of the decision on the candidate at sequence number ``seq``, from the
        session replayed up to it."""
        stored = self.store.session(*key)
        if stored is None:
            raise NotFound("not-found", "no such session")
        monitor = self.monitor(stored.policy)
        decision: Decision | None = None
        with self.quiet():
            again = monitor.session(key[1], principal=key[0], roles=stored.roles)
            for at, how, body in self.store.events(*key):
                if at > seq:
                    break
                decision = replay(again, how, jsontext.loads(body)) or decision
        if decision is None:
            return None
        explained = decision.explain()
        return explained.to_json() if hasattr(explained, "to_json") else str(explained)

    def _replayed(self, key: Key, roles: tuple[str, ...], digest: str) -> tuple[Session, int]:
        monitor = self.monitor(digest)
        last = 0
        with self.quiet():
            session = monitor.session(key[1], principal=key[0], roles=roles)
            for at, how, body in self.store.events(*key):
                replay(session, how, jsontext.loads(body))
                last = at
        return session, last


# each operation, by the name a request gives it
OPERATIONS: Mapping[Operation, Callable[..., Any]] = {
    "create": Sessions.create,
    "record": Sessions.record,
    "add_facts": Sessions.add_facts,
    "authorize": Sessions.authorize,
    "decide": Sessions.decide,
    "approve": Sessions.approve,
    "behind": Sessions.behind,
    "rebuild": Sessions.rebuild,
    "forget": Sessions.drop,
    "explain": Sessions.explain,
}


def replay(session: Session, how: str, row: dict[str, Any]) -> Decision | None:
    """Do again what a row of the database did to a session; the decision, for one that decided."""
    if how == "record":
        session.record(row)
    elif how == "facts":
        session.add_facts(row["facts"])
    elif how == "authorize":
        return session.authorize(row)
    elif how == "decide":
        return session.decide(row["action"])
    elif how == "approval":
        from policyc.runtime.approvals import Approval

        data = row["approval"]
        remaining = row["expires_at"] - time.time()
        if remaining > 0:  # an approval whose time is up is recorded, but cannot be used
            session.approvals.add(
                Approval(
                    data["id"],
                    session.id,
                    data["tool"],
                    data["digest"],
                    frozenset(data["rules"]),
                    session.approvals.clock() + remaining,
                    data["call"],
                    data["approver"],
                )
            )
        session.record_approval(row["event"])  # recorded by the approvals endpoint: the host's
    return None


# what a refusal of the host's word says to the key that sent it
HOST_ONLY = (
    "only the host states it, so no key may send it (a person approves an escalated call at "
    "`/v1/approvals`; identity comes from the key's principal and roles)"
)


def check_batch(
    batch: list[Any], known: dict[str, Any], session: Session | None = None
) -> list[dict[str, Any]]:
    """The events of a batch, each checked against the session and the batch before it; the
    first malformed one refuses the whole batch (:class:`~.errors.Invalid` naming it), and so does the first one that
    only the host records, with ``session`` (:func:`policyc.runtime.trust.event_problem`)."""
    from policyc.runtime.trust import approval_tool, event_problem

    seen = collections.ChainMap({}, known)  # the batch's events over the session's, nothing copied
    checked = []
    is_approval_tool = None if session is None else approval_tool(session)
    for n, event in enumerate(batch):
        try:
            event = check_event(dict(event) if isinstance(event, dict) else event, seen)
        except EventError as error:
            raise Invalid("malformed-event", f"event {n + 1} of the batch: {error}") from None
        refused = None if is_approval_tool is None else event_problem(event, is_approval_tool)
        if refused is not None:
            raise Invalid("host-only-event", f"event {n + 1} of the batch: {refused}: {HOST_ONLY}")
        seen[event["id"]] = event
        checked.append(event)
    return checked


def decision_json(decision: Decision, seq: int) -> dict[str, Any]:
    """The service's answer of a decision: its one JSON form, as a session's key sees it
    (:meth:`Decision.to_json`, view ``service``), with the sequence number it was made at."""
    return {**decision.to_json("service"), "seq": seq}


class Local:
    """The sessions in the server process itself: asked directly, their
    writes committed in groups (:mod:`.commits`)."""

    def __init__(self, sessions: Sessions) -> None:
        from .commits import GroupCommit

        self.sessions = sessions
        self.commits = GroupCommit(sessions.store)

    def start(self) -> dict[Key, int]:
        return self.sessions.restore()

    def adopt(self, key: Key) -> int:
        return self.sessions.rebuild(key)

    def forget(self, key: Key) -> None:
        self.sessions.drop(key)

    async def call(self, key: Key, operation: Operation, *args: Any, then: Any = None) -> Any:
        """Do ``operation``, then have ``then(value, records)`` (the request's write) committed
        with the writes of other requests; when it or the commit fails the session is rebuilt
        from the database before the error goes on (a failed commit: ``Unavailable``)."""
        value, records = self.sessions.ask(operation, key, *args)
        if then is None and not records:
            return value  # nothing to write
        store = self.sessions.store
        try:
            if then is None:
                await self.commits.write(lambda: store.record_audit(records))
            else:
                await self.commits.write(lambda: then(value, records))
        except BaseException as error:
            if then is not None:
                with contextlib.suppress(Exception):  # forgotten when it cannot be rebuilt now
                    self.sessions.rebuild(key)
            if isinstance(error, not_done()):
                raise Unavailable("not-recorded", f"the change could not be committed: {error}") from None
            raise
        return value

    def stop(self) -> None:
        self.commits.close()
        if self.sessions.audit is not None:
            self.sessions.audit.close()
