"""The service's requests, in its own terms: :class:`Service` creates sessions, records events
and facts, decides candidates, and takes a person's answer to an escalated call, each committed
to the database (:mod:`.store`) before it answers; it answers with JSON-ready data and refuses with
:mod:`.errors` (HTTP is the application's: :mod:`.app`).

A session's requests are ordered by its lock; an authorization made after events the session does
not hold yet waits for them (``after_seq``) up to ``wait`` seconds, then is denied saying so.
Sessions are decided by an evaluator, in this process (:class:`~.sessions.Local`); a change is committed only after the evaluator made it, and an
evaluator whose commit failed rebuilds the session from the database.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from . import jsontext
from .errors import Conflict, Forbidden, Invalid, NotFound, TooLarge, Unavailable
from .failures import not_done
from .keys import Keys, Principal
from .metrics import Metrics
from .ownership import Ownership, Sole
from .sessions import Key, Operation
from .store import Records, Store

NOT_DONE = not_done()  # a store's errors for a write the database did not do
MAX_BODY = 1 << 20  # bytes a request body may have, by default
MAX_BATCH = 10_000  # events in one batch
WAIT = 5.0  # seconds an authorization waits for the graph to reach `after_seq`
ID_LIMIT = 256  # characters of a session id


@dataclass
class Live:
    """A session as the server process follows it: its last sequence number, the lock that
    orders its requests, and the condition authorizations wait on for the graph to reach theirs
    (the runtime session itself is in the evaluator)."""

    seq: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    advanced: asyncio.Condition | None = None


class Evaluator(Protocol):
    """Where sessions are decided (:class:`~.sessions.Local`)."""

    def start(self) -> dict[Key, int]: ...

    def adopt(self, key: Key) -> int:
        """Rebuild a session from the database; its last sequence number."""
        ...

    def forget(self, key: Key) -> None: ...

    async def call(self, key: Key, operation: Operation, *args: Any, then: Any = None) -> Any: ...

    def stop(self) -> None: ...


class Service:
    """The sessions by (principal, id), where they are decided, and the database that holds them."""

    def __init__(
        self,
        evaluator: Evaluator,
        policy_digest: str,
        keys: Keys,
        store: Store,
        *,
        max_body: int = MAX_BODY,
        wait: float = WAIT,
        ownership: Ownership | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.ownership: Ownership = ownership or Sole()
        self.policy_digest = policy_digest
        self.keys = keys
        self.store = store
        self.max_body = max_body
        self.wait = wait
        self.live: dict[Key, Live] = {}
        self.metrics = Metrics()

    def restore(self) -> int:
        """Rebuild every session of the database this service owns; how many there are."""
        self.ownership.start()
        self.live = {key: Live(seq) for key, seq in self.evaluator.start().items()}
        for stored in self.store.sessions():  # sessions without events yet
            key = (stored.principal, stored.session)
            if self.ownership.owns(key):
                self.live.setdefault(key, Live())
        self.metrics.holding(len(self.live))
        return len(self.live)

    def find(self, principal: Principal, session: str) -> Live:
        live = self.live.get((principal.name, session))
        if live is None:
            live = self._adopted((principal.name, session))
        return live

    def _adopted(self, key: Key) -> Live:
        """A session of the database this service does not hold yet, owned and rebuilt here
        when no other instance holds it (its owner stopped: its lease ran out);
        ``session-elsewhere`` naming the instance that does."""
        if isinstance(self.ownership, Sole) or self.store.session(*key) is None:
            raise NotFound("not-found", f"no session `{short(key[1])}`")
        holder = self.ownership.claim(key)
        if holder is not None:
            raise Unavailable(
                "session-elsewhere", f"session `{short(key[1])}` is decided by the instance `{short(holder)}`"
            )
        live = self.live[key] = Live(self.evaluator.adopt(key))
        self.metrics.holding(len(self.live))
        return live

    def renew(self) -> None:
        """Keep the sessions this service owns; forget those another instance took over."""
        self.lost(self.ownership.renew())

    def lost(self, keys: list[Key]) -> None:
        """Forget sessions another instance took over."""
        for key in keys:
            self.live.pop(key, None)
            self.evaluator.forget(key)
        self.metrics.holding(len(self.live))

    # ------------------------------------------------------------------------ requests

    async def create(self, principal: Principal, body: Any) -> dict[str, Any]:
        session = _session_id(body.get("session") if isinstance(body, dict) else None)
        roles = body.get("roles", list(principal.roles))
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise Invalid("malformed-request", "`roles` must be a list of role names")
        missing = sorted(set(roles) - set(principal.roles))
        if missing:
            raise Forbidden("role-not-held", f"the key's principal does not hold the role `{missing[0]}`")
        key = (principal.name, session)
        if key in self.live or self.ownership.claim(key) is not None:
            raise Conflict("session-exists", f"session `{short(session)}` exists")
        live = self.live[key] = Live()
        digest = self.policy_digest  # a session runs the policy current when it is created, always
        async with live.lock:

            def commit(_: Any, audit: Records) -> None:
                if not self.store.create_session(principal.name, session, roles, digest, audit):
                    raise Conflict("session-exists", f"session `{short(session)}` exists")

            try:
                await self.evaluator.call(key, "create", tuple(roles), digest, then=commit)
            except BaseException:
                del self.live[key]
                raise
        self.metrics.holding(len(self.live))
        return {"session": session, "seq": 0, "policy": digest}

    async def events(self, principal: Principal, session: str, body: Any) -> dict[str, Any]:
        live = self.find(principal, session)
        batch = body.get("events") if isinstance(body, dict) else None
        if not isinstance(batch, list) or not batch:
            raise Invalid("malformed-request", 'expected {"events": [EVENT, ...]} with at least one event')
        if len(batch) > MAX_BATCH:
            raise TooLarge("too-many-events", f"a batch holds at most {MAX_BATCH:,} events")
        return await self._appended(principal, session, live, "record", batch, "events")

    async def facts(self, principal: Principal, session: str, body: Any) -> dict[str, Any]:
        """Give the session domain facts (``add_facts``); durable when this answers."""
        live = self.find(principal, session)
        facts = body.get("facts") if isinstance(body, dict) else None
        if not isinstance(facts, dict):
            raise Invalid("malformed-request", 'expected {"facts": {"RELATION": [[VALUE, ...], ...], ...}}')
        return await self._appended(principal, session, live, "facts", facts, "facts")

    async def _appended(
        self,
        principal: Principal,
        session: str,
        live: Live,
        how: Literal["record", "facts"],
        given: Any,
        what: str,
    ) -> dict[str, Any]:
        """The session's sequence number once the evaluator took ``given`` (operation ``how``:
        the rows it answers are committed as that many rows of the session)."""
        operation: Operation = "add_facts" if how == "facts" else "record"
        with self.metrics.waiting.track_inprogress():
            async with live.lock:

                def commit(kept: list[Any], audit: Records) -> None:
                    rows = [(how, jsontext.dumps(row).decode()) for row in kept]
                    try:
                        self.store.append(principal.name, session, rows, live.seq, audit)
                    except NOT_DONE as error:
                        raise Unavailable(
                            "not-recorded", f"the {what} could not be recorded: {error}"
                        ) from None

                kept = await self._asked(principal, session, what, operation, given, then=commit)
                live.seq += len(kept)
                await self._advanced(live)
                return {"seq": live.seq}

    async def authorize(self, principal: Principal, session: str, body: Any) -> dict[str, Any]:
        """Record a candidate event and decide it."""
        return await self._decided(principal, session, body, "event", "authorize")

    async def decide(self, principal: Principal, session: str, body: Any) -> dict[str, Any]:
        """Decide a recorded candidate again (once a person approved it, say)."""
        return await self._decided(principal, session, body, "action", "decide")

    async def _decided(
        self,
        principal: Principal,
        session: str,
        body: Any,
        field: str,
        operation: Literal["authorize", "decide"],
    ) -> dict[str, Any]:
        """A decision on a graph that holds ``after_seq``: the candidate in ``body[field]`` is
        authorized or decided again (``operation``), the change and the decision committed as
        one, or a denial saying the graph is behind."""
        started = time.perf_counter()
        live = self.find(principal, session)
        if not isinstance(body, dict) or field not in body:
            raise Invalid("malformed-request", f'expected {{"{field}": ..., "after_seq": N}}')
        after = body.get("after_seq", 0)
        if type(after) is not int or after < 0:
            raise Invalid("malformed-request", "`after_seq` must be a non-negative integer")
        key = (principal.name, session)
        behind = await self._reach(live, after)
        with self.metrics.waiting.track_inprogress():
            async with live.lock:
                decision_id = "d-" + secrets.token_hex(16)
                if behind:  # the graph never reached the sequence number the client acted on

                    def logged(decided: dict[str, Any], audit: Records) -> None:
                        self._commit_decision(key, {"decision_id": decision_id, **decided}, None, audit=audit)

                    decided = await self._asked(
                        principal,
                        session,
                        field,
                        "behind",
                        operation,
                        body[field],
                        live.seq,
                        self._behind(live, after),
                        then=logged,
                    )
                    decision_body = {"decision_id": decision_id, **decided}
                else:

                    def commit(answer: tuple[dict[str, Any], dict[str, Any]], audit: Records) -> None:
                        kept, decided = answer
                        self._commit_decision(
                            key, {"decision_id": decision_id, **decided}, kept, operation, audit
                        )

                    _, decided = await self._asked(
                        principal, session, field, operation, body[field], live.seq + 1, then=commit
                    )
                    decision_body = {"decision_id": decision_id, **decided}
                    live.seq += 1
                    await self._advanced(live)
        self.metrics.decided(decision_body["verdict"], time.perf_counter() - started)
        return decision_body

    async def approvals(self, principal: Principal) -> dict[str, Any]:
        """The escalated calls waiting for a person (to a key with the ``approver`` role)."""
        _approver(principal)
        waiting = []
        for decision_id, owner, session, body, asked in self.store.pending():
            decision = jsontext.loads(body)
            waiting.append(
                {
                    "approval_id": decision_id,
                    "principal": owner,
                    "session": session,
                    "request": decision.get("escalation"),
                    "feedback": decision.get("feedback", ""),
                    "asked": asked,
                }
            )
        return {"pending": waiting}

    async def answer(self, principal: Principal, approval_id: str, body: Any) -> dict[str, Any]:
        """A person's answer to an escalated call: yes (for ``ttl`` seconds, once) or no."""
        _approver(principal)
        if not isinstance(body, dict) or type(body.get("approve")) is not bool:
            raise Invalid("malformed-request", 'expected {"approve": true|false, "ttl": SECONDS}')
        ttl = body.get("ttl", 300)
        if type(ttl) not in (int, float) or not 0 < ttl <= 86_400:
            raise Invalid("malformed-request", "`ttl` must be a number of seconds, at most a day")
        found = self.store.decision_row(approval_id)
        if found is None or jsontext.loads(found[2]).get("verdict") != "escalate":
            raise NotFound("not-found", f"no escalated call `{short(approval_id)}`")
        owner, session, decision_text = found
        decision = jsontext.loads(decision_text)
        key = (owner, session)
        live = self.live.get(key)
        if live is None:
            raise NotFound("not-found", f"no escalated call `{short(approval_id)}`")
        async with live.lock:
            if not body["approve"]:
                refused = outcome(owner, session, approval_id, decision, "refused", principal.name)
                if not self.store.answered(approval_id, False, principal.name, None, [refused]):
                    raise Conflict("already-answered", f"`{short(approval_id)}` was answered before")
                return {"approval_id": approval_id, "approved": False, "approval": None, "seq": live.seq}

            def commit(kept: dict[str, Any], audit: Records) -> None:
                row = (owner, session, live.seq + 1, jsontext.dumps(kept).decode())
                approved = outcome(owner, session, approval_id, decision, "approved", principal.name)
                if not self.store.answered(approval_id, True, principal.name, row, [*audit, approved]):
                    raise Conflict("already-answered", f"`{short(approval_id)}` was answered before")

            kept = await self.evaluator.call(
                key, "approve", decision["escalation"], float(ttl), principal.name, then=commit
            )
            live.seq += 1
            await self._advanced(live)
        return {"approval_id": approval_id, "approved": True, "approval": kept["approval"], "seq": live.seq}

    async def audit_head(self, principal: Principal) -> dict[str, Any]:
        """The head of the audit log as committed (to any key: it holds hashes and counts)."""
        return self.store.audit_head().to_json()

    async def decision(self, principal: Principal, session: str, decision_id: str) -> dict[str, Any]:
        self.find(principal, session)
        found = self.store.decision(principal.name, session, decision_id)
        if found is None:
            raise NotFound("not-found", f"no decision `{short(decision_id)}` in session `{short(session)}`")
        stored = jsontext.loads(found)
        stored["explanation"] = await self.evaluator.call((principal.name, session), "explain", stored["seq"])
        return stored

    # ---------------------------------------------------------------------- private

    def _commit_decision(
        self,
        key: Key,
        decision: dict[str, Any],
        candidate: dict[str, Any] | None,
        how: str = "authorize",
        audit: Records = (),
    ) -> None:
        try:
            self.store.decided(
                decision["decision_id"],
                key[0],
                key[1],
                decision["seq"],
                decision["verdict"],
                jsontext.dumps(decision).decode(),
                None if candidate is None else jsontext.dumps(candidate).decode(),
                how,
                audit,
            )
        except NOT_DONE as error:
            raise Unavailable(
                "not-recorded", f"the decision could not be recorded, so it is not given: {error}"
            ) from None

    async def _asked(
        self, principal: Principal, session: str, what: str, operation: Operation, *args: Any, then: Any
    ) -> Any:
        """The evaluator's answer to ``operation`` on a session; a request it refuses as invalid is
        answered so, and logged (a ``refusal`` record naming ``what`` was refused)."""
        try:
            return await self.evaluator.call((principal.name, session), operation, *args, then=then)
        except Invalid as refused:
            record = refusal(principal.name, session, what, refused.code, refused.message)
            try:
                self.store.record_audit([record])
            except NOT_DONE as error:
                raise Unavailable("not-recorded", f"the refusal could not be logged: {error}") from None
            raise

    def _behind(self, live: Live, after: int) -> str:
        """Why a request made after events the session does not hold (yet) is denied."""
        return (
            f"the session's graph is at sequence number {live.seq}, behind the {after} the request "
            f"was made after, and did not reach it within {self.wait:g} s"
        )

    async def _reach(self, live: Live, seq: int) -> bool:
        """Wait until the session's graph holds ``seq``; whether it did not in time."""
        if live.seq >= seq:
            return False
        if live.advanced is None:
            live.advanced = asyncio.Condition()
        async with live.advanced:
            try:
                await asyncio.wait_for(live.advanced.wait_for(lambda: live.seq >= seq), self.wait)
            except TimeoutError:
                return True
        return False

    async def _advanced(self, live: Live) -> None:
        if live.advanced is not None:
            async with live.advanced:
                live.advanced.notify_all()


def outcome(
    principal: str, session: str, decision_id: str, decision: dict[str, Any], said: str, approver: str
) -> dict[str, Any]:
    """The audit record of a person's answer to an escalated decision (docs/verdicts.md)."""
    from policyc.runtime.audit import outcome_record

    escalation = decision.get("escalation") or {}
    record = outcome_record(session, decision.get("action"), said, approver, escalation.get("rules") or ())
    return {**record, "principal": principal, "decision": decision_id}


def refusal(principal: str, session: str, what: str, code: str, message: str) -> dict[str, Any]:
    """The audit record of a request the service refused (:class:`~.errors.Invalid`): what, the
    code and why."""
    from policyc.runtime.audit import refusal_record

    return {**refusal_record(session, what, None, code, message), "principal": principal}


def _session_id(value: Any) -> str:
    """A session id: any text of 1 to :data:`ID_LIMIT` characters (it is only ever a key, and
    shown JSON-encoded)."""
    if not isinstance(value, str) or not value or len(value) > ID_LIMIT:
        raise Invalid("malformed-request", f"`session` must be a string of 1-{ID_LIMIT} characters")
    return value


def short(text: str) -> str:
    """``text`` cut to 64 characters, for a message that names what a client sent."""
    return text if len(text) <= 64 else text[:61] + "..."


def _approver(principal: Principal) -> None:
    if "approver" not in principal.roles:
        raise Forbidden("not-an-approver", "answering escalated calls needs a key with the `approver` role")
