"""The ``policyc`` command. Thin: parse arguments, call the library, print, choose the exit status.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. A module per group of commands holds their options and what only they use;
:mod:`.common` holds what they share (exit statuses, errors, options, reading policies, facts
and thresholds). :data:`COMMANDS` lists every command of :func:`main`; none is added elsewhere.
The library is imported inside each command so ``policyc --help`` stays fast.
"""

from __future__ import annotations

import click

from ..compiler.version import __version__
from . import analyze, build, check, editor, forecast, risk, run, tests, translate

__all__ = ["COMMANDS", "main"]

COMMANDS = (
    check.check,
    build.compile_command,
    build.keygen_command,
    run.eval_command,
    run.explain_command,
    run.replay_command,
    analyze.witness_command,
    analyze.diff_command,
    analyze.conditions_command,
    tests.test_command,
    tests.new_command,
    editor.fmt_command,
    editor.lsp_command,
    translate.translate_command,
    risk.calibrate_command,
    risk.risk_report_command,
    forecast.forecast_group,
)


@click.group(
    commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="policyc")
def main() -> None:
    """Compile, check and enforce Datalog security policies for LLM agents."""
