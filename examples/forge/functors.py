"""Implementations of the functors the FORGE listings declare, over a table of recorded events.

The FORGE policies ask questions about the payload of events (which tool a call invokes, its
arguments, which agent sent a message) through functors. Here the payloads come from a JSON
table ``{"event id": {"tool": ..., "args": {...}, "agent": ..., "text": ...}}``:

* from Python, ``functors_for(events)`` gives a mapping for ``policyc.load(..., functors=...)``;
* from the command line, set ``FORGE_EVENTS`` to the table's path (each scenario folder has
  an ``events.json``) and pass ``--functors examples/forge/functors.py``.

The classifiers of FORGE G.3 (``asks_for_effect``, ``criterion_class``) are keyword tables
here; a deployment would use its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import policyc

EFFECT_WORDS = {
    "payment": ("pay", "send money", "transfer"),
    "deletion": ("delete", "remove"),
    "message": ("send", "email", "message", "post"),
    "browse": ("visit", "open", "browse", "website", "webpage"),
}


def functors_for(events: dict[str, dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """The FORGE functors answering from ``events``."""

    def event(e: str) -> dict[str, Any]:
        return events.get(e, {})

    def is_tool(a: str, name: str) -> bool:
        return event(a).get("tool") == name

    def is_tool_call(a: str) -> bool:
        return "tool" in event(a)

    def tool_arg(a: str, key: str) -> Any:
        value = event(a).get("args", {}).get(key)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list | dict):
            return json.dumps(value, sort_keys=True)
        return value  # None when the call has no such argument: the literal fails

    def queries(a: str, host: str) -> bool:
        url = event(a).get("args", {}).get("url", "")
        return (urlsplit(url).hostname or "") == host

    def sent_by_agent(e: str, agent: str) -> bool:
        return event(e).get("agent") == agent

    def is_confirmation_response(e: str) -> bool:
        return "approved" in event(e).get("text", "").lower()

    return {
        "is_tool": is_tool,
        "is_tool_call": is_tool_call,
        "tool_arg": tool_arg,
        "queries": queries,
        "sent_by_agent": sent_by_agent,
        "is_confirmation_response": is_confirmation_response,
        "is_dependency_manifest": is_dependency_manifest,
        "contains_identifier": contains_identifier,
        "asks_for_effect": asks_for_effect,
        "criterion_class": criterion_class,
        "criterion_wants_max": criterion_wants_max,
        "selected_id": selected_id,
        "url_carries_data": url_carries_data,
    }


def is_dependency_manifest(path: str) -> bool:
    return os.path.basename(path) in {
        "requirements.txt",
        "pyproject.toml",
        "package.json",
        "go.mod",
        "Cargo.toml",
    }


def contains_identifier(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole token (an address, an IBAN, a file name)."""
    return bool(value) and re.search(rf"(?<![\w@.-]){re.escape(value)}(?![\w@-])", text) is not None


def asks_for_effect(request: str, kind: str) -> bool:
    lowered = request.lower()
    return any(word in lowered for word in EFFECT_WORDS.get(kind, ()))


def criterion_class(request: str) -> str:
    lowered = request.lower()
    if "largest" in lowered or "biggest" in lowered or "smallest" in lowered:
        return "size"
    if "newest" in lowered or "latest" in lowered or "oldest" in lowered:
        return "date"
    return "none"


def criterion_wants_max(request: str) -> int:
    lowered = request.lower()
    return 0 if ("smallest" in lowered or "oldest" in lowered) else 1


def selected_id(listing: str, field: str, wants_max: int) -> str:
    """The id of the record a listing (a JSON list of records with ``id``) selects by ``field``."""
    try:
        records = [r for r in json.loads(listing) if isinstance(r, dict) and field in r and "id" in r]
    except (ValueError, TypeError):
        return ""
    if not records:
        return ""
    chosen = (max if wants_max else min)(records, key=lambda r: r[field])
    return str(chosen["id"])


def url_carries_data(url: str) -> bool:
    """Whether a URL sends anything beyond a host and a plain path (a query, a fragment, long segments)."""
    parts = urlsplit(url if "://" in url else "https://" + url)
    return bool(parts.query or parts.fragment or any(len(seg) > 40 for seg in parts.path.split("/")))


def _from_environment() -> dict[str, Callable[..., Any]]:
    path = os.environ.get("FORGE_EVENTS")
    if not path:
        return functors_for({})
    with open(path, encoding="utf-8") as source:
        return functors_for(json.load(source))


for _name, _fn in _from_environment().items():
    globals()[_name] = policyc.functor(_name)(_fn)
