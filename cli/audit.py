"""`policyc audit`: verify a monitor's audit log, and show the decisions it holds.

Exit status of ``verify``: 0 when the log is intact, 1 when a record is bad (the first one is
named by its line, with a stable code, on standard error), 2 when the log or the key cannot be
read. ``show`` exits with 1 for a log with a line that is not a record, 2 for one it cannot read.
"""

from __future__ import annotations

import click

from .common import EXIT_ERRORS, EXIT_USAGE, echo_json, fail, internal_errors


@click.group("audit")
def audit_group() -> None:
    """Verify and read the audit logs of monitors (see docs/verdicts.md, "Audit log")."""


@audit_group.command("verify")
@click.argument("log", metavar="LOG")
@click.option(
    "--key", metavar="PUB", help="Check every checkpoint's signature with this Ed25519 public key (PEM)."
)
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify_command(log: str, key: str | None, output: str) -> None:
    """Check that no record of LOG was changed, deleted, inserted or moved, and that its tail is whole."""
    with internal_errors():
        from ..runtime.audit import AuditError, verify

        try:
            verified = verify(log, key)
        except AuditError as error:
            fail(str(error), EXIT_USAGE)
        problem = verified.problem
        if output == "json":
            echo_json(
                {
                    "ok": verified.ok,
                    "records": verified.records,
                    "checkpoints": verified.checkpoints,
                    "signed": verified.signed,
                    "problem": None
                    if problem is None
                    else {"line": problem.line, "code": problem.code, "message": problem.message},
                }
            )
        elif problem is None:
            signed = f", {verified.signed} signatures verified" if key else ""
            click.echo(f"{log}: ok: {verified.records} records, {verified.checkpoints} checkpoints{signed}")
        else:
            click.echo(f"{log}:{problem.line}: {problem.message} [{problem.code}]", err=True)
        if problem is not None:
            raise SystemExit(EXIT_ERRORS)


@audit_group.command("show")
@click.argument("log", metavar="LOG")
@click.option("--session", metavar="S", help="Only the decisions of this session.")
@click.option(
    "--verdict",
    type=click.Choice(["allow", "deny", "escalate"]),
    help="Only the decisions with this verdict.",
)
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def show_command(log: str, session: str | None, verdict: str | None, output: str) -> None:
    """Print the decisions of LOG with their reasons (it is not verified: see `policyc audit verify`)."""
    with internal_errors():
        from ..runtime.audit import AuditError, decisions, read_records, render_decision

        try:
            records = read_records(log)
        except AuditError as error:
            fail(str(error), EXIT_USAGE if str(error).startswith("cannot read") else EXIT_ERRORS)
        chosen = decisions(records, session, verdict)
        if output == "json":
            echo_json(chosen)
            return
        for record in chosen:
            click.echo(render_decision(record))


@audit_group.command("export")
@click.argument("db", metavar="DB")
@click.option("-o", "--output", metavar="LOG", help="Write the log here (default: standard output).")
def export_command(db: str, output: str | None) -> None:
    """Write the audit log a `policyc serve` database holds as a JSON-lines log (to verify or show)."""
    with internal_errors():
        import sqlite3
        import sys
        from pathlib import Path

        from ..serve.audit import export

        if not Path(db).is_file():
            fail(f"`{db}` is not a file", EXIT_USAGE)
        try:
            data = export(db)
        except sqlite3.Error as error:
            fail(f"`{db}` holds no audit log of policyc serve: {error}", EXIT_USAGE)
        if output is None:
            sys.stdout.buffer.write(data)
        else:
            from ..compiler.files import replace_file

            replace_file(output, data)
