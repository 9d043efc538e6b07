"""`policyc audit`: verify a monitor's audit log, print its head, show the decisions it holds,
and export a service's log.

Exit status of ``verify``: 0 when the log is intact (and, with ``--expect``, reaches the head;
a log whose last segment is still open, as an export of a running service, passes only so,
reported ``open``), 1 when a record is bad, the log ends before the head, or it ends in an open
segment and no head was expected (the first problem is named by its line,
with a stable code, on standard error), 2 when the log, the key or the head cannot be read.
``head`` exits with 1 for a log that does not verify. ``show`` exits with 1 for a log with a
line that is not a record, 2 for one it cannot read. ``export`` exits with 1 when the service's
tables and its log differ (the first difference named, with a stable code).
"""

from __future__ import annotations

from typing import Any

import click

from .common import EXIT_ERRORS, EXIT_USAGE, echo_json, fail, internal_errors

OPEN = (
    "a segment of the log is still open (its writer, such as a running service, has not closed it): "
    "what the log holds up to the expected head is verified, records after it are not anchored"
)
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
        if verified.open:
            warnings.append({"code": "open-segment", "message": OPEN})
        if output == "json":
            echo_json(
                {
                    "ok": verified.ok,
                    "status": _status(verified),
                    "anchored": verified.anchored,
                    "open": verified.open or (problem is not None and problem.code == "open-segment"),
                    "chains": verified.chains,
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
            chains = f", {verified.chains} chains" if verified.chains != 1 else ""
            counts = f"{verified.records} records{chains}, {verified.checkpoints} checkpoints{signed}"
            if verified.anchored:
                assert head is not None
                reached = len(head.entries)
                said = "open" if verified.open else "ok"
                click.echo(
                    f"{log}: {said}: {counts}; the expected head reached "
                    f"({reached} chain{'s' * (reached != 1)})"
                )
                if verified.open:
                    click.echo(f"{log}: warning: {OPEN} [open-segment]", err=True)
            else:
                click.echo(f"{log}: intact: {counts}")
                click.echo(f"{log}: warning: {UNANCHORED} [unanchored]", err=True)
        elif problem.code == "open-segment":
            click.echo(f"{log}:{problem.line}: warning: {problem.message} [{problem.code}]", err=True)
        else:
            click.echo(f"{log}:{problem.line}: {problem.message} [{problem.code}]", err=True)
        if problem is not None:
            raise SystemExit(EXIT_ERRORS)


def _status(verified: Any) -> str:
    """``ok`` (intact, the head reached, every segment closed), ``open`` (a segment still
    open: passes only with the head reached), ``intact`` (no head expected), or the problem's
    code."""
    problem = verified.problem
    if problem is not None:
        return "open" if problem.code == "open-segment" else str(problem.code)
    if not verified.anchored:
        return "intact"
    return "open" if verified.open else "ok"


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
@click.argument("databases", nargs=-1, required=True, metavar="DB...")
@click.option("-o", "--output", metavar="LOG", help="Write the log here (default: standard output).")
@click.option(
    "--head",
    "head_file",
    metavar="FILE",
    help="Also write the head of the exported log here (one entry per chain), for `verify --expect`.",
)
def export_command(databases: tuple[str, ...], output: str | None, head_file: str | None) -> None:
    """Write the audit log a `policyc serve` database holds as a JSON-lines log (to verify or
    show), and check that the database's decisions and answers are those of its log. DB: a
    SQLite file (with the files of its other processes, NAME.pI.EXT, found beside it), or a
    postgresql:// URL (its password from PGPASSWORD or PGPASSFILE); several chains are written
    one after the other, and checked chain by chain."""
    with internal_errors():
        import sys

        from ..serve.export import ExportError, export_databases

        try:
            exported = export_databases(databases)
        except ExportError as error:
            fail(str(error), EXIT_USAGE)
        data = exported.log
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            _write_private(output, data)
        if head_file is not None:
            from ..runtime.audit import AuditError, head_of_bytes

            try:
                head = head_of_bytes(data, "the exported log")
            except AuditError as error:
                fail(f"--head: {error}", EXIT_ERRORS)
            _write_private(head_file, head.text().encode("utf-8"))
        for source in exported.sources:
            if source.open:
                click.echo(
                    f"{source.name}: the chain at line {source.line} ends in an open segment (its writer "
                    "is running, or stopped without closing it): verify the export with --expect and a "
                    "head its writer published",
                    err=True,
                )
        if exported.difference is not None:
            fail(str(exported.difference))  # it names the database


def _write_private(path: str, data: bytes) -> None:
    from ..compiler.files import PRIVATE, replace_file

    try:
        replace_file(path, data, PRIVATE)  # the log of calls: its owner's only
    except OSError as error:
        fail(f"cannot write `{path}`: {error.strerror or error}", EXIT_USAGE)
