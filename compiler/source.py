"""Source files and spans.

A :class:`Span` is a half-open range of a source file: 1-based line and column of its first
character, and the line and column just past its last character (the convention of LSP,
SARIF and rustc's JSON). Columns count Unicode code points. Spans never take part in the
equality of the nodes that carry them.

>>> src = SourceFile("p.dl", "A(x) :- B(x).\\n")
>>> src.span(8, 12)
Span(file='p.dl', start=8, end=12, line=1, column=9, end_line=1, end_column=13)
>>> src.line_text(1)
'A(x) :- B(x).'
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple


class Span(NamedTuple):
    """An immutable source range (a tuple: spans are made for every node, so they are cheap)."""

    file: str
    start: int
    end: int
    line: int
    column: int
    end_line: int
    end_column: int

    def join(self, other: Span) -> Span:
        """The smallest span covering both (which must be in the same file)."""
        first = self if self.start <= other.start else other
        last = self if self.end >= other.end else other
        return Span(
            self.file, first.start, last.end, first.line, first.column, last.end_line, last.end_column
        )

    def at_end(self) -> Span:
        """The empty span just after this one: where a missing token belongs."""
        return Span(
            self.file, self.end, self.end, self.end_line, self.end_column, self.end_line, self.end_column
        )


@dataclass(frozen=True)
class SourceFile:
    """The text of one policy file, with the line index spans are computed from."""

    path: str
    text: str
    # where the file was included (Soufflé's `__INCL__`): `file:line:column` of each `.include`
    # on the way to it, from the outermost, joined by `;` ("" for a file no other includes)
    included_from: str = field(default="", compare=False)

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        starts = [0]
        find = self.text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        return tuple(starts)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index] + 1

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Span(self.path, start, end, line, column, end_line, end_column)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its line break ('' past the end)."""
        if not 1 <= line <= len(self.line_starts):
            return ""
        start = self.line_starts[line - 1]
        end = self.text.find("\n", start)
        text = self.text[start:] if end == -1 else self.text[start:end]
        return text.rstrip("\r")
