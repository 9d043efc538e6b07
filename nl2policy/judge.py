"""The judge: an independent reading of the policy document at each decision point.

The judge gets the requirements document as written (not the normalized requirements, so that
a normalization error does not reach it), the session up to the call rendered as plain text,
the deployment's facts with what each relation means, and the call. It answers ``allow``,
``deny`` or ``unclear`` with a reason. Where its verdict differs from the policy's, the point is
a disagreement, reported with its scenario.

The session is rendered one event per line, oldest first::

    [u1] user: "Please cancel ZFA04Y. Yes."
    [g1] tool call get_reservation_details {"reservation_id": "ZFA04Y"}
    [r1] tool result of [g1] from get_reservation_details: "{\\"cabin\\": \\"business\\"}"

texts and arguments as JSON (one line each); an event that may depend on only some earlier
events says which (``(saw only: u1, r1)``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import problems as P
from .answers import AnswerError, ask_json, field, optional
from .client import Chat
from .decisions import DecisionPoint
from .templates import block, messages
from .vocabulary import Vocabulary

STEP = "judge"
VERDICTS = {
    "allow": "allow",
    "allowed": "allow",
    "permit": "allow",
    "permitted": "allow",
    "deny": "deny",
    "denied": "deny",
    "block": "deny",
    "blocked": "deny",
    "forbid": "deny",
    "forbidden": "deny",
    "unclear": "unclear",
    "unknown": "unclear",
    "unsure": "unclear",
}


@dataclass(frozen=True)
class Judgment:
    point: DecisionPoint
    verdict: str | None  # "allow", "deny", "unclear", or None when the judge gave no usable answer
    reason: str

    @property
    def agrees(self) -> bool | None:
        if self.verdict not in ("allow", "deny"):
            return None
        return (self.verdict == "allow") == self.point.allowed

    def to_json(self) -> dict[str, Any]:
        out = self.point.to_json()
        out["judge"] = {"verdict": self.verdict, "reason": self.reason}
        out["agrees"] = self.agrees
        return out


def render_session(point: DecisionPoint) -> tuple[str, str]:
    """The session before the call, and the call, as the judge reads them."""
    events = [e for e in point.record.get("events", []) if isinstance(e, dict)]
    call = events[-1] if events and events[-1].get("id") == str(point.action) else None
    before = events[:-1] if call is not None else events
    lines = []
    seen: list[str] = []
    for event in before:
        lines.append(render_event(event, seen))
        seen.append(str(event.get("id")))
    if call is not None:
        decided = render_event(call, seen)
    else:
        decided = f"the action {json.dumps(point.action)}"
    return "\n".join(lines) or "(no events)", decided


def render_event(event: dict[str, Any], earlier: list[str]) -> str:
    ident = event.get("id")
    kind = event.get("kind")
    text = event.get("text")
    said = f": {json.dumps(text, ensure_ascii=False)}" if text is not None else ""
    if kind == "tool_call":
        args = json.dumps(event.get("args") or {}, ensure_ascii=False, sort_keys=True)
        line = f"[{ident}] tool call {event.get('tool')} {args}"
    elif kind == "tool_result":
        source = f" of [{event['of']}]" if event.get("of") else ""
        tool = f" from {event['tool']}" if event.get("tool") else ""
        line = f"[{ident}] tool result{source}{tool}{said}"
    elif isinstance(kind, str) and kind.endswith("_message"):
        line = f"[{ident}] {kind[: -len('_message')]}{said}"
    elif kind == "message" and event.get("role"):
        line = f"[{ident}] {event['role']}{said}"
    else:
        line = f"[{ident}] event of kind {json.dumps(kind)}{said}"
    extra = []
    if event.get("agent"):
        extra.append(f"agent: {event['agent']}")
    if event.get("labels"):
        extra.append("labels: " + ", ".join(map(str, event["labels"])))
    deps = event.get("deps")
    answered = kind == "tool_result" and event.get("of") and not deps  # a result depends on its call
    if isinstance(deps, list) and [str(d) for d in deps] != earlier and not answered:
        extra.append("saw only: " + (", ".join(map(str, deps)) if deps else "nothing earlier"))
    return line + (f" ({'; '.join(extra)})" if extra else "")


def render_facts(point: DecisionPoint, vocabulary: Vocabulary) -> str:
    from policyc.runtime.values import render_fact

    lines = []
    record = point.record
    if record.get("principal"):
        lines.append(f"The session acts for the principal {json.dumps(record['principal'])}.")
    if record.get("roles"):
        lines.append("The principal's roles: " + ", ".join(map(str, record["roles"])) + ".")
    for name, rows in sorted((record.get("facts") or {}).items()):
        doc = vocabulary.doc(name)
        for row in rows:
            lines.append(f"{render_fact(name, tuple(row))}" + (f" — {doc}" if doc else ""))
    for name, rows in sorted((point.functors or {}).items()):
        doc = vocabulary.doc(name)
        for row in rows:
            call = f"{name}({', '.join(json.dumps(v) for v in row[:-1])})"
            value = row[-1]
            lines.append(
                (call if value is True else f"{call} = {json.dumps(value)}") + (f" — {doc}" if doc else "")
            )
    return "\n".join(lines)


def judge_point(
    chat: Chat, document: str, vocabulary: Vocabulary, point: DecisionPoint
) -> tuple[Judgment, list[P.Problem]]:
    session, call = render_session(point)
    blocks = [block("policy", document), block("session", session)]
    facts = render_facts(point, vocabulary)
    if facts:
        blocks.append(block("facts", facts))
    blocks.append(block("call", call))
    answer, found = ask_json(chat, STEP, point.id, messages(STEP, *blocks), _shape)
    problems = list(found)
    if answer is None:
        return Judgment(point, None, ""), problems
    verdict, reason = answer
    judgment = Judgment(point, verdict, reason)
    if verdict == "unclear":
        problems.append(P.JUDGE_UNCLEAR(STEP, f"the judge could not decide: {reason}", point.id))
    elif not judgment.agrees:
        policy = (
            "allows"
            if point.allowed
            else "denies" + (f" ({', '.join(point.reasons)})" if point.reasons else "")
        )
        where = f"; {point.path.description}" if point.path is not None else ""
        problems.append(
            P.JUDGE_DISAGREEMENT(
                STEP,
                f"the policy {policy} and the judge says {verdict}: {reason}{where}",
                f"{point.origin} {point.id}",
            )
        )
    return judgment, problems


def _shape(value: Any) -> tuple[str, str]:
    said = field(value, "verdict", str).strip().lower()
    if said not in VERDICTS:
        raise AnswerError(f'`verdict` is {said!r}; it must be "allow", "deny" or "unclear"')
    return VERDICTS[said], optional(value, "reason", str, "").strip()
