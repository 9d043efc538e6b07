"""policyc diagnostics as LSP diagnostics of one open document.

A document shows exactly what ``policyc check FILE`` reports for its file (and, after a save,
``policyc check --deep FILE``): same codes, severities, messages and places. Two parts of a
policyc diagnostic have no field of their own in LSP, so they become related information at
the diagnostic's own place, the way rust-analyzer shows them: the ``help`` text and, for deep
findings, the strength.

A diagnostic located in a file the document includes cannot be shown in that file (it is the
document's diagnostic, and that file may be open on its own, checked as its own root), so it
is shown on the document's ``.include`` line that brings the file in, its message prefixed
with where it is (``in `rules.dl` at 3:5: ...``) and its real place as related information
(one in no included file, which the compiler does not report, would go at the document's start
the same way: nothing is left out).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from lsprotocol import types

from policyc.compiler.diagnostics import Diagnostic, Severity
from policyc.compiler.render_text import strength_text
from policyc.compiler.source import Span

from .document import Snapshot, key, real_path

SOURCE = "policyc"
# fade the text of what these report: it has no effect on any verdict
UNNECESSARY = frozenset({"PC202", "PC205", "PC301", "PC302", "PC303"})


def placed(snapshot: Snapshot, diagnostics: Iterable[Diagnostic]) -> list[tuple[Diagnostic, Span, str]]:
    """Each diagnostic with the place in the document it is shown at and its message there."""
    out = []
    for d in diagnostics:
        if snapshot.is_mine(d.span.file):
            out.append((d, d.span, d.message))
            continue
        include = snapshot.includes.get(key(d.span.file))
        # a place in no file the document includes (none is known): the start of the document
        at = include.path.span if include is not None else Span(snapshot.path, 0, 0, 1, 1, 1, 1)
        where = os.path.relpath(real_path(d.span.file), os.path.dirname(os.path.abspath(snapshot.path)))
        message = f"in `{where}` at {d.span.line}:{d.span.column}: {d.message}"
        out.append((d, at, message))
    return out


def to_lsp(snapshot: Snapshot, diagnostics: Iterable[Diagnostic]) -> list[types.Diagnostic]:
    return [convert(snapshot, d, span, message) for d, span, message in placed(snapshot, diagnostics)]


def convert(snapshot: Snapshot, d: Diagnostic, span: Span, message: str) -> types.Diagnostic:
    related = [types.DiagnosticRelatedInformation(location(snapshot, r.span), r.message) for r in d.related]
    if span != d.span:
        related.insert(0, types.DiagnosticRelatedInformation(location(snapshot, d.span), d.message))
    if d.help:
        related.append(types.DiagnosticRelatedInformation(location(snapshot, d.span), f"help: {d.help}"))
    if d.strength is not None:
        strength = strength_text(d.strength, d.bound)
        related.append(
            types.DiagnosticRelatedInformation(location(snapshot, d.span), f"strength: {strength}")
        )
    if d.witness is not None:
        text = "; ".join(([d.witness.note] if d.witness.note else []) + d.witness.lines())
        related.append(
            types.DiagnosticRelatedInformation(location(snapshot, d.span), f"witness (replayed): {text}")
        )
    return types.Diagnostic(
        range=lsp_range(snapshot, span),
        message=message,
        severity=types.DiagnosticSeverity.Error
        if d.severity is Severity.ERROR
        else types.DiagnosticSeverity.Warning,
        code=d.code,
        source=SOURCE,
        related_information=related or None,
        tags=[types.DiagnosticTag.Unnecessary] if d.code in UNNECESSARY else None,
        data={"name": d.name, "fix": d.fix.message if d.fix else None},
    )


def lsp_range(snapshot: Snapshot, span: Span) -> types.Range:
    (sl, sc), (el, ec) = snapshot.range(span)
    return types.Range(types.Position(sl, sc), types.Position(el, ec))


def location(snapshot: Snapshot, span: Span) -> types.Location:
    return types.Location(snapshot.uri_of(span.file), lsp_range(snapshot, span))
