"""Deadlines: the time a piece of work may take, and work that must end by one although it
cannot be interrupted.

A :class:`Deadline` is asked before each step of work made of many small ones (the pairs of
rules compared, the rules whose bodies are proved, the tools, the bounded questions), and gives
z3 what is left as its solver timeout: the work ends about when the deadline passes, and says
what it left undone.

clingo's grounder cannot be stopped once started, and some policies ground slowly (a ``sum``
over chosen facts grounds every subset sum of the values). Where processes can be forked,
:func:`within` runs such work in a child, which is stopped when the time is up; elsewhere it
runs in this process. The result (and any exception) comes back pickled.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
GRACE = 1.0  # seconds beyond the deadline a child may take to send its answer


class Deadline:
    """A time by which work must end, ``seconds`` from now (on the monotonic clock, which a
    forked child shares)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """The seconds left (0 once the deadline has passed)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def solver_timeout(self, most: float) -> int:
        """A z3 ``timeout`` (milliseconds) of at most ``most`` seconds and the time left: at
        least 1, as 0 would mean no timeout (ask :meth:`passed` before asking z3)."""
        return max(1, int(min(most, self.left()) * 1000))


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, or :class:`TimeoutError` when it has not finished in ``seconds`` (plus a grace
    for work that watches the time itself and returns what it has)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return work()
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run, args=(work, send), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(seconds + GRACE):
            raise TimeoutError(f"the search did not finish in {seconds:g} s")
        try:
            failed, value = receive.recv()
        except (EOFError, OSError):
            raise RuntimeError("the analysis process stopped without an answer") from None
    finally:
        child.terminate()
        child.join()
    if failed:
        raise value
    return value


def _run(work: Callable[[], Any], send: Any) -> None:
    try:
        answer = (False, work())
    except Exception as error:  # sent back and raised in the parent
        answer = (True, error)
    send.send(answer)
    send.close()
