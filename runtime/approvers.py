"""Approvers: asking a person about an escalated call, and what the answer makes of it.

An approver is a callable the host gives the monitor (``Monitor(policy, approver=...)``): it
takes an :class:`~.approvals.EscalationRequest` and returns (or, when async, resolves to)
``True`` to approve; anything else is a no. :func:`settle` (and :func:`settle_async`) turn an
escalated decision into the final one: with a yes, the approval is recorded in the session and
the call decided again (a ``Deny`` still wins; a call whose escalating rules changed meanwhile
is refused); with a no, no answer within the monitor's ``approval_timeout``, an approver that
raises, or no approver at all, the call is denied with a reason that says which.

:class:`ConsoleApprover` asks on a terminal: it shows the tool, the arguments and the
escalating rules' messages, and reads ``y``/``N``; with input that is not a terminal it
answers no without asking.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from .approvals import EscalationRequest
from .verdict import Decision, Reason

NO_APPROVER = "policyc:no-approver"
APPROVAL_REFUSED = "policyc:approval-refused"
APPROVAL_TIMEOUT = "policyc:approval-timeout"
APPROVER_FAILED = "policyc:approver-failed"
APPROVAL_STALE = "policyc:approval-stale"
_SUGGESTION = "Ask the user how to proceed, or do without this call."


def refused(decision: Decision, rule: str, message: str) -> Decision:
    """The escalated ``decision`` denied: ``message`` first, then the escalating reasons."""
    reason = Reason(rule, message, _SUGGESTION, "high")
    return Decision(
        decision.action,
        False,
        (reason, *(r for r in decision.reasons if r.rule != rule)),
        decision.errored,
        decision.evaluation,
        escalation=decision.escalation,
    )


def log_outcome(session: Any, decision: Decision, outcome: str) -> None:
    """What became of the escalated call (an outcome of :data:`~.audit.OUTCOMES`), to the audit
    log of the session's monitor (nothing without one). Fronts that settle a call themselves
    (the gateway's client that cannot be asked, a retry that came too late) log it here."""
    watched = getattr(session, "watched", None)
    if watched is not None and decision.escalation is not None:
        watched.outcome(decision.escalation, outcome)


def _no_approver(session: Any, decision: Decision) -> Decision:
    log_outcome(session, decision, "no-approver")
    return refused(
        decision,
        NO_APPROVER,
        "the call needs a person's approval and no approver is set, so it is refused",
    )


def _answered(session: Any, decision: Decision, answer: Any, request: EscalationRequest) -> Decision:
    """The final decision once the approver answered ``answer`` (True: approved)."""
    if answer is not True:
        log_outcome(session, decision, "refused")
        return refused(decision, APPROVAL_REFUSED, "the approver did not approve the call, so it is refused")
    log_outcome(session, decision, "approved")
    session.approve(request)
    again = session.decide(decision.action)
    if again.escalated:  # the escalating rules changed since the request: the approval does not fit
        session.approvals.pending = [a for a in session.approvals.pending if not a.covers(request)]
        return refused(
            again,
            APPROVAL_STALE,
            "the call's escalating rules changed while it was being approved, so it is refused",
        )
    return again


def _failed(session: Any, decision: Decision, error: BaseException) -> Decision:
    log_outcome(session, decision, "failed")
    return refused(
        decision,
        APPROVER_FAILED,
        f"the approver failed ({type(error).__name__}: {error}), so the call is refused",
    )


def _timed_out(session: Any, decision: Decision, timeout: float | None) -> Decision:
    log_outcome(session, decision, "timed-out")
    return refused(
        decision, APPROVAL_TIMEOUT, f"no approval came within {timeout:g} s, so the call is refused"
    )


def settle(session: Any, decision: Decision) -> Decision:
    """The final decision of an escalated one, asking the session's approver (synchronously,
    at most the monitor's ``approval_timeout`` seconds); any other decision as it is."""
    if not decision.escalated or decision.escalation is None or session.monitor.approves_elsewhere:
        return decision
    monitor = session.monitor
    approver = monitor.approver
    if approver is None:
        return _no_approver(session, decision)
    request = decision.escalation
    timeout = monitor.approval_timeout
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def ask() -> None:
        try:
            answer = approver(request)
            if inspect.isawaitable(answer):
                answer = asyncio.run(_awaited(answer))
            outcome["answer"] = answer
        except BaseException as error:
            outcome["error"] = error
        finally:
            done.set()

    # a thread of its own, so that an approver that never answers only leaves the call refused
    threading.Thread(target=ask, name="policyc-approver", daemon=True).start()
    if not done.wait(timeout):
        return _timed_out(session, decision, timeout)
    if "error" in outcome:
        return _failed(session, decision, outcome["error"])
    return _answered(session, decision, outcome.get("answer"), request)


async def settle_async(session: Any, decision: Decision) -> Decision:
    """:func:`settle` for async code: an async approver is awaited in the running loop, a sync
    one runs in a thread of its own; either has at most ``approval_timeout`` seconds."""
    if not decision.escalated or decision.escalation is None or session.monitor.approves_elsewhere:
        return decision
    monitor = session.monitor
    approver = monitor.approver
    if approver is None:
        return _no_approver(session, decision)
    request = decision.escalation
    timeout = monitor.approval_timeout

    async def ask() -> Any:
        if _is_async(approver):
            return await approver(request)
        return await _in_thread(approver, request)

    try:
        answer = await asyncio.wait_for(ask(), timeout)
    except TimeoutError:
        return _timed_out(session, decision, timeout)
    except Exception as error:
        return _failed(session, decision, error)
    return _answered(session, decision, answer, request)


def _in_thread(approver: Callable[[EscalationRequest], Any], request: EscalationRequest) -> asyncio.Future:
    """The approver's answer, from a daemon thread of its own (not the loop's executor, which
    would keep a loop that closes waiting for an approver that never answers)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settled(answer: Any, error: BaseException | None) -> None:
        if future.done():  # given up on (timed out)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(answer)

    def ask() -> None:
        answer: Any = None
        failed: BaseException | None = None
        try:
            answer = approver(request)
            if inspect.isawaitable(answer):
                answer = asyncio.run(_awaited(answer))
        except BaseException as error:
            failed = error
        try:
            loop.call_soon_threadsafe(settled, answer, failed)
        except RuntimeError:  # the loop is closed: nobody waits for the answer any more
            pass

    threading.Thread(target=ask, name="policyc-approver", daemon=True).start()
    return future


def _is_async(approver: Any) -> bool:
    """Whether calling the approver gives a coroutine (an async function, or an object whose
    ``__call__`` is one)."""
    method = type(approver).__dict__.get("__call__")  # an object whose __call__ is async
    return inspect.iscoroutinefunction(approver) or inspect.iscoroutinefunction(method)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@dataclass(frozen=True)
class ConsoleApprover:
    """An approver that asks on a terminal: the tool, the arguments and the escalating rules'
    messages, then ``Approve this call? [y/N]``; ``y`` or ``yes`` approves, anything else (or
    the end of input) does not. Input that is not a terminal gets no question and a no, unless
    ``interactive`` says otherwise (for tests driving it with streams)."""

    input: IO[str] | None = None  # default: sys.stdin
    output: IO[str] | None = None  # default: sys.stderr
    interactive: bool | None = None  # None: whether the input is a terminal

    def __call__(self, request: EscalationRequest) -> bool:
        source = self.input if self.input is not None else sys.stdin
        sink = self.output if self.output is not None else sys.stderr
        interactive = self.interactive
        if interactive is None:
            try:
                interactive = bool(source.isatty())
            except (AttributeError, ValueError, OSError):
                interactive = False
        if not interactive:
            return False
        sink.write(prompt(request))
        sink.flush()
        answer = source.readline()
        return answer.strip().lower() in ("y", "yes")


def prompt(request: EscalationRequest) -> str:
    """What :class:`ConsoleApprover` shows, every value as people's text shows it
    (runtime/render.py), so that no argument can write control characters to the terminal."""
    from . import render

    lines = [
        f"policyc: a call needs your approval (session {render.value(request.session)})",
        f"  tool: {render.name(request.tool or '')}",
    ]
    for key in sorted(request.arguments):
        value = render.value(request.arguments[key], render.APPROVAL_LIMIT)
        lines.append(f"  {render.name(key)}: {value}")
    for message in request.messages:
        lines.append(f"  why: {render.printable(message)}")
    lines.append("Approve this call? [y/N] ")
    return "\n".join(lines)


Approver = Callable[[EscalationRequest], Any]
