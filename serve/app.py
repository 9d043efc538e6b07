"""The reference monitor as an HTTP service: the Starlette application over a
:class:`~.service.Service`, and the only place that speaks HTTP.

Every request but ``GET /healthz`` carries ``Authorization: Bearer KEY``; a missing or unknown
key is answered 401 before any policy code runs. A principal sees its own sessions only: another
principal's session is 404, as a missing one is. Every error is ``{"error": {"code", "message"}}``
with a stable code, and the status its kind has in :data:`STATUS` (the service refuses in its own
terms, :mod:`.errors`). Bodies larger than the limit are 413 before they are read whole.

State lives in the database (:mod:`.store`): an event batch and a decision are committed before
the answer, and the sessions are rebuilt from it when the service starts (:meth:`Service.restore`),
replaying each session's events in order, candidates authorized again, so that decisions after a
restart are those of a service that never stopped. docs/serve.md describes the API; the OpenAPI
document (:mod:`.openapi`) is served at ``/openapi.json``.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from policyc.runtime.jsonio import NumberRefused

from . import jsontext
from .errors import (
    Conflict,
    Failed,
    Forbidden,
    Invalid,
    Malformed,
    NotFound,
    ServiceError,
    TooLarge,
    Unauthenticated,
    Unavailable,
)
from .keys import Keys, Principal
from .routing import InstanceRouter, Router
from .service import MAX_BODY, NOT_DONE, WAIT, Service, short
from .tls import subject_of

__all__ = ["MAX_BODY", "STATUS", "WAIT", "application"]

# the HTTP status of each kind of refusal
STATUS: Mapping[type[ServiceError], int] = {
    Malformed: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Invalid: 422,
    Failed: 500,
    Unavailable: 503,
}


def _json(data: Any, status: int = 200) -> Response:
    return Response(jsontext.dumps(data), status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return Response(_error_body(code, message), status_code=status, media_type="application/json")


def _error_body(code: str, message: str) -> bytes:
    return jsontext.dumps({"error": {"code": code, "message": message}})


def _database_away(error: BaseException) -> Unavailable:
    """What a request that met a store's failure outside a write's own handling is told: the
    database did not answer (down, restarting, the connection broke); it may be sent again."""
    return Unavailable(
        "database-unavailable", f"the database did not answer, so the request was not done: {error}"
    )


def _refused(error: ServiceError) -> Response:
    return _error(STATUS[type(error)], error.code, error.message)


# ------------------------------------------------------------------------- the application


def application(service: Service, router: Router | InstanceRouter | None = None) -> ASGIApp:
    """The ASGI application of a service: the routes that decide and record (``events``,
    ``authorize``, ``decide``) answered by plain ASGI handlers (:func:`_hot`), every other one by
    Starlette. With ``router`` (one of ``--processes N``), a client's request about a session
    another process owns goes to that process (:mod:`.routing`)."""
    routed = _routed(service)

    async def local(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            found = HOT.fullmatch(scope["path"])
            if found is not None:
                await _hot(service, found[2], found[1], scope, receive, send)
                return
        await routed(scope, receive, send)

    if router is None:
        return local
    router.local = local

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await routed(scope, receive, send)
        await router.route(scope, receive, send, local)

    return app


def principal_of(service: Service) -> Callable[[str, Scope], Principal]:
    """The check of a request's key (and certificate) against the service's keys, for a router."""

    def check(header: str, scope: Scope) -> Principal:
        return _principal(header, scope, service.keys)

    return check


def _routed(service: Service) -> Starlette:
    """The Starlette application of every route (the hot ones too: :func:`application` answers
    those before it)."""

    def authenticated(
        handler: Callable[..., Awaitable[Any]],
        *,
        with_body: bool = True,
        status: int = 200,
        timed: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint of ``handler``: the caller's principal, the path's parameters and (with
        ``with_body``) the JSON body in; its data out as JSON with ``status``, a refusal as its
        error; ``timed``: the time inside the service in a ``Server-Timing`` header."""

        async def endpoint(request: Request) -> Response:
            try:
                principal = _principal(request.headers.get("authorization", ""), request.scope, service.keys)
                arguments = dict(request.path_params)
                if with_body:
                    arguments["body"] = await _body(
                        request.stream(), request.headers.get("content-length"), service.max_body
                    )
                started = time.perf_counter()
                answer = _json(await handler(principal, **arguments), status)
            except ServiceError as error:
                return _refused(error)
            except NOT_DONE as error:
                return _refused(_database_away(error))
            if timed:  # committing included, for clients that measure latency
                answer.headers["Server-Timing"] = f"decide;dur={(time.perf_counter() - started) * 1000:.3f}"
            return answer

        return endpoint

    async def health(request: Request) -> Response:
        return _json({"status": "ok", "sessions": len(service.live)})

    async def metrics(request: Request) -> Response:
        try:
            _principal(request.headers.get("authorization", ""), request.scope, service.keys)
        except ServiceError as error:
            return _refused(error)
        return Response(service.metrics.text(), media_type="text/plain; version=0.0.4")

    async def openapi(request: Request) -> Response:
        from .openapi import document

        try:
            _principal(request.headers.get("authorization", ""), request.scope, service.keys)
        except ServiceError as error:
            return _refused(error)
        return _json(document())

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, "not-found", f"no route {request.method} {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        answer = _error(405, "method-not-allowed", f"{request.method} is not allowed on {request.url.path}")
        allow = (getattr(exc, "headers", None) or {}).get("Allow")
        if allow:  # the methods the route has (RFC 9110 asks for them)
            answer.headers["Allow"] = allow
        return answer

    async def crashed(request: Request, exc: Exception) -> Response:
        return _error(500, "internal-error", f"the service failed: {type(exc).__name__}")

    routes = [
        Route("/healthz", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/sessions", authenticated(service.create, status=201), methods=["POST"]),
        Route("/v1/sessions/{session}/events", authenticated(service.events), methods=["POST"]),
        Route("/v1/sessions/{session}/facts", authenticated(service.facts), methods=["POST"]),
        Route(
            "/v1/sessions/{session}/authorize", authenticated(service.authorize, timed=True), methods=["POST"]
        ),
        Route("/v1/sessions/{session}/decide", authenticated(service.decide, timed=True), methods=["POST"]),
        Route("/v1/approvals", authenticated(service.approvals, with_body=False), methods=["GET"]),
        Route("/v1/approvals/{approval_id}", authenticated(service.answer), methods=["POST"]),
        Route("/v1/audit/head", authenticated(service.audit_head, with_body=False), methods=["GET"]),
        Route(
            "/v1/sessions/{session}/decisions/{decision_id}",
            authenticated(service.decision, with_body=False),
            methods=["GET"],
        ),
    ]
    return Starlette(
        routes=routes, exception_handlers={404: not_found, 405: not_allowed, 500: crashed, Exception: crashed}
    )


# the routes that decide and record, answered without the framework: POST /v1/sessions/S/OPERATION
HOT = re.compile(r"/v1/sessions/([^/]+)/(events|authorize|decide)")


class _Gone(Exception):
    """The client went before its request's body arrived."""


async def _hot(
    service: Service,
    operation: str,
    session: str,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """A hot route's request, answered as the Starlette endpoint answers it (the same
    refusals, statuses and bodies), without building a request and a response object."""
    headers = dict(scope["headers"])
    declared = headers.get(b"content-length")

    def body() -> Awaitable[bytes]:
        return _read(
            _stream(receive), None if declared is None else declared.decode("latin-1"), service.max_body
        )

    answer = await hot_answer(
        service, operation, session, headers.get(b"authorization", b"").decode("latin-1"), scope, body
    )
    if answer is None:
        return
    status, payload, extra = answer
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": payload})


async def hot_answer(
    service: Service,
    operation: str,
    session: str,
    authorization: str,
    scope: Mapping[str, Any],
    body: Callable[[], Awaitable[bytes]],
) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
    """The answer to a request of a hot route (``operation``: ``events``, ``authorize`` or
    ``decide``, the :class:`Service` method that answers it; ``authorization``: its header;
    ``body()``: its body, read within the limit): its status, JSON body and headers beside the
    content's, the time a decision took for the two that decide. None when the client went
    before its body arrived. Shared by the ASGI handler (:func:`_hot`) and the HTTP protocol's
    own (:mod:`.hotpath`)."""
    handler: Callable[[Principal, str, Any], Awaitable[Any]] = getattr(service, operation)
    extra: list[tuple[bytes, bytes]] = []
    try:
        principal = _principal(authorization, scope, service.keys)
        value = _parsed(await body())
        started = time.perf_counter()
        status, payload = 200, jsontext.dumps(await handler(principal, session, value))
        if operation != "events":  # committing included, for clients that measure latency
            extra.append(
                (b"server-timing", f"decide;dur={(time.perf_counter() - started) * 1000:.3f}".encode())
            )
    except _Gone:
        return None
    except ServiceError as error:
        status, payload = STATUS[type(error)], _error_body(error.code, error.message)
    except NOT_DONE as error:
        away = _database_away(error)
        status, payload = STATUS[type(away)], _error_body(away.code, away.message)
    except Exception as error:
        status, payload = 500, _error_body("internal-error", f"the service failed: {type(error).__name__}")
    return status, payload, extra


async def _stream(receive: Receive) -> AsyncIterator[bytes]:
    """The chunks of a request's body."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


def _principal(header: str, scope: Mapping[str, Any], keys: Keys) -> Principal:
    """Who calls: the principal of the bearer key (``header``: the ``Authorization`` header), or
    of the verified client certificate of the connection (:mod:`.tls`); both, when both are
    given, must name the same one."""
    subject = subject_of(scope)
    certified = keys.certified(subject) if subject is not None else None
    if not header and certified is not None:
        return certified
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        if subject is not None:
            raise Unauthenticated(
                "unauthorized", f"the client certificate `{short(subject)}` names no principal of KEYS.toml"
            )
        raise Unauthenticated("unauthorized", "send `Authorization: Bearer KEY` with a key of KEYS.toml")
    principal = keys.principal(key.strip())
    if principal is None:
        raise Unauthenticated("unauthorized", "the key is not one of KEYS.toml")
    if certified is not None and certified != principal:
        raise Unauthenticated("unauthorized", "the key and the client certificate name different principals")
    return principal


async def _body(stream: AsyncIterator[bytes], declared: str | None, limit: int) -> Any:
    """The JSON value of a request's body (``declared``: its ``Content-Length``), refused past
    ``limit`` bytes before it is read whole."""
    return _parsed(await _read(stream, declared, limit))


async def _read(stream: AsyncIterator[bytes], declared: str | None, limit: int) -> bytes:
    """A request's body (``declared``: its ``Content-Length``), refused past ``limit`` bytes
    before it is read whole."""
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise TooLarge("too-large", f"a request body holds at most {limit:,} bytes")
    chunks = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise TooLarge("too-large", f"a request body holds at most {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parsed(body: bytes) -> Any:
    """The JSON value of a request's body."""
    try:
        return jsontext.loads(body)
    except NumberRefused as error:  # JSON, with a number no event or fact can hold exactly
        raise Invalid(
            "unrepresentable-number", f"the body holds a number policyc cannot hold: {error}"
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise Malformed("malformed-json", f"the body is not JSON: {error}") from None
