"""The deep checks of a saved document (``policyc check --deep``), in a child process.

The analysis (clingo and z3) runs in a process of its own, forked from a single-threaded
fork server that has the analyzer imported already (a fresh interpreter where fork servers do
not exist), so the server's event loop never waits for it, and it can be stopped: when the
document changes or is saved again, or when it has not answered by its deadline (twice the
time the searches may take, plus :data:`GRACE` seconds), its whole process group is killed and
it reports nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.util  # registers its exit handler before the server's
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyc.compiler.diagnostics import Diagnostic

GRACE = 5.0


@dataclass(frozen=True)
class Outcome:
    findings: tuple[Diagnostic, ...]
    undecided: tuple[str, ...]  # what was not decided in the time allowed, one line per kind of check
    problem: str | None = None  # why there are no findings: the analysis failed or ran out of time


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["policyc.lsp.deep", "policyc.analyzer.deep"])
        return context
    return multiprocessing.get_context("spawn")


def warm_up() -> None:
    """Start the fork server (and import the analyzer in it) before the first job needs it."""
    context = _context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


class Job:
    """One run of the deep checks over one version of a document."""

    def __init__(self, text: str, path: str, files: dict[str, bytes], bound: int, timeout: float) -> None:
        context = _context()
        self.receive, send = context.Pipe(duplex=False)
        # Not a daemon: the analyzer runs each bounded search in a child of its own, which a
        # daemonic process may not start. At exit the server stops every job (its exit handler,
        # registered after multiprocessing's, runs first), so exiting never waits for one.
        self.process = context.Process(
            target=_analyse, args=(send, text, path, files, bound, timeout), daemon=False
        )
        self.deadline = 2 * timeout + GRACE
        self.stopped = False
        self.process.start()
        send.close()

    async def outcome(self) -> Outcome | None:
        """The findings, waited for in a worker thread (the event loop goes on); None when the
        job was stopped before it answered."""
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(None, self._wait)
        if self.stopped:
            return None
        if not ready:
            self.stop()
            return Outcome((), (), f"the deep checks did not finish in {self.deadline:g} s")
        try:
            answer = self.receive.recv()
        except (EOFError, OSError):
            return None if self.stopped else Outcome((), (), "the deep checks stopped without an answer")
        finally:
            self.stop()
        return answer

    def _wait(self) -> bool:
        try:
            return self.receive.poll(self.deadline)
        except (EOFError, OSError):
            return True  # closed: recv says why

    def stop(self) -> None:
        """Kill the analysis and every process it started."""
        self.stopped = True
        if self.process.pid is not None and self.process.exitcode is None:
            if hasattr(os, "killpg"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.process.kill()  # in case it was stopped before it made its group
        with contextlib.suppress(OSError, ValueError, AssertionError):
            self.process.join(timeout=1)
        with contextlib.suppress(OSError):
            self.receive.close()


def _analyse(send: Any, text: str, path: str, files: dict[str, bytes], bound: int, timeout: float) -> None:
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # a group of its own: stopping it stops the searches it forks
    try:
        from .document import reader

        send.send(analyse(text, path, reader(files), bound, timeout))
    except Exception as error:  # the analysis failed: say so rather than crash silently
        send.send(Outcome((), (), f"the deep checks failed: {type(error).__name__}: {error}"))
    finally:
        send.close()


def analyse(text: str, path: str, read: Callable[[str], bytes], bound: int, timeout: float) -> Outcome:
    """What ``policyc check --deep`` adds to the diagnostics of a policy without errors."""
    from policyc.analyzer.deep import analyse as deep
    from policyc.compiler.loader import load_source
    from policyc.compiler.pipeline import compile_program
    from policyc.compiler.stages import Stratified

    compilation = compile_program(*load_source(text, path, read))
    if not compilation.ok or not isinstance(compilation, Stratified):
        return Outcome((), ())
    result = deep(compilation, bound, timeout)
    return Outcome(tuple(result.findings), tuple(result.notes()))
