"""Positions: policyc's code points and the editor's code units.

Spans count Unicode code points; LSP positions are 0-based lines and characters counted in the
code units of the negotiated encoding, UTF-16 unless the client asks for UTF-8 or UTF-32. A
character beyond the Basic Multilingual Plane is one code point but two UTF-16 units.

Lines end at ``\\n`` as in :class:`~policyc.compiler.source.SourceFile` (a ``\\r`` before it is
part of the line, and never counted past).

>>> index = LineIndex("é😀 = x\\nP(x).")
>>> index.position(3), index.offset(0, 4)
((0, 4), 3)
>>> LineIndex("é😀 = x", "utf-8").position(3)
(0, 7)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

from policyc.compiler.source import SourceFile, Span

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def units(text: str, encoding: str) -> int:
    """The length of ``text`` in code units of ``encoding``."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@dataclass(frozen=True)
class LineIndex:
    """A text with its line starts, converting code-point offsets to and from LSP positions."""

    text: str
    encoding: str = UTF16

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        return SourceFile("", self.text).line_starts

    def line_end(self, line: int) -> int:
        """The offset of the end of a 0-based line, before its ``\\r\\n`` or ``\\n``."""
        if line + 1 < len(self.line_starts):
            end = self.line_starts[line + 1] - 1
            return end - 1 if end > self.line_starts[line] and self.text[end - 1] == "\r" else end
        return len(self.text)

    def position(self, offset: int) -> tuple[int, int]:
        """The (line, character) of a code-point offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.line_starts, offset) - 1
        start = self.line_starts[line]
        return line, units(self.text[start:offset], self.encoding)

    def offset(self, line: int, character: int) -> int:
        """The code-point offset of an LSP position, clamped to its line (and the text)."""
        if line < 0:
            return 0
        if line >= len(self.line_starts):
            return len(self.text)
        start, end = self.line_starts[line], self.line_end(line)
        if self.encoding == UTF32:
            return min(start + max(character, 0), end)
        counted = 0
        for at in range(start, end):
            if counted >= character:
                return at
            counted += units(self.text[at], self.encoding)
        return end

    def span_offsets(self, span: Span) -> tuple[int, int]:
        """The code-point offsets of a span, from its 1-based lines and columns (so that a span
        made over another copy of the text, such as a file's decodable prefix, still lands)."""
        return self._offset_of(span.line, span.column), self._offset_of(span.end_line, span.end_column)

    def _offset_of(self, line: int, column: int) -> int:
        if line - 1 >= len(self.line_starts):
            return len(self.text)
        start = self.line_starts[max(line - 1, 0)]
        limit = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return min(start + max(column - 1, 0), limit)

    def range(self, span: Span) -> tuple[tuple[int, int], tuple[int, int]]:
        """The LSP (start, end) positions of a span."""
        start, end = self.span_offsets(span)
        return self.position(start), self.position(end)

    @property
    def end(self) -> tuple[int, int]:
        return self.position(len(self.text))
