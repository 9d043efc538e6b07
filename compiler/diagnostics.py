"""Diagnostics are values: a stable code and name, a severity, a one-line message, a primary
span, labelled related spans, an optional help text and an optional fix.

Only the CLI prints them or turns them into an exit status; everything else returns them.
The catalog of codes lives in :mod:`policyc.compiler.codes`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .source import SourceFile, Span


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Related:
    """A secondary location that explains the primary one ("first declared here")."""

    span: Span
    message: str


@dataclass(frozen=True)
class Edit:
    """Replace the text of ``span`` with ``text`` (an empty span inserts)."""

    span: Span
    text: str


@dataclass(frozen=True)
class Fix:
    """A change that resolves a diagnostic. ``safe`` fixes keep the policy's meaning."""

    message: str
    edits: tuple[Edit, ...]
    safe: bool = True


def removal(source: SourceFile | None, span: Span, message: str = "remove the declaration") -> Fix | None:
    """The safe fix that removes the statement at ``span``: its whole line when nothing else is
    on it, else the statement and the blanks after it."""
    if source is None:
        return None
    text = source.text
    start, end = span.start, span.end
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if not text[line_start:start].strip() and not text[end:line_end].strip():
        start, end = line_start, min(line_end + 1, len(text))
    else:
        while end < line_end and text[end] in " \t":
            end += 1
    return Fix(message, (Edit(source.span(start, end), ""),), safe=True)


def replace_name(span: Span, name: str, close: str | None) -> Fix | None:
    """The fix of a "did you mean" diagnostic: the close name in place of the unknown one (a
    guess at what was meant, so not safe)."""
    if close is None:
        return None
    return Fix(f"replace `{name}` with `{close}`", (Edit(span, close),), safe=False)


@dataclass(frozen=True)
class Scenario:
    """A concrete session that shows a deep finding, replayed through a monitor before it is
    shown: the facts the host gives (``Blocked("a@b.example")``), the events it records (each
    as JSON text, in order), the call it decides and what the monitor decided of it (``allow``,
    ``deny``, ``escalate``, or ``refuse`` for a call an error refused), what the policy derived
    there that the finding is about (``Deny("a@b.example")``), and what it shows, in one line."""

    facts: tuple[str, ...]
    events: tuple[str, ...]
    action: str
    verdict: str
    derived: tuple[str, ...] = ()
    note: str = ""

    def lines(self) -> list[str]:
        """The scenario as lines of text: what is given, recorded and decided."""
        found = [f"given   {fact}" for fact in self.facts]
        found += [f"event   {event}" for event in self.events]
        found.append(f"decide  `{self.action}`: {self.verdict}")
        found += [f"derived {fact}" for fact in self.derived]
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "facts": list(self.facts),
            "events": [json.loads(event) for event in self.events],
            "action": self.action,
            "verdict": self.verdict,
            "derived": list(self.derived),
            "note": self.note,
        }


@dataclass(frozen=True)
class Diagnostic:
    """A problem found in a policy: its stable code and name, severity, message and place, with
    related places, a help text, a fix, and what a proof found (strength, bound)."""

    code: str
    name: str
    severity: Severity
    message: str
    span: Span
    related: tuple[Related, ...] = ()
    help: str | None = None
    fix: Fix | None = None
    # deep findings (`policyc check --deep`): how sure the finding is, and the search's bound
    strength: str | None = None  # "syntactic", "proved" or "bounded"
    bound: int | None = None
    uninterpreted: tuple[str, ...] = ()  # the functors the finding modelled as uninterpreted functions
    witness: Scenario | None = None  # a session that shows it, replayed through a monitor
    tool: str | None = None  # the tool a finding is about (always-deny, always-allow), as a value

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple:
        return (self.span.file, self.span.line, self.span.column, self.code, self.message)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by file and position, without exact duplicates (a file included twice)."""
    return sorted(set(diagnostics), key=Diagnostic.sort_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)
