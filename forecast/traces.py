"""Recorded sessions, replayed through a monitor and abstracted step by step.

Trace files are the JSON Lines files ``policyc replay`` reads: one session per line, an object
with an ``events`` list and optionally ``session``, ``principal``, ``roles`` and ``facts``. Each
session is replayed through a fresh monitor session: a tool call is decided where it was made
(``authorize``), any other event recorded; after each event the step is abstracted
(:class:`~.abstraction.Abstraction`). A malformed line, a malformed event or a failing
predicate is an error that names the file, the line and the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .abstraction import Abstraction
from .errors import ForecastError


@dataclass(frozen=True)
class Step:
    """One step of a recorded session: the event (None before the first), the predicates'
    values, whether the unsafe predicate holds, and the monitor's verdict on a tool call."""

    event: str | None
    tool: str | None
    values: tuple[bool, ...]
    unsafe: bool
    denied: bool | None = None
    rules: tuple[str, ...] = ()  # the deny rules that fired for a denied tool call


@dataclass(frozen=True)
class Trace:
    name: str
    where: str  # file:line
    steps: tuple[Step, ...]  # every event of the session, the initial step first

    @property
    def violation(self) -> int | None:
        """The index of the first step where the unsafe predicate holds."""
        return next((i for i, s in enumerate(self.steps) if s.unsafe), None)

    def learned(self) -> tuple[Step, ...]:
        """The steps the chain learns from: up to the first unsafe step (reaching it is all
        that counts)."""
        first = self.violation
        return self.steps if first is None else self.steps[: first + 1]


def sessions(path: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The sessions of a trace file or archive (a folder, gzip or zstd files: read as `policyc
    replay` reads them): a name, the line, the record."""
    from policyc.replay.archive import sessions as archived
    from policyc.runtime.replay import TraceError

    try:
        for name, _, line, record in archived([path]):
            yield name, line, record
    except OSError as error:
        raise OSError(f"cannot read `{path}`: {error.strerror or error}") from None
    except TraceError as error:
        raise ForecastError(str(error)) from None


@dataclass(frozen=True)
class Played:
    """A step of a replayed session: the event (None before the first) and, for a tool call, the
    monitor's verdict; ``where`` names it for messages."""

    event: str | None
    tool: str | None
    denied: bool | None
    rules: tuple[str, ...]
    where: str


def play(monitor: Any, record: dict[str, Any], name: str, where: str) -> Iterator[tuple[Any, Played]]:
    """Replay one recorded session through a fresh monitor session, yielding the session after
    each step: first as it starts, then after each event (a tool call decided where it was made)."""
    from policyc.compiler.reading import show

    roles = record.get("roles") or ()
    principal = record.get("principal")
    if not isinstance(roles, list | tuple):
        raise ForecastError(f"{where}: roles: expected a list of strings, got {show(roles)}")
    if principal is not None and not isinstance(principal, str):
        raise ForecastError(f"{where}: principal: expected a string, got {show(principal)}")
    from policyc.runtime.replay import steps

    refused = 0
    for step, (session, event, decision) in enumerate(steps(monitor, record, name)):
        if len(session.refusals) > refused:  # the trace holds an event the session refused: from
            session.sticky.extend(session.refusals[refused:])  # there on, it is not the run recorded
            refused = len(session.refusals)
        if step == 0:
            yield session, Played(None, None, None, (), f"{where}: at the start")
            continue
        identifier = event.get("id") if isinstance(event, dict) else None
        at = f"{where}: event {step}" + (f" (`{identifier}`)" if isinstance(identifier, str) else "")
        if decision is None:
            yield session, Played(identifier, None, None, (), at)
        else:
            rules = tuple(dict.fromkeys(r.rule for r in decision.reasons))
            yield session, Played(identifier, event.get("tool"), not decision.allowed, rules, at)


def replay(abstraction: Abstraction, record: dict[str, Any], name: str, where: str) -> Trace:
    """One recorded session, replayed and abstracted at every step."""
    steps = []
    for session, played in play(abstraction.monitor, record, name, where):
        try:
            observed = abstraction.observe(session)
        except ForecastError as error:
            raise ForecastError(f"{played.where}: {error}") from None
        steps.append(
            Step(played.event, played.tool, observed.values, observed.unsafe, played.denied, played.rules)
        )
    return Trace(name, where, tuple(steps))


def read(abstraction: Abstraction, paths: list[str]) -> list[Trace]:
    """Every session of the trace files, replayed and abstracted."""
    traces = []
    for path in paths:
        for name, number, record in sessions(path):
            traces.append(replay(abstraction, record, name, f"{path}:{number}"))
    return traces
