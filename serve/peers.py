"""How the processes of ``policyc serve --processes N`` hand each other requests: ASGI over a
Unix socket, without HTTP.

A forwarded request is one frame: its method, path, query, headers and the client certificate's
subject the forwarding process verified, then its body; the answer is one frame back: the
status, the headers and the body. Frames carry an id, so one connection between two processes
carries any number of requests at once, each answered when the owner is done with it. The owner
runs the request through its own application (:func:`serve`), as if a client had sent it there,
so it is refused or answered exactly as a request to the owner is. The sockets live in a folder
only the service's user may enter; nothing reaches them from the network.

A frame is ``!IIQ`` (the lengths of its JSON head and of its body, its id), the head (orjson),
then the body's bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

_FRAME = struct.Struct("!IIQ")
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]  # status, headers, body
App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


async def _read(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any], bytes]:
    head_size, body_size, ident = _FRAME.unpack(await reader.readexactly(_FRAME.size))
    head = orjson.loads(await reader.readexactly(head_size))
    body = await reader.readexactly(body_size) if body_size else b""
    return ident, head, body


def _frame(ident: int, head: dict[str, Any], body: bytes) -> bytes:
    encoded = orjson.dumps(head)
    return _FRAME.pack(len(encoded), len(body), ident) + encoded + body


async def serve(path: str, app: App) -> asyncio.AbstractServer:
    """Answer the other processes' requests at the Unix socket ``path`` with ``app``."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                ident, head, body = await _read(reader)
                task = asyncio.ensure_future(_answer(app, ident, head, body, writer))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_unix_server(connection, path)


async def _answer(
    app: App, ident: int, head: dict[str, Any], body: bytes, writer: asyncio.StreamWriter
) -> None:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "http",
        "method": head["method"],
        "path": head["path"],
        "raw_path": head["path"].encode("utf-8", "surrogateescape"),
        "root_path": "",
        "query_string": head["query"].encode("latin-1"),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["headers"]],
        "server": None,
        "client": None,
        "extensions": {"tls": {"client_cert_name": head["cert"]}} if head.get("cert") else {},
    }
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if given:
            await asyncio.Event().wait()  # no disconnect to report: the forwarder waits for the answer
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception as error:  # the owner failed on it: answered as the application answers a crash
        status, headers = 500, [(b"content-type", b"application/json")]
        chunks = [
            orjson.dumps(
                {
                    "error": {
                        "code": "internal-error",
                        "message": f"the service failed: {type(error).__name__}",
                    }
                }
            )
        ]
    answer = {"status": status, "headers": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]}
    with contextlib.suppress(ConnectionError):
        writer.write(_frame(ident, answer, b"".join(chunks)))
        await writer.drain()


class Peer:
    """One process's connection to another (opened on first use, opened again once broken)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.writer: asyncio.StreamWriter | None = None
        self.waiting: dict[int, asyncio.Future[Answer]] = {}
        self.next = 0
        self.opening = asyncio.Lock()
        self.reading: asyncio.Task[None] | None = None  # the task that reads the answers

    async def ask(self, head: dict[str, Any], body: bytes) -> Answer:
        """The owner's answer to a request (``ConnectionError`` when it cannot be reached or went
        away before answering: the request may or may not have been done there)."""
        writer = await self._open()
        self.next += 1
        ident = self.next
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.waiting[ident] = future
        try:
            writer.write(_frame(ident, head, body))
            await writer.drain()
            return await future
        finally:
            self.waiting.pop(ident, None)

    async def _open(self) -> asyncio.StreamWriter:
        async with self.opening:
            if self.writer is None or self.writer.is_closing():
                reader, self.writer = await asyncio.open_unix_connection(self.path)
                self.reading = asyncio.ensure_future(self._answers(reader, self.writer))
            return self.writer

    async def _answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                ident, head, body = await _read(reader)
                future = self.waiting.get(ident)
                if future is not None and not future.done():
                    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["headers"]]
                    future.set_result((head["status"], headers, body))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            if self.writer is writer:
                self.writer = None
            for future in list(self.waiting.values()):
                if not future.done():
                    future.set_exception(ConnectionError(f"the process at {self.path} went away"))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
