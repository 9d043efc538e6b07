"""The policy side of one client connection: MCP calls, results and resources as events of a
monitor session, and the decision of every call (docs/mcp.md, "How MCP maps to events").

A :class:`Gate` holds the session of one connection. :meth:`Gate.call` records a
``tools/call`` as a ``tool_call`` event (the tool ``S.T``, its arguments) and decides it;
:meth:`Gate.result` records what the server answered as a ``tool_result`` of that call, with
the labels configured for the server and the tool; :meth:`Gate.resource` and
:meth:`Gate.prompt` record what a resource read or a prompt put before the agent. What the
servers answer is recorded together with the next call, before that call is decided, in one
trip to the worker thread (or by :meth:`Gate.flush` when the connection ends): every decision
sees everything answered before it.

It fails closed. A decision runs in a worker thread, at most ``decide_timeout`` seconds; one
that raises or takes longer is a denial saying so, and after a decision that did not finish the
session's state is unknown, so every later call of the connection is denied too. An escalated
call is put to the person through ``ask`` (the client's elicitation), answered within the
monitor's ``approval_timeout``, approved in the session and decided again
(:func:`policyc.runtime.approvers.settle` in a worker thread, with the reasons of
docs/verdicts.md; the monitor's approver is an :class:`Approvers`, which asks the connection's
user); with no ``ask`` it is denied saying why.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from policyc.runtime.context import authorize_tool_call

from .config import SessionOptions

if TYPE_CHECKING:
    from policyc.runtime.protocols import MonitorLike, SessionLike

Ask = Callable[[Any], Awaitable[bool]]  # an EscalationRequest -> whether the person approves


@dataclass
class Approvers:
    """The monitor's approver (``Monitor(policy, approver=Approvers())``): asks about an
    escalated call whoever its session's gate registered while it settles the call (the user of
    that connection, through its client); a session no one asks for is a no. Called by
    :func:`policyc.runtime.approvers.settle` in a thread of its own."""

    askers: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    def __call__(self, request: Any) -> bool:
        ask = self.askers.get(request.session)
        return False if ask is None else bool(ask(request))


@dataclass(frozen=True)
class Verdict:
    """What the gateway does with a call: forward it (``forward``), or answer the client with
    ``text`` as an error result. ``call`` is the call's event id (None when it was refused
    before it was recorded), ``decision`` the monitor's last decision of it."""

    forward: bool
    text: str
    call: str | None = None
    decision: Any = None


@dataclass(frozen=True)
class Handover:
    """A call decided on the fast path (:mod:`.fastcall`) that the SDK path goes on with (it escalated): the
    verdict, and the call's digest, so that it applies to this call only."""

    digest: str
    verdict: Any


class Gate:
    """The session of one client connection (``monitor.session(session_id, ...)``)."""

    def __init__(self, monitor: MonitorLike, session_id: str, options: SessionOptions) -> None:
        import anyio

        self.options = options
        self.lock = anyio.Lock()
        self.count = 0
        self.broken: str | None = None  # why every call of this connection is denied
        self.queued: list[dict[str, Any]] = []  # what the servers answered, not recorded yet
        self.session: SessionLike = None  # type: ignore[assignment]  # None only while broken
        try:  # in process, or at a `policyc serve` service (which refuses a principal: its key's)
            self.session = monitor.session(
                session_id, principal=options.principal, roles=options.roles or None
            )
        except Exception as error:
            self.broken = f"the policy session could not be started: {type(error).__name__}: {error}"

    def _id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    async def call(self, tool: str, arguments: Mapping[str, Any], ask: Ask | None) -> Verdict:
        """Record the call of ``tool`` (``S.T``) with ``arguments`` and decide it; an escalated
        call is put to ``ask`` (None: the client cannot be asked, and the call is denied)."""
        first = await self.decide(tool, arguments)
        if first.decision is None or not first.decision.escalated:
            return first
        assert first.call is not None
        return await self.settle(first.call, tool, first.decision, ask)

    async def decide(self, tool: str, arguments: Mapping[str, Any], inline: bool = False) -> Verdict:
        """Record the call and decide it, asking no one: an escalated call comes back as a
        verdict that does not forward, its ``decision`` escalated (see :meth:`settle`).
        ``inline``: on the event loop rather than in a worker thread (:meth:`_inline`)."""
        if inline and not self.lock.locked():  # nothing is awaited until it is decided: no one
            return self._decided_here(tool, arguments)  # else can take the lock meanwhile
        async with self.lock:
            if inline:
                return self._decided_here(tool, arguments)
            if self.broken is not None:
                return Verdict(False, refusal_text(tool, self.broken))
            call, work = self._work(tool, arguments)
            return _decided(tool, call, await self._in_thread(work, tool))

    def _decided_here(self, tool: str, arguments: Mapping[str, Any]) -> Verdict:
        if self.broken is not None:
            return Verdict(False, refusal_text(tool, self.broken))
        call, work = self._work(tool, arguments)
        return _decided(tool, call, self._inline(work))

    def _work(self, tool: str, arguments: Mapping[str, Any]) -> tuple[str, Callable[[], Any]]:
        """The next call's id, and the work of deciding it: what the servers answered before it
        recorded, then the call recorded and decided as every front decides one
        (runtime/context.py), an escalation left to :meth:`settle`."""
        call = self._id("c")
        queued, self.queued = self.queued, []

        def work() -> Any:
            for earlier in queued:
                self.session.record(earlier)
            return authorize_tool_call(self.session, tool, arguments, None, call, checked=False)[0]

        return call, work

    async def settle(self, call: str, tool: str, decision: Any, ask: Ask | None) -> Verdict:
        """The verdict on an escalated ``decision`` of ``call``: ``ask`` answers (within the
        monitor's ``approval_timeout``), the approval is recorded and the call decided again; with
        no ``ask`` the call is denied, saying the client cannot be asked."""
        import anyio

        from policyc.runtime.context import settled

        if ask is None:
            why = (
                "the call needs a person's approval, and this client cannot ask one "
                "(it did not declare the MCP elicitation capability)"
            )
            return await self.unanswered(call, tool, decision, "no-approver", why)
        monitor = self.session.monitor
        approvers = monitor.approver
        token = anyio.lowlevel.current_token()
        waited = monitor.approval_timeout

        async def bounded(request: Any) -> bool:
            # given up a second after settle() stops waiting (it denies, approval-timeout), so
            # that no question stays open at the client
            with anyio.move_on_after(math.inf if waited is None else waited + 1.0):
                return bool(await ask(request))
            return False

        def asked(request: Any) -> bool:  # in the thread settle() asks in: the question runs in the loop
            return bool(anyio.from_thread.run(bounded, request, token=token))

        limit = self.options.decide_timeout + (math.inf if waited is None else waited)
        async with self.lock:
            if self.broken is not None:
                return Verdict(False, refusal_text(tool, self.broken), call)
            if isinstance(approvers, Approvers):
                approvers.askers[self.session.id] = asked
            queued, self.queued = self.queued, []

            def work() -> Any:  # what was answered meanwhile, then the approval and the decision after it
                for earlier in queued:
                    self.session.record(earlier)
                return settled(self.session, tool, decision)

            try:
                settled = await self._in_thread(work, tool, limit)
            finally:
                if isinstance(approvers, Approvers):
                    approvers.askers.pop(self.session.id, None)
            if isinstance(settled, str):
                return Verdict(False, refusal_text(tool, settled), call)
            return _verdict(tool, call, settled)

    async def unanswered(self, call: str, tool: str, decision: Any, outcome: str, why: str) -> Verdict:
        """The refusal of an escalated ``decision`` of ``call`` that no one answered in time
        (``outcome``: ``no-approver`` or ``timed-out``, logged as the call's outcome)."""
        from policyc.runtime.approvers import log_outcome

        async with self.lock:
            log_outcome(self.session, decision, outcome)
        return Verdict(False, refusal_text(tool, why, decision.feedback), call, decision)

    async def result(self, call: str, tool: str, result: Any, labels: tuple[str, ...]) -> None:
        """Record the result of an allowed call (a ``CallToolResult``) as a ``tool_result``; an
        error result gets the label ``error`` besides ``labels``."""
        event: dict[str, Any] = {
            "id": self._id("r"),
            "kind": "tool_result",
            "of": call,
            "tool": tool,
            "text": content_text(
                getattr(result, "content", None), getattr(result, "structured_content", None)
            ),
        }
        every = list(labels) + (["error"] if getattr(result, "is_error", False) else [])
        if every:
            event["labels"] = list(dict.fromkeys(every))
        if self.options.depends == "call":
            event["deps"] = [call]
        await self._record(event)

    async def resource(self, server: str, uri: str, contents: Any, labels: tuple[str, ...]) -> None:
        """Record a resource read through the gateway: an event of kind ``resource`` whose text is
        the resource's text, its arguments the server and the URI."""
        event: dict[str, Any] = {
            "id": self._id("res"),
            "kind": "resource",
            "text": content_text(contents, None),
            "args": {"server": server, "uri": uri},
        }
        if labels:
            event["labels"] = list(labels)
        await self._record(event)

    async def prompt(
        self, server: str, name: str, arguments: Mapping[str, Any], result: Any, labels: tuple[str, ...]
    ) -> None:
        """Record a prompt got through the gateway: an event of kind ``prompt`` (its messages'
        text; the server, the prompt's name and its arguments as arguments)."""
        messages = getattr(result, "messages", None) or []
        text = "\n".join(content_text([getattr(m, "content", None)], None) for m in messages)
        event: dict[str, Any] = {
            "id": self._id("p"),
            "kind": "prompt",
            "text": text,
            "args": {"server": server, "prompt": name, **{f"arg.{k}": str(v) for k, v in arguments.items()}},
        }
        if labels:
            event["labels"] = list(labels)
        await self._record(event)

    async def _record(self, event: dict[str, Any]) -> None:
        """Keep an answer of a server for the session: it is recorded with the next call, before
        that call is decided (in the same trip to the worker thread), or by :meth:`flush`."""
        self.queued.append(event)

    async def flush(self) -> None:
        """Record what is kept and not recorded yet (when the connection ends)."""
        async with self.lock:
            queued, self.queued = self.queued, []
            if self.broken is not None or not queued:
                return

            def work() -> None:
                for event in queued:
                    self.session.record(event)

            outcome = await self._in_thread(work, "recording")
            if isinstance(outcome, str):
                self.broken = f"recording what the servers answered failed ({outcome})"

    def _inline(self, work: Callable[[], Any]) -> Any:
        """``work()`` here, on the event loop (an in-process monitor's decision, some hundredths of
        a millisecond, less than the trip to a worker thread): its value, or why it has none. The
        monitor's own limits bound it as they go; a decision that still ends past
        ``decide_timeout`` counts for nothing, as one in a thread would: it is a denial, and the
        gate is broken from then on."""
        import time

        timeout = self.options.decide_timeout
        started = time.monotonic()
        try:
            value = work()
        except Exception as error:
            return f"the policy side failed: {_what(error)}"
        if time.monotonic() - started > timeout:
            self.broken = (
                f"a decision took longer than {timeout:g} s, so the session's state is unknown "
                "and every later call of this connection is refused"
            )
            return f"the decision took longer than {timeout:g} s"
        return value

    async def _in_thread(self, work: Callable[[], Any], tool: str, limit: float | None = None) -> Any:
        """``work()`` in a worker thread within ``limit`` seconds (default ``decide_timeout``):
        its value, or why it has none (a string). A decision that did not finish leaves the
        session in a state no one knows: the gate is broken from then on."""
        import anyio

        timeout = self.options.decide_timeout if limit is None else limit
        try:
            with anyio.move_on_after(timeout) as scope:
                value = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except Exception as error:
            return f"the policy side failed: {_what(error)}"
        if scope.cancelled_caught:
            self.broken = (
                f"a decision took longer than {timeout:g} s, so the session's state is unknown "
                "and every later call of this connection is refused"
            )
            return f"the decision took longer than {timeout:g} s"
        return value


def _decided(tool: str, call: str, decision: Any) -> Verdict:
    """The verdict on a call: its decision, or why it has none (a string)."""
    if isinstance(decision, str):
        return Verdict(False, refusal_text(tool, decision), call)
    return _verdict(tool, call, decision)


def _verdict(tool: str, call: str, decision: Any) -> Verdict:
    if decision.allowed:
        return Verdict(True, "", call, decision)
    return Verdict(False, refusal_text(tool, None, decision.feedback), call, decision)


def refusal_text(tool: str, why: str | None, feedback: str = "") -> str:
    """The text of an error result for a call the gateway did not forward."""
    lines = [f"policyc denied the call of `{tool}`; it was not sent to the server."]
    if why:
        lines.append(f"Reason: {why}.")
    if feedback:
        lines.append(feedback)
    return "\n".join(lines)


def _what(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def content_text(content: Any, structured: Any) -> str:
    """The text of MCP content blocks (tool results, resource contents, prompt messages): text
    as it is, resources' text, other blocks as a short description; the structured content as
    JSON when there is no text."""
    parts: list[str] = []
    for block in content or []:
        if block is None:
            continue
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
            continue
        resource = getattr(block, "resource", None)
        if resource is not None and isinstance(getattr(resource, "text", None), str):
            parts.append(resource.text)
            continue
        kind = getattr(block, "type", None) or type(block).__name__
        uri = getattr(block, "uri", None) or getattr(resource, "uri", None)
        parts.append(f"[{kind}{' ' + str(uri) if uri else ''}]")
    if not parts and structured is not None:
        try:
            parts.append(json.dumps(structured, sort_keys=True, ensure_ascii=False))
        except (TypeError, ValueError):
            parts.append(str(structured))
    return "\n".join(parts)
