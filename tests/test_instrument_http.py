"""HTTP instrumentation against real servers on 127.0.0.1: every hop of a redirect is decided,
overlapping scopes of several agents keep each other's requests mediated, bodies (streamed,
uploaded, too large) and headers are what the policy sees, and requests from threads without
a session are refused."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import requests

import policyc
from policyc.runtime import httpx_hooks, instrument, requests_hooks
from policyc.runtime.instrument import use_session


@dataclass
class Server:
    """A local HTTP server that records what it receives: ``/redirect?status=N&to=URL``
    answers with a redirect (status N) to URL, any other path with ``ok``."""

    port: int
    received: list[dict] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [r["path"] for r in self.received]

    def redirect(self, target: str, status: int = 302) -> str:
        """The URL of a redirect to ``target`` (which the URL holds escaped)."""
        from urllib.parse import quote

        return self.url(f"/redirect?status={status}&to={quote(target, safe='')}")


def _serve() -> Iterator[Server]:
    server = Server(0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _answer(self) -> None:
            body = self._body()
            server.received.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
            )
            if self.path.startswith("/redirect?"):
                from urllib.parse import parse_qs, urlsplit

                query = parse_qs(urlsplit(self.path).query)
                self.send_response(int(query.get("status", ["302"])[0]))
                self.send_header("Location", query["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def allowed():
    yield from _serve()


@pytest.fixture
def denied():
    yield from _serve()


def policy_for(denied_port: int) -> object:
    return policyc.load(
        f"""
        .import events
        @id("denied-host") @message("{{a}} goes to a denied host")
        Deny(a) :- is_tool(a, "http_request"), ToolArg(a, "url", u), contains("127.0.0.1:{denied_port}", u).
        @id("secret-body") Deny(a) :- is_tool(a, "http_request"), ToolArg(a, "body", b), contains("SECRET", b).
        @id("secret-header") Deny(a) :- is_tool(a, "http_request"), ToolArg(a, "headers", h), contains("SECRET", h).
        """
    )


@pytest.fixture
def session(denied):
    return policyc.Monitor(policy_for(denied.port)).session("s")


def http_calls(session) -> list[dict]:
    return [e["args"] for e in session.events.values() if e.get("tool") == "http_request"]


def originals() -> dict[str, object]:
    return {
        "httpx.Client.send": httpx.Client.send,
        "httpx.AsyncClient.send": httpx.AsyncClient.send,
        "httpx.Client._send_single_request": httpx.Client._send_single_request,
        "httpx.AsyncClient._send_single_request": httpx.AsyncClient._send_single_request,
        "httpx.HTTPTransport.handle_request": httpx.HTTPTransport.handle_request,
        "httpx.AsyncHTTPTransport.handle_async_request": httpx.AsyncHTTPTransport.handle_async_request,
        "requests.Session.send": requests.Session.send,
        "requests.adapters.HTTPAdapter.send": requests.adapters.HTTPAdapter.send,
    }


@pytest.fixture(autouse=True)
def nothing_stays_patched():
    before = originals()
    yield
    assert originals() == before, "instrumentation left a patch installed"


# ------------------------------------------------------------------------------- redirects


def test_httpx_decides_every_redirect_hop(allowed, denied, session) -> None:
    target = denied.url("/leak?q=SECRET-FROM-THE-PAGE")
    with use_session(session), policyc.instrument_httpx():
        with pytest.raises(policyc.PolicyDenied, match="goes to a denied host"):
            httpx.get(allowed.redirect(target), follow_redirects=True)
        with httpx.Client(follow_redirects=True) as client, pytest.raises(policyc.PolicyDenied):
            client.get(allowed.redirect(target, 307))
        # a redirect to an allowed place is followed, and both hops are recorded
        assert httpx.get(allowed.redirect(allowed.url("/fine")), follow_redirects=True).text == "ok"
    assert denied.received == []
    assert [p.startswith("/redirect") for p in allowed.paths] == [
        True,
        True,
        True,
        False,
    ]  # the first hops went
    assert allowed.paths[-1] == "/fine"
    urls = [call["url"] for call in http_calls(session)]
    assert urls[0] == allowed.redirect(target) and urls[1] == target
    assert urls[-1] == allowed.url("/fine")


def test_httpx_async_decides_every_redirect_hop(allowed, denied, session) -> None:
    target = denied.url("/leak?q=SECRET")

    async def run() -> None:
        with use_session(session), policyc.instrument_httpx():
            async with httpx.AsyncClient(follow_redirects=True) as client:
                with pytest.raises(policyc.PolicyDenied, match="goes to a denied host"):
                    await client.get(allowed.redirect(target))
                assert (await client.get(allowed.redirect(allowed.url("/fine")))).text == "ok"

    asyncio.run(run())
    assert denied.received == []
    assert [c["url"] for c in http_calls(session)][1] == target


def test_requests_decides_every_redirect_hop(allowed, denied, session) -> None:
    target = denied.url("/leak?q=SECRET")
    with use_session(session), policyc.instrument_requests():
        with pytest.raises(policyc.PolicyDenied, match="goes to a denied host"):
            requests.get(allowed.redirect(target), timeout=5)
        with pytest.raises(policyc.PolicyDenied):
            requests.post(allowed.redirect(target, 307), data=b"x", timeout=5)
        assert requests.get(allowed.redirect(allowed.url("/fine")), timeout=5).text == "ok"
    assert denied.received == []
    assert [c["url"] for c in http_calls(session)][1] == target


def test_httpx_transport_used_directly_is_decided(denied, session) -> None:
    with use_session(session), policyc.instrument_httpx(), httpx.HTTPTransport() as transport:
        with pytest.raises(policyc.PolicyDenied):
            transport.handle_request(httpx.Request("GET", denied.url("/direct")))
    assert denied.received == []
    assert len(http_calls(session)) == 1  # decided once, not once per layer


# ------------------------------------------------------------------ overlapping scopes


def two_agents(run_a, run_b) -> None:
    """Agent A enters its scope, then B; A leaves while B is still inside, and B sends."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    problems: list[BaseException] = []

    def guarded(fn, *events):
        def body() -> None:
            try:
                fn(*events)
            except BaseException as error:  # reported by the test thread
                problems.append(error)
                for event in (a_in, b_in, a_out):
                    event.set()

        return body

    a = threading.Thread(target=guarded(run_a, a_in, b_in, a_out))
    b = threading.Thread(target=guarded(run_b, a_in, b_in, a_out))
    a.start()
    b.start()
    a.join(30)
    b.join(30)
    if problems:
        raise problems[0]


@pytest.mark.parametrize("library", ["httpx", "requests"])
def test_overlapping_scopes_in_threads(library, allowed, denied) -> None:
    policy = policy_for(denied.port)
    session_a = policyc.Monitor(policy).session("a")
    session_b = policyc.Monitor(policy).session("b")
    instrumentation = policyc.instrument_httpx if library == "httpx" else policyc.instrument_requests

    def get(url: str) -> str:
        if library == "httpx":
            return httpx.get(url).text
        return requests.get(url, timeout=5).text

    outcome: dict[str, object] = {}

    def run_a(a_in, b_in, a_out) -> None:
        with use_session(session_a), instrumentation():
            a_in.set()
            assert b_in.wait(10)
            assert get(allowed.url("/a")) == "ok"
        a_out.set()

    def run_b(a_in, b_in, a_out) -> None:
        assert a_in.wait(10)
        with use_session(session_b), instrumentation():
            b_in.set()
            assert a_out.wait(10)
            assert get(allowed.url("/b")) == "ok"
            try:
                get(denied.url("/leak"))
                outcome["b"] = "sent"
            except policyc.PolicyDenied:
                outcome["b"] = "refused"

    two_agents(run_a, run_b)
    assert outcome["b"] == "refused"
    assert denied.received == []
    assert [c["url"] for c in http_calls(session_a)] == [allowed.url("/a")]
    assert [c["url"] for c in http_calls(session_b)] == [allowed.url("/b"), denied.url("/leak")]
    # the last scope out uninstalled: a request outside any session goes out undecided
    assert get(allowed.url("/after")) == "ok"


@pytest.mark.parametrize("first_out", ["a", "b"])
def test_overlapping_scopes_in_asyncio_tasks(first_out, allowed, denied) -> None:
    policy = policy_for(denied.port)
    sessions = {name: policyc.Monitor(policy).session(name) for name in "ab"}
    outcome: dict[str, str] = {}

    async def main() -> None:
        entered = {name: asyncio.Event() for name in "ab"}
        left = asyncio.Event()

        async def agent(name: str) -> None:
            other = "b" if name == "a" else "a"
            async with httpx.AsyncClient() as client:
                with use_session(sessions[name]), policyc.instrument_httpx():
                    entered[name].set()
                    await entered[other].wait()
                    if name == first_out:
                        left.set()
                        return
                    await left.wait()
                    try:
                        await client.get(denied.url(f"/leak-{name}"))
                        outcome[name] = "sent"
                    except policyc.PolicyDenied:
                        outcome[name] = "refused"

        await asyncio.gather(agent("a"), agent("b"))

    asyncio.run(main())
    staying = "b" if first_out == "a" else "a"
    assert outcome == {staying: "refused"}
    assert denied.received == []
    assert [c["url"] for c in http_calls(sessions[staying])] == [denied.url(f"/leak-{staying}")]


def test_nested_scopes_and_handles_in_any_order(allowed, denied, session) -> None:
    first = policyc.instrument_httpx()
    second = policyc.instrument_httpx()
    third = policyc.instrument_requests()
    with use_session(session):
        first.uninstall()
        first.uninstall()  # a handle releases once
        with pytest.raises(policyc.PolicyDenied):
            httpx.get(denied.url("/x"))
        with policyc.instrument_httpx():
            pass
        with pytest.raises(policyc.PolicyDenied):
            httpx.get(denied.url("/y"))
        third.uninstall()
        second.uninstall()
    assert denied.received == []
    assert httpx.get(allowed.url("/free")).text == "ok"


def test_many_threads_beginning_and_ending_instrumentations() -> None:
    start = threading.Barrier(8)

    def churn() -> None:
        start.wait(10)
        for _ in range(50):
            with policyc.instrument_httpx(), policyc.instrument_requests():
                pass

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert httpx_hooks.HOOKS.state[0] is False and requests_hooks.HOOKS.state[0] is False


# -------------------------------------------------------------------- bodies and headers


def test_httpx_streamed_and_uploaded_bodies_are_decided(allowed, session) -> None:
    def chunks(*parts: bytes) -> Iterator[bytes]:
        yield from parts

    with use_session(session), policyc.instrument_httpx():
        with pytest.raises(policyc.PolicyDenied, match="secret-body"):
            httpx.post(allowed.url("/stream"), content=chunks(b"the SEC", b"RET"))
        assert httpx.post(allowed.url("/stream"), content=chunks(b"harm", b"less")).text == "ok"
        with pytest.raises(policyc.PolicyDenied, match="secret-body"):
            httpx.post(allowed.url("/upload"), files={"f": ("notes.txt", b"a SECRET note")})
        assert httpx.post(allowed.url("/upload"), files={"f": ("notes.txt", b"a plain note")}).text == "ok"
    assert [r["path"] for r in allowed.received] == ["/stream", "/upload"]
    assert allowed.received[0]["body"] == b"harmless"
    assert b"a plain note" in allowed.received[1]["body"]
    bodies = [c["body"] for c in http_calls(session)]
    assert bodies[1] == "harmless" and "a plain note" in bodies[3]


def test_httpx_async_streamed_body_is_decided(allowed, session) -> None:
    async def chunks(*parts: bytes):
        for part in parts:
            yield part

    async def run() -> None:
        with use_session(session), policyc.instrument_httpx():
            async with httpx.AsyncClient() as client:
                with pytest.raises(policyc.PolicyDenied, match="secret-body"):
                    await client.post(allowed.url("/s"), content=chunks(b"SEC", b"RET"))
                assert (await client.post(allowed.url("/s"), content=chunks(b"ok ", b"data"))).text == "ok"

    asyncio.run(run())
    assert [r["body"] for r in allowed.received] == [b"ok data"]


def test_bodies_over_the_cap_are_refused(allowed, session) -> None:
    big = b"x" * 2001
    with use_session(session), policyc.instrument_httpx(max_body_bytes=2000):
        with pytest.raises(policyc.PolicyDenied, match="larger than 2000 bytes") as refused:
            httpx.post(allowed.url("/big"), content=iter([big[:1000], big[1000:]]))
        assert refused.value.decision.reasons[0].rule == "policyc:body-too-large"
        with pytest.raises(policyc.PolicyDenied, match="larger than 2000 bytes"):
            httpx.post(allowed.url("/big"), content=big)
        assert httpx.post(allowed.url("/fits"), content=big[:2000]).text == "ok"
    with use_session(session), policyc.instrument_requests(max_body_bytes=2000):
        with pytest.raises(policyc.PolicyDenied, match="larger than 2000 bytes"):
            requests.post(allowed.url("/big"), data=iter([big[:1000], big[1000:]]), timeout=5)
    assert [r["path"] for r in allowed.received] == ["/fits"]
    # the default cap is documented
    assert instrument.MAX_BODY_BYTES == 1024 * 1024


def test_an_unreadable_body_is_refused_not_an_exception(allowed, session) -> None:
    async def chunks():
        yield b"data"

    with use_session(session), policyc.instrument_httpx():
        with pytest.raises(policyc.PolicyDenied, match="cannot be read"):
            httpx.Client().post(allowed.url("/x"), content=chunks())  # an async body on a sync client
    assert allowed.received == []


def test_requests_streamed_and_file_bodies_are_decided(allowed, session, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"the SECRET file")
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"a plain file")
    with use_session(session), policyc.instrument_requests():
        with pytest.raises(policyc.PolicyDenied, match="secret-body"):
            requests.post(allowed.url("/g"), data=(c for c in [b"SEC", b"RET"]), timeout=5)
        assert requests.post(allowed.url("/g"), data=(c for c in [b"fine ", b"data"]), timeout=5).text == "ok"
        with secret.open("rb") as file, pytest.raises(policyc.PolicyDenied, match="secret-body"):
            requests.post(allowed.url("/f"), data=file, timeout=5)
        with plain.open("rb") as file:
            assert requests.post(allowed.url("/f"), data=file, timeout=5).text == "ok"
        with pytest.raises(policyc.PolicyDenied, match="secret-body"):
            requests.post(allowed.url("/u"), files={"f": ("s.txt", b"SECRET")}, timeout=5)
    assert [(r["path"], r["body"]) for r in allowed.received] == [
        ("/g", b"fine data"),
        ("/f", b"a plain file"),
    ]
    assert [c["body"] for c in http_calls(session)][1] == "fine data"


@pytest.mark.parametrize("library", ["httpx", "requests"])
def test_headers_are_arguments_and_credentials_redacted(library, allowed, session) -> None:
    def send(headers: dict, **kwargs) -> str:
        if library == "httpx":
            return httpx.get(allowed.url("/h"), headers=headers, **kwargs).text
        return requests.get(allowed.url("/h"), headers=headers, timeout=5, **kwargs).text

    instrumentation = policyc.instrument_httpx if library == "httpx" else policyc.instrument_requests
    with use_session(session), instrumentation():
        with pytest.raises(policyc.PolicyDenied, match="secret-header"):
            send({"X-Data": "SECRET page text"})
        assert (
            send({"X-Data": "plain", "Authorization": "Bearer SECRET-TOKEN", "Cookie": "sid=SECRET"}) == "ok"
        )
    headers = http_calls(session)[-1]["headers"]
    assert headers["x-data"] == "plain"
    assert headers["authorization"] == "[redacted]" and headers["cookie"] == "[redacted]"
    assert all(name == name.lower() for name in headers)
    assert allowed.received[-1]["headers"]["Authorization"] == "Bearer SECRET-TOKEN"  # sent as given


# --------------------------------------------------------------- threads without a session


@pytest.mark.parametrize("library", ["httpx", "requests"])
def test_threads_without_a_session(library, allowed, session) -> None:
    def get(path: str) -> str:
        if library == "httpx":
            return httpx.get(allowed.url(path)).text
        return requests.get(allowed.url(path), timeout=5).text

    def in_thread(fn, context: contextvars.Context | None = None) -> object:
        out: list[object] = []

        def body() -> None:
            try:
                out.append(fn())
            except policyc.PolicyDenied as denied:
                out.append(denied)

        thread = threading.Thread(target=body if context is None else lambda: context.run(body))
        thread.start()
        thread.join(10)
        return out[0]

    instrumentation = policyc.instrument_httpx if library == "httpx" else policyc.instrument_requests
    with use_session(session), instrumentation():
        refused = in_thread(lambda: get("/no-session"))
        assert isinstance(refused, policyc.PolicyDenied)
        assert refused.decision.reasons[0].rule == "policyc:no-session"
        # a thread started in a copy of the context has the session
        assert in_thread(lambda: get("/with-session"), contextvars.copy_context()) == "ok"
        with instrumentation(allow_outside_session=True):
            # every active instrumentation must allow requests outside a session
            assert isinstance(in_thread(lambda: get("/still-refused")), policyc.PolicyDenied)
    with instrumentation(allow_outside_session=True):
        assert in_thread(lambda: get("/outside")) == "ok"
    assert [r["path"] for r in allowed.received] == ["/with-session", "/outside"]
    assert [c["url"] for c in http_calls(session)] == [allowed.url("/with-session")]


def test_recorded_arguments_are_json(allowed, session) -> None:
    with use_session(session), policyc.instrument_httpx():
        httpx.post(allowed.url("/j?q=1"), json={"a": 1})
    (call,) = http_calls(session)
    assert set(call) == {"method", "url", "host", "body", "headers"}
    assert call["method"] == "POST" and call["host"] == "127.0.0.1" and json.loads(call["body"]) == {"a": 1}
    assert call["headers"]["content-type"] == "application/json"
