"""A chat-completions server on 127.0.0.1 with scripted answers, for `policyc translate` tests.

It speaks the part of the OpenAI protocol the real `openai` client uses for
``POST /v1/chat/completions``, records every request (headers and JSON body), and answers
with whatever the test's ``respond`` function returns for a request: an answer, a refusal, an
empty or truncated answer, an HTTP error with headers (429 with ``retry-after-ms``, 500), or
any of those after a delay longer than the client's timeout.

    with ChatServer(lambda request: Reply.answer('{"a": 1}')) as server:
        ... run `policyc translate --base-url server.url` ...
        server.requests[0].body["model"]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str | None = None
    refusal: str | None = None
    finish: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # a body sent as it is

    @staticmethod
    def answer(content: str, finish: str = "stop") -> Reply:
        return Reply(content=content, finish=finish)

    @staticmethod
    def json(value: Any) -> Reply:
        return Reply(content=json.dumps(value))

    @staticmethod
    def refused(text: str = "I'm sorry, but I can't help with that.") -> Reply:
        return Reply(refusal=text)

    @staticmethod
    def empty() -> Reply:
        return Reply(content="")

    @staticmethod
    def error(status: int, message: str = "scripted failure", **headers: str) -> Reply:
        body = json.dumps({"error": {"message": message, "type": "scripted", "code": None}}).encode()
        return Reply(status=status, headers={k.replace("_", "-"): v for k, v in headers.items()}, raw=body)

    def slow(self, seconds: float) -> Reply:
        return Reply(self.status, self.content, self.refusal, self.finish, self.headers, seconds, self.raw)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "system"), "")

    @property
    def user(self) -> str:
        """The last user message."""
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")


class ChatServer:
    def __init__(self, respond: Callable[[Request], Reply]) -> None:
        self.respond = respond
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server.lock:
                    server.requests.append(request)
                if not self.path.endswith("/chat/completions"):
                    self._send(Reply.error(404, f"no route {self.path}"))
                    return
                try:
                    reply = server.respond(request)
                except Exception as error:  # a bug in a test's script: make it visible
                    reply = Reply.error(500, f"the test script failed: {type(error).__name__}: {error}")
                if reply.delay:
                    time.sleep(reply.delay)
                self._send(reply, body.get("model", "scripted"))

            def _send(self, reply: Reply, model: str = "scripted") -> None:
                if reply.raw is not None:
                    data = reply.raw
                else:
                    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
                    if reply.refusal is not None:
                        message["refusal"] = reply.refusal
                        message["content"] = None
                    data = json.dumps(
                        {
                            "id": "chatcmpl-scripted",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": model,
                            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        }
                    ).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
