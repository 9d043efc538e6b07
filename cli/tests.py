"""Policy tests: `policyc test` (the `*_test.toml` files, with coverage) and `policyc new`
(a policy folder whose tests pass)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import EXIT_ERRORS, EXIT_USAGE, FORMAT, echo_json, fail, internal_errors


@click.command("test")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "--coverage", is_flag=True, help="Report which rules some test made fire, and the Deny rules none did."
)
@FORMAT
def test_command(paths: tuple[str, ...], coverage: bool, fmt: str) -> None:
    """Run the policy tests in `*_test.toml` files (PATH: files or folders, default `.`).

    Exit status 0 when every test passed, 1 when one failed or a test file could not run.
    """
    with internal_errors():
        from ..testing.report import summary, text, to_json
        from ..testing.run import FileResult, run_file
        from ..testing.spec import SUFFIX, TestFileError, discover, read

        files, missing = discover(list(paths) or ["."])
        for name in missing:
            fail(f"cannot read `{name}`: no such file or folder", EXIT_USAGE)
        if not files:
            fail(f"no test files (`*{SUFFIX}`) under {', '.join(paths) or '.'}")
        results = []
        for path in files:
            try:
                test = read(path)
            except TestFileError as error:
                results.append(FileResult(None, path, f"{error} [invalid-test-file]"))
                continue
            results.append(run_file(test, coverage))
        if fmt == "json":
            echo_json(to_json(results, coverage), ensure_ascii=False, default=str)
        else:
            click.echo(text(results, coverage))
        counts = summary(results)
        if counts["failed"] or counts["errors"]:
            sys.exit(EXIT_ERRORS)


@click.command("new")
@click.argument("name")
@click.option(
    "--dir", "parent", default=".", show_default=True, metavar="PARENT", help="Where to create the folder."
)
def new_command(name: str, parent: str) -> None:
    """Create a policy folder NAME with a policy, its tests and a README."""
    with internal_errors():
        from .scaffold import ScaffoldError, scaffold

        try:
            written = scaffold(name, Path(parent))
        except ScaffoldError as error:
            fail(str(error))
        for path in written:
            click.echo(f"wrote {path}")
        click.echo(f"next: policyc test {Path(parent) / name} --coverage")
