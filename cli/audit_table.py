"""What ``policyc audit show`` prints: one row per decision in a table when the terminal is wide
enough for it, else one block per decision (a line of time and session, then a labelled line
per value), long values folded (never cut), so that a narrow terminal shows every value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.audit_rows import COLUMNS, Row

GAP = 2  # spaces between columns


def print_rows(rows: Sequence[Row], file: Any = None) -> None:
    """Print the rows on standard output (or ``file``); with no row, say so."""
    from rich.console import Console

    console = Console(file=file, highlight=False, soft_wrap=False)
    if not rows:
        console.print("no decision in the log")
        return
    cells = [row.cells() for row in rows]
    widths = [max(len(name), *(len(c[i]) for c in cells)) for i, name in enumerate(COLUMNS)]
    if sum(widths) + GAP * (len(COLUMNS) - 1) <= console.width:
        _table(console, cells, widths)
    else:
        _blocks(console, cells)


def _table(console: Any, cells: list[tuple[str, ...]], widths: list[int]) -> None:
    from rich.text import Text

    def line(values: Sequence[str]) -> str:
        padded = [value.ljust(width) for value, width in zip(values, widths, strict=True)]
        return (" " * GAP).join(padded).rstrip()

    console.print(Text(line(COLUMNS), style="bold"))
    for row in cells:
        console.print(Text(line(row)))


def _blocks(console: Any, cells: list[tuple[str, ...]]) -> None:
    from rich.text import Text

    for number, row in enumerate(cells):
        if number:
            console.print()
        values = dict(zip(COLUMNS, row, strict=True))
        console.print(Text(f"{values['time']}  {values['session']}", style="bold"), overflow="fold")
        for name in COLUMNS[2:]:
            if values[name]:
                console.print(Text(f"  {name}: {values[name]}"), overflow="fold")
