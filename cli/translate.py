"""`policyc translate`: natural-language requirements to a checked policy, with the report
that says how far it can be trusted."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .common import (
    EXIT_ERRORS,
    EXIT_USAGE,
    FORMAT,
    FUNCTORS,
    Finite,
    echo_json,
    fail,
    internal_errors,
    print_diagnostics,
    require_extra,
)


@click.command("translate")
@click.argument("requirements", metavar="REQUIREMENTS.md")
@click.option("-o", "--output", required=True, metavar="POLICY.dl", help="Where to write the policy.")
@click.option(
    "--vocab",
    "vocabulary",
    multiple=True,
    metavar="POLICY_OR_MODULE",
    help="What the rules may use: a policy file (its Deny and Allow rules left out) or a library "
    "module such as `events` or `tools` (repeatable; default `events`).",
)
@click.option(
    "--traces", metavar="TRACES.jsonl", help="Recorded sessions (as for `policyc replay`) to judge."
)
@click.option("--report", "report_path", metavar="REPORT.json", help="Also write the report as JSON here.")
@FORMAT
@click.option(
    "--model", envvar="POLICYC_MODEL", metavar="MODEL", help="The model to ask [env: POLICYC_MODEL]."
)
@click.option(
    "--base-url",
    envvar="OPENAI_BASE_URL",
    metavar="URL",
    help="An OpenAI-compatible endpoint (default OpenAI's) [env: OPENAI_BASE_URL].",
)
@click.option(
    "--timeout",
    type=Finite(0.1, 86400),
    default=120.0,
    show_default=True,
    help="Seconds per request.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=3,
    show_default=True,
    help="Further attempts after a request times out, is rate limited or meets a server error.",
)
@click.option(
    "--repair-rounds",
    type=click.IntRange(0, 10),
    default=3,
    show_default=True,
    help="Rounds of feeding the checker's diagnostics back to the translator.",
)
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=4,
    show_default=True,
    help="Fresh values per type for the synthesized decision points.",
)
@click.option(
    "--search-timeout",
    type=Finite(1.0, 86400),
    default=120.0,
    show_default=True,
    help="Seconds the searches for synthesized decision points may take together.",
)
@click.option(
    "--jobs", type=click.IntRange(1, 64), default=4, show_default=True, help="Requests in flight at once."
)
@FUNCTORS
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(("back-translation", "synthesis", "judge", "analysis")),
    help="Leave a validation step out (repeatable); the report says so.",
)
@click.option(
    "--no-json-mode", is_flag=True, help="Do not ask the endpoint for JSON mode (`response_format`)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress display on standard error.")
def translate_command(
    requirements: str,
    output: str,
    vocabulary: tuple[str, ...],
    traces: str | None,
    report_path: str | None,
    fmt: str,
    model: str | None,
    base_url: str | None,
    timeout: float,
    retries: int,
    repair_rounds: int,
    bound: int,
    search_timeout: float,
    jobs: int,
    functors: str | None,
    skip: tuple[str, ...],
    no_json_mode: bool,
    quiet: bool,
) -> None:
    """Translate natural-language requirements into a checked policy, and report how far it can
    be trusted: coverage both ways, source-blind back-translation, and agreement with a judge on
    recorded and synthesized decision points.

    The model is any OpenAI-compatible chat-completions endpoint; the API key comes from
    OPENAI_API_KEY. Exit status 0 when the policy was written and nothing needs attention, 1 when
    the report lists problems, 2 when the inputs, the output or the endpoint cannot be used.
    """
    with internal_errors():
        require_extra("translate", "`policyc translate`")
        import json

        from ..nl2policy.client import DEFAULT_BASE_URL, ConfigurationError, Settings
        from ..nl2policy.pipeline import InputError, Options, run
        from ..nl2policy.progress import Progress
        from ..nl2policy.vocabulary import VocabularyError

        if not model:
            fail("no model: pass --model or set POLICYC_MODEL", EXIT_USAGE)
        key = os.environ.get("OPENAI_API_KEY") or None
        if key is None and (base_url or DEFAULT_BASE_URL).rstrip("/") == DEFAULT_BASE_URL:
            fail(
                "no API key: set OPENAI_API_KEY (or pass --base-url for a local server that needs none)",
                EXIT_USAGE,
            )
        settings = Settings(model, base_url, key, timeout, retries, json_mode=not no_json_mode)
        options = Options(
            requirements,
            output,
            settings,
            vocabulary,
            traces,
            functors,
            repair_rounds,
            bound,
            search_timeout,
            jobs=jobs,
            skip=frozenset(skip),
            report=report_path,
        )
        try:
            with Progress(quiet) as progress:
                report = run(options, progress)
        except InputError as error:
            fail(str(error), error.status)
        except VocabularyError as error:
            if error.diagnostics:
                print_diagnostics(list(error.diagnostics))
            fail(str(error), error.status)
        except ConfigurationError as error:
            fail(str(error), EXIT_USAGE)
        data = report.to_json()
        if report_path is not None:
            try:
                Path(report_path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
            except OSError as error:
                fail(f"cannot write `{report_path}`: {error.strerror or error}", EXIT_USAGE)
        if fmt == "json":
            echo_json(data, ensure_ascii=False)
        else:
            click.echo(report.text())
        if not report.ok:
            sys.exit(EXIT_ERRORS)
