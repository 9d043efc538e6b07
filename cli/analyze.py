"""Questions to the analyzer: `policyc witness`, `policyc diff` and `policyc conditions`."""

from __future__ import annotations

from typing import Any

import click

from .common import (
    FORMAT,
    POLICY,
    Finite,
    echo_json,
    fail,
    internal_errors,
    load_for_analysis,
    print_diagnostics,
)

BOUND = click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=3,
    show_default=True,
    help="Fresh values per type a bounded search may use (besides the policy's constants).",
)


SEARCH_TIMEOUT = click.option(
    "--timeout",
    type=Finite(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Give up a search after this many seconds.",
)


def _answer(question: Any, fmt: str) -> None:
    """Print what an analysis ``question()`` answers (its diagnostics and status 1 when the
    policy or the question cannot be analysed)."""
    from ..analyzer.query import AnalysisError

    try:
        found = question()
    except AnalysisError as error:
        if error.diagnostics:
            print_diagnostics(list(error.diagnostics))
        fail(str(error))
    if fmt == "json":
        echo_json(found.to_json(), ensure_ascii=False)
    else:
        click.echo(found.text())


@click.command("witness")
@POLICY
@click.argument("query")
@BOUND
@FORMAT
@SEARCH_TIMEOUT
def witness_command(policy: str, query: str, bound: int, fmt: str, timeout: float) -> None:
    """The smallest database on which QUERY holds, replayed through the evaluator.

    QUERY is a conjunction of literals over the policy's relations and functors, such as
    'Deny(a), is_tool(a, "send_email")'. Without a witness, says whether none exists at all
    (proved) or none within the bound. Exit status 0 when the question was answered.
    """
    with internal_errors():
        from ..analyzer.witness import find_witness

        loaded = load_for_analysis(policy)
        _answer(lambda: find_witness(loaded, query, bound, timeout), fmt)


@click.command("diff")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@BOUND
@FORMAT
@SEARCH_TIMEOUT
def diff_command(old: str, new: str, bound: int, fmt: str, timeout: float) -> None:
    """How NEW decides differently from OLD (policy files or bundles): equivalent,
    more-permissive, less-permissive or incomparable, with a database and action for each way
    they differ, replayed through both evaluators. Exit status 0 when the question was answered.
    """
    with internal_errors():
        from ..analyzer.diff import diff

        before, after = load_for_analysis(old), load_for_analysis(new)
        _answer(lambda: diff(before, after, bound, timeout), fmt)


@click.command("conditions")
@POLICY
@click.argument("query")
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=2,
    show_default=True,
    help="How many times recursive relations are unfolded.",
)
@FORMAT
def conditions_command(policy: str, query: str, bound: int, fmt: str) -> None:
    """When QUERY holds, as alternatives over the input relations and functors.

    QUERY is a conjunction of literals, such as 'Allow(a)' or 'Deny(a), is_tool(a, "send_email")'.
    """
    with internal_errors():
        from ..analyzer.conditions import conditions

        loaded = load_for_analysis(policy)
        _answer(lambda: conditions(loaded, query, bound), fmt)
