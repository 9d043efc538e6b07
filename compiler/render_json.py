"""Diagnostics as one JSON object, the contract other tools rely on::

    {"diagnostics": [{"code", "name", "severity", "message", "file", "line", "column",
                      "end_line", "end_column", "help", "related": [...], "fix",
                      "strength", "bound", "uninterpreted", "witness"}],
     "errors": N, "warnings": N}

Lines and columns are 1-based; ``end_column`` is just past the last character; columns
count Unicode code points.
"""

from __future__ import annotations

import json
from typing import Any

from .diagnostics import Diagnostic, Fix, Severity, WitnessCall


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
        "witness": witness_json(d.witness) if d.witness else None,
    }


def witness_json(witness: WitnessCall) -> dict[str, Any]:
    """``{"note", "decision", "events"}``: the session a finding was replayed on, its events as
    JSON objects (the last is the call decided)."""
    return {
        "note": witness.note,
        "decision": witness.decision,
        "events": [json.loads(event) for event in witness.events],
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
