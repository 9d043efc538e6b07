"""Applying the fixes diagnostics carry, as ``ruff check --fix`` does (``policyc check --fix``).

A round takes the diagnostics of the files as they are now, chooses the fixes to apply (safe
ones, and with ``unsafe`` the others too; none that touches a file it may not edit, or a place
an earlier fix of the round touches), and applies them; the files are then checked again and
the next round starts, until no fix applies, or the files come back to a state they were in
(fixes that undo each other), or after :data:`ROUNDS` rounds. One fix carried by several
diagnostics (the ``.import`` of a library module, say) is applied once and fixes each of them.

>>> text = "Deny(a) :- Send(a, to).\\n.input Send\\n"
>>> from .pipeline import compile_source
>>> done = fix_texts({"p.dl": text}, lambda texts: list(compile_source(texts["p.dl"], "p.dl").diagnostics))
>>> done.texts["p.dl"], [d.name for d in done.fixed]
('Deny(a) :- Send(a, _).\\n.input Send\\n', ['singleton-variable'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .diagnostics import Diagnostic, Edit, Fix, sort_diagnostics

ROUNDS = 100  # rounds of fixes at most (ruff's limit too)
BOM = "\ufeff"


@dataclass(frozen=True)
class Fixed:
    """What fixing found: the texts at the end (by file, as the diagnostics name them), the
    diagnostics whose fixes were applied (where they were found, in the text of their round),
    what the last round found (the diagnostics that remain), the rounds that applied fixes,
    and whether the fixes settled (no fix left to apply)."""

    texts: dict[str, str]
    fixed: tuple[Diagnostic, ...]
    remaining: tuple[Diagnostic, ...]
    rounds: int
    settled: bool

    def unsafe(self) -> int:
        """How many remaining diagnostics carry a fix that is not safe."""
        return sum(d.fix is not None and not d.fix.safe for d in self.remaining)


def fix_texts(
    texts: Mapping[str, str],
    check: Callable[[Mapping[str, str]], list[Diagnostic]],
    *,
    unsafe: bool = False,
    read: Callable[[str], str | None] = lambda file: None,
    rounds: int = ROUNDS,
) -> Fixed:
    """Fix ``texts`` (file to text) round after round: ``check`` gives the diagnostics of the
    texts as they are; ``read`` gives the text of another file a fix edits (None: it may not be
    edited, such as a library module), which then joins the texts."""
    current = dict(texts)
    seen = {_state(current)}
    fixed: list[Diagnostic] = []
    for done in range(rounds + 1):
        diagnostics = sort_diagnostics(check(current))
        chosen, credited = choose(diagnostics, current, unsafe, read)
        if not chosen or done == rounds:
            return Fixed(current, tuple(fixed), tuple(diagnostics), done, not chosen)
        current = apply(current, chosen)
        fixed.extend(credited)
        state = _state(current)
        if state in seen:  # fixes that undo each other: stop where they began again
            remaining = sort_diagnostics(check(current))
            return Fixed(current, tuple(fixed), tuple(remaining), done + 1, False)
        seen.add(state)
    raise AssertionError("unreachable")


def choose(
    diagnostics: Iterable[Diagnostic],
    texts: dict[str, str],
    unsafe: bool = False,
    read: Callable[[str], str | None] = lambda file: None,
) -> tuple[list[Fix], list[Diagnostic]]:
    """The fixes of one round, in the diagnostics' order, and the diagnostics they fix: of two
    fixes that touch one place (or insert at one point), the first; a fix is skipped whole
    when one of its edits cannot be made. ``texts`` gains the files ``read`` gives."""
    taken: dict[str, list[tuple[int, int]]] = {}
    chosen: list[Fix] = []
    applied: set[Fix] = set()
    credited: list[Diagnostic] = []
    for d in diagnostics:
        fix = d.fix
        if fix is None or not fix.edits or not (fix.safe or unsafe):
            continue
        if fix in applied:
            credited.append(d)
            continue
        if not all(_editable(edit.span.file, texts, read) for edit in fix.edits):
            continue
        spans = [(e.span.file, e.span.start, e.span.end) for e in fix.edits]
        if any(_overlap(start, end, taken.get(file, ())) for file, start, end in spans):
            continue  # the next round offers it again, if it is still needed
        for file, start, end in spans:
            taken.setdefault(file, []).append((start, end))
        chosen.append(fix)
        applied.add(fix)
        credited.append(d)
    return chosen, credited


def apply(texts: Mapping[str, str], fixes: Iterable[Fix]) -> dict[str, str]:
    """The texts with the fixes' edits made (edits that do not overlap)."""
    edits: dict[str, list[Edit]] = {}
    for fix in fixes:
        for edit in fix.edits:
            edits.setdefault(edit.span.file, []).append(edit)
    out = dict(texts)
    for file, found in edits.items():
        text = out[file]
        skip = 1 if text.startswith(BOM) else 0  # a byte-order mark stays first
        for edit in sorted(found, key=lambda e: (e.span.start, e.span.end), reverse=True):
            start, end = max(edit.span.start, skip), max(edit.span.end, skip)
            text = text[:start] + edit.text + text[end:]
        out[file] = text
    return out


def _editable(file: str, texts: dict[str, str], read: Callable[[str], str | None]) -> bool:
    if file in texts:
        return True
    text = read(file)
    if text is None:
        return False
    texts[file] = text
    return True


def _overlap(start: int, end: int, taken: Iterable[tuple[int, int]]) -> bool:
    return any(max(start, s) < min(end, e) or start == s for s, e in taken)


def _state(texts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(texts.items()))
