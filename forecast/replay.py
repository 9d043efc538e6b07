"""Replaying recorded sessions with a forecast: the probability of staying safe at every step,
the warnings, and how far ahead of the violation they came.

A session **reaches the violation** at the first step where the model's unsafe predicate holds.
A **warning** is a step, before that, where the probability of staying safe is below the
threshold; the **lead time** is the number of events from the first warning to the violation.
A warning in a session that never reaches the violation is a **false alarm**. A session that
fails (a malformed event, a failing functor) has unknown predicates from then on: it is counted
apart, neither safe nor violating.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from .errors import ForecastError
from .monitor import BoundForecaster
from .traces import play, sessions


@dataclass(frozen=True)
class StepForecast:
    event: str | None
    tool: str | None
    safe: float
    unsafe_now: bool
    known: bool
    warned: bool
    denied: bool | None
    rules: tuple[str, ...]
    error: str | None = None  # the session failed: its predicates are unknown

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "tool": self.tool,
            "safe": self.safe,
            "unsafe_now": self.unsafe_now,
            "known": self.known,
            "warned": self.warned,
            "denied": self.denied,
            "rules": list(self.rules),
            "error": self.error,
        }


@dataclass(frozen=True)
class SessionForecast:
    name: str
    steps: tuple[StepForecast, ...]

    @property
    def failed(self) -> bool:
        return any(s.error is not None for s in self.steps)

    @property
    def violation(self) -> int | None:
        return next((i for i, s in enumerate(self.steps) if s.unsafe_now), None)

    @property
    def first_warning(self) -> int | None:
        last = self.violation if self.violation is not None else len(self.steps)
        return next((i for i, s in enumerate(self.steps[:last]) if s.warned), None)

    @property
    def lead(self) -> int | None:
        """Events from the first warning to the violation (None without both)."""
        if self.violation is None or self.first_warning is None:
            return None
        return self.violation - self.first_warning

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.name,
            "violation": self.violation,
            "first_warning": self.first_warning,
            "lead": self.lead,
            "steps": [s.to_json() for s in self.steps],
        }


def replay(forecaster: BoundForecaster, paths: list[str]) -> list[SessionForecast]:
    """Every session of the trace files with its forecasts (the decisions are the policy's own;
    :class:`ForecastError` when the files hold no session)."""
    monitor = forecaster.abstraction.monitor
    found = []
    for path in paths:
        for name, number, record in sessions(path):
            steps = []
            for session, played in play(monitor, record, name, f"{path}:{number}"):
                forecast = forecaster.forecast(session)
                steps.append(
                    StepForecast(
                        played.event,
                        played.tool,
                        forecast.safe,
                        forecast.unsafe_now,
                        forecast.known,
                        forecast.below,
                        played.denied,
                        played.rules,
                        forecast.error,
                    )
                )
            found.append(SessionForecast(name, tuple(steps)))
    if not found:
        raise ForecastError("no recorded sessions to replay")
    return found


def summary(reports: list[SessionForecast], threshold: float) -> dict[str, Any]:
    violating = [r for r in reports if r.violation is not None]
    leads = [r.lead for r in violating if r.lead is not None]
    safe = [r for r in reports if r.violation is None and not r.failed]
    return {
        "threshold": threshold,
        "sessions": len(reports),
        "violations": len(violating),
        "warned_ahead": len(leads),
        "missed": len(violating) - len(leads),
        "lead": {
            "min": min(leads) if leads else None,
            "median": statistics.median(leads) if leads else None,
            "mean": round(statistics.fmean(leads), 2) if leads else None,
            "max": max(leads) if leads else None,
        },
        "safe_sessions": len(safe),
        "false_alarms": sum(1 for r in safe if r.first_warning is not None),
        "failed": sum(1 for r in reports if r.failed and r.violation is None),
    }


def summary_text(found: dict[str, Any], unsafe: str) -> str:
    lead = found["lead"]
    count = found["sessions"]
    parts = [f"{count} session{'s' * (count != 1)}, threshold {found['threshold']:.2f}"]
    if found["violations"]:
        ahead = f"{found['warned_ahead']} of {found['violations']} reaching `{unsafe}` warned ahead"
        if found["warned_ahead"]:
            ahead += (
                f" (lead: median {lead['median']:g}, mean {lead['mean']:g}, "
                f"min {lead['min']}, max {lead['max']} events)"
            )
        parts.append(ahead)
    else:
        parts.append(f"none reached `{unsafe}`")
    parts.append(
        f"{found['false_alarms']} false alarm{'s' * (found['false_alarms'] != 1)} in {found['safe_sessions']} safe"
    )
    if found["failed"]:
        parts.append(f"{found['failed']} failed before reaching `{unsafe}` (their predicates are unknown)")
    return "; ".join(parts)
