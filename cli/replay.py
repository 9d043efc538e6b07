"""`policyc replay`: recorded sessions replayed through the monitor, from one trace file to
archives of millions of sessions, in this process, on a local pool or on a Ray cluster, with a
report of the decisions and, against an older policy, of what would change (docs/replay.md)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

import click

from .common import EXIT_USAGE, FORMAT, FUNCTORS, POLICY, VERIFY, echo_json, fail, internal_errors


@click.command("replay")
@POLICY
@click.argument("traces", metavar="TRACES...", nargs=-1, required=True)
@click.option(
    "--compare",
    "old_policy",
    metavar="OLD_POLICY_OR_BUNDLE",
    help="Replay with this policy too, and report the decisions that differ.",
)
@click.option("--engine", type=click.Choice(("local", "ray")), default="local", show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Processes (local) or actors (ray) replaying shards [default: the CPUs].",
)
@click.option("--address", metavar="ADDRESS", help="The Ray cluster to run on (default: a local one).")
@click.option("--report", "report_path", metavar="FILE", help="Write the report (JSON) to FILE.")
@click.option(
    "--differing",
    "differing_path",
    metavar="FILE",
    help="With --compare, write every session whose decisions differ to FILE (JSON Lines): its file, "
    "line and name, its first differing call and both decisions of it.",
)
@click.option(
    "--html",
    "html_path",
    metavar="FILE",
    help="Write the report as a self-contained HTML page with its plots to FILE (extra `plots`).",
)
@click.option(
    "--shard-bytes",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    help="Bytes of a plain trace file per shard (a compressed file is one shard).",
)
@click.option("--each", is_flag=True, help="List every session's decisions before the report.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="A progress bar on stderr with sessions/s [default: when stderr is a terminal].",
)
@FORMAT
@FUNCTORS
@VERIFY
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Risk thresholds from `policyc calibrate` (instead of those the bundle carries).",
)
def replay_command(
    policy: str,
    traces: tuple[str, ...],
    old_policy: str | None,
    engine: str,
    workers: int | None,
    address: str | None,
    report_path: str | None,
    differing_path: str | None,
    html_path: str | None,
    shard_bytes: int,
    each: bool,
    progress: bool | None,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
    thresholds_path: str | None,
) -> None:
    """Replay recorded sessions (JSON Lines files, plain, gzip or zstd, or folders of them; one
    session per line, an object with an `events` list), deciding every tool call where it was
    made, and report the decisions per verdict, rule and tool; with --compare, every decision
    that differs. Exit status 1 when a line or file could not be read or a shard failed."""
    if differing_path is not None and old_policy is None:
        raise click.UsageError(
            "--differing lists the sessions two policies decide differently: give --compare"
        )
    with internal_errors():
        from .common import require_extra

        if engine == "ray":
            require_extra("ray", "`--engine ray`")
        if html_path is not None:
            require_extra("plots", "`--html`")
        for path in traces:
            if not os.path.exists(path):
                fail(f"cannot read `{path}`: no such file or folder", EXIT_USAGE)
        job, digests = _job(policy, old_policy, functors, verify_key, thresholds_path, each)
        if differing_path is not None:
            job = replace(job, differing=True)
        from ..replay.archive import files, shards
        from ..replay.engines import replay_archive
        from ..replay.report import differing_lines, listing, location, report_bytes, report_json, report_text

        found, unopened = shards(traces, shard_bytes)
        chosen = workers or os.cpu_count() or 1
        with _progress(progress) as advance:
            try:
                tally = replay_archive(
                    job, found, engine=engine, workers=chosen, address=address, progress=advance
                )
            except ImportError as error:
                fail(f"--engine ray needs Ray: pip install 'policyc[ray]' ({error})", EXIT_USAGE)
        for problem in unopened:
            tally.unreadable_line((-1, problem.line, 0), problem.path, problem.message)
        compared = None if old_policy is None or digests[1] is None else (old_policy, digests[1])
        report = report_json(tally, (policy, digests[0]), compared, files(traces))
        if report_path is not None:
            _write(report_path, report_bytes(report))
        if differing_path is not None:
            count = len(tally.differing_sessions)
            _write(differing_path, differing_lines(tally), f"{count:,} differing session{'s' * (count != 1)}")
        if html_path is not None:
            from ..replay.page import report_html

            _write(html_path, report_html(report).encode("utf-8"))
        if fmt == "json":
            echo_json({"sessions": listing(tally), "report": report} if each else report)
        else:
            click.echo(report_text(report, listing(tally)), nl=False)
        if not tally.sessions and not tally.unreadable:
            fail(
                f"{', '.join(traces)}: no sessions (a trace holds one JSON object with an `events` list per line)"
            )
        if tally.unreadable or tally.shards_failed:
            first = (tally.unreadables or tally.shards_failed)[0][1]
            parts = [
                f"{n:,} {what}{'s' * (n != 1)}"
                for n, what in (
                    (tally.unreadable, "unreadable line"),
                    (len(tally.shards_failed), "failed shard"),
                )
                if n
            ]
            fail(
                f"{' and '.join(parts)} (listed in the report; the first: "
                f"{location(first)}: {first['message']})"
            )


def _write(path: str, data: bytes, what: str | None = None) -> None:
    """Write a file and say so on standard error (standard output holds the report)."""
    try:
        with open(path, "wb") as out:
            out.write(data)
    except OSError as error:
        fail(f"cannot write `{path}`: {error.strerror or error}", EXIT_USAGE)
    click.echo(f"wrote {path}" + (f": {what}" if what else ""), err=True)


def _job(
    policy: str,
    old_policy: str | None,
    functors: str | None,
    verify_key: str | None,
    thresholds_path: str | None,
    each: bool,
) -> tuple[Any, tuple[str, str | None]]:
    """The job every worker runs (the policies as bundles) and the policies' digests; a policy
    that cannot be used ends the command as for every command."""
    from ..replay.engines import Job
    from ..runtime.opener import frozen
    from .common import load_policy, policy_failures, thresholds_for_monitor

    loaded = load_policy(policy, functors, verify_key)  # its errors printed as `check` prints them
    options = {}
    if thresholds_path is not None:
        options["thresholds"] = thresholds_for_monitor(thresholds_path, loaded)
    with policy_failures():
        digest, bundle = frozen(policy, verify_key)
        old = None if old_policy is None else frozen(old_policy, verify_key)
        if old_policy is not None:
            load_policy(old_policy, functors, verify_key)
    job = Job(
        bundle,
        policy,
        None if old is None else old[1],
        old_policy or "",
        functors=functors,
        options=options,
        each=each,
    )
    return job, (digest, None if old is None else old[0])


class _progress:
    """A rich progress bar on stderr counting sessions, with sessions/s (or nothing)."""

    def __init__(self, wanted: bool | None) -> None:
        self.wanted = sys.stderr.isatty() if wanted is None else wanted
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not self.wanted:
            return lambda sessions: None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("replaying"),
            TextColumn("{task.completed:,} sessions"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True, force_terminal=True),
            transient=False,
        )
        self.bar.start()
        task = self.bar.add_task("replay", total=None, rate="")

        def advance(sessions: int) -> None:
            self.bar.advance(task, sessions)
            speed = self.bar.tasks[0].speed
            if speed:
                self.bar.update(task, rate=f"{speed:,.0f} sessions/s")

        return advance

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()
