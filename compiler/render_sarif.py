"""Diagnostics as a SARIF 2.1.0 log (GitHub code scanning and most CI dashboards read it).

Every code of the catalog is a rule of the tool, so ``ruleIndex`` is stable across runs.
Regions use 1-based lines and columns counted in Unicode code points (``columnKind``);
related spans become ``relatedLocations`` and fixes become SARIF ``fixes``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .codes import CATALOG
from .diagnostics import Diagnostic, Severity
from .source import Span

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def to_sarif(diagnostics: list[Diagnostic], version: str) -> dict[str, Any]:
    index = {code.code: i for i, code in enumerate(CATALOG)}
    rules = [
        {
            "id": code.code,
            "name": code.name,
            "shortDescription": {"text": code.summary},
            "defaultConfiguration": {"level": _level(code.severity)},
        }
        for code in CATALOG
    ]
    results = []
    for d in diagnostics:
        result: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _level(d.severity),
            "message": {"text": d.message + (f"\nhelp: {d.help}" if d.help else "")},
            "locations": [{"physicalLocation": _physical(d.span)}],
        }
        if d.strength is not None:
            result["properties"] = {
                "strength": d.strength,
                "bound": d.bound,
                "uninterpreted": list(d.uninterpreted),
            }
            if d.witness is not None:
                result["properties"]["witness"] = d.witness.to_json()
            if d.tool is not None:
                result["properties"]["tool"] = d.tool
        if d.related:
            result["relatedLocations"] = [
                {"id": i + 1, "physicalLocation": _physical(r.span), "message": {"text": r.message}}
                for i, r in enumerate(d.related)
            ]
        if d.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": d.fix.message},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(e.span.file)},
                            "replacements": [
                                {"deletedRegion": _region(e.span), "insertedContent": {"text": e.text}}
                            ],
                        }
                        for e in d.fix.edits
                    ],
                }
            ]
        results.append(result)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "policyc", "version": version, "rules": rules}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def _level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


def _uri(path: str) -> str:
    if os.path.isabs(path):
        return Path(path).as_uri()
    return quote(Path(path).as_posix())


def _region(span: Span) -> dict[str, int]:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": span.end_line,
        "endColumn": span.end_column,
    }


def _physical(span: Span) -> dict[str, Any]:
    return {"artifactLocation": {"uri": _uri(span.file)}, "region": _region(span)}
