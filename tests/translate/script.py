"""Scripted answers for the chat server: which step a request belongs to, canned answers per
step, and a judge that answers by a reference policy.

A request's step is told by its system message, which is the step's prompt file as
`policyc.nl2policy.templates.prompt` reads it (a repair round is the translator's prompt with
the repair instructions in the last user message; a second try after a malformed answer ends
with "Your answer could not be used").

The reference judge reads what the judge is shown — the session one event per line, the facts,
the call — back into event records, replays them through a reference policy with a real
monitor, and answers that policy's verdict: a judge that "answers by the reference rule".
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from policyc.nl2policy.templates import STEPS, prompt

from .chat import Reply, Request

HERE = Path(__file__).resolve().parent
PROMPTS = {prompt(step): step for step in STEPS}


def step_of(request: Request) -> str:
    step = PROMPTS.get(request.system, "unknown")
    if request.user.startswith("Your answer could not be used"):
        return f"{step}-again"
    if step == "translate" and any(m["role"] == "assistant" for m in request.messages):
        return "repair"
    return step


def blocks(text: str) -> dict[str, str]:
    """The tagged blocks of a user message (`<tag>\\n...\\n</tag>`)."""
    found = {}
    for match in re.finditer(r"<(\w+)>\n(.*?)\n</\1>", text, re.DOTALL):
        found[match[1]] = match[2].replace(f"<\\/{match[1]}>", f"</{match[1]}>")
    return found


class Script:
    """Answers each request by its step's handler (a missing handler is a test failure: the
    server answers 500 with the reason, and the report shows it)."""

    def __init__(self, **handlers: Callable[[Request], Reply]) -> None:
        self.handlers = {name.replace("_", "-"): fn for name, fn in handlers.items()}
        self.steps: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        step = step_of(request)
        with self.lock:
            self.steps.append(step)
        if step not in self.handlers:
            raise LookupError(f"no scripted answer for step {step!r}")
        return self.handlers[step](request)


def translation(rules: str, not_expressible: list[dict[str, str]] | None = None) -> Reply:
    return Reply.json({"rules": rules, "not_expressible": not_expressible or []})


def fixture(*parts: str) -> str:
    return HERE.joinpath(*parts).read_text("utf-8")


def rule_id(request: Request) -> str:
    """The id of the rule a back-translation or comparison is about."""
    rule = blocks(request.user).get("rule", "")
    match = re.search(r"^id: (\S+)", rule, re.MULTILINE)
    return match[1] if match else ""


class BackTranslator:
    """Describes each rule from a table (rule id -> description) and compares by a set of the
    rules whose description differs from the requirement."""

    def __init__(self, descriptions: dict[str, str], different: dict[str, str] | None = None) -> None:
        self.descriptions = descriptions
        self.different = different or {}
        self.seen: list[str] = []

    def describe(self, request: Request) -> Reply:
        rid = rule_id(request)
        self.seen.append(rid)
        return Reply.json({"description": self.descriptions.get(rid, f"the rule {rid} denies some actions")})

    def compare(self, request: Request) -> Reply:
        description = blocks(request.user).get("description", "")
        for rid, difference in self.different.items():
            if description == self.descriptions.get(rid):
                return Reply.json({"verdict": "different", "difference": difference})
        return Reply.json({"verdict": "same", "difference": ""})


# ------------------------------------------------------------------ the reference judge

LINE = re.compile(r"^\[(?P<id>[^\]]+)\] (?P<rest>.*)$")


def _json_at(text: str, start: int) -> tuple[Any, int]:
    return json.JSONDecoder().raw_decode(text, start)


def _extras(rest: str) -> dict[str, Any]:
    """`(agent: x; labels: a, b; saw only: u1, r1)` at the end of an event line."""
    out: dict[str, Any] = {}
    rest = rest.strip()
    if not (rest.startswith("(") and rest.endswith(")")):
        return out
    for part in rest[1:-1].split("; "):
        key, _, value = part.partition(": ")
        if key == "agent":
            out["agent"] = value
        elif key == "labels":
            out["labels"] = value.split(", ")
        elif key == "saw only":
            out["deps"] = [] if value == "nothing earlier" else value.split(", ")
    return out


def parse_event(line: str) -> dict[str, Any]:
    """An event record from a line of the judge's session block (see nl2policy/judge.py)."""
    match = LINE.match(line)
    assert match, f"not an event line: {line!r}"
    event: dict[str, Any] = {"id": match["id"]}
    rest = match["rest"]
    if rest.startswith("tool call "):
        tool, _, after = rest[len("tool call ") :].partition(" ")
        args, end = _json_at(after, 0)
        event.update(kind="tool_call", tool=tool, args=args)
        event.update(_extras(after[end:]))
        return event
    if rest.startswith("tool result"):
        head = re.match(r"tool result(?: of \[([^\]]*)\])?(?: from ([^\s:]+))?", rest)
        assert head
        event["kind"] = "tool_result"
        if head[1]:
            event["of"] = head[1]
        if head[2]:
            event["tool"] = head[2]
        after = rest[head.end() :]
        if after.startswith(": "):
            event["text"], end = _json_at(after, 2)
            after = after[end:]
        event.update(_extras(after))
        return event
    kind_match = re.match(r'event of kind ("[^"]*")', rest)
    if kind_match:
        event["kind"] = json.loads(kind_match[1])
        after = rest[kind_match.end() :]
    else:
        role = re.match(r"\w+", rest)
        assert role, f"not an event line: {line!r}"
        after = rest[role.end() :]
        kind = f"{role[0]}_message"
        event["kind"] = kind if role[0] in ("user", "assistant", "system", "agent") else "message"
        if event["kind"] == "message":
            event["role"] = role[0]
    if after.startswith(": "):
        event["text"], end = _json_at(after, 2)
        after = after[end:]
    event.update(_extras(after))
    return event


class ReferenceJudge:
    """Answers the judge's question by replaying the session through a reference policy."""

    def __init__(self, policy: str | Path) -> None:
        import policyc

        self.policy = policyc.load(Path(policy))
        self.verdicts: list[tuple[list[dict[str, Any]], str]] = []
        self.lock = threading.Lock()

    def decide(self, request: Request) -> tuple[bool, list[str]]:
        import policyc
        from policyc.runtime.facts import parse_fact

        parts = blocks(request.user)
        events = [parse_event(line) for line in parts["session"].splitlines() if line != "(no events)"]
        facts: dict[str, list[list[Any]]] = {}
        for line in parts.get("facts", "").splitlines():
            text = line.split(" — ")[0]
            if text.startswith("The "):
                continue
            name, values = parse_fact(text)
            facts.setdefault(name, []).append(list(values))
        if parts["call"].startswith("the action "):  # a policy without the event vocabulary
            action = json.loads(parts["call"][len("the action ") :])
            decision = self.policy.evaluate(facts).decide(action)
            with self.lock:
                self.verdicts.append((events, "allow" if decision.allowed else "deny"))
            return decision.allowed, [r.rule for r in decision.reasons]
        call = parse_event(parts["call"])
        session = policyc.Monitor(self.policy).session("judged")
        if facts:
            session.add_facts(facts)
        for event in events:
            session.record(event)
        decision = session.authorize(call)
        with self.lock:
            self.verdicts.append(([*events, call], "allow" if decision.allowed else "deny"))
        return decision.allowed, [r.rule for r in decision.reasons]

    def __call__(self, request: Request) -> Reply:
        allowed, rules = self.decide(request)
        if allowed:
            return Reply.json({"verdict": "allow", "reason": "no rule of the policy forbids this call"})
        return Reply.json({"verdict": "deny", "reason": "the policy forbids it: " + ", ".join(rules)})
