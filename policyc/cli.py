"""The ``policyc`` command. Thin: parse arguments, call the library, print, choose the exit status.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. The compiler is imported inside each command so ``policyc --help`` stays fast.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__

FORMATS = ("text", "json", "sarif")
SHOWABLE = ("ast", "strata")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="policyc")
def main() -> None:
    """Compile, check and enforce Datalog security policies for LLM agents."""


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="How to print the diagnostics.",
)
@click.option(
    "--fail-on",
    type=click.Choice(("error", "warning")),
    default="error",
    show_default=True,
    help="Exit with status 1 on errors only, or on warnings too.",
)
@click.option("--show", type=click.Choice(SHOWABLE), help="Also print an intermediate form of each file.")
@click.option("--stdin-filename", metavar="NAME", help="The file name to report for a policy read from `-`.")
def check(
    paths: tuple[str, ...], fmt: str, fail_on: str, show: str | None, stdin_filename: str | None
) -> None:
    """Report every syntax and semantic error of policy files.

    FILE may be a policy file, a folder (every `*.dl` file below it is checked) or `-` for
    standard input.
    """
    if show and fmt == "sarif":
        raise click.UsageError("--show cannot be combined with --format sarif")
    gc.disable()  # a short-lived process building many small objects; collection only costs time
    with _internal_errors():
        _check(paths, fmt, fail_on, show, stdin_filename)


def _check(
    paths: tuple[str, ...], fmt: str, fail_on: str, show: str | None, stdin_filename: str | None
) -> None:
    from .compiler.diagnostics import Severity, sort_diagnostics
    from .compiler.loader import SourceError, load_data, load_file
    from .compiler.pipeline import compile_program

    files, problems = _expand(paths)
    compilations = {}
    for path in files:
        try:
            if path == "-":
                name = stdin_filename or "<stdin>"
                program, found = load_data(sys.stdin.buffer.read(), name)
            else:
                program, found = load_file(path)
        except SourceError as error:
            problems.append(str(error))
            continue
        compilations[path] = compile_program(program, found)
    diagnostics = sort_diagnostics(d for c in compilations.values() for d in c.diagnostics)
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors

    if fmt == "text":
        _print_text(diagnostics, compilations, show)
    elif fmt == "json":
        from .compiler.render_json import to_json

        out: dict[str, Any] = to_json(diagnostics)
        if show:
            from .compiler.show import show_json

            out[show] = {path: show_json(show, c) for path, c in compilations.items()}
        click.echo(json.dumps(out, indent=2))
    else:
        from .compiler.render_sarif import to_sarif

        click.echo(json.dumps(to_sarif(diagnostics, __version__), indent=2))

    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(2)
    if errors or (fail_on == "warning" and warnings):
        sys.exit(1)


def _print_text(diagnostics: list, compilations: dict, show: str | None) -> None:
    from rich.console import Console

    from .compiler import render_text

    console = Console(highlight=False, soft_wrap=True)
    if show:
        from .compiler.show import show_text

        for path, compilation in compilations.items():
            if len(compilations) > 1:
                console.print(f"== {path} ==", style="bold")
            console.print(show_text(show, compilation), markup=False)
    sources: dict[str, Any] = {}
    for compilation in compilations.values():
        for module in compilation.program.modules:
            if module.source is not None:
                sources.setdefault(module.path, module.source)
    render_text.render(diagnostics, sources.get, console)
    if compilations:
        console.print(render_text.summary(diagnostics), style="bold" if diagnostics else None)


def _expand(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Files to check: files as given, folders searched for `*.dl`, `-` for standard input."""
    files: list[str] = []
    problems: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            files.append(path)
            continue
        found = sorted(str(p) for p in Path(path).rglob("*.dl") if p.is_file())
        if not found:
            problems.append(f"no policy files (`*.dl`) in `{path}`")
        files.extend(found)
    return files, problems


class _internal_errors:
    """Turn a crash into a one-line report (set POLICYC_DEBUG=1 to see the traceback)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> bool:
        if error is None or isinstance(
            error, (SystemExit, KeyboardInterrupt, click.exceptions.Exit, click.ClickException)
        ):
            return False
        if os.environ.get("POLICYC_DEBUG"):
            return False
        click.echo(f"policyc: internal error: {kind.__name__}: {error}", err=True)
        click.echo(
            "this is a bug in policyc; please report it with the input that caused it "
            "(POLICYC_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(2)
