"""The gateway's stdio transport to its client: lines read and written on the event loop.

The SDK's own stdio transport reads each line of the client's input, and writes each line of
output, in a worker thread. :class:`Wire` reads and writes the same frames through the event
loop's pipes, and gives its :attr:`Wire.take` the first look at each frame: a ``tools/call`` it
takes (the fast path, :mod:`.fastcall`) is answered with :meth:`Wire.send`; every other frame
goes to the SDK's server as its own transport would pass it (:attr:`Wire.read`,
:attr:`Wire.write`). While the wire runs, file descriptor 0 reads the null device and 1 writes
to stderr, so that nothing else in the process (a handler, a library, a child started without
pipes) reads the client's frames or writes into them; both are put back at the end.

Standard input that the event loop cannot watch (a regular file) has no wire: :func:`opened`
gives None and the gateway uses the SDK's transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

LINE_LIMIT = 64 << 20  # the longest frame read (bytes); a longer one is a parse error


class Wire:
    """The client's frames over the process's standard input and output."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from mcp.shared._context_streams import create_context_streams
        from mcp.shared.message import SessionMessage

        self.reader = reader
        self.writer = writer
        self.feed, self.read = create_context_streams[SessionMessage | Exception](0)
        self.write, self.written = create_context_streams[SessionMessage](0)
        self.take: Callable[[dict[str, Any], str], bool] | None = None
        self.initialized = False  # the client has said `notifications/initialized`

    async def send(self, frame: dict[str, Any]) -> None:
        """Write one frame (a JSON-RPC message as a dict) to the client."""
        self.writer.write(json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        await self.writer.drain()

    async def pass_on(self, line: str) -> None:
        """Give a frame to the SDK's server, as its own stdio transport would."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as error:
            await self.feed.send(error)
            return
        await self.feed.send(SessionMessage(message))

    async def reading(self) -> None:
        """Read the client's frames until its input ends."""
        async with self.feed:
            while True:
                try:
                    raw = await self.reader.readline()
                except ValueError as error:  # longer than LINE_LIMIT: read past it, say so
                    await self.feed.send(error)
                    continue
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace")
                if not line.strip():
                    continue
                if self.take is not None and ('"tools/call"' in line or '"notifications/cancelled"' in line):
                    try:
                        frame = json.loads(line)
                    except ValueError:
                        frame = None
                    if isinstance(frame, dict) and self.take(frame, line):
                        continue
                if not self.initialized and '"notifications/initialized"' in line:
                    with contextlib.suppress(ValueError):
                        self.initialized = json.loads(line).get("method") == "notifications/initialized"
                await self.pass_on(line)

    async def writing(self) -> None:
        """Write what the SDK's server sends."""
        async with self.written:
            async for message in self.written:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                self.writer.write(text.encode() + b"\n")
                await self.writer.drain()


@contextlib.asynccontextmanager
async def opened() -> AsyncIterator[Wire | None]:
    """A :class:`Wire` on the process's standard input and output while the block runs (None
    when the event loop cannot watch them: the SDK's transport serves then)."""
    loop = asyncio.get_running_loop()
    with _claimed() as (given, taken):
        reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
        source = os.fdopen(given, "rb", buffering=0, closefd=False)
        sink = os.fdopen(taken, "wb", buffering=0, closefd=False)
        try:
            reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
        except (ValueError, OSError):
            yield None
            return
        try:
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sink)
        except (ValueError, OSError):
            reading.close()
            yield None
            return
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        wire = Wire(reader, writer)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(wire.reading)
                group.start_soon(wire.writing)
                try:
                    yield wire
                finally:
                    group.cancel_scope.cancel()
        finally:
            reading.close()
            with contextlib.suppress(Exception):
                transport.close()


@contextlib.contextmanager
def _claimed() -> Any:
    """Private copies of descriptors 0 and 1 while the block runs, 0 reading the null device and
    1 writing to stderr meanwhile; put back afterwards. Where they cannot be copied, 0 and 1."""
    import fcntl

    copies: list[tuple[int, int]] = []
    # a descriptor that cannot be copied or diverted is served where it is (as the SDK's
    # transport does then): the frames still flow, only stray writes to it are not kept out
    with contextlib.suppress(OSError):
        for fd, diversion in ((0, lambda: os.open(os.devnull, os.O_RDONLY)), (1, lambda: os.dup(2))):
            private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            copies.append((fd, private))
            other = diversion()
            os.dup2(other, fd)
            os.close(other)
    try:
        given = dict(copies).get(0, 0)
        taken = dict(copies).get(1, 1)
        yield given, taken
    finally:
        sys.stdout.flush()
        for fd, private in copies:
            with contextlib.suppress(OSError):
                os.set_blocking(private, True)  # the event loop's pipes made it non-blocking
                os.dup2(private, fd)
            with contextlib.suppress(OSError):
                os.close(private)
