"""The trusted and the untrusted context of a call: the texts of the events it may depend on.

A call depends on the events its ``deps`` name, on what they depend on in turn, and on the
event its ``of`` names; without ``deps``, on every earlier event (docs/events.md). Among those:

* **trusted** — messages from the user or the system (``user_message``, ``system_message``, or
  ``role`` ``user``/``system``), and any event labelled ``"trusted"``;
* **untrusted** — tool results, messages from other agents, events of any other kind (a
  retrieval, a fetched page: whatever the agent did not produce came from outside), and any
  event labelled ``"untrusted"`` (which wins over ``"trusted"``);
* neither — the agent's own messages and calls: they only repeat what it read.

>>> events = {
...     "u": {"id": "u", "kind": "user_message", "text": "pay the bill"},
...     "c": {"id": "c", "kind": "tool_call", "tool": "read_file"},
...     "r": {"id": "r", "kind": "tool_result", "of": "c", "text": "IBAN X"},
... }
>>> call_context(events, ["u", "c", "r"], {"id": "p", "kind": "tool_call", "tool": "send_money"})
(['pay the bill'], ['IBAN X'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TRUSTED_ROLES = frozenset({"user", "system"})
TRUSTED_KINDS = frozenset({"user_message", "system_message"})
UNTRUSTED_KINDS = frozenset({"tool_result", "agent_message"})
AGENT_KINDS = frozenset({"assistant_message", "tool_call"})


def trust(event: Mapping[str, Any]) -> str | None:
    """``"trusted"``, ``"untrusted"`` or None for an event the agent produced itself."""
    labels = event.get("labels") or ()
    if "untrusted" in labels:
        return "untrusted"
    if "trusted" in labels:
        return "trusted"
    role = event.get("role")
    kind = event.get("kind")
    if role in TRUSTED_ROLES or (role is None and kind in TRUSTED_KINDS):
        return "trusted"
    if kind in UNTRUSTED_KINDS or role == "agent":
        return "untrusted"
    if role == "assistant" or (role is None and kind in AGENT_KINDS):
        return None
    return "untrusted"  # a kind of event the agent does not produce came from outside


def dependencies(
    events: Mapping[str, Mapping[str, Any]], order: Sequence[str], call: Mapping[str, Any]
) -> list[str]:
    """The events ``call`` may depend on, in session order (``order`` lists the events recorded
    before it)."""
    if call.get("deps") is None:
        return list(order)
    reached: set[str] = set()
    whole: set[str] = set()  # reached events without deps: each depends on every event before it
    pending = [d for d in (*call["deps"], call.get("of")) if d is not None]
    while pending:
        e = pending.pop()
        if e in reached or e not in events:
            continue
        reached.add(e)
        event = events[e]
        if event.get("deps") is None:
            whole.add(e)
        else:
            pending.extend(event["deps"])
        if event.get("of") is not None:
            pending.append(event["of"])
    # every event before the latest of those is reached: only the rest is looked at one by one
    start = next((i for i in range(len(order) - 1, -1, -1) if order[i] in whole), 0) if whole else 0
    return [*order[:start], *(e for e in order[start:] if e in reached)]


def call_context(
    events: Mapping[str, Mapping[str, Any]], order: Sequence[str], call: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """The texts of the trusted and of the untrusted events ``call`` may depend on."""
    trusted: list[str] = []
    untrusted: list[str] = []
    for e in dependencies(events, order, call):
        event = events[e]
        text = event.get("text")
        if not text:
            continue
        kind = trust(event)
        if kind == "trusted":
            trusted.append(text)
        elif kind == "untrusted":
            untrusted.append(text)
    return trusted, untrusted
