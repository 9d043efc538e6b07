"""Which ASGI framework and JSON library `policyc serve` is built on, by measurement.

In one run, on 127.0.0.1 only:

* **JSON**: encoding a decision and decoding an event batch of the size agents send (one
  authorization request, a batch of 10 events), with the standard library's ``json``, ``orjson``
  and ``msgspec``: microseconds per call, best of several rounds.
* **Framework**: the same endpoint (read a JSON body, check a bearer key, answer a decision-sized
  JSON object) as a plain ASGI callable, a Starlette application and a FastAPI application, each
  served by uvicorn (httptools, one process) in a subprocess on a free port and driven by one
  keep-alive client for a fixed number of requests: requests per second and the client-side p50
  and p99 latency, best of a few rounds, the servers taking turns.

A server process stops when the script ends; every request goes to 127.0.0.1.

    python benchmarks/bench_asgi.py [--requests 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any

EVENT = {
    "id": "e42",
    "kind": "tool_call",
    "tool": "send_email",
    "args": {"to": "alice@example.com", "subject": "Quarterly numbers", "body": "See attached." * 8},
    "deps": ["e40", "e41"],
    "labels": ["external"],
}
BATCH = {"events": [dict(EVENT, id=f"e{i}") for i in range(10)]}
DECISION = {
    "decision_id": "d-000042",
    "verdict": "deny",
    "allowed": False,
    "reasons": [
        {"rule": "toxic-flow", "message": "e42 sends data derived from untrusted input", "suggestion": None}
    ],
    "feedback": "Authorization issues encountered:\n- Blocked: e42 sends data derived from untrusted input",
    "seq": 42,
}

APP = textwrap.dedent(
    """
    import json
    KEY = b"Bearer k"
    BODY = json.dumps(%(decision)r).encode()

    async def read(receive):
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(chunks)

    async def plain(scope, receive, send):
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        body = json.loads(await read(receive))
        status = 200 if headers.get(b"authorization") == KEY and "event" in body else 401
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": BODY})

    def starlette_app():
        from starlette.applications import Starlette
        from starlette.responses import Response
        from starlette.routing import Route

        async def authorize(request):
            body = json.loads(await request.body())
            ok = request.headers.get("authorization") == "Bearer k" and "event" in body
            return Response(BODY, status_code=200 if ok else 401, media_type="application/json")

        return Starlette(routes=[Route("/v1/sessions/{sid}/authorize", authorize, methods=["POST"])])

    def fastapi_app():
        from fastapi import FastAPI, Header, Request
        from fastapi.responses import Response

        app = FastAPI()

        @app.post("/v1/sessions/{sid}/authorize")
        async def authorize(sid: str, request: Request, authorization: str = Header("")):
            body = json.loads(await request.body())
            ok = authorization == "Bearer k" and "event" in body
            return Response(BODY, status_code=200 if ok else 401, media_type="application/json")

        return app

    starlette = starlette_app()
    fastapi = fastapi_app()
    """
) % {"decision": DECISION}


def best_us(fn: Any, rounds: int = 5, calls: int = 2000) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def json_table() -> list[tuple[str, float, float]]:
    import msgspec
    import orjson

    batch_bytes = json.dumps(BATCH).encode()
    rows = [
        ("json", best_us(lambda: json.dumps(DECISION).encode()), best_us(lambda: json.loads(batch_bytes))),
        ("orjson", best_us(lambda: orjson.dumps(DECISION)), best_us(lambda: orjson.loads(batch_bytes))),
    ]
    encoder, decoder = msgspec.json.Encoder(), msgspec.json.Decoder()
    rows.append(
        ("msgspec", best_us(lambda: encoder.encode(DECISION)), best_us(lambda: decoder.decode(batch_bytes)))
    )
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(folder: str, module: str, app: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            f"{module}:{app}",
            "--app-dir",
            folder,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--http",
            "httptools",
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"uvicorn serving {app} did not start")


def drive(port: int, requests: int) -> tuple[float, float, float]:
    import httpx

    body = json.dumps({"event": EVENT, "after_seq": 0}).encode()
    headers = {"authorization": "Bearer k", "content-type": "application/json"}
    url = f"http://127.0.0.1:{port}/v1/sessions/s1/authorize"
    latencies = []
    with httpx.Client() as client:
        for _ in range(50):  # warm up the connection and the server
            client.post(url, content=body, headers=headers)
        start = time.perf_counter()
        for _ in range(requests):
            sent = time.perf_counter()
            response = client.post(url, content=body, headers=headers)
            latencies.append(time.perf_counter() - sent)
            assert response.status_code == 200, response.text
        elapsed = time.perf_counter() - start
    latencies.sort()
    return requests / elapsed, statistics.median(latencies), latencies[int(0.99 * (len(latencies) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'json library':14} {'encode a decision µs':>21} {'decode 10 events µs':>20}")
    for name, encode, decode in json_table():
        print(f"{name:14} {encode:21.2f} {decode:20.2f}")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "bench_asgi_apps.py").write_text(APP, "utf-8")
        servers = {}
        try:
            for app in ("plain", "starlette", "fastapi"):
                process, port = serve(folder, "bench_asgi_apps", app)
                servers[app] = (process, port)
            best: dict[str, tuple[float, float, float]] = {}
            for _ in range(args.rounds):
                for app, (_, port) in servers.items():
                    rate, p50, p99 = drive(port, args.requests)
                    if app not in best or rate > best[app][0]:
                        best[app] = (rate, p50, p99)
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=10)
    print(f"\n{'framework':14} {'requests/s':>11} {'p50 µs':>8} {'p99 µs':>8} {'vs plain':>9}")
    for app, (rate, p50, p99) in best.items():
        print(f"{app:14} {rate:11,.0f} {p50 * 1e6:8.0f} {p99 * 1e6:8.0f} {rate / best['plain'][0]:9.2f}")


if __name__ == "__main__":
    main()
