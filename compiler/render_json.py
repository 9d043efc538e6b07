"""Diagnostics as one JSON object, the contract other tools rely on::

    {"diagnostics": [{"code", "name", "severity", "message", "file", "line", "column",
                      "end_line", "end_column", "help", "related": [...], "fix",
                      "strength", "bound", "uninterpreted", "witness", "tool"}],
     "errors": N, "warnings": N}

Lines and columns are 1-based; ``end_column`` is just past the last character; columns
count Unicode code points. ``witness`` (a deep finding's session, replayed through a monitor)
is ``{"facts": ["Rel(...)", ...], "events": [EVENT, ...], "action", "verdict", "derived":
["Rel(...)", ...], "note"}`` or null: ``verdict`` is what the monitor decided of the call
``action`` (``allow``, ``deny``, ``escalate``, or ``refuse`` when an error refused it), ``note``
what the session shows, in one line.
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Diagnostic, Fix, Severity


def to_json(diagnostics: list[Diagnostic]) -> dict[str, Any]:
    return {
        "diagnostics": [diagnostic_json(d) for d in diagnostics],
        "errors": sum(d.severity is Severity.ERROR for d in diagnostics),
        "warnings": sum(d.severity is Severity.WARNING for d in diagnostics),
    }


def diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "name": d.name,
        "severity": d.severity.value,
        "message": d.message,
        "file": d.span.file,
        "line": d.span.line,
        "column": d.span.column,
        "end_line": d.span.end_line,
        "end_column": d.span.end_column,
        "help": d.help,
        "related": [
            {
                "file": r.span.file,
                "line": r.span.line,
                "column": r.span.column,
                "end_line": r.span.end_line,
                "end_column": r.span.end_column,
                "message": r.message,
            }
            for r in d.related
        ],
        "fix": fix_json(d.fix) if d.fix else None,
        "strength": d.strength,
        "bound": d.bound,
        "uninterpreted": list(d.uninterpreted),
        "witness": d.witness.to_json() if d.witness is not None else None,
        "tool": d.tool,
    }


def fix_json(fix: Fix) -> dict[str, Any]:
    return {
        "message": fix.message,
        "safe": fix.safe,
        "edits": [
            {
                "file": e.span.file,
                "line": e.span.line,
                "column": e.span.column,
                "end_line": e.span.end_line,
                "end_column": e.span.end_column,
                "text": e.text,
            }
            for e in fix.edits
        ],
    }
