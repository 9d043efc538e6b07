"""Event records to facts of the `events` vocabulary (``events.dl``), and the functors that
answer from events' payloads.

An event record is a dict::

    {"id": "e3", "kind": "tool_call", "tool": "send_email", "args": {"to": "a@b.c"},
     "text": "...", "of": "e2", "deps": ["e1", "e2"], "agent": "mailer", "labels": ["untrusted"]}

Only ``id`` and ``kind`` are required. ``deps`` lists the events ``id`` may depend on; when it
is absent the event depends on every earlier event of its session (an LLM saw its whole
history), and a tool result also on its call (``of``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

EVENT_ID = "EventId"  # the type of the attributes that hold event ids (events.dl)
MESSAGE_KINDS = {
    "user_message": "user",
    "assistant_message": "assistant",
    "system_message": "system",
    "agent_message": "agent",
}
FIELDS = {"id", "kind", "text", "tool", "args", "of", "deps", "agent", "labels", "role"}
# an argument's value is a JSON value: strings, finite numbers, booleans, null, and lists and
# objects (with string keys) of them, nested at most this deep; integers as long as JSON readers
# accept (Python's limit on converting integers to text)
MAX_DEPTH = 64
# a list argument longer than this has no `ToolArgList` fact (a record nests once per
# element); `ToolArgItem` has its every element
MAX_LIST = 200
_INT_LIMIT = 10 ** (getattr(sys.int_info, "default_max_str_digits", 4300) or 4300)


class EventError(ValueError):
    """An event record that cannot be recorded; the message says what is wrong with it."""


def value_text(value: Any) -> str:
    """An argument's value as text: strings as they are, numbers in decimal, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def cons_list(values: list[Any]) -> tuple:
    """A list argument as the record ``ToolArgList`` holds: a cons-list of its elements'
    texts, ``nil`` (the empty tuple) at its end.

    >>> cons_list(["a", 2])
    ('a', ('2', ()))
    """
    out: tuple = ()
    for value in reversed(values):
        out = (value_text(value), out)
    return out


def policy_value(value: Any) -> Any:
    """An argument's value as `tool_arg` gives it: strings and numbers as they are."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return value
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def check_event(event: Any, known: Mapping[str, Any]) -> dict[str, Any]:
    """The event, checked against the session so far (:class:`EventError` if malformed).

    Plain well-formed events are recognized in one pass over their fields; anything else
    (other types, and every problem) goes to :func:`_check`, which says what is wrong.
    """
    if type(event) is not dict:
        return _check(event, known)
    identifier = event.get("id")
    kind = event.get("kind")
    if (
        type(identifier) is not str
        or not identifier
        or identifier in known
        or type(kind) is not str
        or not kind
    ):
        return _check(event, known)
    if not FIELDS.issuperset(event):
        return _check(event, known)
    for field, value in event.items():
        if value is None or field in _REQUIRED:
            continue
        if field == "deps":
            if type(value) is not list:
                return _check(event, known)
            for d in value:
                if type(d) is not str or d not in known:
                    return _check(event, known)
        elif field == "labels":
            if type(value) is not list:
                return _check(event, known)
            for label in value:
                if type(label) is not str:
                    return _check(event, known)
        elif field == "args":
            if type(value) is not dict:
                return _check(event, known)
            for v in value.values():
                t = type(v)
                if t is str or t is bool:
                    continue
                if t is int:
                    if -_INT_LIMIT < v < _INT_LIMIT:
                        continue
                elif t is float:
                    if math.isfinite(v):
                        continue
                return _check(event, known)
        elif type(value) is not str:
            return _check(event, known)
    if kind == "tool_call" and not event.get("tool"):
        return _check(event, known)
    of = event.get("of")
    if of is not None and of not in known:
        return _check(event, known)
    return _complete(event, known)


def _complete(event: dict[str, Any], known: Mapping[str, Any]) -> dict[str, Any]:
    """A tool result that does not name its tool has its call's."""
    of = event.get("of")
    if of is not None and not event.get("tool") and event["kind"] == "tool_result":
        tool = known[of].get("tool")
        if tool:
            return {**event, "tool": tool}
    return event


_REQUIRED = frozenset({"id", "kind"})


def _check(event: Any, known: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise EventError(f"an event is a JSON object, not {type(event).__name__}")
    identifier = event.get("id")
    where = f"event {identifier!r}" if isinstance(identifier, str) else "an event"
    if not isinstance(identifier, str) or not identifier:
        raise EventError(f"{where} has no `id` (a non-empty string)")
    if identifier in known:
        raise EventError(f"{where} was already recorded")
    kind = event.get("kind")
    if not isinstance(kind, str) or not kind:
        raise EventError(f"{where} has no `kind` (a non-empty string)")
    unknown = set(event) - FIELDS
    if unknown:
        raise EventError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
    for field in ("text", "tool", "of", "agent", "role"):
        if field in event and event[field] is not None and not isinstance(event[field], str):
            raise EventError(f"{where}: `{field}` must be a string")
    if kind == "tool_call" and not event.get("tool"):
        raise EventError(f"{where} is a tool call without a `tool`")
    args = event.get("args")
    if args is not None:
        if not isinstance(args, dict):
            raise EventError(f"{where}: `args` must be an object")
        for name, value in args.items():
            problem = value_problem(value)
            if not isinstance(name, str):
                problem = f"the argument name {name!r} is not a string"
            if problem is not None:
                raise EventError(f"{where}: argument `{name}`: {problem}")
    if event.get("of") is not None and event["of"] not in known:
        raise EventError(f"{where}: `of` names `{event['of']}`, which was not recorded")
    deps = event.get("deps")
    if deps is not None:
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise EventError(f"{where}: `deps` must be a list of event ids")
        missing = [d for d in deps if d not in known]
        if missing:
            raise EventError(f"{where} depends on events that were not recorded: {', '.join(missing)}")
    labels = event.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)):
        raise EventError(f"{where}: `labels` must be a list of strings")
    return _complete(event, known)


def value_problem(value: Any) -> str | None:
    """What keeps a value from being an argument's value (None: it is a JSON value).

    >>> value_problem({"to": ["a@b.c"], "n": 2.5}) is None
    True
    >>> value_problem([1, float("nan")])
    '[1]: not a finite number (nan)'
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        at = f"{path}: " if path else ""
        t = type(item)
        if item is None or t is str or t is bool:
            continue
        if t is int:
            if not -_INT_LIMIT < item < _INT_LIMIT:
                return f"{at}an integer of more than {len(str(_INT_LIMIT)) - 1:,} digits"
            continue
        if t is float:
            if not math.isfinite(item):
                return f"{at}not a finite number ({item!r})"
            continue
        if t is list or t is dict:
            if depth >= MAX_DEPTH:
                return f"{at}nested more than {MAX_DEPTH} levels deep"
            if t is list:
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
            else:
                for k, v in item.items():
                    if type(k) is not str:
                        return f"{at}the key {k!r} is not a string"
                    stack.append((v, f"{path}.{k}" if path else k, depth + 1))
            continue
        return f"{at}a {t.__name__} is not a JSON value (strings, numbers, booleans, null, lists, objects)"
    return None


RELATIONS = (
    "Event",
    "Position",
    "DependsOn",
    "Message",
    "Text",
    "Agent",
    "Label",
    "Action",
    "ToolCall",
    "ToolArg",
    "ToolResult",
)
# the relations of `.import lists` the events fill too: only when asked for by name (`wanted`),
# since a policy of the events vocabulary alone has no such relations
LIST_RELATIONS = ("ToolArgList", "ToolArgItem")
_EVERY = {name: name for name in RELATIONS}


def event_facts(
    event: dict[str, Any],
    position: int,
    earlier: Sequence[str],
    wanted: Mapping[str, Hashable] | None = None,
    implicit: bool = False,
) -> dict[Hashable, set[tuple]]:
    """The facts one (checked) event adds to its session, per relation name (those of
    :data:`RELATIONS`). With ``wanted`` (names to keys), only the facts of the relations it
    names, under their keys (:data:`LIST_RELATIONS` too). With
    ``implicit``, an event without ``deps`` gives no ``DependsOn`` facts: the session keeps that
    it depends on every earlier event (``earlier``) in its order (:mod:`policyc.runtime.prefix`).

    >>> event_facts({"id": "c1", "kind": "tool_call", "tool": "t", "deps": ["u1"]}, 1, ["u1"], {"DependsOn": 3})
    {3: {('c1', 'u1')}}
    >>> event_facts({"id": "c1", "kind": "tool_call", "tool": "t"}, 1, ["u1"], {"DependsOn": 3}, implicit=True)
    {3: set()}
    """
    key = (_EVERY if wanted is None else wanted).get
    e = event["id"]
    kind = event["kind"]
    facts: dict[Hashable, set[tuple]] = {}
    if (to := key("Event")) is not None:
        facts[to] = {(e, kind)}
    if (to := key("Position")) is not None:
        facts[to] = {(e, position)}
    if (to := key("DependsOn")) is not None:
        deps = event.get("deps")
        rows = set()
        if deps is not None or not implicit:
            for d in earlier if deps is None else deps:
                rows.add((e, d))
            of = event.get("of")
            if of is not None:
                rows.add((e, of))  # (an earlier event: implied when the dependency is implicit)
            rows.discard((e, e))
        facts[to] = rows
    role = event.get("role")
    if (role or kind in MESSAGE_KINDS) and (to := key("Message")) is not None:
        facts[to] = {(e, role or MESSAGE_KINDS[kind])}
    if (text := event.get("text")) is not None and (to := key("Text")) is not None:
        facts[to] = {(e, text)}
    if (agent := event.get("agent")) is not None and (to := key("Agent")) is not None:
        facts[to] = {(e, agent)}
    if (labels := event.get("labels")) and (to := key("Label")) is not None:
        facts[to] = {(e, label) for label in labels}
    if kind == "tool_call":
        if (to := key("Action")) is not None:
            facts[to] = {(e,)}
        if (to := key("ToolCall")) is not None:
            facts[to] = {(e, event["tool"])}
        if (to := key("ToolArg")) is not None:
            args = event.get("args") or {}
            facts[to] = {(e, name, value_text(v)) for name, v in args.items() if v is not None}
        lists = {name: v for name, v in (event.get("args") or {}).items() if type(v) is list}
        if (to := key("ToolArgList")) is not None:
            facts[to] = {(e, name, cons_list(v)) for name, v in lists.items() if len(v) <= MAX_LIST}
        if (to := key("ToolArgItem")) is not None:
            facts[to] = {(e, name, i, value_text(x)) for name, v in lists.items() for i, x in enumerate(v)}
    elif (
        kind == "tool_result"
        and (of := event.get("of")) is not None
        and (to := key("ToolResult")) is not None
    ):
        facts[to] = {(e, of, event.get("tool") or "")}
    return facts


def session_functors(
    events: dict[str, dict[str, Any]], declared: Mapping[tuple[str, str], str] | None = None
) -> dict[str, Callable[..., Any]]:
    """The event functors, answering from a session's recorded events. ``declared`` maps a
    tool's argument declared a number (``.arg``) to its type: ``tool_arg`` gives an integral
    float of a ``number`` or ``unsigned`` argument as the integer, an integer of a ``float``
    argument as the float (the monitor refuses any other value before a rule reads it)."""

    def is_tool(a: str, name: str) -> bool:
        event = events.get(a)
        return event is not None and event.get("kind") == "tool_call" and event.get("tool") == name

    def tool_name(a: str) -> str | None:
        event = events.get(a)
        return event.get("tool") if event is not None and event.get("kind") == "tool_call" else None

    def tool_arg(a: str, key: str) -> Any:
        event = events.get(a)
        if event is None:
            return None
        value: Any = (event.get("args") or {}).get(key)
        if declared and type(value) in (int, float):
            wanted = declared.get((event.get("tool"), key))  # type: ignore[arg-type]
            if wanted == "float" and type(value) is int:
                value = float(value)
            elif wanted in ("number", "unsigned") and type(value) is float and value.is_integer():
                value = int(value)
        return policy_value(value)

    def text_of(e: str) -> str:
        event = events.get(e)
        return (event.get("text") or "") if event is not None else ""

    return {"is_tool": is_tool, "tool_name": tool_name, "tool_arg": tool_arg, "text_of": text_of}


SESSION_FUNCTORS = ("is_tool", "tool_name", "tool_arg", "text_of")
