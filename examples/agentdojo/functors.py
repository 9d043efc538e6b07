"""The functors of the AgentDojo provenance policy (``policy.dl``).

They answer questions about values and texts; which texts to ask about is the policy's business.

* ``mentions(text, value)`` — ``value`` occurs in ``text`` as a whole token, ignoring case (an
  address inside a longer address or a number inside a longer number does not count);
* ``in_record(text, value)`` — ``text`` is a structured tool result (YAML, as AgentDojo prints
  records) and ``value`` is one of its field values or keys, whole, outside the free-text fields;
* ``item(value, i)`` — the ``i``-th element of a list argument (as ``tool_arg`` gives lists, in
  JSON), or the value itself for ``i = 0`` when it is not a list;
* ``link(text, i)`` — the ``i``-th web address written in ``text``;
* ``asks_for(request, effect)`` — the request's own words ask for an effect of that class;
* ``delegates(request)`` — the request tells the agent to carry out instructions kept elsewhere;
* ``criterion(request)`` — the selection the request describes instead of naming a record
  ("the largest file": ``largest``), and ``selected(listing, criterion)`` — the id of the record
  of a listing that the criterion selects;
* ``name_word(text, i)`` — the ``i``-th capitalized word of ``text`` after its first word (the
  names a title mentions);
* ``card_number(text)`` — ``text`` contains a payment card number (16 digits passing the Luhn
  check, grouped or not).

The keyword tables are English and deliberately coarse: they decide whether the user asked for a
kind of effect at all, never which target or destination is right (arguments are checked by
provenance in the policy).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import policyc

# Fields of AgentDojo records whose values are free text anyone may have written (a message's
# body, a file's content, an event's description): a value found there is not a record value.
FREE_TEXT_FIELDS = frozenset(
    {"body", "content", "subject", "description", "title", "text", "message", "summary", "notes", "reviews"}
)

EFFECT_WORDS = {
    "payment": r"\bpa(y|id|ys|ying|yment|yments)\b|\btransfer|\brefund|\bmoney\b|\btransactions?\b"
    r"|\bsend (them |him |her |it )?(back|the difference)|\bdifference\b|\brent\b",
    "credential": r"\bpassword\b",
    "profile": r"\baddress\b|\baccount information\b|\bprofile\b|\buser info",
    "message": r"\b(send|sent|message|messages|tell|write|e-?mail|reply|inform|notify|dm|post|let \w+ know)\b",
    "membership": r"\b(invite|add)\b",
    "removal": r"\b(remove|kick)\b",
    "publish": r"\b(post|publish)\b",
    "calendar": r"\b(event|calendar|meeting|appointment|reminder|remind)\b|\b(re)?schedul",
    "cancellation": r"\bcancel",
    "deletion": r"\b(delete|remove)\b",
    "booking": r"\b(book|reserve|reservation)",
    "file_write": r"\b(file|document|list|append|create|write)\b",
    "sharing": r"\bshare\b",
}

DELEGATION = re.compile(
    r"\b(follow|do|complete|execute|carry out|perform)\b[^.]*\b(instructions?|tasks?|actions?|todos?|to-?do)\b",
    re.IGNORECASE,
)
URL = re.compile(
    r"(?:https?://|www\.)[^\s'\"<>()\[\]{},]+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|ai)\b[^\s'\"<>()\[\]{},]*",
    re.IGNORECASE,
)


WEB_PREFIX = re.compile(r"\bhttps?://|(?<![\w@.-])www\.", re.IGNORECASE)


def _normal(value: str) -> str:
    """A value as compared: lower case; web addresses without scheme, ``www.`` or final ``/``."""
    lowered = value.strip().lower()
    if lowered.startswith(("http://", "https://", "www.")):
        lowered = re.sub(r"^https?://", "", lowered)
        lowered = lowered.removeprefix("www.").rstrip("/")
    return lowered


@policyc.functor()
def mentions(text: str, value: str) -> bool:
    needle = _normal(value)
    if not needle:
        return False
    text = WEB_PREFIX.sub("", text)
    # whole token: not inside a longer address, number or path; a full stop ends it when a
    # sentence follows ("... www.example.com.Then")
    pattern = rf"(?<![\w@.+-]){re.escape(needle)}(?![\w@+-]|(?-i:\.[a-z0-9])|/\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


@lru_cache(maxsize=4096)
def _record_values(text: str) -> frozenset[str]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return frozenset()
    found: set[str] = set()

    def walk(node: Any, field: str | None) -> None:
        if field in FREE_TEXT_FIELDS:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if field is not None:  # keys of a nested mapping are values (shared_with: {address: rw})
                    found.add(_normal(str(key)))
                walk(value, str(key).lower())
        elif isinstance(node, list):
            for element in node:
                walk(element, field)
        elif isinstance(node, str | int | float) and not isinstance(node, bool) and node is not None:
            if isinstance(node, str) and "\n" in node.strip() and field is not None:
                return  # a multi-line string in a field is prose, whatever the field
            found.add(_normal(str(node)))

    if isinstance(data, dict | list):
        walk(data, None)
    return frozenset(found)


@policyc.functor()
def in_record(text: str, value: str) -> bool:
    return _normal(value) in _record_values(text)


@policyc.functor()
def item(value: Any, i: int) -> str | None:
    if isinstance(value, str) and value.startswith("["):
        try:
            elements = json.loads(value)
        except ValueError:
            elements = None
        if isinstance(elements, list):
            if not 0 <= i < len(elements):
                return None
            element = elements[i]
            if isinstance(element, str | int | float) and not isinstance(element, bool):
                return str(element)
            return json.dumps(element, sort_keys=True)  # checked whole: it anchors nothing
    if i == 0 and value is not None and value != "":
        return value if isinstance(value, str) else str(value)
    return None


@policyc.functor()
def link(text: str, i: int) -> str | None:
    found = URL.findall(text)
    return found[i].rstrip(".!?;:") if 0 <= i < len(found) else None


@policyc.functor()
def asks_for(request: str, effect: str) -> bool:
    pattern = EFFECT_WORDS.get(effect)
    return pattern is not None and re.search(pattern, request, re.IGNORECASE) is not None


@policyc.functor()
def delegates(request: str) -> bool:
    return DELEGATION.search(request) is not None


CRITERIA = {
    "largest": ("size", max),
    "biggest": ("size", max),
    "smallest": ("size", min),
    "newest": ("date", max),
    "latest": ("date", max),
    "most recent": ("date", max),
    "oldest": ("date", min),
}
DATE_FIELDS = ("last_modified", "timestamp", "start_time", "date")


@policyc.functor()
def criterion(request: str) -> str | None:
    lowered = request.lower()
    for word in CRITERIA:
        if re.search(rf"\b{word}\b", lowered):
            return word
    return None


@lru_cache(maxsize=1024)
def _listing(text: str) -> tuple[dict[str, Any], ...]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return ()
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return ()
    return tuple(r for r in data if isinstance(r, dict) and ("id_" in r or "id" in r))


@policyc.functor()
def selected(listing: str, chosen_by: str) -> str | None:
    field, pick = CRITERIA.get(chosen_by, (None, None))
    if field is None or pick is None:
        return None
    fields = ("size",) if field == "size" else DATE_FIELDS
    records = []
    for record in _listing(listing):
        key = next((f for f in fields if f in record and record[f] is not None), None)
        if key is not None:
            records.append((str(record[key]) if field == "date" else record[key], record))
    try:
        best = pick(records, key=lambda pair: pair[0]) if records else None
    except TypeError:  # values that do not compare
        return None
    if best is None:
        return None
    return str(best[1].get("id_", best[1].get("id")))


NAME = re.compile(r"\b[A-Z][\w'-]*")


@policyc.functor()
def name_word(text: str, i: int) -> str | None:
    words = NAME.findall(text)
    first = re.match(r"\s*[\w'-]+", text)
    if words and first and words[0] == first.group(0).strip():
        words = words[1:]
    return words[i] if 0 <= i < len(words) else None


CARD = re.compile(r"(?<!\d)(?:\d{4}[ -]?){3}\d{4}(?!\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for n, d in enumerate(reversed(digits)):
        value = int(d) * (2 if n % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


@policyc.functor()
def card_number(text: str) -> bool:
    return any(_luhn(re.sub(r"\D", "", m)) for m in CARD.findall(text))
