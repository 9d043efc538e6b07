"""The hot routes answered by the HTTP protocol itself (serve/hotpath.py): the same answers as
the ASGI application gives, over a real `policyc serve` and raw HTTP/1.1 on its socket.

A request whose body is sent chunked takes the ASGI path; the same request with its length
declared takes the protocol's own: every answer of the one must be the other's."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import pytest

from .support.service import POLICY, Server, prepare


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("hotpath")
    keys = prepare(folder, POLICY, {"agent": ("agent",), "other": ("agent",)})
    server = Server(folder, "--max-body", "4096")
    try:
        yield server, keys
    finally:
        server.stop()


class Raw:
    """One HTTP/1.1 connection, written and read as bytes."""

    def __init__(self, server: Server) -> None:
        self.socket = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def open_session(self, name: str, key: str) -> None:
        self.send(request("/v1/sessions", json.dumps({"session": name}).encode(), key))
        assert self.answer()[0] == 201

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            self._more()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def closed(self) -> bool:
        try:
            return self.socket.recv(1) == b""
        except ConnectionResetError:
            return True

    def _more(self) -> None:
        chunk = self.socket.recv(65536)
        assert chunk, "the service closed the connection"
        self.buffer += chunk

    def close(self) -> None:
        self.socket.close()


def request(path: str, body: bytes, key: str | None, chunked: bool = False, version: str = "1.1") -> bytes:
    head = f"POST {path} HTTP/{version}\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    if key is not None:
        head += f"authorization: Bearer {key}\r\n"
    if chunked:
        return (head + "transfer-encoding: chunked\r\n\r\n").encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (
            len(body),
            body,
        )
    return (head + f"content-length: {len(body)}\r\n\r\n").encode() + body


def result(identifier: str) -> bytes:
    """The body of an event batch of one tool result."""
    return json.dumps({"events": [{"id": identifier, "kind": "tool_result"}]}).encode()


def comparable(name: str, status: int, headers: dict[str, str], body: bytes) -> tuple[object, ...]:
    """An answer without what differs between two equal answers about two sessions: the
    session's name (``name``), the decision's id, the date, and the time it took (only whether
    the answer says it)."""
    text = re.sub(rb'"d-[0-9a-f]{32}"', b'"d-ID"', body).replace(name.encode(), b"S")
    names = sorted(set(headers) - {"date"})
    return status, names, headers["content-type"], json.loads(text)


def test_every_answer_of_the_protocol_is_the_asgi_application_s(
    served: tuple[Server, dict[str, str]],
) -> None:
    server, keys = served
    fast, slow = Raw(server), Raw(server)
    try:
        for raw, name in ((fast, "fast"), (slow, "slow")):
            raw.open_session(name, keys["agent"])
        steps: list[tuple[str, bytes, str | None]] = [
            (
                "events",
                b'{"events": [{"id": "r1", "kind": "tool_result", "labels": ["untrusted"]}]}',
                "agent",
            ),
            (
                "authorize",
                b'{"event": {"id": "a1", "kind": "tool_call", "tool": "send_email", "deps": ["r1"]}, "after_seq": 1}',
                "agent",
            ),
            (
                "authorize",
                b'{"event": {"id": "a2", "kind": "tool_call", "tool": "read", "deps": []}, "after_seq": 2}',
                "agent",
            ),
            (
                "authorize",
                b'{"event": {"id": "a3", "kind": "tool_call"}, "after_seq": 3}',
                "agent",
            ),  # no tool
            ("decide", b'{"action": "a1"}', "agent"),
            ("events", b'{"events": [{"id": "r1", "kind": "tool_result"}]}', "agent"),  # its id again
            ("events", b'{"events": []}', "agent"),
            ("events", b'{"events": [', "agent"),  # not JSON
            ("events", b'{"events": [{"id": "n", "kind": "tool_result", "args": {"x": 1e999}}]}', "agent"),
            ("authorize", b'{"event": {"id": "a4", "kind": "tool_call"}, "after_seq": -1}', "agent"),
            ("events", b'{"events": [{"id": "r9", "kind": "tool_result"}]}', None),  # no key
            ("events", b'{"events": [{"id": "r9", "kind": "tool_result"}]}', "other"),  # not its session
        ]
        for operation, body, who in steps:
            answers = []
            for raw, name, chunked in ((fast, "fast", False), (slow, "slow", True)):
                key = None if who is None else keys[who]
                raw.send(request(f"/v1/sessions/{name}/{operation}", body, key, chunked=chunked))
                answers.append(comparable(name, *raw.answer()))
            assert answers[0] == answers[1], (operation, body)
        # a missing session, and a body declared past --max-body (read by the ASGI application)
        fast.send(request("/v1/sessions/nowhere/events", b'{"events": []}', keys["agent"]))
        assert fast.answer()[0] == 404
        fast.send(request("/v1/sessions/fast/events", b"[" + b" " * 5000 + b"]", keys["agent"]))
        status, _, body = fast.answer()
        assert status == 413 and json.loads(body)["error"]["code"] == "too-large"
    finally:
        fast.close()
        slow.close()


def test_pipelined_requests_are_answered_in_order_and_http_1_0_closes(
    served: tuple[Server, dict[str, str]],
) -> None:
    server, keys = served
    raw = Raw(server)
    try:
        raw.open_session("piped", keys["agent"])
        # three requests in one write: each answered, in order, on the one connection
        raw.send(
            b"".join(
                request(
                    "/v1/sessions/piped/events",
                    result(f"p{n}"),
                    keys["agent"],
                )
                for n in range(3)
            )
        )
        assert [json.loads(raw.answer()[2])["seq"] for _ in range(3)] == [1, 2, 3]
    finally:
        raw.close()
    once = Raw(server)
    try:
        once.send(
            request(
                "/v1/sessions/piped/events",
                result("q"),
                keys["agent"],
                version="1.0",
            )
        )
        status, headers, body = once.answer()
        assert status == 200 and json.loads(body)["seq"] == 4
        assert headers["connection"] == "close" and once.closed()
    finally:
        once.close()


def test_a_client_gone_before_its_answer_leaves_the_service_answering(
    served: tuple[Server, dict[str, str]],
) -> None:
    server, keys = served
    raw = Raw(server)
    raw.open_session("gone", keys["agent"])
    for n in range(20):  # each request's connection closed as soon as it is sent
        raw.send(
            request(
                "/v1/sessions/gone/events",
                result(f"g{n}"),
                keys["agent"],
            )
        )
        raw.close()
        raw = Raw(server)
    raw.send(request("/v1/sessions/gone/events", result("last"), keys["agent"]))
    status, _, body = raw.answer()
    raw.close()
    # every request sent was recorded (an answer not read is still given): the last one is the 21st
    assert status == 200 and json.loads(body)["seq"] == 21
    assert server.process.poll() is None
