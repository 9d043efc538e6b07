"""The ``policyc`` command. Thin: parse arguments, call the library, print, choose the exit status.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. A module per group of commands holds their options and what only they use;
:mod:`.common` holds what they share (exit statuses, errors, options, reading policies, facts
and thresholds). :data:`COMMANDS` lists every command of :func:`main` and where it is defined;
none is added elsewhere. A command's module is imported only when the command runs (or a help
text lists it), and the library only inside each command, so ``policyc --help`` and a small
``policyc check`` start fast.
"""

from __future__ import annotations

from importlib import import_module

import click

from ..compiler.version import __version__

__all__ = ["COMMANDS", "main"]

COMMANDS: dict[str, str] = {
    "check": "check:check",
    "compile": "build:compile_command",
    "keygen": "build:keygen_command",
    "eval": "run:eval_command",
    "explain": "run:explain_command",
    "replay": "replay:replay_command",
    "witness": "analyze:witness_command",
    "diff": "analyze:diff_command",
    "conditions": "analyze:conditions_command",
    "test": "tests:test_command",
    "new": "tests:new_command",
    "fmt": "editor:fmt_command",
    "lsp": "editor:lsp_command",
    "translate": "translate:translate_command",
    "calibrate": "risk:calibrate_command",
    "risk-report": "risk:risk_report_command",
    "forecast": "forecast:forecast_group",
    "audit": "audit:audit_group",
    "serve": "serve:serve_group",
    "mcp": "mcp:mcp_group",
}
"""Each command's name and ``module:attribute`` in this package."""


class _Commands(click.Group):
    """The commands of :data:`COMMANDS`, each imported when it is asked for (and any added
    to the group the usual way, such as by a test)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = where.split(":")
        command: click.Command = getattr(import_module(f".{module}", __name__), attribute)
        return command


@click.group(
    cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="policyc")
def main() -> None:
    """Compile, check and enforce Datalog security policies for LLM agents."""
