"""The fast path of `tools/call` on stdio (gateway/fastcall.py): the installed `policyc mcp`
driven with raw JSON-RPC frames, once as it runs and once with `--no-fast-path` (every request
through the MCP SDK), must answer every call alike — allowed, denied, refused by the schema,
unknown, an error result, structured content, escalated, with a progress token — for a client of
the handshake era and one of 2026-07-28; and the calls must really take the fast path (the server
sees the relay's string request ids). A cancelled call gets no answer and its server is told; a
server that dies during a call is named in the answer."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .support.gateway import POLICYC, SERVE_DEMO, one_server

SERVER = (
    """
import os, anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS = [
    mt.Tool(name="echo", input_schema=TEXT),
    mt.Tool(name="send", input_schema=TEXT),
    mt.Tool(name="fail", input_schema={"type": "object"}),
    mt.Tool(name="shape", input_schema={"type": "object"},
            output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    mt.Tool(name="whoami", input_schema={"type": "object"}),
    mt.Tool(name="wait", input_schema={"type": "object", "properties": {"marker": {"type": "string"}}}),
    mt.Tool(name="die", input_schema={"type": "object"}),
]


async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    arguments = params.arguments or {}
    if params.name == "fail":
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="it broke")], is_error=True)
    if params.name == "shape":
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="{\\"n\\": 3}")], structured_content={"n": 3})
    if params.name == "whoami":  # the kind of request id the server was sent
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=type(ctx.request_id).__name__)])
    if params.name == "wait":
        marker = arguments["marker"]
        open(marker + ".started", "w").close()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            open(marker + ".cancelled", "w").close()
            raise
    if params.name == "die":
        os._exit(3)
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=params.name + ": " + arguments.get("text", ""))])
"""
    + SERVE_DEMO
)

POLICY = """
.import events
@id("no-secret")
@message("no secrets")
Deny(a) :- ToolCall(a, "demo.echo"), ToolArg(a, "text", "secret").
@id("send-needs-approval")
@message("sending needs a person")
Escalate(a) :- ToolCall(a, "demo.send").
"""

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Raw:
    """`policyc mcp` over stdio, spoken to in JSON-RPC frames."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.process = subprocess.Popen(
            [POLICYC, "mcp", str(tmp_path / "policy.dl"), "--config", str(tmp_path / "gateway.toml"), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / f"gateway{'-sdk' if flags else ''}.log").open("w"),
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def send(self, frame: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **frame}).encode() + b"\n")
        self.process.stdin.flush()

    def request(
        self, method: str, params: dict[str, Any] | None = None, answer: Any = None
    ) -> dict[str, Any]:
        """Send a request and wait for its answer; a request of the gateway meanwhile (an
        elicitation) is answered with ``answer``."""
        self.ids += 1
        ident = self.ids
        self.send({"id": ident, "method": method, **({"params": params} if params is not None else {})})
        return self.answer(ident, answer)

    def answer(self, ident: int, answer: Any = None, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if frame.get("id") == ident and "method" not in frame:
                return frame
            if "method" in frame and "id" in frame:  # the gateway asks the client
                self.send(
                    {"id": frame["id"], "result": answer if answer is not None else {"action": "decline"}}
                )

    def handshake(self, capabilities: dict[str, Any] | None = None) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        assert "result" in self.request("initialize", params)
        self.send({"method": "notifications/initialized"})

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    one_server(tmp_path, SERVER, POLICY)
    return tmp_path


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("demo.echo", {"text": "hello"}),
    ("demo.echo", {"text": "secret"}),  # denied
    ("demo.echo", {"text": 3}),  # refused by the schema
    ("demo.nothing", {}),  # no such tool
    ("demo.fail", {}),  # an error result
    ("demo.shape", {}),  # structured content, checked against the outputSchema
    ("demo.send", {"text": "x"}),  # escalated, and this client cannot be asked
    ("demo.echo", {"text": "again"}),
]


def _session(raw: Raw, modern: bool, progress: bool = False) -> list[dict[str, Any]]:
    if not modern:
        raw.handshake()
    meta = dict(MODERN) if modern else {}
    listed = raw.request("tools/list", {"_meta": meta} if modern else None)
    assert "result" in listed, listed
    answers = []
    for n, (name, arguments) in enumerate(CALLS):
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        call_meta = dict(meta)
        if progress:
            call_meta["progressToken"] = f"p{n}"
        if call_meta:
            params["_meta"] = call_meta
        answers.append(raw.request("tools/call", params))
    return [{k: v for k, v in a.items() if k != "id"} for a in answers]


@pytest.mark.parametrize(
    "modern", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["handshake", "2026-07-28"]
)
def test_the_fast_path_answers_every_call_as_the_sdk_path_does(files: Path, modern: bool) -> None:
    answers = {}
    for flags in ((), ("--no-fast-path",)):
        raw = Raw(files, *flags)
        try:
            answers[flags] = _session(raw, modern)
            whoami = {"name": "demo.whoami", "arguments": {}, **({"_meta": dict(MODERN)} if modern else {})}
            answers[flags, "id"] = raw.request("tools/call", whoami)["result"]["content"][0]["text"]
        finally:
            raw.close()
    fast, sdk = answers[()], answers[("--no-fast-path",)]
    assert fast == sdk
    texts = [a["result"]["content"][0]["text"] for a in fast]
    assert texts[0] == "echo: hello" and texts[-1] == "echo: again"
    assert "no secrets" in texts[1] and "policyc denied" in texts[1]
    assert "not of type 'string'" in texts[2] and "no tool `demo.nothing`" in texts[3]
    assert fast[4]["result"]["isError"] and texts[4] == "it broke"
    assert fast[5]["result"]["structuredContent"] == {"n": 3}
    assert "cannot ask" in texts[6] and fast[6]["result"]["isError"]
    # the fast path sent the calls itself (string ids), the SDK path through its session (integers)
    assert answers[(), "id"] == "str" and answers[("--no-fast-path",), "id"] == "int"


@pytest.mark.slow
def test_a_call_with_a_progress_token_is_left_to_the_sdk_and_answered_alike(files: Path) -> None:
    raw = Raw(files)
    try:
        with_progress = _session(raw, modern=False, progress=True)
    finally:
        raw.close()
    raw = Raw(files)
    try:
        plain = _session(raw, modern=False)
    finally:
        raw.close()
    assert with_progress == plain


@pytest.mark.slow
def test_an_escalated_call_is_handed_to_the_sdk_path_and_put_to_the_person(files: Path) -> None:
    for approve, expected in ((True, "send: x"), (False, "policyc denied")):
        raw = Raw(files)
        try:
            raw.handshake({"elicitation": {"form": {}}})
            raw.request("tools/list")
            answer = {"action": "accept", "content": {"approve": approve}}
            result = raw.request("tools/call", {"name": "demo.send", "arguments": {"text": "x"}}, answer)
            assert expected in result["result"]["content"][0]["text"]
            after = raw.request("tools/call", {"name": "demo.echo", "arguments": {"text": "later"}})
            assert after["result"]["content"][0]["text"] == "echo: later"
        finally:
            raw.close()


@pytest.mark.slow
def test_a_cancelled_fast_call_gets_no_answer_and_its_server_is_told(files: Path) -> None:
    raw = Raw(files)
    marker = files / "w"
    try:
        raw.handshake()
        raw.request("tools/list")
        raw.send(
            {
                "id": 50,
                "method": "tools/call",
                "params": {"name": "demo.wait", "arguments": {"marker": str(marker)}},
            }
        )
        deadline = time.monotonic() + 30
        while not Path(f"{marker}.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        raw.send({"method": "notifications/cancelled", "params": {"requestId": 50, "reason": "enough"}})
        while not Path(f"{marker}.cancelled").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(f"{marker}.cancelled").exists()
        after = raw.request("tools/call", {"name": "demo.echo", "arguments": {"text": "next"}})
        assert after["result"]["content"][0]["text"] == "echo: next"
        seen = []
        while not raw.lines.empty():
            seen.append(raw.lines.get())
        assert not [f for f in seen if f.get("id") == 50]
    finally:
        raw.close()


@pytest.mark.slow
def test_a_server_that_dies_during_a_fast_call_is_named(files: Path) -> None:
    raw = Raw(files)
    try:
        raw.handshake()
        raw.request("tools/list")
        died = raw.request("tools/call", {"name": "demo.die", "arguments": {}})
        assert died["result"]["isError"]
        assert "the server `demo` stopped during the call" in died["result"]["content"][0]["text"]
        later = raw.request("tools/call", {"name": "demo.echo", "arguments": {"text": "x"}})
        assert "`demo` is not running" in later["result"]["content"][0]["text"]
    finally:
        raw.close()


# A server that speaks JSON-RPC by hand, so that its answers to calls can be wrong in every way
# the SDK's own server never is.
RAW_SERVER = r"""
import json, sys

TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("ok", "notobject", "error", "noise", "badid")]
for line in sys.stdin:
    frame = json.loads(line)
    ident, method = frame.get("id"), frame.get("method")
    if ident is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": frame["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name = frame["params"]["name"]
        if name == "notobject":
            result = "a text where an object belongs"
        elif name == "error":
            print(json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": "no such luck"}}), flush=True)
            continue
        elif name == "noise":  # a line that is no JSON, then the answer
            print("this is not JSON", flush=True)
            result = {"content": [{"type": "text", "text": "after the noise"}]}
        elif name == "badid":  # an answer to a call never made, then the real one
            print(json.dumps({"jsonrpc": "2.0", "id": "policyc-999", "result": {"content": []}}), flush=True)
            result = {"content": [{"type": "text", "text": "the real answer"}]}
        else:
            result = {"content": [{"type": "text", "text": "fine"}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"""


@pytest.mark.parametrize("flags", [(), ("--no-fast-path",)], ids=["fast path", "SDK path"])
def test_wrong_answers_of_a_server_are_error_results_and_the_connection_goes_on(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """An answer that is no result object, a JSON-RPC error (with -32000, the code the SDK also
    uses for a closed connection), a line that is no JSON before the answer, an answer to a call
    never made: each call is answered, the server stays in service. (The SDK's session cannot
    read an answer whose result is no object, and waits for it until the server's `timeout`.)"""
    one_server(tmp_path, RAW_SERVER, ".import events\n", "timeout = 3\n")
    raw = Raw(tmp_path, *flags)
    try:
        raw.handshake()
        assert "result" in raw.request("tools/list")
        answers = {
            name: raw.request("tools/call", {"name": f"demo.{name}", "arguments": {}})
            for name in ("notobject", "error", "noise", "badid", "ok")
        }
    finally:
        raw.close()
    texts = {name: answer["result"]["content"][0]["text"] for name, answer in answers.items()}
    assert answers["notobject"]["result"]["isError"] and "demo.notobject" in texts["notobject"]
    assert answers["error"]["result"]["isError"] and "no such luck" in texts["error"]
    assert not answers["noise"]["result"].get("isError") and texts["noise"] == "after the noise"
    assert not answers["badid"]["result"].get("isError") and texts["badid"] == "the real answer"
    assert not answers["ok"]["result"].get("isError") and texts["ok"] == "fine"
