"""Connections to the process that owns their first request's session (``--processes N``).

The processes share the listening socket, and the kernel hands a new connection to whichever
accepts it first. Before anything is read, the accepting process peeks at the connection's first
request (its request line, its key and, for a new session, its body, waited for when it comes
after the head): when another process owns the session it names, the connection itself is
passed to that process over a Unix socket (``SCM_RIGHTS``), which serves it from then on; a
request on it about someone else's session is forwarded as any other (:mod:`.routing`). An agent
that keeps one connection per session thus reaches its owner without a hop. A connection whose
first request cannot be read so (TLS, a request not yet whole after a moment, one that names no
session) stays where it was accepted.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any

from . import jsontext

PEEK = 16_384  # bytes of a first request looked at
PEEK_WAIT = 0.5  # seconds a first request may take to be whole before it is served here


class Handoff:
    """Accepts the connections of ``listener`` for process ``index``, keeping those it owns
    (``owner(head, body)``: the process a first request is for, or None when it cannot say)
    and passing the others to their owners' hand-off sockets (``paths``); ``handed(how)`` counts
    each connection (:meth:`.metrics.Metrics.handed`)."""

    def __init__(
        self,
        index: int,
        listener: socket.socket,
        paths: list[str],
        owner: Callable[[bytes, bytes], int | None],
        serve: Callable[[socket.socket], None],
        handed: Callable[[str], None] = lambda how: None,
    ) -> None:
        self.index = index
        self.listener = listener
        self.paths = paths
        self.owner = owner
        self.serve = serve  # serves a connection in this process
        self.inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.handed = handed
        self.peeking: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(FileNotFoundError):
            import os

            os.unlink(self.paths[self.index])
        self.inbox.bind(self.paths[self.index])
        self.inbox.setblocking(False)
        self.listener.setblocking(False)
        loop.add_reader(self.listener.fileno(), self._accept)
        loop.add_reader(self.inbox.fileno(), self._received)

    def stop(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.listener.fileno())
        loop.remove_reader(self.inbox.fileno())
        self.inbox.close()
        self.outbox.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return  # another process took it, or none is waiting
            except OSError:
                return
            connection.setblocking(False)
            task = asyncio.ensure_future(self._first(connection))
            self.peeking.add(task)
            task.add_done_callback(self.peeking.discard)

    async def _first(self, connection: socket.socket) -> None:
        """Peek at the first request; keep the connection, or pass it to its owner."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PEEK_WAIT
        owner: int | None = None
        while True:
            try:
                seen = connection.recv(PEEK, socket.MSG_PEEK)
            except BlockingIOError:
                seen = None
            except OSError:
                connection.close()
                return
            if seen == b"":  # closed before it asked anything
                connection.close()
                return
            if seen is not None:
                head, found, body = seen.partition(b"\r\n\r\n")
                if found and (len(seen) >= PEEK or len(body) >= _declared(head)):
                    owner = self.owner(head, body)
                    break  # its head and its body (as far as a peek sees), or too long to wait for
                if len(seen) >= PEEK:
                    break
            if loop.time() >= deadline:
                break
            if seen:  # part of it is there, so the socket reads as readable: wait a moment instead
                await asyncio.sleep(0.002)
            else:
                await _readable(connection, deadline - loop.time())
        if owner is None or owner == self.index:
            self.handed("unrouted" if owner is None else "kept")
            self.serve(connection)
            return
        try:
            # sendmsg, not socket.send_fds: send_fds drops its address (CPython 3.11-3.13)
            rights = array.array("i", [connection.fileno()])
            self.outbox.sendmsg(
                [b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)], 0, self.paths[owner]
            )
        except OSError:  # the owner cannot take it now: served here, forwarding as needed
            self.handed("unrouted")
            self.serve(connection)
            return
        self.handed("passed")
        connection.close()

    def _received(self) -> None:
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(self.inbox, 16, 8)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            for fd in fds:
                connection = socket.socket(fileno=fd)
                connection.setblocking(False)
                self.handed("received")
                self.serve(connection)


def _declared(head: bytes) -> int:
    """The length of the body a request's head declares (0: none, or none readable)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            return int(value) if value.isdigit() else 0
    return 0


async def _readable(connection: socket.socket, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(connection.fileno(), readable)
    try:
        await asyncio.wait_for(ready, max(timeout, 0.0))
    except TimeoutError:
        pass
    finally:
        loop.remove_reader(connection.fileno())


def first_session(head: bytes, body: bytes) -> tuple[str, str | None] | None:
    """The key and the session id a first request names (from its path, or for a new session
    from its body when it is whole): ``(authorization header, session)``; None when it names
    none.

    >>> first_session(b"POST /v1/sessions/s1/events HTTP/1.1\\r\\nAuthorization: Bearer k", b"")
    ('Bearer k', 's1')
    >>> first_session(b"POST /v1/sessions HTTP/1.1\\r\\nauthorization: Bearer k\\r\\ncontent-length: 17", b'{"session": "s2"}')
    ('Bearer k', 's2')
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        return None
    path = parts[1].split(b"?", 1)[0].decode("latin-1")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, given = line.partition(b":")
        headers[name.strip().lower()] = given.strip()
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    if path.startswith("/v1/sessions/"):
        from urllib.parse import unquote

        named = unquote(path[len("/v1/sessions/") :].split("/", 1)[0], errors="surrogateescape")
        return (authorization, named) if named else None
    if path == "/v1/sessions" and parts[0] == b"POST":
        length = headers.get(b"content-length", b"")
        if not length.isdigit() or len(body) < int(length):
            return None
        try:
            value: Any = jsontext.loads(body[: int(length)])
        except Exception:
            return None
        session = value.get("session") if isinstance(value, dict) else None
        return (authorization, session) if isinstance(session, str) else None
    return None
