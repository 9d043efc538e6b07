"""`policyc mcp`: the MCP gateway (docs/mcp.md), and its subcommands (`lock`, `init`, `check`)."""

from __future__ import annotations

import click

from .common import EXIT_ERRORS, EXIT_USAGE, StartGroup, fail, internal_errors, policy_failures, require_extra

# the subcommands defined in cli/mcp_tools.py, imported only when one of them is asked for
_TOOLS = ("lock", "init", "check")


class _McpGroup(StartGroup):
    """``policyc mcp POLICY ...`` starts the gateway; ``policyc mcp lock ...`` and the other
    subcommands run themselves (``lock``, ``init`` and ``check`` imported only when asked for)."""

    usages = (
        "POLICY_OR_BUNDLE --config gateway.toml [OPTIONS]",
        "POLICY_OR_BUNDLE --name NAME [OPTIONS] -- COMMAND [ARGS]...",
    )

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *(name for name in _TOOLS if _tool(name) is not None)} - {"start"})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _TOOLS:
            return _tool(cmd_name)
        return super().get_command(ctx, cmd_name)


def _tool(name: str) -> click.Command | None:
    try:
        from . import mcp_tools
    except ImportError:
        return None
    command = getattr(mcp_tools, f"{name}_command", None)
    return command if isinstance(command, click.Command) else None


@click.group("mcp", cls=_McpGroup, invoke_without_command=False)
def mcp_group() -> None:
    """Run an MCP gateway that decides every tool call with the policy (docs/mcp.md)."""


@mcp_group.command("start", hidden=True, context_settings={"ignore_unknown_options": False})
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND ARGS...]")
@click.option(
    "--config", "config_path", metavar="gateway.toml", help="The upstream servers and session options."
)
@click.option(
    "--name", metavar="NAME", help="With `-- COMMAND ARGS...`: the one server's name (its tools are NAME.T)."
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="LABEL",
    help="With --name: a label of every result (repeatable).",
)
@click.option(
    "--listen", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio."
)
@click.option(
    "--lock", "lock", metavar="FILE", help="Pin each tool's definition in FILE (docs/mcp.md, Tool pinning)."
)
@click.option("--functors", metavar="MODULE", help="A Python module implementing the policy's functors.")
@click.option("--verify-key", metavar="PUB", help="Run only a bundle signed with this Ed25519 public key.")
@click.option("--audit", "audit", metavar="FILE", help="Append every event and decision to this audit log.")
@click.option(
    "--monitor",
    "monitor_url",
    metavar="URL",
    help="Decide at this `policyc serve` service instead of in process.",
)
@click.option(
    "--key", "key", metavar="KEY", envvar="POLICYC_KEY", help="The service's key (or $POLICYC_KEY)."
)
@click.option(
    "--approval-timeout",
    default=120.0,
    show_default=True,
    type=click.FloatRange(0.001, 86400),
    help="Seconds a person has to answer an escalated call before it is denied.",
)
@click.option(
    "--analysis-timeout",
    default=6.0,
    show_default=True,
    type=click.FloatRange(0, 600),
    help="Seconds the start-up analysis of always-denied tools may take (0: none).",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Serve the servers that started when some did not (by default the gateway exits).",
)
@click.option(
    "--keys",
    "keys",
    metavar="KEYS.toml",
    help="With --listen: the clients' bearer keys and principals (the file `policyc serve` reads).",
)
@click.option("--no-auth", is_flag=True, help="With --listen on a loopback address: ask clients for no key.")
@click.option(
    "--max-sessions-per-key",
    "max_sessions",
    type=click.IntRange(1, 100_000),
    metavar="N",
    help="With --listen: the sessions one key's principal may hold at once (default 10).",
)
@click.option(
    "--no-fast-path",
    "sdk_path",
    is_flag=True,
    help="Decide and forward tools/call through the MCP SDK like every other request (slower).",
)
def start_command(
    policy: str,
    command: tuple[str, ...],
    config_path: str | None,
    name: str | None,
    labels: tuple[str, ...],
    listen: str | None,
    lock: str | None,
    functors: str | None,
    verify_key: str | None,
    audit: str | None,
    monitor_url: str | None,
    key: str | None,
    approval_timeout: float,
    analysis_timeout: float,
    allow_missing: bool,
    keys: str | None,
    no_auth: bool,
    max_sessions: int | None,
    sdk_path: bool,
) -> None:
    with internal_errors():
        require_extra("mcp", "`policyc mcp`")
        from ..gateway.config import ConfigError
        from ..gateway.launch import Settings, StartError, build, run
        from ..gateway.probe import ServersMissing
        from ..serve.server import PortInUse

        settings = Settings(
            policy,
            config=config_path,
            name=name,
            command=command,
            labels=labels,
            listen=listen,
            lock=lock,
            functors=functors,
            verify_key=verify_key,
            audit=audit,
            monitor=monitor_url,
            key=key,
            approval_timeout=approval_timeout,
            analysis_timeout=analysis_timeout,
            allow_missing=allow_missing,
            fast=not sdk_path,
            keys=keys,
            no_auth=no_auth,
            max_sessions=max_sessions,
        )
        try:
            with policy_failures():
                gateway = build(settings)
        except (StartError, ConfigError) as error:
            fail(str(error), EXIT_USAGE)
        try:
            run(gateway)
        except ServersMissing as error:
            fail(str(error), EXIT_ERRORS)
        except PortInUse as error:
            fail(
                f"{error.filename} is in use (another policyc mcp?); choose another --listen port", EXIT_USAGE
            )
        except KeyboardInterrupt:  # Ctrl-C at a terminal: the gateway has unwound, and ends quietly
            pass
