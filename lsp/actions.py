"""Code actions and formatting.

Every diagnostic that carries a fix (see ``fix`` in ``policyc check --format json``) offers
it as a quick fix: a singleton variable becomes ``_``, a misspelt name becomes the name it is
close to, an undefined relation gets a ``.decl`` (its types inferred from its uses) and an
``.input``. Fixes that keep the policy's meaning are marked preferred, and ``source.fixAll``
applies all of those at once.

Formatting runs the formatter of ``policyc fmt`` over the whole document and answers with one
edit, or none when the text does not parse (there is nothing to format until it does).
"""

from __future__ import annotations

from collections.abc import Iterable

from lsprotocol import types

from policyc.compiler.diagnostics import Diagnostic, Fix

from .diagnostics import convert, lsp_range, placed
from .document import Snapshot

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.policyc"


def quick_fixes(
    snapshot: Snapshot, diagnostics: Iterable[Diagnostic], wanted: types.Range
) -> list[types.CodeAction]:
    """The fixes of the diagnostics shown in (or touching) the range ``wanted``."""
    actions = []
    for d, span, message in placed(snapshot, diagnostics):
        if d.fix is None:
            continue
        shown = lsp_range(snapshot, span)
        if _before(shown.end, wanted.start) or _before(wanted.end, shown.start):
            continue
        actions.append(
            types.CodeAction(
                title=_title(d.fix),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[convert(snapshot, d, span, message)],
                is_preferred=d.fix.safe,
                edit=workspace_edit(snapshot, [d.fix]),
            )
        )
    return actions


def fix_all(snapshot: Snapshot, diagnostics: Iterable[Diagnostic]) -> types.CodeAction | None:
    """One action with every safe fix of the document's own diagnostics, chosen as one round of
    `policyc check --fix` chooses them (of two fixes of one place, the first; the next run
    offers the other)."""
    from policyc.compiler.fixing import choose

    fixes, _ = choose(diagnostics, {}, read=lambda file: snapshot.text if snapshot.is_mine(file) else None)
    if not fixes:
        return None
    return types.CodeAction(
        title="Apply every safe policyc fix", kind=FIX_ALL, edit=workspace_edit(snapshot, fixes)
    )


def workspace_edit(snapshot: Snapshot, fixes: list[Fix]) -> types.WorkspaceEdit:
    changes: dict[str, list[types.TextEdit]] = {}
    for fix in fixes:
        for edit in fix.edits:
            changes.setdefault(snapshot.uri_of(edit.span.file), []).append(
                types.TextEdit(lsp_range(snapshot, edit.span), edit.text)
            )
    return types.WorkspaceEdit(changes=changes)


def formatting(snapshot: Snapshot) -> list[types.TextEdit] | None:
    from policyc.compiler.formatter import FormatError, format_source

    try:
        formatted = format_source(snapshot.text, snapshot.path)
    except FormatError:
        return None
    if formatted == snapshot.text:
        return []
    end = snapshot.lines(snapshot.path).end
    whole = types.Range(types.Position(0, 0), types.Position(*end))
    return [types.TextEdit(whole, formatted)]


def _title(fix: Fix) -> str:
    return fix.message[:1].upper() + fix.message[1:]


def _before(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) < (b.line, b.character)
