"""Asking the user about an escalated call through the client's MCP elicitation.

On a connection of the handshake era (protocol 2025-11-25 and before), the gateway sends an
``elicitation/create`` request to the client while the ``tools/call`` waits (:func:`asker`). On
a 2026-07-28 connection, where a server asks within its answer, the call's result is an
``InputRequiredResult`` holding the elicitation (:func:`input_required`); the client asks the
user and retries the call with the answer and the state, and the retry — the same call of the
same connection, within the approval timeout — is approved or refused (:func:`resumed`).

Either way the user sees the same form: one boolean, ``approve``, and a message naming the tool,
each argument and the escalating rules' messages (:func:`approval_message`).

>>> from policyc.runtime.approvals import EscalationRequest
>>> request = EscalationRequest("s1", "c1", "git.git_add", {"files": ["a\\u001b[2J.txt"]}, frozenset({"r"}), ("staging needs approval",))
>>> print(approval_message(request))
policyc: the call of `git.git_add` needs your approval.
  files = `["a\\u001b[2J.txt"]`
- staging needs approval
Approve exactly this call, once?
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from policyc.runtime.approvals import DEFAULT_TTL, call_digest

from .decide import Gate, Verdict, refusal_text

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "Run exactly this call, once",
            "default": False,
        }
    },
    "required": ["approve"],
}


MAX_PENDING = 1024  # escalated calls waiting for their retry, in all (the oldest go first)


@dataclass(frozen=True)
class Pending:
    """An escalated call put to the user on a 2026-07-28 connection, until the client retries
    it: the connection, the call (its arguments and their canonical digest), its verdict and
    when it was asked (monotonic)."""

    key: str
    tool: str
    arguments: dict[str, Any]
    verdict: Verdict
    asked: float
    digest: str  # call_digest(tool, arguments)


def modern(ctx: Any) -> bool:
    """Whether the request came over a 2026-07-28 connection (a server asks within its answer)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def can_elicit(ctx: Any) -> bool:
    """Whether the client declared the elicitation capability."""
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def approved(answer: Any) -> bool:
    """Whether an elicitation's answer approves: the form accepted with ``approve`` true."""
    content = getattr(answer, "content", None) or {}
    return getattr(answer, "action", None) == "accept" and content.get("approve") is True


def asker(ctx: Any) -> Any:
    """How to ask the user about an escalated call of a handshake-era connection: an
    ``elicitation/create`` request to the client; None when the client did not declare the
    capability or cannot be sent a request."""
    session = ctx.session
    if not can_elicit(ctx) or not session.can_send_request:
        return None
    request_id = ctx.request_id

    async def ask(request: Any) -> bool:
        answer = await session.elicit_form(
            approval_message(request), APPROVAL_SCHEMA, related_request_id=request_id
        )
        return approved(answer)

    return ask


def input_required(
    pending: dict[str, Pending],
    key: str,
    tool: str,
    arguments: dict[str, Any],
    verdict: Verdict,
    ttl: float = DEFAULT_TTL,
) -> Any:
    """The answer to an escalated call on a 2026-07-28 connection: the elicitation the client
    must put to the user, and the state (kept in ``pending``) its retry brings back. A call not
    retried within ``ttl`` seconds is forgotten, and so is the oldest when :data:`MAX_PENDING`
    wait (its retry is then refused as unknown)."""
    import mcp.types as mt

    now = time.monotonic()
    for state in [s for s, waiting in pending.items() if now - waiting.asked > ttl]:
        del pending[state]
    while len(pending) >= MAX_PENDING:
        del pending[next(iter(pending))]  # the oldest: a dict keeps the order they were asked in
    state = secrets.token_urlsafe(24)
    pending[state] = Pending(key, tool, dict(arguments), verdict, now, call_digest(tool, arguments))
    form = mt.ElicitRequestFormParams(
        message=approval_message(verdict.decision.escalation), requested_schema=APPROVAL_SCHEMA
    )
    return mt.InputRequiredResult(
        input_requests={"approval": mt.ElicitRequest(params=form)}, request_state=state
    )


async def resumed(
    pending: dict[str, Pending],
    key: str,
    gate: Gate,
    tool: str,
    arguments: dict[str, Any],
    params: Any,
    limit: float | None,
) -> tuple[Verdict, dict[str, Any]]:
    """The verdict on the retry of a call put to the user, and the arguments to send: the same
    call of the same connection (its canonical JSON, so ``1``, ``1.0`` and ``true`` differ),
    approved within ``limit`` seconds, is settled with that answer, and the arguments the user
    was shown are the ones sent; anything else is denied."""
    found = pending.pop(params.request_state, None)
    if found is None or found.key != key:
        why = "the call's approval state is unknown, used, expired or of another connection"
        return Verdict(False, refusal_text(tool, why)), arguments
    if found.tool != tool or found.digest != call_digest(tool, arguments):
        return Verdict(
            False, refusal_text(tool, "the retried call is not the call the user was asked about")
        ), arguments
    answer = approved((params.input_responses or {}).get("approval"))
    assert found.verdict.call is not None
    if limit is not None and time.monotonic() - found.asked > limit:
        why = f"no approval came within {limit:g} s"
        late = await gate.unanswered(found.verdict.call, tool, found.verdict.decision, "timed-out", why)
        return late, arguments

    async def ask(request: Any) -> bool:
        return answer

    return await gate.settle(found.verdict.call, tool, found.verdict.decision, ask), found.arguments


def approval_message(request: Any) -> str:
    """What the user is asked about an escalated call: the tool, each argument (cut to 500
    characters) and the escalating rules' messages, every value as people's text shows it
    (``policyc.runtime.render``), so that no argument can pass for the gateway's own words."""
    from policyc.runtime import render

    lines = [f"policyc: the call of {render.value(str(request.tool))} needs your approval."]
    for key, value in sorted(request.arguments.items()):
        lines.append(f"  {render.name(key)} = {render.value(value, render.APPROVAL_LIMIT)}")
    for message in request.messages:
        lines.append(f"- {render.printable(message)}")
    lines.append("Approve exactly this call, once?")
    return "\n".join(lines)
