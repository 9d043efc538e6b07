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

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

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
from .service import MAX_BODY, WAIT, Service, short
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
    return _json({"error": {"code": code, "message": message}}, status)


def _refused(error: ServiceError) -> Response:
    return _error(STATUS[type(error)], error.code, error.message)


# ------------------------------------------------------------------------- the application


def application(service: Service) -> Starlette:
    """The ASGI application of a service."""

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
                principal = _principal(request, service.keys)
                arguments = dict(request.path_params)
                if with_body:
                    arguments["body"] = await _body(request, service.max_body)
                started = time.perf_counter()
                answer = _json(await handler(principal, **arguments), status)
            except ServiceError as error:
                return _refused(error)
            if timed:  # committing included, for clients that measure latency
                answer.headers["Server-Timing"] = f"decide;dur={(time.perf_counter() - started) * 1000:.3f}"
            return answer

        return endpoint

    async def health(request: Request) -> Response:
        return _json({"status": "ok", "sessions": len(service.live)})

    async def metrics(request: Request) -> Response:
        try:
            _principal(request, service.keys)
        except ServiceError as error:
            return _refused(error)
        return Response(service.metrics.text(), media_type="text/plain; version=0.0.4")

    async def openapi(request: Request) -> Response:
        from .openapi import document

        try:
            _principal(request, service.keys)
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


def _principal(request: Request, keys: Keys) -> Principal:
    """Who calls: the principal of the bearer key, or of the verified client certificate
    (:mod:`.tls`); both, when both are given, must name the same one."""
    header = request.headers.get("authorization", "")
    subject = subject_of(request.scope)
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


async def _body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise TooLarge("too-large", f"a request body holds at most {limit:,} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge("too-large", f"a request body holds at most {limit:,} bytes")
        chunks.append(chunk)
    try:
        return jsontext.loads(b"".join(chunks))
    except NumberRefused as error:  # JSON, with a number no event or fact can hold exactly
        raise Invalid(
            "unrepresentable-number", f"the body holds a number policyc cannot hold: {error}"
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise Malformed("malformed-json", f"the body is not JSON: {error}") from None
