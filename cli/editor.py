"""For editors: `policyc fmt` (the canonical layout) and `policyc lsp` (the language server)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .common import (
    EXIT_ERRORS,
    EXIT_USAGE,
    FORMAT,
    echo_json,
    internal_errors,
    policy_files,
    print_diagnostics,
    require_extra,
    rewrite,
)


@click.command("fmt")
@click.argument("paths", nargs=-1, metavar="FILE...")
@click.option("--check", is_flag=True, help="Write nothing; list the files that are not formatted (exit 1).")
@click.option("--diff", is_flag=True, help="Write nothing; print the changes as a unified diff (exit 1).")
@click.option("--write", is_flag=True, help="Rewrite the files that are not formatted (the default).")
@click.option("--stdin-filename", metavar="NAME", help="The file name to report for a policy read from `-`.")
@FORMAT
def fmt_command(
    paths: tuple[str, ...], check: bool, diff: bool, write: bool, stdin_filename: str | None, fmt: str
) -> None:
    """Format policy files in the canonical layout (docs/formatting.md), rewriting them in place.

    FILE may be a policy file, a folder (every `*.dl` file below it) or `-` for standard input,
    whose formatted text goes to standard output.
    """
    if check + diff + write > 1:
        raise click.UsageError("choose one of --check, --diff and --write")
    if not paths:
        raise click.UsageError("give the files or folders to format, or `-` for standard input")
    mode = "check" if check else "diff" if diff else "write"
    with internal_errors():
        _fmt(paths, mode, stdin_filename or "<stdin>", fmt)


def _fmt(paths: tuple[str, ...], mode: str, stdin_name: str, fmt: str) -> None:
    from ..compiler.formatter import format_bytes, format_read
    from ..compiler.loader import SourceError, read_file

    files, problems = policy_files(paths)
    results = []
    for path in files:
        if path == "-":
            result = format_bytes(sys.stdin.buffer.read(), stdin_name)
        else:
            try:
                result = format_read(read_file(path))
            except SourceError as error:
                problems.append(str(error))
                continue
        if mode == "write" and result.changed and path != "-":
            try:
                rewrite(path, result.formatted or "")
            except OSError as error:
                problems.append(f"cannot write `{path}`: {error.strerror or error}")
                continue
        results.append((path, result))

    diagnostics = [d for _, result in results for d in result.diagnostics]
    failed = sum(1 for _, result in results if result.formatted is None)
    changed = [path for path, result in results if result.changed]
    if fmt == "json":
        _fmt_json(results, mode, diagnostics)
    else:
        _fmt_text(results, mode, diagnostics)
        # the text of standard input, printed, is all `fmt -` says (as `ruff format -`)
        counted = [(p, r) for p, r in results if not (mode == "write" and p == "-")]
        written = sum(1 for _, r in counted if r.changed)
        broken = sum(1 for _, r in counted if r.formatted is None)
        _fmt_summary(mode, written, len(counted) - written - broken, broken)
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(EXIT_USAGE)
    if failed or (mode in ("check", "diff") and changed):
        sys.exit(EXIT_ERRORS)


def _fmt_text(results: list, mode: str, diagnostics: list) -> None:
    if diagnostics:
        print_diagnostics(diagnostics, {result.path: result.source for _, result in results}.get)
    for path, result in results:
        if result.formatted is None:
            continue
        if mode == "write" and path == "-":
            click.echo(result.formatted, nl=False)
        elif mode == "check" and result.changed:
            click.echo(f"would reformat: {result.path}")
        elif mode == "diff" and result.changed:
            click.echo(result.diff(), nl=False)


def _fmt_summary(mode: str, changed: int, unchanged: int, failed: int) -> None:
    def files(n: int) -> str:
        return f"{n} file{'s' if n != 1 else ''}"

    if mode == "write":
        parts = [f"{files(changed)} reformatted", f"{files(unchanged)} left unchanged"]
    else:
        parts = [f"{files(changed)} would be reformatted", f"{files(unchanged)} already formatted"]
    if failed:
        parts.append(f"{files(failed)} with errors not formatted")
    if parts and changed + unchanged + failed:
        click.echo(", ".join(parts), err=True)


def _fmt_json(results: list, mode: str, diagnostics: list) -> None:
    from ..compiler.render_json import to_json

    files = []
    for path, result in results:
        entry: dict[str, Any] = {
            "file": result.path,
            "changed": result.changed,
            "error": result.formatted is None,
        }
        if mode == "write" and path == "-":
            entry["text"] = result.formatted
        elif mode == "diff":
            entry["diff"] = result.diff()
        files.append(entry)
    echo_json({"files": files, **to_json(diagnostics)})


@click.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over standard input and output (the default and only way).")
def lsp_command(stdio: bool) -> None:
    """Run the language server for editors (LSP over standard input and output): diagnostics as
    you type and deep checks on save, hover, go to definition, references, rename, outline,
    completion, quick fixes and formatting. See docs/lsp.md."""
    with internal_errors():
        require_extra("lsp", "`policyc lsp`")
        from ..lsp.server import serve

        serve(debug=bool(os.environ.get("POLICYC_DEBUG")))
