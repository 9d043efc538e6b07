"""The loads bench_serve.py puts on a running ``policyc serve``: the steps an agent sends, simple
synchronous clients in processes of their own, and the asyncio agent-like load.

A step is what an agent does per decision: it records a tool result (an event batch of one) and
asks for a decision on a call that depends on it (``authorize`` after the batch's ``seq``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import time
import traceback
from typing import Any

# the latency samples a client keeps at most (its first decisions')
SAMPLES = 20_000


def step(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Step ``i`` of a session: a tool result (a third of them untrusted) and a call depending on
    it; a result depends on the call before it within a task of ten steps (so the work a step takes
    does not grow with the session, as in tau2-like tasks)."""
    deps = [f"a{i - 1}"] if i % 10 else []
    result: dict[str, Any] = {"id": f"r{i}", "kind": "tool_result", "tool": "fetch", "deps": deps}
    if i % 3 == 0:
        result["labels"] = ["untrusted"]
    call = {"id": f"a{i}", "kind": "tool_call", "tool": "send_email" if i % 2 else "read", "deps": [f"r{i}"]}
    return result, call


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def server_timing(headers: Any) -> float:
    """Seconds the service says it spent on a decision (its ``Server-Timing``), NaN without one."""
    value = headers.get("server-timing") or ""
    return float(value.split("dur=")[1].split(";")[0]) / 1000 if "dur=" in value else float("nan")


class Connection:
    """One keep-alive HTTP/1.1 connection to the service, with the principal's key: a plain
    socket, each request written as one piece of bytes and each answer read by its
    ``Content-Length``, so that the client spends as little CPU as it can beside the service it
    measures (``http.client`` spent about 0.15 ms per request; the service under test shares the
    machine's cores with its clients)."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.socket = socket.create_connection((host, port), timeout=60)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = (
            f"HTTP/1.1\r\nhost: {host}:{port}\r\nauthorization: Bearer {key}\r\n"
            "content-type: application/json\r\ncontent-length: "
        ).encode()
        self.buffer = b""

    def post(
        self, path: str, body: dict[str, Any], expect: int = 200
    ) -> tuple[dict[str, Any], dict[str, str]]:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.socket.sendall(b"POST %s %s%d\r\n\r\n%s" % (path.encode(), self.head, len(data), data))
        status, headers, text = self._answer()
        if status != expect:
            raise RuntimeError(f"POST {path}: {status} {text[:300]!r}")
        return json.loads(text), headers

    def _answer(self) -> tuple[int, dict[str, str], bytes]:
        """The next answer on the connection: its status, headers (names in lower case) and body."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._more()
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < end + 4 + length:
            self._more()
        text = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        return int(lines[0].split(" ", 2)[1]), headers, text

    def _more(self) -> None:
        chunk = self.socket.recv(65536)
        if not chunk:
            raise ConnectionError("the service closed the connection")
        self.buffer += chunk

    def open_sessions(self, names: list[str]) -> None:
        for name in names:
            self.post("/v1/sessions", {"session": name}, expect=201)

    def decide(self, session: str, i: int) -> tuple[float, float]:
        """Step ``i`` in ``session``: the client's latency of the decision and the service's own."""
        result, call = step(i)
        recorded, _ = self.post(f"/v1/sessions/{session}/events", {"events": [result]})
        sent = time.perf_counter()
        _, headers = self.post(
            f"/v1/sessions/{session}/authorize", {"event": call, "after_seq": recorded["seq"]}
        )
        return time.perf_counter() - sent, server_timing(headers)

    def close(self) -> None:
        self.socket.close()


def warm_up(host: str, port: int, key: str, name: str, decisions: int) -> None:
    """A few decisions before measuring, so that nothing a first request pays is counted."""
    connection = Connection(host, port, key)
    try:
        connection.open_sessions([name])
        for i in range(decisions):
            connection.decide(name, i)
    finally:
        connection.close()


def sync_client(
    host: str, port: int, key: str, name: str, sessions: int, window: Any, ready: Any, out: Any
) -> None:
    """A client process: ``sessions`` sessions of its own, each on a keep-alive connection of its
    own (as an agent's client holds one: with ``--processes``, the connection is handed to the
    process that owns its session), taking steps in turn as fast as the answers come, from the
    start to the end of ``window`` (monotonic seconds, set once every client is ready)."""
    started = False
    connections: list[Connection] = []
    try:
        names = [f"{name}-{k}" for k in range(sessions)]
        for session in names:
            connections.append(Connection(host, port, key))
            connections[-1].open_sessions([session])
        ready.put(None)
        started = True
        while window[1] == 0.0:
            time.sleep(0.001)
        start, stop = window[0], window[1]
        while time.monotonic() < start:
            time.sleep(0.0005)
        cpu = time.process_time()
        client: list[float] = []
        inside: list[float] = []
        done = 0
        while time.monotonic() < stop:
            took, spent = connections[done % sessions].decide(names[done % sessions], done // sessions)
            done += 1
            if len(client) < SAMPLES:
                client.append(took)
                inside.append(spent)
        ended = time.monotonic()
        out.put(
            {
                "decisions": done,
                "ended": ended,
                "cpu": time.process_time() - cpu,
                "client": client,
                "inside": inside,
            }
        )
    except BaseException:
        (out if started else ready).put(traceback.format_exc())
    finally:
        for connection in connections:
            connection.close()


async def _agent(client: Any, name: str, steps: int, pause: float, samples: list[tuple[float, float]]) -> int:
    answer = await client.post("/v1/sessions", json={"session": name})
    assert answer.status_code == 201, answer.text
    for i in range(steps):
        result, call = step(i)
        answer = await client.post(f"/v1/sessions/{name}/events", json={"events": [result]})
        assert answer.status_code == 200, answer.text
        seq = answer.json()["seq"]
        if pause:
            await asyncio.sleep(pause)
        sent = time.perf_counter()
        answer = await client.post(f"/v1/sessions/{name}/authorize", json={"event": call, "after_seq": seq})
        took = time.perf_counter() - sent
        assert answer.status_code == 200, answer.text
        samples.append((took, server_timing(answer.headers)))
    return steps


async def _agents(url: str, key: str, sessions: int, steps: int, pause: float, tag: str) -> dict[str, float]:
    import httpx

    samples: list[tuple[float, float]] = []
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(
        base_url=url, headers={"authorization": f"Bearer {key}"}, limits=limits, timeout=60
    ) as client:
        start, cpu = time.perf_counter(), time.process_time()
        done = await asyncio.gather(
            *(_agent(client, f"{tag}-{n}", steps, pause, samples) for n in range(sessions))
        )
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    client_side = [c for c, _ in samples]
    inside = [s for _, s in samples]
    return {
        "decisions": float(sum(done)),
        "decisions_per_s": sum(done) / elapsed,
        "client_p50": statistics.median(client_side),
        "client_p99": percentile(client_side, 0.99),
        "service_p50": statistics.median(inside),
        "service_p99": percentile(inside, 0.99),
        "client_cpu": cpu / sum(done),
    }


def asyncio_client(url: str, key: str, sessions: int, steps: int, pause: float, tag: str, out: Any) -> None:
    """The agent-like load: ``sessions`` asyncio tasks of one client process (httpx, one
    keep-alive connection each), each recording a tool result and then asking for a decision,
    ``pause`` seconds apart, for ``steps`` steps."""
    try:
        out.put(asyncio.run(_agents(url, key, sessions, steps, pause, tag)))
    except BaseException:
        out.put(traceback.format_exc())
