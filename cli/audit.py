"""`policyc audit`: verify a monitor's audit log, print its head, show the decisions it holds,
and export a service's log.

Exit status of ``verify``: 0 when the log is intact (and, with ``--expect``, reaches the head),
1 when a record is bad or the log ends before the head (the first problem is named by its line,
with a stable code, on standard error), 2 when the log, the key or the head cannot be read.
``head`` exits with 1 for a log that does not verify. ``show`` exits with 1 for a log with a
line that is not a record, 2 for one it cannot read. ``export`` exits with 1 when the service's
tables and its log differ (the first difference named, with a stable code).
"""

from __future__ import annotations

from typing import Any

import click

from .common import EXIT_ERRORS, EXIT_USAGE, echo_json, fail, internal_errors

UNANCHORED = (
    "no head was expected (--expect HEAD): a log cut right after a closing checkpoint, whole "
    "segments gone, is intact too"
)


@click.group("audit")
def audit_group() -> None:
    """Verify and read the audit logs of monitors (see docs/verdicts.md, "Audit log")."""


@audit_group.command("verify")
@click.argument("log", metavar="LOG")
@click.option(
    "--key", metavar="PUB", help="Check every checkpoint's signature with this Ed25519 public key (PEM)."
)
@click.option(
    "--expect",
    metavar="HEAD",
    help="The head the log must reach, as `policyc audit head` printed it or the log published it "
    "(the text itself, or a file holding it); a log that ends before it is `truncated`.",
)
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify_command(log: str, key: str | None, expect: str | None, output: str) -> None:
    """Check that no record of LOG was changed, deleted, inserted or moved, that its tail is
    whole and, with --expect, that it reaches the head it had."""
    with internal_errors():
        from ..runtime.audit import AuditError, verify

        head = None if expect is None else _expected(expect)
        try:
            verified = verify(log, key, head)
        except AuditError as error:
            fail(str(error), EXIT_USAGE)
        problem = verified.problem
        warnings = [] if verified.anchored else [{"code": "unanchored", "message": UNANCHORED}]
        if output == "json":
            echo_json(
                {
                    "ok": verified.ok,
                    "status": "ok"
                    if verified.ok and verified.anchored
                    else "intact"
                    if verified.ok
                    else problem.code,
                    "anchored": verified.anchored,
                    "records": verified.records,
                    "checkpoints": verified.checkpoints,
                    "signed": verified.signed,
                    "problem": None
                    if problem is None
                    else {"line": problem.line, "code": problem.code, "message": problem.message},
                    "warnings": warnings if problem is None else [],
                }
            )
        elif problem is None:
            signed = f", {verified.signed} signatures verified" if key else ""
            counts = f"{verified.records} records, {verified.checkpoints} checkpoints{signed}"
            if verified.anchored:
                assert head is not None
                chains = len(head.entries)
                click.echo(
                    f"{log}: ok: {counts}; the expected head reached ({chains} chain{'s' * (chains != 1)})"
                )
            else:
                click.echo(f"{log}: intact: {counts}")
                click.echo(f"{log}: warning: {UNANCHORED} [unanchored]", err=True)
        else:
            click.echo(f"{log}:{problem.line}: {problem.message} [{problem.code}]", err=True)
        if problem is not None:
            raise SystemExit(EXIT_ERRORS)


def _expected(value: str) -> Any:
    """The head ``--expect`` names: the text itself, or the file holding it."""
    import os

    from ..compiler.files import read_text
    from ..runtime.audit import parse_head

    text = value
    is_file = bool(value) and "\n" not in value and os.path.exists(value)
    if is_file:
        try:
            text = read_text(value)
        except (OSError, UnicodeDecodeError) as error:
            fail(f"--expect: cannot read `{value}`: {getattr(error, 'strerror', None) or error}", EXIT_USAGE)
    try:
        return parse_head(text)
    except ValueError as error:
        what = f"`{value}` holds no head" if is_file else "neither a file nor a head"
        fail(f"--expect: {what} of an audit log: {error}", EXIT_USAGE)


@audit_group.command("head")
@click.argument("log", metavar="LOG")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def head_command(log: str, output: str) -> None:
    """Print the head of LOG: per chain of records, where it has got to (`CHAIN SEQ HASH`). Keep
    it somewhere the log's writer cannot reach; `policyc audit verify --expect` checks it."""
    with internal_errors():
        from ..runtime.audit import AuditError, head_of

        try:
            head = head_of(log)
        except AuditError as error:
            fail(str(error), EXIT_USAGE if str(error).startswith("cannot read") else EXIT_ERRORS)
        if output == "json":
            echo_json(head.to_json())
        else:
            click.echo(head.text(), nl=False)


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
    """Print the decisions of LOG as a table: time (UTC), session, tool, verdict, rules, and how
    an escalation ended; `--format json` prints the decision records (LOG is not verified: see
    `policyc audit verify`)."""
    with internal_errors():
        from ..runtime.audit import AuditError, decisions, read_records

        try:
            records = read_records(log)
        except AuditError as error:
            fail(str(error), EXIT_USAGE if str(error).startswith("cannot read") else EXIT_ERRORS)
        if output == "json":
            echo_json(decisions(records, session, verdict))
            return
        from ..runtime.audit_rows import decision_rows
        from .audit_table import print_rows

        print_rows(decision_rows(records, session, verdict))


@audit_group.command("export")
@click.argument("db", metavar="DB")
@click.option("-o", "--output", metavar="LOG", help="Write the log here (default: standard output).")
def export_command(db: str, output: str | None) -> None:
    """Write the audit log a `policyc serve` database holds as a JSON-lines log (to verify or show),
    and check that the database's decisions and answers are those of its log."""
    with internal_errors():
        import sqlite3
        import sys
        from pathlib import Path

        from ..serve.audit import differences, export

        if not Path(db).is_file():
            fail(f"`{db}` is not a file", EXIT_USAGE)
        try:
            data = export(db)
            difference = differences(db, data)
        except sqlite3.Error as error:
            fail(f"`{db}` holds no audit log of policyc serve: {error}", EXIT_USAGE)
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            from ..compiler.files import PRIVATE, replace_file

            try:
                replace_file(output, data, PRIVATE)  # the log of calls: its owner's only
            except OSError as error:
                fail(f"cannot write `{output}`: {error.strerror or error}", EXIT_USAGE)
        if difference is not None:
            fail(f"{db}: {difference}")
