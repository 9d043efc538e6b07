"""The progress display on standard error.

On a terminal: a line for each step as it ends, with what it found, and a progress bar for the
step under way (with a counter for the steps that ask the model once per rule or decision
point). Elsewhere (a log, a pipe): one plain line when a step starts and one when it ends, so
that a CI log shows where the time went. Quiet: nothing.
"""

from __future__ import annotations

import sys
import threading
from typing import Any


class Progress:
    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.lock = threading.Lock()
        self.bars: Any = None
        self.task: Any = None
        self.name = ""
        if not quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as Bars

            self.bars = Bars(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> Progress:
        if self.bars is not None:
            self.bars.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bars is not None:
            self.bars.stop()

    def step(self, name: str, total: int = 1) -> None:
        """A step starts (``total`` requests or items to do)."""
        with self.lock:
            self.name = name
            if self.quiet:
                return
            if self.bars is not None:
                if self.task is not None:
                    self.bars.remove_task(self.task)
                self.task = self.bars.add_task(name, total=max(total, 1))
            else:
                print(f"policyc translate: {name}", file=sys.stderr, flush=True)

    def advance(self) -> None:
        with self.lock:
            if self.bars is not None and self.task is not None:
                self.bars.update(self.task, advance=1)

    def finish(self, summary: str) -> None:
        """A step ends; ``summary`` says what it found."""
        with self.lock:
            if self.quiet:
                return
            if self.bars is not None:
                if self.task is not None:
                    self.bars.remove_task(self.task)
                    self.task = None
                from rich.markup import escape

                self.bars.console.print(
                    f"[green]✓[/] {escape(self.name)}: {escape(summary)}", highlight=False
                )
            else:
                print(f"policyc translate: {self.name}: {summary}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        with self.lock:
            if self.quiet:
                return
            if self.bars is not None:
                self.bars.console.print(f"  {text}", highlight=False, markup=False)
            else:
                print(f"policyc translate:   {text}", file=sys.stderr, flush=True)
