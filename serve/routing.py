"""Requests to the process that owns their session (``policyc serve --processes N``).

N service processes share one listening port: the kernel hands each new connection to one of
them, whatever sessions its requests name. A session is owned by one process, chosen by a hash
of its principal and id (:func:`owner_of`), and lives in that process's database. A request
naming a session another process owns is forwarded to the owner over the owner's Unix socket
(one hop inside the host, ASGI without HTTP: :mod:`.peers`) and its answer relayed as it is; a
request about every session (the escalated calls waiting, the audit log's head) is asked of every
process and the answers merged; an answer to an escalated call goes to the process that holds it.

The owner answers a forwarded request with its own application, without routing it again, and
with the client certificate's subject the forwarding process verified; the Unix sockets live in a
folder only the service's user may enter, and nothing from the network reaches them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from . import jsontext
from .metrics import Metrics, summed
from .peers import Answer, Peer, serve

# the routes that name a session: /v1/sessions/S and what is under it
_SESSION = re.compile(r"/v1/sessions/([^/]+)(?:/.*)?")
_HOP_HEADERS = {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"content-length"}


def owner_of(principal: str, session: str, count: int) -> int:
    """The process (0 .. count - 1) that owns the session ``session`` of ``principal``.

    >>> owner_of("agent", "s1", 1), owner_of("agent", "s1", 4) == owner_of("agent", "s1", 4)
    (0, True)
    """
    digest = hashlib.sha256(f"{principal}\0{session}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


class Router:
    """How process ``index`` of ``count`` reaches the others: their Unix sockets (``peers``,
    one per process, its own included) and who is asking (``principal_of(header, scope)``, the
    application's check of the key, raising on a bad one)."""

    def __init__(
        self,
        index: int,
        peers: Sequence[str],
        principal_of: Callable[[str, Scope], Any],
        max_body: int,
        metrics: Metrics | None = None,
    ) -> None:
        self.index = index
        self.metrics = metrics  # this process's: counts the requests forwarded
        self.own = peers[index]
        self.count = len(peers)
        self.peers = [Peer(path) for path in peers]
        self.principal_of = principal_of
        self.max_body = max_body
        self.local: ASGIApp | None = None  # the application without routing (set by it)
        self.server: Any = None

    async def start(self) -> None:
        """Answer the other processes' requests at this process's socket."""
        assert self.local is not None
        self.server = await serve(self.own, self.local)

    async def route(
        self, scope: Scope, receive: Receive, send: Send, local: Callable[..., Awaitable[None]]
    ) -> None:
        """Answer a request from a client: here, when this process owns what it names (or it
        names nothing a process owns), else at the owner, or at every process."""
        path, method = scope["path"], scope["method"]
        found = _SESSION.fullmatch(path)
        if found is not None:
            owner = self._owner(scope, found[1])
            if owner is None or owner == self.index:
                return await local(scope, receive, send)
            return await self._forward(owner, scope, await _read(receive, self.max_body), send)
        if path == "/v1/sessions" and method == "POST":
            body = await _read(receive, self.max_body)
            owner = self._owner(scope, _session_in(body))
            if owner is None or owner == self.index:
                return await local(scope, _replayed(body), send)
            return await self._forward(owner, scope, body, send)
        if path == "/v1/approvals" and method == "GET":
            return await self._merged(scope, send, "pending")
        if path == "/v1/audit/head" and method == "GET":
            return await self._merged(scope, send, "heads")
        if path == "/metrics" and method == "GET":
            return await self._summed(scope, send)
        if path.startswith("/v1/approvals/") and method == "POST":
            return await self._first_found(scope, await _read(receive, self.max_body), send)
        return await local(scope, receive, send)

    def owns(self, authorization: str, session: str) -> bool:
        """Whether this process answers a request about ``session`` with this ``Authorization``
        header itself: it owns the session, or the key is refused here as anywhere."""
        scope = {"headers": [(b"authorization", authorization.encode("latin-1"))]}
        return self._owner(scope, session) in (None, self.index)

    def _owner(self, scope: Scope, session: str | None) -> int | None:
        """The owner of ``session`` for the request's principal (None: the request is refused
        here, as it would be anywhere: no valid key, or no session named)."""
        if session is None:
            return None
        try:
            principal = self.principal_of(_header(scope, b"authorization"), scope)
        except Exception:
            return None
        return owner_of(principal.name, session, self.count)

    async def _ask(self, peer: int, scope: Scope, body: bytes) -> Answer:
        head = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": [
                (k.decode("latin-1"), v.decode("latin-1"))
                for k, v in scope["headers"]
                if k.lower() not in _HOP_HEADERS
            ],
            "cert": _subject(scope),
        }
        return await self.peers[peer].ask(head, body)

    async def _forward(self, peer: int, scope: Scope, body: bytes, send: Send) -> None:
        if self.metrics is not None:
            self.metrics.forwarded.inc()
        try:
            status, headers, content = await self._ask(peer, scope, body)
        except Exception as error:  # the owner could not be reached: refused, nothing was changed there
            status, headers, content = _unavailable(
                f"process {peer}, which holds the session, did not answer ({type(error).__name__})"
            )
        await _send(send, status, headers, content)

    async def _merged(self, scope: Scope, send: Send, field: str) -> None:
        """Every process's answer, its list ``field`` joined (the first refusal as it is)."""
        answers = await self._everyone(scope, send)
        if answers:
            merged = [item for answer in answers for item in json.loads(answer).get(field) or []]
            first = json.loads(answers[0])
            await _send(
                send, 200, [(b"content-type", b"application/json")], jsontext.dumps({**first, field: merged})
            )

    async def _summed(self, scope: Scope, send: Send) -> None:
        """Every process's counters, summed into one service's (the first refusal as it is)."""
        answers = await self._everyone(scope, send)
        if answers:
            texts = [answer.decode("utf-8") for answer in answers]
            await _send(send, 200, [(b"content-type", b"text/plain; version=0.0.4")], summed(texts))

    async def _everyone(self, scope: Scope, send: Send) -> list[bytes] | None:
        """Every process's answer to the request, each a 200; None when one was not (that one's
        answer, or a 503 for a process that did not answer, sent as the request's)."""
        answers = []
        for peer in range(self.count):
            try:
                status, headers, content = await self._ask(peer, scope, b"")
            except Exception as error:
                status, headers, content = _unavailable(
                    f"process {peer} did not answer ({type(error).__name__})"
                )
            if status != 200:
                await _send(send, status, headers, content)
                return None
            answers.append(content)
        return answers

    async def _first_found(self, scope: Scope, body: bytes, send: Send) -> None:
        """The answer of the process that holds what the request names (each asked in turn,
        this one first; the last one's 404 when none does)."""
        order = [self.index, *(p for p in range(self.count) if p != self.index)]
        for n, peer in enumerate(order):
            try:
                status, headers, content = await self._ask(peer, scope, body)
            except Exception as error:
                status, headers, content = _unavailable(
                    f"process {peer} did not answer ({type(error).__name__})"
                )
            if status != 404 or n == len(order) - 1:
                return await _send(send, status, headers, content)

    async def close(self) -> None:
        for peer in self.peers:
            await peer.close()
        if self.server is not None:
            self.server.close()


def _subject(scope: Scope) -> str | None:
    tls = (scope.get("extensions") or {}).get("tls")
    return tls.get("client_cert_name") if isinstance(tls, dict) else None


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""


def _session_in(body: bytes) -> str | None:
    try:
        value = jsontext.loads(body)
    except Exception:
        return None
    session = value.get("session") if isinstance(value, dict) else None
    return session if isinstance(session, str) else None


async def _read(receive: Receive, limit: int) -> bytes:
    """The request's body (at most ``limit`` bytes and one more, for the owner to refuse)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= limit + 1:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)[: limit + 1]


def _replayed(body: bytes) -> Receive:
    """A ``receive`` that gives ``body`` again, as one message."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _unavailable(message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = jsontext.dumps({"error": {"code": "owner-unavailable", "message": message}})
    return 503, [(b"content-type", b"application/json")], body


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], content: bytes) -> None:
    start = [*headers, (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": content})


HOP_HEADER = b"x-policyc-forwarded"  # names the instance a request was forwarded by: not forwarded again


class InstanceRouter:
    """Requests to the instance that owns their session, when several instances share a
    PostgreSQL database (``--db postgresql://``): a request about a session whose lease another
    live instance holds is forwarded to the address that instance announced, with the client's
    own headers (the owner checks the key again), once; the owner's answer is relayed. Everything
    else is answered here (the store is shared: the escalations waiting and the audit log's head
    are every instance's)."""

    def __init__(self, service: Any, principal_of: Callable[[str, Scope], Any], max_body: int) -> None:
        self.service = service
        self.store = service.store
        self.principal_of = principal_of
        self.max_body = max_body
        self.clients: dict[str, Any] = {}
        self.local: ASGIApp | None = None

    async def start(self) -> None:
        pass

    async def route(
        self, scope: Scope, receive: Receive, send: Send, local: Callable[..., Awaitable[None]]
    ) -> None:
        if _header(scope, HOP_HEADER):
            return await local(scope, receive, send)
        path, method = scope["path"], scope["method"]
        address: str | None = None
        found = _SESSION.fullmatch(path)
        if found is not None:
            address = self._elsewhere(self._key(scope, found[1]))
        elif path.startswith("/v1/approvals/") and method == "POST":
            row = self.store.decision_row(path[len("/v1/approvals/") :])
            address = None if row is None else self._elsewhere((row[0], row[1]))
        if address is None:
            return await local(scope, receive, send)
        body = await _read(receive, self.max_body)
        try:
            status, headers, content = await self._ask(address, scope, body)
        except Exception as error:
            status, headers, content = _unavailable(
                f"the instance at {address}, which holds the session, did not answer ({type(error).__name__})"
            )
        await _send(send, status, headers, content)

    def _key(self, scope: Scope, session: str) -> tuple[str, str] | None:
        try:
            principal = self.principal_of(_header(scope, b"authorization"), scope)
        except Exception:
            return None
        return principal.name, session

    def _elsewhere(self, key: tuple[str, str] | None) -> str | None:
        """Where the session ``key`` is decided, when another live instance holds it (None: here)."""
        if key is None or key in self.service.live:
            return None
        try:
            lease = self.store.lease(*key)
            if lease is None or lease.owner == self.store.instance or lease.remaining <= 0:
                return None
            found: str | None = self.store.address_of(lease.owner)
            return found
        except Exception:  # the database cannot say: answered here, which refuses what it cannot do
            return None

    async def _ask(self, address: str, scope: Scope, body: bytes) -> Answer:
        import httpx

        client = self.clients.get(address)
        if client is None:
            client = self.clients[address] = httpx.AsyncClient(base_url=address, timeout=60)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_HEADERS]
        headers.append((HOP_HEADER, self.store.instance.encode("utf-8")))
        query = scope.get("query_string", b"").decode("latin-1")
        url = scope["path"] + (f"?{query}" if query else "")
        answer = await client.request(scope["method"], url, headers=headers, content=body)
        kept = [(k, v) for k, v in answer.headers.raw if k.lower() not in _HOP_HEADERS]
        return answer.status_code, kept, answer.content

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()
