"""`policyc mcp`: the MCP gateway (docs/mcp.md), and its subcommands (`lock`, `init`)."""

from __future__ import annotations

import click

from .common import EXIT_USAGE, StartGroup, fail, internal_errors, policy_failures, require_extra

# the subcommands defined in cli/mcp_tools.py, imported only when one of them is asked for
_TOOLS = ("lock", "init")


class _McpGroup(StartGroup):
    """``policyc mcp POLICY ...`` starts the gateway; ``policyc mcp lock ...`` and the other
    subcommands run themselves (``lock`` and ``init`` imported only when asked for)."""

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
) -> None:
    with internal_errors():
        import dataclasses

        require_extra("mcp", "`policyc mcp`")
        import anyio

        from ..gateway.config import ConfigError, quick_config, read_config

        if (config_path is None) == (name is None):
            fail("give --config gateway.toml, or --name NAME -- COMMAND ARGS... (one of them)", EXIT_USAGE)
        if config_path is not None and command:
            fail(
                f"unexpected arguments `{' '.join(command)}` (a command goes with --name, not --config)",
                EXIT_USAGE,
            )
        if labels and name is None:
            fail("--label goes with --name (a configuration file gives labels per server)", EXIT_USAGE)
        if (monitor_url is None) != (key is None):
            fail("--monitor and --key go together", EXIT_USAGE)
        if monitor_url is not None and audit is not None:
            fail(
                "--audit is the in-process monitor's; a `policyc serve` monitor keeps its own audit log",
                EXIT_USAGE,
            )
        try:
            if config_path is not None:
                config = read_config(config_path)
            else:
                assert name is not None
                config = quick_config(name, command, labels)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)
        if lock is not None:
            config = dataclasses.replace(config, lock=lock)
        address = _address(listen) if listen is not None else None
        monitor, hidden, closing = _monitor(
            policy, functors, verify_key, audit, monitor_url, key, approval_timeout, analysis_timeout
        )
        screen = _screen(config)
        from ..gateway.server import serve

        try:
            anyio.run(serve, config, monitor, hidden, address, screen, None, closing)
        except KeyboardInterrupt:  # Ctrl-C at a terminal: the gateway has unwound, and ends quietly
            pass


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen `{listen}`: expected HOST:PORT (such as 127.0.0.1:8765)", EXIT_USAGE)
    return host.strip("[]"), int(port)


def _monitor(
    policy: str,
    functors: str | None,
    verify_key: str | None,
    audit: str | None,
    monitor_url: str | None,
    key: str | None,
    approval_timeout: float,
    analysis_timeout: float,
) -> tuple[object, dict[str, str], object]:
    """The monitor deciding the calls, the tools the policy proves always denied, and what
    closes the audit log (None without one)."""
    import sys

    from ..gateway.analysis import always_denied
    from ..gateway.decide import Approvers
    from .common import load_policy

    loaded = load_policy(policy, functors, verify_key)
    hidden: dict[str, str] = {}
    if analysis_timeout > 0:
        hidden, why = always_denied(policy, analysis_timeout)
        if why is not None:
            print(f"policyc mcp: every tool is listed: {why}", file=sys.stderr)
    if monitor_url is not None:
        from ..serve.client import connect

        assert key is not None
        return connect(monitor_url, key), hidden, None
    from ..runtime.audit import AuditError, AuditLog
    from ..runtime.session import Monitor

    try:
        with policy_failures():
            log = None if audit is None else AuditLog(audit)
            monitor = Monitor(loaded, approver=Approvers(), approval_timeout=approval_timeout, audit=log)
            return monitor, hidden, None if log is None else log.close
    except (AuditError, OSError) as error:
        fail(f"cannot open the audit log `{audit}`: {getattr(error, 'strerror', None) or error}", EXIT_USAGE)
    raise AssertionError("unreachable")


def _screen(config: object) -> object:
    """The screen of tool pins when the configuration names a lock file (docs/mcp.md, "Tool
    pinning"); a lock that cannot be used ends the command."""
    path = getattr(config, "lock", None)
    if path is None:
        return None
    from ..gateway.screen import pin_screen

    screen = pin_screen(path)
    if isinstance(screen, str):
        fail(screen, EXIT_USAGE)
    return screen
