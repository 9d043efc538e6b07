"""A small pretty-printing document algebra (in the style of Wadler's and prettier's) for the
formatter: text, line breaks, groups that print flat when they can, indentation, and line
suffixes for trailing comments.

A :class:`Group` prints on one line (each :class:`Line` as its ``flat`` text) unless it holds
a hard break (:data:`HARD`, a breaking :class:`Suffix`, a multi-line text) or, for a group
made with ``fit=True``, its flat text would run past the width; then each of its own lines
breaks, and the groups inside it decide for themselves.

>>> doc = group(["P(", nest(4, [Line(""), "x,", Line(), "y"]), Line(""), ")"], fit=True)
>>> render_text(doc, 80)
'P(x, y)\\n'
>>> render_text(doc, 5)
'P(\\n    x,\\n    y\\n)\\n'

Trailing comments are line suffixes: they go to the end of the line they are on, after the
code that follows them on that line, and :func:`render_text` aligns the trailing comments of
consecutive lines.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

SUFFIX_GAP = 2  # spaces between code and a trailing comment, at least


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    comment: bool = False  # a line holding only comments is not code (it ends an alignment block)


@dataclass(frozen=True, slots=True)
class Line:
    """A line break, or ``flat`` when its group prints on one line."""

    flat: str = " "


@dataclass(frozen=True, slots=True)
class Hard:
    """A line break in any case; every group around it breaks."""


HARD = Hard()


@dataclass(frozen=True, slots=True)
class Suffix:
    """A trailing comment: printed at the end of the current line. ``breaks``: the groups
    around it break (a line comment ends its line)."""

    text: str
    breaks: bool = True
    final: bool = False  # nothing may follow it on its line (a line comment)


@dataclass(frozen=True, slots=True)
class Nest:
    indent: int
    doc: Doc


@dataclass(frozen=True, slots=True)
class IfBroken:
    """``broken`` when the enclosing group breaks, ``flat`` when it prints on one line."""

    broken: Doc
    flat: Doc


@dataclass(frozen=True, slots=True)
class Unit:
    """A statement: the trailing comments of a unit over several lines align among
    themselves; those of consecutive one-line units align together."""

    doc: Doc


@dataclass(frozen=True, slots=True)
class Group:
    doc: Doc
    fit: bool  # also break when the flat text does not fit in the width
    width: int = 0  # of the flat text
    hard: bool = False  # holds a hard break: never flat


Doc = str | Text | Line | Hard | Suffix | Nest | IfBroken | Unit | Group | Sequence["Doc"]


def nest(indent: int, doc: Doc) -> Nest:
    return Nest(indent, doc)


def group(doc: Doc, fit: bool = False) -> Group:
    width, hard = _measure(doc)
    return Group(doc, fit, width, hard)


def _measure(doc: Doc) -> tuple[int, bool]:
    """The width of the flat text of ``doc`` and whether it holds a hard break."""
    if isinstance(doc, str):
        return len(doc), "\n" in doc
    if isinstance(doc, Text):
        return len(doc.text), "\n" in doc.text
    if isinstance(doc, Line):
        return len(doc.flat), False
    if isinstance(doc, Hard):
        return 0, True
    if isinstance(doc, Suffix):
        return 0, doc.breaks
    if isinstance(doc, Nest | Unit):
        return _measure(doc.doc)
    if isinstance(doc, IfBroken):
        return _measure(doc.flat)
    if isinstance(doc, Group):
        return doc.width, doc.hard
    width = 0
    hard = False
    for part in doc:
        w, h = _measure(part)
        width += w
        hard = hard or h
    return width, hard


@dataclass(frozen=True, slots=True)
class OutputLine:
    text: str  # indentation and code (and inline comments)
    suffixes: tuple[str, ...]  # trailing comments
    code: bool  # holds more than comments
    unit: int = -1  # the unit the line belongs to (-1: none)


class _EndUnit:
    """Where a unit's document ends (a marker on the renderer's stack)."""


_END_UNIT = _EndUnit()


class _Renderer:
    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[OutputLine] = []
        self.parts: list[str] = []
        self.suffixes: list[Suffix] = []
        self.code = False
        self.column = 0
        self.pending_indent = 0
        self.unit = -1  # the unit being rendered
        self.units = 0
        self.line_unit = -1  # the unit of the current line: the one it starts in

    def text(self, text: str, comment: bool) -> None:
        if not text:
            return
        first, *rest = text.split("\n")
        self._append(first, comment, False)
        for line in rest:  # a block comment over several lines: its lines as they are
            self.newline(0)
            self._append(line, comment, True)

    def _append(self, text: str, comment: bool, verbatim: bool) -> None:
        if not self.parts:
            if not verbatim:
                text = text.lstrip(" ")  # a flat line's space never starts a line
                text = " " * self.pending_indent + text if text else ""
            if not text:
                return
            self.line_unit = self.unit
        self.parts.append(text)
        self.column += len(text)
        self.code = self.code or not comment

    def newline(self, indent: int) -> None:
        suffixes = [suffix.text for suffix in self.suffixes]
        # a final suffix ends its line: the suffixes after it go on lines of their own
        ends = [i + 1 for i, suffix in enumerate(self.suffixes) if suffix.final]
        cuts = [0, *[i for i in ends if i < len(suffixes)], len(suffixes)]
        self.lines.append(
            OutputLine("".join(self.parts), tuple(suffixes[: cuts[1]]), self.code, self.line_unit)
        )
        for start, end in itertools.pairwise(cuts[1:]):
            self.lines.append(OutputLine(" " * indent + " ".join(suffixes[start:end]), (), False))
        self.parts = []
        self.suffixes = []
        self.line_unit = -1
        self.code = False
        self.column = 0
        self.pending_indent = indent

    def render(self, doc: Doc) -> list[OutputLine]:
        stack: list[tuple[int, bool, Doc | _EndUnit]] = [(0, True, doc)]
        while stack:
            indent, broken, item = stack.pop()
            if isinstance(item, _EndUnit):
                self.unit = -1
            elif isinstance(item, str):
                self.text(item, False)
            elif isinstance(item, Text):
                self.text(item.text, item.comment)
            elif isinstance(item, Line):
                if broken:
                    self.newline(indent)
                else:
                    self.text(item.flat, False)
            elif isinstance(item, Hard):
                self.newline(indent)
            elif isinstance(item, Suffix):
                self.suffixes.append(item)
            elif isinstance(item, Nest):
                stack.append((indent + item.indent, broken, item.doc))
            elif isinstance(item, Unit):
                self.unit = self.units
                self.units += 1
                if self.parts:  # after a comment on the same line: the line is the unit's
                    self.line_unit = self.unit
                stack.append((indent, broken, _END_UNIT))
                stack.append((indent, broken, item.doc))
            elif isinstance(item, IfBroken):
                stack.append((indent, broken, item.broken if broken else item.flat))
            elif isinstance(item, Group):
                column = self.column if self.parts else self.pending_indent
                breaks = item.hard or (item.fit and column + item.width > self.width)
                stack.append((indent, breaks, item.doc))
            else:
                stack.extend((indent, broken, part) for part in reversed(item))
        if self.parts or self.suffixes:
            self.newline(0)
        return self.lines


def render(doc: Doc, width: int) -> list[OutputLine]:
    """The lines of ``doc`` laid out in ``width`` columns (trailing comments not placed yet)."""
    return _Renderer(width).render(doc)


def render_text(doc: Doc, width: int) -> str:
    """The text of ``doc``: its lines, trailing comments aligned, each line ending in ``\\n``."""
    lines = render(doc, width)
    out: list[str] = []
    for block in _blocks(lines):
        with_suffix = [line for line in block if line.suffixes]
        column = max((len(line.text) for line in with_suffix), default=0) + SUFFIX_GAP
        for line in block:
            if line.suffixes:
                pad = column - len(line.text) if line.text else 0
                out.append(line.text + " " * pad + " ".join(line.suffixes))
            else:
                out.append(line.text)
    return "".join(line + "\n" for line in out)


def _blocks(lines: list[OutputLine]) -> list[list[OutputLine]]:
    """Runs of lines whose trailing comments align: the lines of a unit over several lines,
    or consecutive one-line units; a blank line or a line of comments only stands alone."""
    sizes = collections.Counter(line.unit for line in lines)

    def group_of(line: OutputLine) -> int | None:  # the unit of a line of a unit over several lines
        return line.unit if line.unit != -1 and sizes[line.unit] > 1 else None

    blocks: list[list[OutputLine]] = []
    run: list[OutputLine] = []
    for line in lines:
        if run and (not line.code or group_of(line) != group_of(run[-1])):
            blocks.append(run)
            run = []
        if line.code:
            run.append(line)
        else:
            blocks.append([line])
    if run:
        blocks.append(run)
    return blocks
