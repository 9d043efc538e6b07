"""Work that must end by a deadline although it cannot be interrupted.

clingo's grounder cannot be stopped once started, and some policies ground slowly (a ``sum``
over chosen facts grounds every subset sum of the values). Where processes can be forked, the
work runs in a child, which is stopped when the time is up; elsewhere it runs in this process.
The result (and any exception) comes back pickled.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
GRACE = 1.0  # seconds beyond the deadline a child may take to send its answer


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
