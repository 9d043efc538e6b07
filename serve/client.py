"""A remote monitor: the sessions of a ``policyc serve`` service with the in-process API.

:func:`connect` gives a :class:`RemoteMonitor`; its :meth:`~RemoteMonitor.session` creates a
session at the service and returns a :class:`RemoteSession`, which answers what runtime code
asks of a :class:`~policyc.runtime.session.Session`: ``record``, ``add_facts``, ``authorize``,
``decide``, ``id``, and the events it recorded (``events``, ``order``), so that
``policyc.guard``, ``policyc.instrument_httpx`` and ``policyc.tool_messages`` run under
``policyc.use_session(remote)`` unchanged. Decisions are
:class:`~policyc.runtime.verdict.Decision` objects (:class:`RemoteDecision`, whose
``explain()`` asks the service).

The client fails closed. A transport error, a timeout, a 5xx, any status the route does not
answer with, or an answer that does not parse or lacks a field is never an allow: it is an
errored denial whose reason names what happened (``service unreachable: ...``, ``service
answered 503 ...``) and whose feedback, as for any errored decision, gives a short code only
(:data:`CODES`). An event the service did not acknowledge poisons the session object, as a
malformed event poisons an in-process session: from then on every decision is a denial saying
why, and nothing more is sent; so do facts the service refuses.

The client's own requests to the service are marked decided for the HTTP instrumentation
(:data:`policyc.runtime.http_hooks.decided`), so ``instrument_httpx`` never asks the monitor
about the monitor's own traffic.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from policyc.runtime.approvals import DEFAULT_TTL
from policyc.runtime.verdict import (
    ERROR_RULE,
    ERROR_SUGGESTION,
    Decision,
    EventRefused,
    Reason,
    refused_call,
)
from policyc.stdlib.events import EventError, check_event

if TYPE_CHECKING:
    import httpx

    from policyc.runtime.explain import Explanation
    from policyc.runtime.protocols import MonitorLike

TIMEOUT = 10.0  # seconds a request to the service may take
# the code an errored decision's feedback shows, by what went wrong
CODES = {
    "unreachable": "service-unreachable",  # no connection, a timeout, a broken transfer
    "failed": "service-failed",  # a 5xx
    "refused": "service-refused",  # a 4xx the route should not give (a wrong key: 401)
    "garbled": "service-answer-malformed",  # an answer that does not parse or lacks a field
    "exists": "session-exists",  # the session id is taken and attach=False
    "principal": "principal-refused",  # a principal asked for: a session acts for its key's
    "facts": "malformed-facts",  # add_facts: facts that are not rows per relation (here or at the service)
    "event": "malformed-event",  # the event is malformed (here or at the service)
}


def connect(
    url: str, key: str, *, timeout: float = TIMEOUT, session_roles: Iterable[str] | None = None
) -> RemoteMonitor:
    """The monitor a ``policyc serve`` service at ``url`` runs, for the principal of ``key``.

    ``timeout`` bounds each request (seconds); ``session_roles`` are the roles sessions take
    when :meth:`RemoteMonitor.session` names none (default: every role of the key's
    principal). Nothing is sent until a session is made."""
    return RemoteMonitor(url, key, timeout=timeout, session_roles=session_roles)


class RemoteMonitor:
    """The sessions of one service for one key, over one HTTP connection pool (``close()``, or
    a ``with`` block, ends it)."""

    approver = None
    approval_timeout = None
    approval_ttl = DEFAULT_TTL  # how long a front keeps a call it put to its user (the gateway)
    # escalated calls are approved at the service (its approvals endpoints), never here: a
    # decision that escalates stays escalated (refused as needing approval)
    approves_elsewhere = True

    def __init__(
        self, url: str, key: str, *, timeout: float = TIMEOUT, session_roles: Iterable[str] | None = None
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise ImportError("policyc.connect needs httpx: pip install 'policyc[serve]'") from None

        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session_roles = None if session_roles is None else list(session_roles)
        self.http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"},
            follow_redirects=False,
        )

    def session(
        self,
        session_id: str,
        *positional: Any,
        principal: str | None = None,
        roles: Iterable[str] | None = None,
        attach: bool = False,
    ) -> RemoteSession:
        """A new session ``session_id`` at the service (``POST /v1/sessions``), with ``roles``
        (default: the monitor's ``session_roles``, else the key's), by keyword as every monitor
        takes them (:class:`~policyc.runtime.protocols.MonitorLike`; roles by position still
        work, with a ``DeprecationWarning``, for one release). The session acts for the key's
        principal: a ``principal`` given is refused (the session is poisoned, saying so), as
        no key may choose whom it acts for. With ``attach=True``, a session of this id the key's
        principal made before is continued instead (its earlier events stay at the service;
        this object knows only those it records). A session the service did not make
        (unreachable, a wrong key, an id taken without ``attach``) is returned poisoned: every
        decision denies, saying why."""
        if positional:
            if len(positional) > 1:
                raise TypeError("session() takes a session id, and roles= and attach= by keyword")
            warnings.warn(
                "RemoteMonitor.session(id, roles): give roles= by keyword", DeprecationWarning, stacklevel=2
            )
            roles = positional[0]
        session = RemoteSession(self, session_id)
        if principal is not None:
            session.poison(
                failure(
                    "principal",
                    f"a service's session acts for its key's principal; principal {principal!r} was "
                    "asked for (leave it out, or use a key of that principal)",
                )
            )
            return session
        chosen = self.session_roles if roles is None else list(roles)
        body: dict[str, Any] = {"session": session_id}
        if chosen is not None:
            body["roles"] = chosen
        answer = self.request("POST", "/v1/sessions", body)
        if isinstance(answer, Reason):
            session.poison(answer)
        elif answer.status_code == 409 and attach:
            pass  # continued: the service keeps its events and sequence number
        elif answer.status_code == 409:
            session.poison(
                failure(
                    "exists",
                    f"the service holds a session `{session_id}` already (pass attach=True to continue it)",
                )
            )
        elif answer.status_code != 201:
            session.poison(unexpected(answer))
        else:
            body_seq = _json(answer)
            seq = body_seq.get("seq") if isinstance(body_seq, dict) else None
            if type(seq) is not int or seq < 0:
                session.poison(garbled(answer, "no sequence number `seq`"))
            else:
                session.seq = seq
        return session

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response | Reason:
        """The service's answer, or the reason it gave none (a transport error, a timeout)."""
        import httpx

        from policyc.runtime.http_hooks import decided

        try:
            content = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as error:
            return failure("event", f"the request cannot be sent as JSON: {type(error).__name__}: {error}")
        headers = {"Content-Type": "application/json"} if content is not None else {}
        try:
            request = self.http.build_request(method, path, content=content, headers=headers)
            token = decided.set(request)  # the monitor's own traffic is not an action of the agent
            try:
                return self.http.send(request)
            finally:
                decided.reset(token)
        except httpx.TimeoutException as error:
            return failure(
                "unreachable",
                f"service unreachable: no answer within {self.timeout:g} s ({type(error).__name__})",
            )
        except (httpx.HTTPError, OSError, RuntimeError) as error:  # RuntimeError: a closed client
            return failure("unreachable", f"service unreachable: {type(error).__name__}: {error}")

    def approvals(self) -> list[dict[str, Any]]:
        """The escalated calls waiting for a person, oldest first (the key needs the ``approver``
        role). :class:`ServiceError` saying why there is no list."""
        body = _answered(self.request("GET", "/v1/approvals"))
        pending = body.get("pending") if isinstance(body, dict) else None
        if not isinstance(pending, list) or not all(isinstance(p, dict) for p in pending):
            raise ServiceError("the service's answer has no list of `pending` calls")
        return pending

    def answer(self, approval_id: str, approve: bool, ttl: float | None = None) -> dict[str, Any]:
        """Approve an escalated call once (for ``ttl`` seconds; the service's default when None)
        or refuse it: the service's record of the answer. :class:`ServiceError` saying why not
        (an unknown id, one already answered, a key that is not an approver's)."""
        body: dict[str, Any] = {"approve": approve}
        if ttl is not None:
            body["ttl"] = ttl
        answer = _answered(self.request("POST", f"/v1/approvals/{_quote(approval_id)}", body))
        if not isinstance(answer, dict):
            raise ServiceError("the service's answer is not an object")
        return answer

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RemoteMonitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RemoteSession:
    """A session at the service with the API of an in-process session: ``record``,
    ``add_facts``, ``authorize``, ``decide``; ``id``; ``events`` and ``order``, the events this
    object recorded (what :func:`~policyc.runtime.context.use_session`, ``guard`` and
    ``tool_messages`` read); ``seq``, the last sequence number the service acknowledged, sent
    as ``after_seq`` with every authorization; ``sticky``, the reasons it is poisoned."""

    def __init__(self, monitor: RemoteMonitor, session_id: str) -> None:
        self.monitor = monitor
        self.id = session_id
        self.events: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.seq = 0
        self.sticky: list[Reason] = []
        self.decided: dict[Any, Decision] = {}  # the last decision of each action authorized here
        self.lock = threading.Lock()
        self.path = "/v1/sessions/" + _quote(session_id)

    # ---------------------------------------------------------------------- the session API

    def record(self, event: Mapping[str, Any]) -> None:
        """Send an event to the service (``POST .../events``); it is durable there when this
        returns. A malformed event, or one the service refuses (past the session's limit), is
        refused as an in-process session refuses it: :class:`~policyc.runtime.session.EventRefused`,
        and nothing of it is kept. One the service does not acknowledge poisons the session
        (whether the service holds it is unknown): every later decision denies, saying why."""
        with self.lock:
            checked = self._take(event)
            if self.sticky:
                return
            refused = self._sent("/events", {"events": [checked]}, refusals=True)
            if refused is not None:
                self._untake(checked)
                raise refused

    def add_facts(self, facts: Any) -> None:
        """Send domain facts (rows per input relation) to the service (``POST .../facts``);
        durable there when this returns. Facts the service refuses as malformed, or does not
        acknowledge, poison the session, as malformed facts poison an in-process session."""
        with self.lock:
            if self.sticky:
                return
            try:
                rows = {name: [list(row) for row in given] for name, given in facts.items()}
            except Exception as error:  # not a mapping of rows
                self.poison(failure("facts", f"malformed facts: {type(error).__name__}: {error}"))
                return
            self._sent("/facts", {"facts": rows}, "malformed-facts")

    def _sent(
        self, route: str, body: dict[str, Any], refused: str = "", refusals: bool = False
    ) -> EventRefused | None:
        """Send what a route records; the sequence number it acknowledges, or the session
        poisoned saying why it was not (``refused``: the code of a 422 kept as it is). With
        ``refusals``, an event the service refused (422) is returned as such, the session
        untouched."""
        answer = self.monitor.request("POST", self.path + route, body)
        if isinstance(answer, Reason):
            self.poison(answer)
        elif refusals and answer.status_code == 422 and _code(answer) in REFUSALS:
            return EventRefused(_message(answer), _code(answer) or "service-refused")
        elif answer.status_code == 422 and refused and _code(answer) == refused:
            self.poison(unexpected(answer, "facts"))
        elif answer.status_code != 200:
            self.poison(unexpected(answer))
        else:
            answered = _json(answer)
            seq = answered.get("seq") if isinstance(answered, dict) else None
            if type(seq) is not int or seq < self.seq:
                self.poison(garbled(answer, "no sequence number `seq` after the last one"))
            else:
                self.seq = seq
        return None

    def authorize(self, event: Mapping[str, Any]) -> Decision:
        """Record a candidate action at the service and have it decided there, on a graph that
        holds every event this session recorded (``after_seq``)."""
        action = event.get("id") if isinstance(event, Mapping) else None
        with self.lock:
            try:
                checked = self._take(event)
            except EventRefused as refused:  # as an in-process session refuses it
                return refused_call(action, refused)
            if self.sticky:
                return self._poisoned(action)
            answer = self.monitor.request(
                "POST", self.path + "/authorize", {"event": checked, "after_seq": self.seq}
            )
            if isinstance(answer, Reason):
                return _denial(action, answer)
            if answer.status_code == 422 and _code(answer) in REFUSALS:
                self._untake(checked)
                return refused_call(
                    action, EventRefused(_message(answer), _code(answer) or "service-refused")
                )
            if answer.status_code != 200:
                return _denial(action, unexpected(answer))
            decision = self._decision(answer, action)
            self.decided[action] = decision
            return decision

    def decide(self, action: Any) -> Decision:
        """An action this session authorized, decided again by the service (which then uses an
        approval a person gave it at the approvals endpoints); any other action is denied,
        saying why."""
        with self.lock:
            if self.sticky:
                return self._poisoned(action)
            try:
                found = self.decided.get(action)
            except TypeError:
                found = None
            if found is not None:
                answer = self.monitor.request(
                    "POST", self.path + "/decide", {"action": action, "after_seq": self.seq}
                )
                if isinstance(answer, Reason):
                    return _denial(action, answer)
                if answer.status_code != 200:
                    return _denial(action, unexpected(answer))
                decision = self._decision(answer, action)
                self.decided[action] = decision
                return decision
            reason = Reason(
                "policyc:unknown-action",
                "the service decides only the candidates `authorize` sends it, and this session "
                "sent it no such action, so it is refused",
                "Authorize the call (`session.authorize(event)`) instead of deciding it.",
                "high",
            )
            return Decision(action, False, (reason,), True)

    # --------------------------------------------------------------------------- poisoning

    def poison(self, reason: Reason) -> None:
        """From now on every decision denies with ``reason`` (and nothing more is sent)."""
        self.sticky.append(reason)

    def _poisoned(self, action: Any) -> Decision:
        codes = ",".join(dict.fromkeys(r.code or "" for r in self.sticky))
        messages = "; ".join(dict.fromkeys(r.message or "" for r in self.sticky))
        reason = Reason(
            ERROR_RULE,
            f"the policy could not be evaluated, so the action is denied: {messages}",
            ERROR_SUGGESTION,
            "high",
            code=codes,
        )
        return Decision(action, False, (reason,), True)

    def _take(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The event checked as the service checks it and kept here;
        :class:`~policyc.runtime.session.EventRefused` if it is malformed (nothing kept)."""
        try:
            copy = dict(event) if isinstance(event, Mapping) else event
            checked = check_event(copy, self.events)
        except EventError as error:
            raise EventRefused(f"malformed event: {error}") from None
        except Exception as error:  # a mapping that fails to copy, a key that fails to hash, ...
            raise EventRefused(f"malformed event: {type(error).__name__}: {error}") from None
        self.events[checked["id"]] = checked
        self.order.append(checked["id"])
        return checked

    def _untake(self, checked: dict[str, Any]) -> None:
        """Forget an event the service refused."""
        self.events.pop(checked["id"], None)
        if self.order and self.order[-1] == checked["id"]:
            self.order.pop()

    def _decision(self, answer: httpx.Response, action: Any) -> Decision:
        body = _json(answer)
        try:
            decision = RemoteDecision.from_json(body, action, self)
        except (KeyError, TypeError, ValueError) as error:
            return _denial(action, garbled(answer, str(error)))
        self.seq = max(self.seq, decision.seq)
        return decision


# ------------------------------------------------------------------------------ decisions


@dataclass(frozen=True)
class RemoteDecision(Decision):
    """A decision the service made: the runtime's :class:`Decision` with the service's id for
    it, the sequence number it was made at and its feedback text; ``explain()`` asks the
    service (``GET .../decisions/{decision_id}``)."""

    decision_id: str = field(default="", kw_only=True)
    seq: int = field(default=0, kw_only=True)
    origin: RemoteSession | None = field(default=None, kw_only=True, compare=False, repr=False)

    def explain(self) -> Explanation:
        """The service's explanation of the decision, the same object as an explanation made
        in process (:class:`~policyc.runtime.explain.Explanation`; ``ConnectionError``: what kept
        the service from answering, or an answer that is no explanation)."""
        from policyc.runtime.explain import Explanation

        if self.origin is None:
            raise ValueError("the decision is not from a session of the service")
        answer = self.origin.monitor.request(
            "GET", f"{self.origin.path}/decisions/{_quote(self.decision_id)}"
        )
        if isinstance(answer, Reason):
            raise ConnectionError(answer.message)
        if answer.status_code != 200:
            raise ConnectionError(unexpected(answer).message)
        body = _json(answer)
        if not isinstance(body, dict) or "explanation" not in body:
            raise ConnectionError(garbled(answer, "no `explanation`").message)
        try:
            return Explanation.from_json(body["explanation"])
        except ValueError as error:
            raise ConnectionError(garbled(answer, str(error)).message) from None

    @classmethod
    def from_json(  # type: ignore[override]
        cls, body: Any, action: Any = None, origin: RemoteSession | None = None
    ) -> RemoteDecision:
        """The decision an answer of ``POST .../authorize`` holds: the runtime's one JSON form
        of a decision (:meth:`Decision.from_json`) with the service's ``decision_id`` and
        ``seq`` (``ValueError``, if it lacks a field, contradicts itself or decides another
        action than ``action``)."""
        if not isinstance(body, dict):
            raise ValueError("the answer is not an object")
        decision_id, seq = body.get("decision_id"), body.get("seq")
        if not isinstance(decision_id, str) or type(seq) is not int:
            raise ValueError("`decision_id` or `seq` is not what a decision holds")
        if body.get("action") != action:
            raise ValueError(f"the decision is of `{body.get('action')}`, not of `{action}`")
        return super().from_json(body, decision_id=decision_id, seq=seq, origin=origin)


# ------------------------------------------------------------------------------- failures


class ServiceError(Exception):
    """The service gave no usable answer: the message says what it said, or why there was none."""


def _answered(answer: httpx.Response | Reason) -> Any:
    """The JSON body of a 200 answer; :class:`ServiceError` for anything else."""
    if not hasattr(answer, "status_code"):
        raise ServiceError(str(getattr(answer, "message", answer)))
    assert not isinstance(answer, Reason)
    if answer.status_code != 200:
        error = _error(answer)
        said = f"{error[0]}: {error[1]}" if error else "no error body"
        raise ServiceError(f"the service answered {answer.status_code} ({said})")
    body = _json(answer)
    if body is None:
        raise ServiceError("the service's answer is not JSON")
    return body


def failure(kind: str, message: str) -> Reason:
    """The reason of a denial the client makes itself (``kind``: a key of :data:`CODES`)."""
    return Reason(ERROR_RULE, message, ERROR_SUGGESTION, "high", code=CODES[kind])


def unexpected(answer: httpx.Response, kind: str | None = None) -> Reason:
    """The reason of an answer with a status the route should not give."""
    status = answer.status_code
    error = _error(answer)
    said = f" {error[0]}: {error[1]}" if error else ""
    return failure(kind or ("failed" if status >= 500 else "refused"), f"service answered {status}{said}")


def garbled(answer: httpx.Response, why: str) -> Reason:
    return failure("garbled", f"service answered {answer.status_code} with a malformed body: {why}")


def _denial(action: Any, reason: Reason) -> Decision:
    return Decision(action, False, (reason,), True)


def _json(answer: httpx.Response) -> Any:
    try:
        return json.loads(answer.content)
    except (ValueError, RecursionError):
        return None


def _error(answer: httpx.Response) -> tuple[str, str] | None:
    """The code and message of an error body ``{"error": {"code", "message"}}``."""
    body = _json(answer)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return error["code"], str(error.get("message", ""))[:500]
    return None


def _code(answer: httpx.Response) -> str | None:
    error = _error(answer)
    return error[0] if error else None


def _message(answer: httpx.Response) -> str:
    """What the service said of an event it refused."""
    error = _error(answer)
    return f"the service refused the event: {error[1] if error else answer.status_code}"


# the codes of a 422 saying the service did not record an event, and kept nothing of it
# the codes of a 422 that refuses one event alone (an in-process session raises EventRefused)
REFUSALS = frozenset(
    {"malformed-event", "limit-exceeded", "extension-failed", "conflicting-facts", "host-only-event"}
)


def _quote(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")


if TYPE_CHECKING:

    def _remote(monitor: RemoteMonitor) -> MonitorLike:  # checked by mypy: the client satisfies it
        return monitor
