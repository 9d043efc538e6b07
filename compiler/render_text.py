"""Diagnostics as text, the way rustc and ruff show them::

    policy.dl:3:12: error[PC101]: relation `Taint` is not defined [undefined-relation]
      |
    3 | Deny(a) :- Taint(a), HasSecret(a).
      |            ^^^^^
      = help: did you mean `Tainted`?

Related locations follow the primary one, each with its label under a ``-`` underline.
Colour comes from rich, and only when the output is a terminal (``NO_COLOR`` is honoured).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .diagnostics import Diagnostic, Severity
from .source import SourceFile, Span

if TYPE_CHECKING:  # rich is imported where text is made: a check with nothing to show needs none
    from rich.console import Console
    from rich.text import Text

TAB = "    "
STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow"}

Sources = Callable[[str], SourceFile | None]


def render(diagnostics: Iterable[Diagnostic], sources: Sources, console: Console) -> None:
    for diagnostic in diagnostics:
        console.print(render_one(diagnostic, sources), soft_wrap=True, highlight=False)


def render_one(diagnostic: Diagnostic, sources: Sources) -> Text:
    from rich.text import Text

    span = diagnostic.span
    style = STYLE[diagnostic.severity]
    out = Text()
    out.append(f"{_location(span)}: ", style="bold")
    out.append(f"{diagnostic.severity.value}[{diagnostic.code}]", style=style)
    out.append(": ")
    out.append(diagnostic.message, style="bold")
    out.append(f" [{diagnostic.name}]", style="dim")
    lines = [span.line] + [r.span.line for r in diagnostic.related]
    width = len(str(max(lines)))
    source = sources(span.file)
    if source is not None and source.line_starts and span.line <= len(source.line_starts):
        out.append("\n")
        out.append_text(_snippet(source, span, "^", style, None, width))
    for related in diagnostic.related:
        other = sources(related.span.file)
        out.append("\n")
        out.append(" " * width + " ::: ", style="bold blue")
        out.append(_location(related.span))
        if other is not None and related.span.line <= len(other.line_starts):
            out.append("\n")
            out.append_text(_snippet(other, related.span, "-", "bold blue", related.message, width))
        else:
            out.append(f": {related.message}")
    if diagnostic.help:
        out.append("\n")
        out.append(" " * width + " = ", style="bold blue")
        out.append("help: ", style="bold")
        out.append(diagnostic.help)
    if diagnostic.strength is not None:
        out.append("\n")
        out.append(" " * width + " = ", style="bold blue")
        out.append("strength: ", style="bold")
        out.append(strength_text(diagnostic.strength, diagnostic.bound))
        if diagnostic.uninterpreted:
            names = ", ".join(f"`{name}`" for name in diagnostic.uninterpreted)
            what = (
                "uninterpreted functions of their"
                if len(diagnostic.uninterpreted) > 1
                else "an uninterpreted function of its"
            )
            out.append(f"; with {names} modelled as {what} declared types")
    if diagnostic.witness is not None:
        out.append("\n")
        out.append(" " * width + " = ", style="bold blue")
        out.append("witness: ", style="bold")
        out.append(diagnostic.witness.note or "replayed through a monitor:")
        for line in diagnostic.witness.lines():
            out.append("\n" + " " * width + "     " + line)
    if diagnostic.fix is not None:
        out.append("\n")
        out.append(" " * width + " = ", style="bold blue")
        out.append("fix: ", style="bold")
        out.append(diagnostic.fix.message + ("" if diagnostic.fix.safe else " (unsafe)"))
    return out


def strength_text(strength: str, bound: int | None) -> str:
    if strength == "bounded":
        return f"bounded (no counterexample with up to {bound} fresh values per type)"
    if strength == "proved":
        return "proved (on every database)"
    if strength == "witnessed":
        return "witnessed (a call replayed through the monitor)"
    return "syntactic (the rule's text shows it)"


def _location(span: Span) -> str:
    return f"{span.file}:{span.line}:{span.column}"


def _snippet(source: SourceFile, span: Span, mark: str, style: str, label: str | None, width: int) -> Text:
    from rich.cells import cell_len
    from rich.text import Text

    text = source.line_text(span.line)
    start = max(span.column - 1, 0)
    if span.end_line == span.line:
        end = max(span.end_column - 1, start + 1)
    else:
        end = max(len(text), start + 1)
    shown = text.replace("\t", TAB)
    pad = cell_len(text[:start].replace("\t", TAB))
    length = max(cell_len(text[start:end].replace("\t", TAB)), 1)
    gutter = " " * width + " |"
    out = Text()
    out.append(gutter + "\n", style="bold blue")
    out.append(f"{span.line:>{width}} | ", style="bold blue")
    out.append(shown + "\n")
    out.append(gutter + " ", style="bold blue")
    out.append(" " * pad + mark * length, style=style)
    if label:
        out.append(" " + label, style=style)
    return out


def summary(diagnostics: list[Diagnostic]) -> str:
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    if not diagnostics:
        return "All checks passed."
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    return "Found " + " and ".join(parts) + "."


def fixable(diagnostics: list[Diagnostic]) -> str | None:
    """The line after the summary that says how many findings `policyc check --fix` would fix, as
    ruff says it; ``None`` when no finding carries a fix."""
    safe = sum(d.fix is not None and d.fix.safe for d in diagnostics)
    unsafe = sum(d.fix is not None and not d.fix.safe for d in diagnostics)
    more = f"{unsafe} more with `--unsafe-fixes`" if unsafe else ""
    if safe:
        return f"[*] {safe} fixable with `policyc check --fix`" + (f" ({more})." if more else ".")
    if unsafe:
        return f"No safe fixes ({unsafe} fixable with `policyc check --fix --unsafe-fixes`)."
    return None
