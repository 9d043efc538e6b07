"""Risk budgets: `policyc calibrate` (a threshold per role) and `policyc risk-report`
(calibrated thresholds judged on new records)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .common import (
    EXIT_ERRORS,
    FORMAT,
    Finite,
    echo_json,
    internal_errors,
    require_extra,
    risk_declarations,
    risk_fail,
    thresholds_in_bundle,
)

PLOTS = click.option(
    "--plots", metavar="DIR", help="Write a plot per role (violation and utility against the threshold)."
)
PLOT_FORMAT = click.option(
    "--plot-format",
    type=click.Choice(("png", "svg")),
    default="png",
    show_default=True,
    help="The plots' format.",
)


@click.command("calibrate")
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option("--data", "data", metavar="CALIB.jsonl", help="Calibration records, one per line.")
@click.option(
    "--from-traces",
    "traces",
    multiple=True,
    metavar="TRACES",
    help="Instead of --data: records made from labelled recorded sessions (files or folders, as "
    "`policyc replay` reads them; repeatable), scored by --detector.",
)
@click.option("-o", "--output", required=True, metavar="THRESHOLDS", help="Where to write thresholds.json.")
@click.option(
    "--method",
    type=click.Choice(("crc", "clopper-pearson")),
    default="crc",
    show_default=True,
    help="crc: expected violation within budget per stratum (Eq. 5); clopper-pearson: every stratum "
    "within budget at once with probability 1 - delta (Theorem 2).",
)
@click.option(
    "--delta",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Failure probability of the clopper-pearson certificate, split over the strata; also the "
    "level of the test violation bounds.",
)
@click.option(
    "--episode-level", is_flag=True, help="Calibrate over episodes (the worst field of each), not fields."
)
@click.option(
    "--default-pool",
    default="high_risk",
    show_default=True,
    metavar="NAME",
    help="The pool of rare roles that declare none.",
)
@click.option(
    "--detector",
    default="lexical-provenance",
    show_default=True,
    metavar="NAME",
    help="The detector that produced the scores (the monitor must score with the same one).",
)
@click.option(
    "--test", "test_path", metavar="TEST.jsonl", help="Held-out records to report the thresholds on."
)
@click.option(
    "--test-split",
    type=Finite(0, 1, min_open=True, max_open=True),
    metavar="FRACTION",
    help="Hold out this fraction of the episodes of --data as test data.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The random seed of --test-split.")
@PLOTS
@PLOT_FORMAT
@FORMAT
def calibrate_command(
    policy: str,
    data: str | None,
    traces: tuple[str, ...],
    output: str,
    method: str,
    delta: float,
    episode_level: bool,
    default_pool: str,
    detector: str,
    test_path: str | None,
    test_split: float | None,
    seed: int,
    plots: str | None,
    plot_format: str,
    fmt: str,
) -> None:
    """Calibrate a threshold per role of POLICY from labelled calibration records, write them to
    THRESHOLDS, and report violation, floors and over-intervention per role.

    A record is a JSON object per line: {"field": "send_money.recipient" or "role": "target",
    "score": 0.42, "violated": false, "episode": "e17"}. Roles too rare for their budget
    (1/(n+1) above it) are pooled. Exit status 0 when the thresholds were written.
    """
    if test_path is not None and test_split is not None:
        raise click.UsageError("--test and --test-split cannot be combined")
    if (data is None) == (not traces):
        raise click.UsageError("give the records: --data CALIB.jsonl, or --from-traces TRACES (one of them)")
    if plots is not None:
        require_extra("plots", "`--plots`")
    with internal_errors():
        from ..risk.calibrate import calibrate
        from ..risk.errors import RiskError
        from ..risk.records import split_records
        from ..risk.report import Report, evaluate

        declarations = risk_declarations(policy)
        if data is not None:
            records = _risk_records(data, declarations, episode_level)
        else:
            records = _traced_records(traces, declarations, detector, fmt)
            data = ", ".join(traces)
        test = None
        split = None
        try:
            if test_split is not None:
                records, test = split_records(records, test_split, seed)
                split = f"{test_split:g} of the episodes of {data}, seed {seed}"
            elif test_path is not None:
                test = _risk_records(test_path, declarations, episode_level)
                split = test_path
            from ..risk.detectors import calibration_detector

            if (note := calibration_detector(detector)) is not None:
                click.echo(f"policyc: note: {note}", err=True)
            thresholds = calibrate(
                records,
                declarations,
                method=method,
                delta=delta,
                episode_level=episode_level,
                default_pool=default_pool,
                detector=detector,
            )
            thresholds.write(output)
        except RiskError as error:
            risk_fail(error)
        report = Report(
            thresholds,
            evaluate(records, thresholds),
            None if test is None else evaluate(test, thresholds),
            data,
            split,
            delta,
        )
        _risk_output(report, fmt, plots, plot_format, records, test)
        if fmt == "text":
            click.echo(f"wrote {output}")


@click.command("risk-report")
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Thresholds to judge (default: those the bundle carries).",
)
@click.option("--data", required=True, metavar="DATA.jsonl", help="Labelled records, one per line.")
@click.option(
    "--delta",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Level of the Clopper-Pearson bounds on each violation rate.",
)
@PLOTS
@PLOT_FORMAT
@FORMAT
def risk_report_command(
    policy: str,
    thresholds_path: str | None,
    data: str,
    delta: float,
    plots: str | None,
    plot_format: str,
    fmt: str,
) -> None:
    """Judge calibrated thresholds on new labelled records (frozen thresholds under shift, or a
    recalibration check): violation per role against its budget, with its upper bound.

    Exit status 0 when every role is within its budget on the data, 1 when one is not (or the
    input has errors).
    """
    if plots is not None:
        require_extra("plots", "`--plots`")
    with internal_errors():
        from ..risk.errors import RiskError
        from ..risk.report import Report, evaluate
        from ..risk.thresholds import read_thresholds

        declarations = risk_declarations(policy)
        try:
            if thresholds_path is not None:
                thresholds = read_thresholds(thresholds_path)
            else:
                thresholds = thresholds_in_bundle(policy)
        except RiskError as error:
            risk_fail(error)
        problems = thresholds.problems(declarations)
        for problem in problems:
            click.echo(f"policyc: error: {problem}", err=True)
        if problems:
            sys.exit(EXIT_ERRORS)
        records = _risk_records(data, declarations, thresholds.episode_level)
        report = Report(thresholds, None, evaluate(records, thresholds), data, data, delta)
        _risk_output(report, fmt, plots, plot_format, None, records)
        if report.over_budget():
            sys.exit(EXIT_ERRORS)


def _traced_records(traces: tuple[str, ...], declarations: Any, detector: str, fmt: str) -> Any:
    """The records of labelled recorded sessions (``--from-traces``), scored by ``detector``."""
    from ..risk.detectors import detector_named
    from ..risk.errors import RiskError
    from ..risk.from_traces import from_traces

    try:
        records, skipped = from_traces(traces, declarations, detector_named(detector))
    except RiskError as error:
        risk_fail(error)
    if fmt == "text":
        episodes = len({r.episode for r in records})
        note = f", {skipped:,} sessions without labels skipped" if skipped else ""
        click.echo(f"made {len(records):,} records from {episodes:,} labelled sessions{note}")
    return records


def _risk_records(path: str, declarations: Any, episode_level: bool = False) -> Any:
    from ..risk.errors import RiskError
    from ..risk.records import read_records

    try:
        return read_records(path, declarations, need_episodes=episode_level)
    except RiskError as error:
        risk_fail(error)


def _risk_output(
    report: Any, fmt: str, plots: str | None, plot_format: str, calibration: Any, test: Any
) -> None:
    from ..risk.errors import RiskError

    written = []
    if plots is not None:
        from ..risk.plots import write_plots

        try:
            written = write_plots(report.thresholds, calibration or [], test, plots, plot_format)
        except RiskError as error:
            risk_fail(error)
    if fmt == "json":
        out = report.to_json()
        out["plots"] = [str(p) for p in written]
        echo_json(out, ensure_ascii=False)
    else:
        click.echo(report.text())
        for path in written:
            click.echo(f"wrote {path}")
