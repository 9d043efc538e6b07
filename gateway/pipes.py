"""The gateway's transport to a stdio server: its process's pipes read and written on the event
loop, with the fast path's ``tools/call`` frames beside the SDK's session.

The SDK's stdio client reads each line of the server's output into a model and hands it to the
session through a stream, and writes each message through another; a ``tools/call`` of the fast
path (:mod:`.fastcall`) needs none of it. :func:`server_pipes` starts the server as the SDK's
stdio client does (its command, environment and process group, and its shutdown: stdin closed,
a grace period, then the process tree stopped) and gives the SDK's session the streams it reads
and writes; :class:`Pipes` sends a call as one JSON line and takes its answer out of the
server's output before any model is made of it. Its request ids are strings (``policyc-N``),
the session's integers, so the two never meet. A call given up (its caller cancelled, or its
timeout passed) is followed by a ``notifications/cancelled``, as the SDK's session sends; when
the server's output ends, every call still waiting fails with ``CONNECTION_CLOSED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

CANCEL_WRITE_TIMEOUT = 2.0  # seconds a courtesy cancellation may take to write
MARK = b'"policyc-'  # in a line that may answer a call of the fast path


class Pipes:
    """The fast path's calls to one server, over its process's stdin and stdout."""

    def __init__(self, stdin: Any) -> None:
        self.stdin = stdin
        self.waiting: dict[str, asyncio.Future[Any]] = {}  # each call's answer (None: closed)
        self.ids = itertools.count(1)
        self.closed = False

    def claimed(self, line: bytes) -> bool:
        """Whether ``line`` answers a call waiting here (then the call has it)."""
        if not self.waiting or MARK not in line:
            return False
        try:
            frame = json.loads(line)
        except ValueError:
            return False
        ident = frame.get("id") if isinstance(frame, dict) else None
        if not isinstance(ident, str) or ("result" not in frame and "error" not in frame):
            return False
        waiting = self.waiting.pop(ident, None)
        if waiting is None:
            return False
        if not waiting.done():
            waiting.set_result(frame)
        return True

    def close(self) -> None:
        """The server's output ended: every call still waiting has no answer."""
        self.closed = True
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_result(None)
        self.waiting.clear()

    async def _send(self, frame: dict[str, Any]) -> None:
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        await self.stdin.send(data)

    async def call(self, params: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send a ``tools/call`` with ``params`` and wait (``timeout`` seconds, None for ever) for
        its answer: the result as the server sent it. :class:`~mcp.MCPError` for an error
        answer, a timeout (``REQUEST_TIMEOUT``), a closed connection (``CONNECTION_CLOSED``)
        or an answer that is not JSON-RPC's, as the SDK's session raises them."""
        if self.closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        ident = f"policyc-{next(self.ids)}"
        waiting = asyncio.get_running_loop().create_future()
        self.waiting[ident] = waiting
        try:
            try:
                await self._send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            try:
                async with asyncio.timeout(timeout):
                    answer = await waiting
            except TimeoutError:
                await self._cancel(ident, f"timed out after {timeout}s", shield=False)
                raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out") from None
            except anyio.get_cancelled_exc_class():
                await self._cancel(ident, "caller cancelled", shield=True)
                raise
        finally:
            self.waiting.pop(ident, None)
        if answer is None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        return _result(answer)

    async def _cancel(self, ident: str, reason: str, shield: bool) -> None:
        """Tell the server a call is given up (best effort, bounded)."""
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ident, "reason": reason},
        }
        with anyio.CancelScope(shield=shield), anyio.move_on_after(CANCEL_WRITE_TIMEOUT):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await self._send(note)


def _result(frame: dict[str, Any]) -> dict[str, Any]:
    """The result of an answer, or the :class:`~mcp.MCPError` it is (one that is neither a
    JSON-RPC result nor error is an error too)."""
    if frame.get("jsonrpc") == "2.0" and "error" not in frame and isinstance(frame.get("result"), dict):
        return frame["result"]
    error = frame.get("error")
    if frame.get("jsonrpc") == "2.0" and "result" not in frame and isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            raise MCPError(code=code, message=message)
    raise MCPError(code=INTERNAL_ERROR, message="the server's answer is not a JSON-RPC response")


@contextlib.asynccontextmanager
async def server_pipes(parameters: Any, errlog: TextIO) -> AsyncIterator[tuple[Any, Any, Pipes]]:
    """Start the stdio server ``parameters`` (a ``StdioServerParameters``) as the SDK's stdio
    client does, and give the SDK's session its streams, and the fast path its :class:`Pipes`,
    while the block runs; then stop the server as the SDK does: the environment it inherits is
    the SDK's (``get_default_environment``), it runs in a process group of its own (a job object
    on Windows, the SDK's), and on the way out its stdin is closed, it has a grace period to
    exit, and then its process tree is stopped by the SDK's own functions."""
    import mcp_types as types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await _started(parameters, get_default_environment() | (parameters.env or {}), errlog)
    # the process runs: no awaits until the task group is entered (a cancellation would leak it)
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None and process.stdout is not None
    pipes = Pipes(process.stdin)
    written = anyio.Event()

    async def reading() -> None:
        assert process.stdout is not None
        try:
            async with to_session:
                try:
                    buffer = b""
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if not line.strip() or pipes.claimed(line):
                                continue
                            try:
                                message: Any = SessionMessage(
                                    types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                                )
                            except ValueError as error:
                                message = error
                            try:
                                await to_session.send(message)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    pipes.close()  # before the session sees its stream end: the output ended
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            pass  # the pipe ended (the process stopped, or the gateway closed it)
        finally:
            pipes.close()
            await _drained(process)  # a server still writing can reach its exit

    async def writing() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the session sees the connection end
        finally:
            written.set()

    async with anyio.create_task_group() as group:
        group.start_soon(reading)
        group.start_soon(writing)
        try:
            yield read, write, pipes
        finally:  # as the SDK's stdio client ends: traffic stopped, stdin flushed, the server stopped
            with anyio.CancelScope(shield=True):
                read.close()
                write.close()
                with anyio.move_on_after(0.5):
                    await written.wait()
                await _stopped(process)
                for stream in (read, write, to_session, from_session):
                    await stream.aclose()
            group.cancel_scope.cancel()


GRACE = 2.0  # seconds a server has to exit once its stdin is closed (the SDK's)
KILL_GRACE = 2.0  # seconds between stopping its process tree and killing it (the SDK's)


async def _started(parameters: Any, env: dict[str, str], errlog: TextIO) -> Any:
    """The server's process, in a process group of its own (a job object on Windows)."""
    import sys

    if sys.platform == "win32":  # pragma: no cover
        from mcp.os.win32.utilities import create_windows_process, get_windows_executable_command

        command = get_windows_executable_command(parameters.command)
        return await create_windows_process(command, parameters.args, env, errlog, parameters.cwd)
    return await anyio.open_process(
        [parameters.command, *parameters.args],
        env=env,
        stderr=errlog,
        cwd=parameters.cwd,
        start_new_session=True,
    )


async def _drained(process: Any) -> None:
    """Read what the server still writes until its output ends (shielded: it ends with the pipe)."""
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        while True:
            await process.stdout.receive()


async def _stopped(process: Any) -> None:
    """Stop the server as the MCP specification's shutdown says: stdin closed, a grace period,
    then the process tree stopped (the SDK's functions for it), its output closed."""
    import sys

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    if not await _exited(process, GRACE):
        if sys.platform == "win32":  # pragma: no cover
            from mcp.os.win32.utilities import terminate_windows_process_tree

            await terminate_windows_process_tree(process)
        else:
            from mcp.os.posix.utilities import terminate_posix_process_tree

            await terminate_posix_process_tree(process, KILL_GRACE)
        await _exited(process, KILL_GRACE)
    with contextlib.suppress(Exception):
        await process.stdout.aclose()


async def _exited(process: Any, timeout: float) -> bool:
    """Whether the process exited within ``timeout`` (its return code, polled: waiting for it
    would also wait for its pipes, which a child it started may hold)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True
