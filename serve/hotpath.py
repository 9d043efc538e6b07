"""The routes that decide and record, answered by the HTTP protocol itself.

uvicorn's HTTP protocol (httptools) makes every request an ASGI cycle: a scope, an event, a task
that waits for the body through ``receive``, and an answer through ``send`` written in two pieces
(its head, then its body), each a system call that on loopback also runs the receiving side.
For the three routes a busy agent calls per step (``POST /v1/sessions/S/events``, ``authorize``,
``decide``) that was a tenth of the service's CPU. :func:`protocol` makes the protocol uvicorn
runs: uvicorn's own, which answers those requests itself once their body is in, with the same
answer as the ASGI handler (:func:`.app.hot_answer`, shared by both), written in one piece.

Only a plain request takes that path: ``POST`` to one of those routes over plain HTTP, its body's
length declared and within the limit, not pipelined behind an unanswered request, no
``Expect: 100-continue``, no upgrade, about a session this process owns. Anything else (chunked
bodies, bodies declared too large, TLS, a session another process owns) goes to the ASGI
application as before, which answers it in the same terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .app import HOT, hot_answer

if TYPE_CHECKING:
    from .routing import Router
    from .service import Service


class _Event:
    """What uvicorn's protocol sets when a request's body arrives: nobody waits for it here."""

    def set(self) -> None:
        pass


class Hot:
    """A hot request being read and answered: what uvicorn's protocol reads of its current
    request-response cycle (``body``, ``more_body``, ``response_complete``, ``disconnected``,
    ``keep_alive``, ``message_event``), and what answers it."""

    __slots__ = (
        "authorization",
        "body",
        "disconnected",
        "keep_alive",
        "message_event",
        "more_body",
        "operation",
        "response_complete",
        "session",
    )

    def __init__(self, operation: str, session: str, authorization: str, keep_alive: bool) -> None:
        self.body = bytearray()
        self.more_body = True
        self.response_complete = False
        self.disconnected = False
        self.keep_alive = keep_alive
        self.message_event = _Event()
        self.operation = operation
        self.session = session
        self.authorization = authorization


def protocol(service: Service, router: Router | None) -> Any:
    """The HTTP protocol class for uvicorn's ``http`` setting: uvicorn's httptools protocol
    answering the hot routes itself (``"auto"``, uvicorn's choice, without httptools)."""
    try:
        import httptools
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools comes with uvicorn[standard]
        return "auto"

    limit = service.max_body

    class HotProtocol(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            hot = self._hot()
            if hot is None:
                super().on_headers_complete()
                return
            self.cycle = hot  # type: ignore[assignment]  # read as uvicorn reads its own cycle

        def _hot(self) -> Hot | None:
            """The request as a hot one, or None when the ASGI application is to answer it."""
            if self.parser.get_method() != b"POST" or self.scheme != "http" or self.expect_100_continue:
                return None
            if self.limit_concurrency is not None or self.parser.should_upgrade():
                return None
            if self.cycle is not None and not self.cycle.response_complete:
                return None  # pipelined: queued behind the request before it, as uvicorn does
            path = httptools.parse_url(self.url).path
            found = HOT.fullmatch(path.decode("latin-1")) if b"%" not in path else None
            if found is None:
                return None
            declared = authorization = None
            for name, value in self.headers:
                if name == b"content-length":
                    if declared is not None:
                        return None
                    declared = value
                elif name == b"transfer-encoding":
                    return None
                elif name == b"authorization":
                    authorization = value.decode("latin-1")
            if declared is None or not declared.isdigit() or int(declared) > limit:
                return None  # refused or read by the ASGI application
            authorization = authorization or ""
            if router is not None and not router.owns(authorization, found[1]):
                return None
            version = self.parser.get_http_version()
            keep_alive = version != "1.0" and self.parser.should_keep_alive()
            return Hot(found[2], found[1], authorization, keep_alive)

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if not isinstance(cycle, Hot):
                super().on_body(body)
            elif not cycle.response_complete:
                cycle.body += body  # within the declared length, itself within the limit

        def on_message_complete(self) -> None:
            cycle = self.cycle
            if not isinstance(cycle, Hot):
                super().on_message_complete()
                return
            cycle.more_body = False
            task = self.loop.create_task(self._answer(cycle))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

        async def _answer(self, cycle: Hot) -> None:
            body = bytes(cycle.body)

            async def read() -> bytes:
                return body

            try:
                answer = await hot_answer(
                    service, cycle.operation, cycle.session, cycle.authorization, {}, read
                )
            except BaseException:  # cancelled at shutdown: the connection goes with the service
                cycle.response_complete = True
                self.transport.close()
                raise
            assert answer is not None  # the body is read already
            status, payload, extra = answer
            if cycle.disconnected:
                cycle.response_complete = True
                return
            head = [STATUS_LINE[status]]
            for name, value in (
                *self.server_state.default_headers,
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ):
                head += [name, b": ", value, b"\r\n"]
            if not cycle.keep_alive:
                head.append(b"connection: close\r\n")
            head += [b"\r\n", payload]
            self.transport.write(b"".join(head))
            cycle.response_complete = True
            if not cycle.keep_alive:
                self.transport.close()
            self.on_response_complete()

    return HotProtocol
