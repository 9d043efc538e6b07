"""Approvals: a person's yes to one escalated call, bound to that call.

A call a policy escalates (``Escalate(a)`` holds, no ``Deny(a)``) runs only with an
:class:`Approval` of exactly that call: the session, the tool, a SHA-256 of the tool and its
canonical arguments (:func:`call_digest`) and the set of rule ids that escalated it. A session
keeps its approvals in an :class:`Approvals` ledger; one authorizes a call only while it has
not expired (``ttl`` seconds on a monotonic clock, injectable for tests), once, and never over
a ``Deny`` (the ledger is asked only about calls whose verdict is ``escalate``). A different
argument, tool, session or set of escalating rules needs a new approval.

Each approval given is recorded in the session as an event of kind ``approval``, labelled
``"approval"`` (so ``.import approvals`` rules see it as ``Approval(e)``, and the audit log
has it), depending on the call it approves; its text is the approval as JSON.

>>> call_digest("send_email", {"to": "bob", "body": "hi"}) == call_digest("send_email", {"body": "hi", "to": "bob"})
True
>>> ledger = Approvals("s1", clock=lambda: 0.0)
>>> request = EscalationRequest("s1", "a1", "pay", {"amount": 5}, frozenset({"big"}), ("over 1",))
>>> approval = ledger.grant(request, ttl=60)
>>> ledger.take(request) == approval, ledger.take(request)
(True, None)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

APPROVAL_KIND = "approval"  # the kind of the event an approval is recorded as
APPROVAL_LABEL = "approval"  # its label (what `Approval(e)` of the approvals library reads)
DEFAULT_TTL = 300.0  # seconds an approval stays valid
DEFAULT_TIMEOUT = 120.0  # seconds an approver has to answer

_ids = itertools.count(1)


def canonical_json(value: Any) -> str:
    """A JSON value as one text: keys sorted, no white space, non-ASCII kept as it is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def call_digest(tool: str | None, arguments: Mapping[str, Any] | None) -> str:
    """The SHA-256 (hex) of a call: its tool and arguments as canonical JSON."""
    text = canonical_json({"args": dict(arguments or {}), "tool": tool})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EscalationRequest:
    """What a person must see to approve an escalated call: the session, the call (its event
    id, tool and arguments), the ids of the rules that escalated it and their messages, and
    the feedback text the agent would read."""

    session: str
    call: Any  # the call's event id
    tool: str | None
    arguments: dict[str, Any] = field(compare=False)
    rules: frozenset[str]
    messages: tuple[str, ...] = ()
    feedback: str = field(default="", compare=False)
    digest: str = ""  # call_digest(tool, arguments), filled in when not given

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", call_digest(self.tool, self.arguments))

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "call": self.call,
            "tool": self.tool,
            "arguments": self.arguments,
            "digest": self.digest,
            "rules": sorted(self.rules),
            "messages": list(self.messages),
            "feedback": self.feedback,
        }

    @classmethod
    def from_json(cls, data: Any) -> EscalationRequest:
        """A request from its JSON form (``ValueError`` if it is not one, or its digest is not
        the digest of its call)."""
        if not isinstance(data, dict):
            raise ValueError("an escalation is not an object")
        try:
            session, call, tool, arguments = data["session"], data["call"], data["tool"], data["arguments"]
            rules, messages, digest = data["rules"], data["messages"], data["digest"]
        except KeyError as missing:
            raise ValueError(f"an escalation has no `{missing.args[0]}`") from None
        if not isinstance(session, str) or not (tool is None or isinstance(tool, str)):
            raise ValueError("an escalation's `session` or `tool` is not text")
        if not isinstance(arguments, dict) or not isinstance(digest, str):
            raise ValueError("an escalation's `arguments` or `digest` is not what it holds")
        if not _texts(rules) or not _texts(messages):
            raise ValueError("an escalation's `rules` or `messages` are not texts")
        request = cls(
            session, call, tool, arguments, frozenset(rules), tuple(messages), str(data.get("feedback", ""))
        )
        if request.digest != digest:
            raise ValueError("an escalation's `digest` is not the digest of its call")
        return request


@dataclass(frozen=True)
class Approval:
    """A person's yes to one call: valid for the session, tool, call digest and escalating
    rules it names, until ``expires`` (on the ledger's clock), once."""

    id: str
    session: str
    tool: str | None
    digest: str
    rules: frozenset[str]
    expires: float
    call: Any = None  # the call it was given for (its event id)
    approver: str | None = None  # who approved, when the approver says

    def covers(self, request: EscalationRequest) -> bool:
        """Whether this approval is for exactly this call (ignoring expiry and use); an action
        that is no tool call (a value given facts name) has no tool and no arguments to tell
        it from another, so it must be the same action."""
        return (
            self.session == request.session
            and self.tool == request.tool
            and self.digest == request.digest
            and self.rules == request.rules
            and (request.tool is not None or self.call == request.call)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "tool": self.tool,
            "digest": self.digest,
            "rules": sorted(self.rules),
            "call": self.call,
            "approver": self.approver,
        }

    @classmethod
    def from_json(cls, data: Any) -> Approval:
        """An approval from its JSON form (``ValueError`` if it is not one). Its expiry is on
        the clock of the ledger that granted it, which the form does not carry: one read back
        is expired (it tells what was used, and allows nothing again)."""
        if not isinstance(data, dict):
            raise ValueError("an approval is not an object")
        try:
            ident, session, tool, digest, rules = (
                data[k] for k in ("id", "session", "tool", "digest", "rules")
            )
        except KeyError as missing:
            raise ValueError(f"an approval has no `{missing.args[0]}`") from None
        approver = data.get("approver")
        if not all(isinstance(v, str) for v in (ident, session, digest)) or not _texts(rules):
            raise ValueError("an approval's `id`, `session`, `digest` or `rules` are not texts")
        if not (tool is None or isinstance(tool, str)) or not (approver is None or isinstance(approver, str)):
            raise ValueError("an approval's `tool` or `approver` is not text")
        return cls(ident, session, tool, digest, frozenset(rules), float("-inf"), data.get("call"), approver)

    def event(self, deps: list[str] | None = None) -> dict[str, Any]:
        """The approval as the event a session records."""
        labels = [APPROVAL_LABEL]
        if self.approver:
            labels.append(f"approved-by:{self.approver}")
        event: dict[str, Any] = {
            "id": self.id,
            "kind": APPROVAL_KIND,
            "text": canonical_json(self.to_json()),
            "labels": labels,
        }
        if self.tool is not None:
            event["tool"] = self.tool
        if deps is not None:
            event["deps"] = deps
        return event


def approval_of_event(event: Mapping[str, Any], session: str, expires: float) -> Approval | None:
    """The approval an ``approval`` event of a recorded trace holds (its text, as
    :meth:`Approval.event` writes it), for ``session``; None if it holds none."""
    if event.get("kind") != APPROVAL_KIND or APPROVAL_LABEL not in (event.get("labels") or ()):
        return None
    try:
        data = json.loads(event.get("text") or "")
        rules = data["rules"]
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            return None
        if not isinstance(data["digest"], str) or data.get("session", session) != session:
            return None
        return Approval(
            str(event["id"]),
            session,
            data.get("tool"),
            data["digest"],
            frozenset(rules),
            expires,
            data.get("call"),
            data.get("approver"),
        )
    except (ValueError, KeyError, TypeError):
        return None


class Approvals:
    """The approvals of one session that are still unused, on a monotonic clock."""

    def __init__(self, session: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.session = session
        self.clock = clock
        self.pending: list[Approval] = []

    def grant(
        self,
        request: EscalationRequest,
        ttl: float = DEFAULT_TTL,
        approver: str | None = None,
        taken: Container[str] = (),
    ) -> Approval:
        """A new approval of exactly the call of ``request``, valid for ``ttl`` seconds, with
        an id not in ``taken`` (kept only if it names this ledger's session: it could never be
        used here otherwise)."""
        identifier = f"approval{next(_ids)}"
        while identifier in taken:
            identifier = f"approval{next(_ids)}"
        approval = Approval(
            identifier,
            request.session,
            request.tool,
            request.digest,
            frozenset(request.rules),
            self.clock() + float(ttl),
            request.call,
            approver,
        )
        self.add(approval)
        return approval

    def add(self, approval: Approval) -> None:
        """Keep an approval (one for another session is not kept)."""
        if approval.session == self.session:
            self.pending.append(approval)

    def take(self, request: EscalationRequest) -> Approval | None:
        """The unexpired approval of exactly this call, used up (None if there is none);
        expired approvals are dropped."""
        now = self.clock()
        self.pending = [a for a in self.pending if now < a.expires]
        for i, approval in enumerate(self.pending):
            if approval.covers(request):
                del self.pending[i]
                return approval
        return None


def _texts(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)
