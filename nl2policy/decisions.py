"""Decision points and the translated policy's verdict at each.

A decision point is a session up to a tool call (a ``policyc replay`` record whose last event
is the call being decided), or, for a policy that does not use the event vocabulary, domain
facts and an action. **Recorded** points come from ``--traces``: every tool call of every
session, decided where it was made, as ``policyc replay`` decides it. **Synthesized** points
come from :mod:`~policyc.nl2policy.scenarios`, decided by a monitor replaying the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import problems as P
from .scenarios import Path, Scenario

STEP = "judge"


@dataclass(frozen=True)
class DecisionPoint:
    id: str
    origin: str  # "recorded" or "synthesized"
    record: dict[str, Any]  # the session up to the call (the call last), or facts and `action`
    action: Any
    allowed: bool
    errored: bool
    reasons: tuple[str, ...]  # the ids of the rules that denied
    path: Path | None = None
    functors: dict[str, list[list[Any]]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "origin": self.origin,
            "action": self.action,
            "policy": {"allowed": self.allowed, "errored": self.errored, "reasons": list(self.reasons)},
        }
        if self.path is not None:
            out["path"] = self.path.to_json()
        out["scenario"] = self.record
        if self.functors:
            out["functors"] = self.functors
        return out


def read_traces(path: str) -> list[dict[str, Any]]:
    """The sessions of a traces file or archive (as `policyc replay` reads them), each named
    (``OSError`` if unreadable, ``TraceError`` at the first line that is not a session)."""
    from policyc.replay.archive import sessions as archived

    sessions = []
    for name, _, _, record in archived([path]):
        record.setdefault("session", name)
        sessions.append(record)
    return sessions


def recorded(policy: Any, sessions: list[dict[str, Any]]) -> tuple[list[DecisionPoint], list[P.Problem]]:
    """Every tool call of every recorded session, with the policy's verdict where it was made."""
    from policyc.runtime.replay import replay_session
    from policyc.runtime.session import Monitor

    monitor = Monitor(policy)
    points: list[DecisionPoint] = []
    found: list[P.Problem] = []
    for record in sessions:
        name = str(record["session"])
        replayed = replay_session(monitor, record, name)
        calls = [
            i for i, e in enumerate(record["events"]) if isinstance(e, dict) and e.get("kind") == "tool_call"
        ]
        for index, decision in zip(calls, replayed["decisions"], strict=True):
            prefix = {k: v for k, v in record.items() if k in ("session", "principal", "roles", "facts")}
            prefix["events"] = record["events"][: index + 1]
            reasons = tuple(r["rule"] for r in decision["reasons"])
            if decision["errored"]:
                found.append(
                    P.TRACE_PROBLEM(
                        STEP,
                        "the decision failed closed: "
                        + "; ".join(str(r.get("message") or r["rule"]) for r in decision["reasons"]),
                        f"{name}/{decision['event']}",
                    )
                )
            points.append(
                DecisionPoint(
                    f"{name}/{decision['event']}",
                    "recorded",
                    prefix,
                    decision["event"],
                    decision["allowed"],
                    decision["errored"],
                    reasons,
                )
            )
    return points, found


def synthesized(plan: Any, scenarios: list[Scenario], uses_events: bool) -> list[DecisionPoint]:
    """The policy's verdict on each scenario, from a monitor (or an evaluation) replaying it."""
    from policyc.analyzer.sessions import replayed, session_tables
    from policyc.runtime.policy import Policy

    shared: Any = None
    functors = [(spec.name, spec.returns == "bool") for spec in plan.functors]
    points = []
    for scenario in scenarios:
        if scenario.functors:
            policy = Policy(plan, session_tables(functors, scenario.functors))
        else:
            shared = shared or Policy(plan, session_tables(functors, {}))
            policy = shared
        decision = replayed(policy, scenario.record, scenario.action, uses_events)
        points.append(
            DecisionPoint(
                str(scenario.record["session"]),
                "synthesized",
                scenario.record,
                scenario.action,
                decision.allowed,
                decision.errored,
                tuple(r.rule for r in decision.reasons),
                scenario.path,
                scenario.functors or None,
            )
        )
    return points
