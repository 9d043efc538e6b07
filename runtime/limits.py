"""Bounds on the work of one evaluation or one call of a monitor session, checked as it goes.

:class:`Limits` says how long a question may take (``max_seconds``) and how many facts it may
hold at once (``max_facts``). A :class:`Meter` enforces them for one evaluation. Generated code
reports to it (it is the ``E`` of :mod:`.codegen`): every loop it generates counts its
iterations down from :data:`TICK` in a local variable, and when the count reaches zero calls
``E.tick(*held)``, which raises :class:`LimitExceeded` when the time is up or the facts stored,
plus those waiting to be stored (the sets the code is filling, ``held``, and the ones the
evaluator registered as :attr:`Meter.pending`), are more than the limit. A generated function
that is called many times over few facts (a rule asked with its head given) also counts its
calls in ``E.calls``, so that work spread over many calls is checked as often.

The time limit applies to a *window*: :meth:`Meter.start` opens one (an evaluation, a session
recording an event or deciding an action), :meth:`Meter.stop` closes it; outside a window the
meter checks nothing (an explanation asked for later is not cut short). While a window is open
on a thread, the functor wrappers (:mod:`.functors`) see its deadline through :func:`window`:
a functor that returns after the deadline raises :class:`LimitExceeded` instead of giving a
value, so a late result never counts, whatever it would have decided.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any

_monotonic = time.monotonic
TICK = 256  # loop iterations between two checks: counted with small integers, which Python caches
# the most values one `range(a, b[, step])` may generate: more is an error of the evaluation
# (every decision on it a denial), not a loop that holds the decision up until the time limit
MAX_RANGE = 1_000_000


@dataclass(frozen=True)
class Limits:
    """Bounds on one evaluation; exceeding one makes the result errored (a denial).

    ``max_facts``: how many facts an evaluation (or a session) may hold, a positive integer;
    ``max_seconds``: how long one evaluation (or one session call) may take, a positive number
    of seconds, or ``None`` (or infinity) for no time limit. Anything else is a ``ValueError``.
    """

    max_facts: int = 10_000_000
    max_seconds: float | None = 60.0

    def __post_init__(self) -> None:
        facts = self.max_facts
        if isinstance(facts, bool) or not isinstance(facts, int) or facts < 1:
            raise ValueError(f"max_facts must be a positive integer, not {facts!r}")
        seconds = self.max_seconds
        if seconds is None:
            return
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"max_seconds must be a positive number of seconds or None, not {seconds!r}")
        if math.isnan(seconds) or seconds <= 0:
            raise ValueError(f"max_seconds must be a positive number of seconds or None, not {seconds!r}")

    def deadline(self) -> float | None:
        """When an evaluation starting now must stop (``time.monotonic``), if ever."""
        return None if self.max_seconds is None else time.monotonic() + self.max_seconds


class LimitExceeded(Exception):
    """A limit was hit: the evaluation (or the session call) stops, and fails closed."""


def seconds(value: float | None) -> str:
    return f"{value:g} s"


class _Windows(threading.local):
    def __init__(self) -> None:
        self.open: list[Meter] = []  # the meters with a window open on this thread, innermost last


_windows = _Windows()


def window() -> Meter | None:
    """The meter whose window is open on this thread, if any (the innermost)."""
    opened = _windows.open
    return opened[-1] if opened else None


class Meter:
    """The limits of one evaluation, checked as generated code runs (see the module docstring).

    ``facts()`` counts the facts the evaluation stores; ``arithmetic(op)`` records a division by
    zero (``E(op)`` in generated code) and returns what the failed expression is worth;
    ``functors``: whether the evaluation calls any (only then do the functor wrappers need to
    see its window)."""

    __slots__ = (
        "arithmetic",
        "calls",
        "deadline",
        "facts",
        "functors",
        "limits",
        "open",
        "opened",
        "pending",
        "seconds",
        "what",
    )

    def __init__(
        self,
        limits: Limits,
        facts: Callable[[], int],
        arithmetic: Callable[[str], Any],
        functors: bool = True,
    ) -> None:
        self.limits = limits
        self.functors = functors
        self.seconds = limits.max_seconds
        self.facts = facts
        self.arithmetic = arithmetic
        self.calls = TICK
        self.open = False
        self.deadline: float | None = None
        self.what = "evaluation"
        self.pending: tuple[Sized, ...] = ()  # sets of facts derived and not yet stored
        self.opened: list[Meter] = []  # the windows open on the thread of this meter's window

    def __call__(self, op: str) -> Any:
        return self.arithmetic(op)

    def start(self, deadline: float | None = None, what: str = "evaluation") -> bool:
        """Open a window ending at ``deadline`` (by default: the time limit from now), unless one
        is open (then the call is part of it); whether this call opened it."""
        if self.open:
            return False
        self.open = True
        if deadline is None and self.seconds is not None:
            deadline = _monotonic() + self.seconds
        self.deadline = deadline
        self.what = what
        if self.functors:
            opened = self.opened = _windows.open
            opened.append(self)
        return True

    def stop(self) -> None:
        """Close the window (only the call that opened it does)."""
        self.open = False
        if self.functors:
            self.opened.pop()

    def tick(self, *held: Sized) -> int:
        """Check the limits (raising :class:`LimitExceeded`); the count until the next check."""
        self.calls = TICK
        if self.open:
            self.check(held)
        return TICK

    def check(self, held: tuple[Sized, ...] = ()) -> None:
        deadline = self.deadline
        if deadline is not None and time.monotonic() > deadline:
            raise LimitExceeded(self.late())
        limit = self.limits.max_facts
        total = self.facts()
        pending = self.pending
        for facts in pending:
            total += len(facts)
        for facts in held:
            if not any(facts is other for other in pending):
                total += len(facts)
        if total > limit:
            raise LimitExceeded(
                f"more than {limit:,} facts; the fact limit was hit and the {self.what} stopped"
            )

    def late(self, functor: str | None = None) -> str:
        took = seconds(self.limits.max_seconds)
        if functor is not None:
            return f"functor `{functor}` returned after the time limit ({took}); the {self.what} stopped"
        return f"the {self.what} took longer than {took}, the time limit; stopped"

    def overdue(self) -> bool:
        """The window is open and its time is up."""
        return self.open and self.deadline is not None and _monotonic() > self.deadline
