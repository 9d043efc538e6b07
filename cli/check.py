"""`policyc check`: every syntax and semantic error of policy files (and with ``--deep``,
what the analyzer finds in what they do)."""

from __future__ import annotations

import gc
import sys
from typing import Any

import click

from ..compiler.version import __version__
from .common import (
    EXIT_ERRORS,
    EXIT_USAGE,
    NO_MAGIC_OPTION,
    Finite,
    echo_json,
    internal_errors,
    policy_files,
)

FORMATS = ("text", "json", "sarif")
SHOWABLE = ("ast", "strata", "plan")


@click.command()
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
@click.option(
    "--show",
    type=click.Choice(SHOWABLE),
    help="Also print an intermediate form of each file: the syntax tree, the strata or the evaluation plan.",
)
@click.option("--stdin-filename", metavar="NAME", help="The file name to report for a policy read from `-`.")
@click.option(
    "--deep",
    is_flag=True,
    help="Also analyse what the policy does (clingo and z3): dead, redundant and shadowed rules, tools "
    "always denied or allowed.",
)
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=2,
    show_default=True,
    help="Fresh values per type the --deep searches may use.",
)
@click.option(
    "--deep-timeout",
    type=Finite(min=0.1),
    default=6.0,
    show_default=True,
    metavar="SECONDS",
    help="Time the --deep searches of a file may take together; a question left unanswered reports nothing.",
)
@NO_MAGIC_OPTION
@click.option(
    "--fix",
    is_flag=True,
    help="Apply the safe fixes the diagnostics carry, again until none applies, and report what remains.",
)
@click.option(
    "--unsafe-fixes", is_flag=True, help="With --fix or --diff, apply the fixes that are not safe too."
)
@click.option(
    "--diff", is_flag=True, help="Write nothing; print the changes the fixes would make as a unified diff."
)
def check(
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    show: str | None,
    stdin_filename: str | None,
    deep: bool,
    bound: int,
    deep_timeout: float,
    no_magic: bool,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
) -> None:
    """Report every syntax and semantic error of policy files.

    FILE may be a policy file, a folder (every `*.dl` file below it is checked) or `-` for
    standard input. With --fix, the fixes are written to the files (for `-`, the fixed text
    goes to standard output and the report to standard error).
    """
    if show and fmt == "sarif":
        raise click.UsageError("--show cannot be combined with --format sarif")
    if unsafe_fixes and not (fix or diff):
        raise click.UsageError("--unsafe-fixes applies fixes with --fix or shows them with --diff")
    if show and (fix or diff):
        raise click.UsageError("--show cannot be combined with --fix or --diff: show the fixed files after")
    if diff and fmt == "sarif":
        raise click.UsageError("--diff cannot be combined with --format sarif")
    gc.disable()  # a short-lived process building many small objects; collection only costs time
    with internal_errors():
        searched = (bound, deep_timeout) if deep else None
        if fix or diff:
            from .fixes import fix_files

            fix_files(paths, fmt, fail_on, stdin_filename, searched, unsafe_fixes, diff)
        else:
            _check(paths, fmt, fail_on, show, stdin_filename, searched, no_magic)


def _check(
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    show: str | None,
    stdin_filename: str | None,
    deep: tuple[int, float] | None = None,  # the bound and the time of --deep
    no_magic: bool = False,  # the plan shown evaluates every relation in full
) -> None:
    from ..compiler.diagnostics import Severity, sort_diagnostics
    from ..compiler.loader import SourceError, load_data, load_root, read_file
    from ..compiler.pipeline import compile_program
    from ..compiler.source import SourceFile

    files, problems = policy_files(paths)
    compilations = {}
    for path in files:
        try:
            if path == "-":
                name = stdin_filename or "<stdin>"
                program, found = load_data(sys.stdin.buffer.read(), name)
            else:
                source = read_file(path)
                if isinstance(source, SourceFile) and source.text.lstrip().startswith("{"):
                    problems.append(
                        f"`{path}` is a bundle, not a policy source file: check the policy's sources "
                        "(witness, conditions and diff analyse a bundle once its plan is checked to be "
                        "its sources' plan)"
                    )
                    continue
                program, found = load_root(source)
        except SourceError as error:
            problems.append(str(error))
            continue
        compilations[path] = compile_program(program, found)
    deep_findings: list = []
    undecided: list[str] = []  # what --deep left undecided in the time allowed, per file and kind
    if deep is not None:
        from ..analyzer.deep import analyse
        from ..compiler.stages import Stratified

        for path, compilation in compilations.items():
            if compilation.ok and isinstance(compilation, Stratified):
                result = analyse(compilation, *deep)
                deep_findings.extend(result.findings)
                undecided.extend(f"{path}: {note}" for note in result.notes())
    diagnostics = sort_diagnostics(
        [*(d for c in compilations.values() for d in c.diagnostics), *deep_findings]
    )
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors

    if fmt == "text":
        print_text(diagnostics, compilations, show, no_magic, fix_hint=True)
    elif fmt == "json":
        from ..compiler.render_json import to_json

        out: dict[str, Any] = to_json(diagnostics)
        if show:
            from ..compiler.show import show_json

            out[show] = {path: show_json(show, c, no_magic) for path, c in compilations.items()}
        echo_json(out)
    else:
        from ..compiler.render_sarif import to_sarif

        echo_json(to_sarif(diagnostics, __version__))

    for note in undecided:
        click.echo(f"policyc: note: {note} (--deep-timeout); they report nothing", err=True)
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(EXIT_USAGE)
    if errors or (fail_on == "warning" and warnings):
        sys.exit(EXIT_ERRORS)


def print_text(
    diagnostics: list,
    compilations: dict,
    show: str | None = None,
    no_magic: bool = False,
    err: bool = False,
    before_summary: tuple[str, ...] = (),
    fix_hint: bool = False,
) -> None:
    """Print the diagnostics of the compilations as text, each with its source line, then the
    lines ``before_summary``, the summary and, with ``fix_hint``, how many `--fix` would fix (on
    standard error with ``err``)."""
    from ..compiler import render_text

    if not diagnostics and not show:  # nothing to colour: no need for rich
        for line in before_summary:
            click.echo(line, err=err)
        if compilations:
            click.echo(render_text.summary(diagnostics), err=err)
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True, stderr=err)
    if show:
        from ..compiler.show import show_text

        for path, compilation in compilations.items():
            if len(compilations) > 1:
                console.print(f"== {path} ==", style="bold")
            console.print(show_text(show, compilation, no_magic), markup=False)
    sources: dict[str, Any] = {}
    for compilation in compilations.values():
        for module in compilation.program.modules:
            if module.source is not None:
                sources.setdefault(module.path, module.source)
    render_text.render(diagnostics, sources.get, console)
    for line in before_summary:
        console.print(line, markup=False)
    if compilations:
        console.print(render_text.summary(diagnostics), style="bold" if diagnostics else None)
        hint = render_text.fixable(diagnostics) if fix_hint else None
        if hint is not None:
            console.print(hint, markup=False)
