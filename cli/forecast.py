"""`policyc forecast`: learn a chain over policy predicates from recorded sessions, query
it, draw it, and replay sessions with its warnings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..forecast.errors import MAX_HORIZON  # a constant of a module that imports nothing
from .common import (
    EXIT_ERRORS,
    EXIT_USAGE,
    FORMAT,
    FUNCTORS,
    POLICY,
    VERIFY,
    Finite,
    echo_json,
    fail,
    internal_errors,
    load_policy,
    require_extra,
)


@click.group("forecast")
def forecast_group() -> None:
    """Forecast violations: learn a DTMC over policy predicates from recorded sessions (ProbGuard).

    See docs/forecasting.md.
    """


def _forecast_fail(error: Exception) -> None:
    """A forecasting error: an unreadable file is status 2, anything else wrong with the input 1."""
    fail(str(error), EXIT_USAGE if isinstance(error, OSError) else EXIT_ERRORS)


def _forecast_model(path: str) -> Any:
    from ..forecast.errors import ForecastError
    from ..forecast.model import load

    try:
        return load(path)
    except ForecastError as error:
        _forecast_fail(error)
    except OSError as error:
        fail(f"cannot read `{path}`: {error.strerror or error}", EXIT_USAGE)


@forecast_group.command("learn")
@POLICY
@click.argument("traces", nargs=-1, required=True, metavar="TRACES.jsonl...")
@click.option(
    "-p",
    "--predicates",
    "predicates",
    multiple=True,
    required=True,
    metavar="P1,P2,...",
    help='Policy predicates whose truth values make the states: `Rel`, `Rel(_, "x")`, `name=Rel(...)` '
    "(repeatable).",
)
@click.option(
    "--unsafe", required=True, metavar="PRED", help="The predicate that must never hold (e.g. `Deny`)."
)
@click.option(
    "--invariant",
    "invariants",
    multiple=True,
    metavar="FORMULA",
    help="A formula over predicate names every state (or, with primes `P'`, every transition) satisfies "
    "(repeatable).",
)
@click.option("-o", "--output", required=True, metavar="MODEL.json", help="Where to write the model.")
@click.option(
    "--estimator",
    type=click.Choice(("laplace", "frequency")),
    default="laplace",
    show_default=True,
    help="Laplace smoothing over valid transitions, or plain frequencies.",
)
@click.option(
    "--alpha",
    metavar="A",
    type=Finite(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Laplace's α.",
)
@click.option(
    "--horizon",
    "horizons",
    metavar="K",
    type=click.IntRange(1, MAX_HORIZON),
    multiple=True,
    default=(5, 10),
    show_default=True,
    help="Also cache P(unsafe within K steps) (repeatable).",
)
@click.option(
    "--epsilon",
    metavar="E",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The PAC error bound ε.",
)
@click.option(
    "--delta",
    metavar="D",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The PAC confidence parameter δ.",
)
@click.option(
    "--require-pac", is_flag=True, help="Exit with status 1 when the sessions do not meet the PAC bound."
)
@FORMAT
@FUNCTORS
@VERIFY
def forecast_learn_command(
    policy: str,
    traces: tuple[str, ...],
    predicates: tuple[str, ...],
    unsafe: str,
    invariants: tuple[str, ...],
    output: str,
    estimator: str,
    alpha: float,
    horizons: tuple[int, ...],
    epsilon: float,
    delta: float,
    require_pac: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Learn a forecast model from recorded sessions (TRACES: the JSON Lines `policyc replay` reads)."""
    with internal_errors():
        from ..forecast.build import Settings, learn_model
        from ..forecast.errors import ForecastError
        from ..forecast.patterns import parse_predicate, parse_predicates
        from ..forecast.report import learn_text
        from ..runtime.session import Monitor

        loaded = load_policy(policy, functors, verify_key)
        try:
            chosen = tuple(p for text in predicates for p in parse_predicates(text))
            settings = Settings(
                chosen, parse_predicate(unsafe), invariants, estimator, alpha, horizons, epsilon, delta
            )
            model, _ = learn_model(Monitor(loaded), list(traces), settings, policy)
        except (ForecastError, OSError) as error:
            _forecast_fail(error)
        try:
            Path(output).write_text(model.dumps(), "utf-8")
        except OSError as error:
            fail(f"cannot write `{output}`: {error.strerror or error}", EXIT_USAGE)
        if fmt == "json":
            data = model.to_json()
            summary = {
                key: data[key] for key in ("predicates", "unsafe", "invariants", "estimator", "data", "pac")
            }
            echo_json({"output": output, "states": len(model.states), **summary})
        else:
            click.echo(learn_text(model, output))
        if require_pac and not model.pac.met:
            sys.exit(EXIT_ERRORS)


@forecast_group.command("query")
@click.argument("model", metavar="MODEL.json")
@click.option(
    "--state",
    "spec",
    metavar="STATE",
    help="Only these states: a state id, or predicates that hold (`a,b`) and do not (`!c`).",
)
@FORMAT
def forecast_query_command(model: str, spec: str | None, fmt: str) -> None:
    """Print each state's probability of staying safe, of reaching the unsafe state (eventually
    and within each horizon), and the PAC bound; the cached probabilities are checked against
    the chain (status 1 if they disagree)."""
    with internal_errors():
        from ..forecast.build import verify
        from ..forecast.errors import ForecastError
        from ..forecast.report import pac_text, predicates_text, select, states_table

        loaded = _forecast_model(model)
        try:
            states = select(loaded, spec)
        except ForecastError as error:
            _forecast_fail(error)
        problems = verify(loaded)
        if fmt == "json":
            data = loaded.to_json()
            wanted = {s.id for s in states}
            data["states"] = [s for s in data["states"] if s["id"] in wanted]
            data.pop("transitions")
            data["consistent"] = not problems
            echo_json(data, ensure_ascii=False)
        else:
            if spec is None:
                click.echo("\n".join([*predicates_text(loaded), *pac_text(loaded)]))
            click.echo(states_table(loaded, states) if states else "no state of the model matches")
        for problem in problems:
            click.echo(f"policyc: error: {model}: {problem}", err=True)
        if problems:
            sys.exit(EXIT_ERRORS)


@forecast_group.command("show")
@click.argument("model", metavar="MODEL.json")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("dot", "svg")),
    default="dot",
    show_default=True,
    help="DOT text or SVG.",
)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option(
    "--min-probability",
    metavar="P",
    type=Finite(0, 1),
    default=0.0,
    show_default=True,
    help="Leave out transitions less likely than this.",
)
def forecast_show_command(model: str, fmt: str, output: str | None, min_probability: float) -> None:
    """Draw the chain with each state's probability of reaching the unsafe state: Graphviz DOT
    text, or an SVG drawn with matplotlib (no Graphviz needed)."""
    with internal_errors():
        from ..forecast.render import to_dot, to_svg

        if fmt != "dot":
            require_extra("plots", "`policyc forecast show --format svg`")
        loaded = _forecast_model(model)
        text = to_dot(loaded, min_probability) if fmt == "dot" else to_svg(loaded, min_probability)
        if output is None:
            click.echo(text, nl=False)
            return
        try:
            Path(output).write_text(text, "utf-8")
        except OSError as error:
            fail(f"cannot write `{output}`: {error.strerror or error}", EXIT_USAGE)
        click.echo(f"wrote {output}")


@forecast_group.command("replay")
@POLICY
@click.argument("model", metavar="MODEL.json")
@click.argument("traces", nargs=-1, required=True, metavar="TRACES.jsonl...")
@click.option(
    "--threshold",
    metavar="T",
    type=Finite(0, 1),
    required=True,
    help="Warn when the probability of staying safe is below this.",
)
@click.option(
    "--horizon",
    type=click.IntRange(1, MAX_HORIZON),
    metavar="K",
    help="Staying safe for this many steps (a learned horizon).",
)
@click.option(
    "--unseen",
    type=click.Choice(("worst", "max")),
    default="worst",
    show_default=True,
    help="A state no recorded session was in: assume the worst, or take the model's worst state.",
)
@click.option("--summary", "summary_only", is_flag=True, help="Print only the summary.")
@FORMAT
@FUNCTORS
@VERIFY
def forecast_replay_command(
    policy: str,
    model: str,
    traces: tuple[str, ...],
    threshold: float,
    horizon: int | None,
    unseen: str,
    summary_only: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Replay recorded sessions with the forecast at every step: the warnings, and how many
    events ahead of the violation they came (the lead time)."""
    with internal_errors():
        from ..forecast.errors import ForecastError
        from ..forecast.monitor import Forecaster
        from ..forecast.replay import replay, summary, summary_text
        from ..forecast.report import session_text
        from ..runtime.session import Monitor

        loaded = load_policy(policy, functors, verify_key)
        learned = _forecast_model(model)
        try:
            monitor = Monitor(loaded, forecast=Forecaster(learned, threshold, "warn", horizon, unseen))
            reports = replay(monitor.attached["forecast"], list(traces))
        except (ForecastError, OSError) as error:
            _forecast_fail(error)
        found = summary(reports, threshold)
        unsafe = learned.unsafe.name
        if fmt == "json":
            sessions = [] if summary_only else [r.to_json() for r in reports]
            echo_json({"summary": found, "sessions": sessions})
            return
        if not summary_only:
            for report in reports:
                click.echo(session_text(report, threshold, unsafe))
        click.echo(summary_text(found, unsafe))
