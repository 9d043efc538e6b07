"""`policyc mcp lock` (pin the upstream servers' tool definitions) and `policyc mcp init` (a
starter policy, its tests and a gateway.toml for a server): docs/mcp.md."""

from __future__ import annotations

import os
from typing import IO

import click

from .common import EXIT_ERRORS, EXIT_USAGE, fail, internal_errors


@click.command("lock")
@click.option(
    "--config", "config_file", required=True, metavar="gateway.toml", help="The gateway's configuration."
)
@click.option(
    "--lock",
    "lock_file",
    metavar="FILE",
    help="The lock file (default: the configuration's `lock`).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing: list what changed since the lock, and exit 1 if anything did (for CI).",
)
@click.option(
    "--declare-args",
    "declare_file",
    metavar="FILE",
    help="Also write the tools' argument declarations (`.arg S.T.key: TYPE`) from their input "
    "schemas to FILE, for a policy to include (with --check: compare them with FILE).",
)
def lock_command(config_file: str, lock_file: str | None, check: bool, declare_file: str | None) -> None:
    """Start the configured servers and pin their tools' names, descriptions and input schemas."""
    with internal_errors():
        import sys

        from ..gateway.config import ConfigError, read_config
        from ..gateway.declarations import declarations_text
        from ..gateway.pins import LockError, changes, listing, pins, read_lock, write_lock

        try:
            config = read_config(config_file)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)
        path = lock_file or config.lock
        if path is None:
            fail(
                f'{config_file}: no lock file: give --lock FILE or `lock = "FILE"` in the configuration',
                EXIT_USAGE,
            )
        assert path is not None
        before = read_lock(path)  # before any server starts: a lock that cannot be used ends here
        if isinstance(before, LockError) and (check or before.code != "lock-missing"):
            fail(str(before) if check else f"{before} (remove it to pin the tools anew)", EXIT_USAGE)
        listed = listing(config, errlog=_quiet())
        for name, reason in listed.failures.items():
            click.echo(f"policyc: error: server `{name}` is not running: {reason}", err=True)
        if listed.failures:
            fail("every server must run to pin its tools", EXIT_USAGE)
        declared = None if declare_file is None else declarations_text(listed.tools)
        if check:
            assert not isinstance(before, LockError)
            found = changes(before, listed.tools)
            for change in found:
                click.echo(str(change))
            count = sum(len(tools) for tools in listed.tools.values())
            if found:
                click.echo(
                    f"{len(found)} change(s) since {path}: `policyc mcp lock` pins the tools as they are now"
                )
            stale = declare_file is not None and _read_text(declare_file) != declared
            if stale:
                click.echo(
                    f"{declare_file}: not the argument declarations of the tools' input schemas: "
                    f"`policyc mcp lock --declare-args {declare_file}` writes them anew"
                )
            if found or stale:
                sys.exit(EXIT_ERRORS)
            click.echo(f"{path}: {count} tool(s) of {len(listed.tools)} server(s), as pinned")
            return
        lock = pins(listed.tools, listed.servers)
        if not isinstance(before, LockError):
            for change in changes(before, listed.tools):
                click.echo(f"pinned anew: {change}")
        try:
            write_lock(path, lock)
        except OSError as error:
            fail(f"cannot write `{path}`: {error.strerror or error}", EXIT_USAGE)
        click.echo(f"wrote {path}: {len(lock.pins)} tool(s) of {len(lock.servers)} server(s)")
        if declare_file is not None and declared is not None:
            from ..compiler.files import replace_file

            try:
                replace_file(declare_file, declared.encode("utf-8", "backslashreplace"))
            except OSError as error:
                fail(f"cannot write `{declare_file}`: {error.strerror or error}", EXIT_USAGE)
            count = sum(1 for line in declared.splitlines() if line.startswith(".arg "))
            click.echo(f"wrote {declare_file}: {count} argument declaration(s)")


def _read_text(path: str) -> str | None:
    """A file's text, or None when it cannot be read (missing, not a regular file, not UTF-8)."""
    from ..compiler.files import read_bytes

    try:
        return read_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@click.command("init", context_settings={"ignore_unknown_options": True})
@click.option(
    "--name", metavar="NAME", help="The server's name in the gateway (the S of S.T; default: from COMMAND)."
)
@click.option(
    "--out",
    "out",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The folder to write the files to.",
)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND [ARGS]...")
def init_command(name: str | None, out: str, force: bool, command: tuple[str, ...]) -> None:
    """Start a server, list its tools, and write a starter policy, its tests and a gateway.toml.

    \b
    policyc mcp init --name fs -- npx -y @modelcontextprotocol/server-filesystem ~/notes
    """
    with internal_errors():
        from ..gateway.config import ConfigError, quick_config
        from ..gateway.entries import absolute_command, client_entries, installed_policyc
        from ..gateway.pins import listing
        from ..gateway.starter import guess_role, name_of, starter

        server = name or name_of(command)
        try:
            config = quick_config(server, command)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)
        targets = [os.path.join(out, f"{server}.dl"), os.path.join(out, f"{server}_test.toml")]
        targets.append(os.path.join(out, "gateway.toml"))
        existing = [path for path in targets if os.path.lexists(path)]
        if existing and not force:
            fail(f"`{existing[0]}` exists (--force overwrites it)", EXIT_USAGE)
        errlog = _quiet()
        listed = listing(config, errlog=errlog)
        if server in listed.failures:
            errlog.seek(0)
            said = errlog.read().strip().splitlines()[-5:]
            for line in said:
                click.echo(f"  {server}: {line}", err=True)
            fail(f"the server did not start: {listed.failures[server]}", EXIT_USAGE)
        tools = list(listed.tools.get(server, ()))
        # the server runs where init ran it, wherever the client starts the gateway (the
        # configuration's `cwd` is relative to its own folder)
        here = os.path.relpath(os.getcwd(), os.path.abspath(out))
        # a client starts the gateway with a short PATH: a command found on this one is written
        # with its absolute path
        files = starter(server, absolute_command(command), tools, cwd=here)
        try:
            os.makedirs(out, exist_ok=True)
            for file, text in (
                (files.policy_file, files.policy),
                (files.test_file, files.tests),
                (files.config_file, files.config),
            ):
                with open(
                    os.path.join(out, file), "w", encoding="utf-8", errors="backslashreplace"
                ) as handle:
                    handle.write(text)
        except OSError as error:
            fail(f"cannot write to `{out}`: {error.strerror or error}", EXIT_USAGE)
        guesses = sum(1 for tool in tools for key in _keys(tool) if guess_role(key))
        click.echo(
            f"wrote {', '.join(os.path.join(out, f) for f in (files.policy_file, files.test_file, files.config_file))}"
        )
        click.echo(
            f"{len(tools)} tool(s) of `{server}`, {guesses} argument role(s) guessed: review the TODOs, then"
        )
        policy = os.path.join(out, files.policy_file)
        gateway = os.path.join(out, files.config_file)
        click.echo(f"  policyc test {out}")
        click.echo(f"  policyc mcp lock --config {gateway}")
        click.echo(f"  policyc mcp check {policy} --config {gateway}")
        click.echo(f"  policyc mcp {policy} --config {gateway}")
        click.echo("the gateway's entry in a client, with absolute paths (docs/mcp.md):")
        click.echo(client_entries(server, installed_policyc(), policy, gateway).text())


def _keys(tool: object) -> list[str]:
    schema = getattr(tool, "input_schema", None)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [k for k in properties if isinstance(k, str)] if isinstance(properties, dict) else []


def _quiet() -> IO[str]:
    """Where the servers' standard error goes: a temporary file, read back when one fails."""
    import tempfile

    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


@click.command("check")
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option(
    "--config", "config_file", required=True, metavar="gateway.toml", help="The gateway's configuration."
)
@click.option("--functors", metavar="MODULE", help="A Python module implementing the policy's functors.")
@click.option(
    "--analysis-timeout",
    default=6.0,
    show_default=True,
    type=click.FloatRange(0.1, 600),
    help="Seconds the analysis of the tools may take.",
)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def check_command(
    policy: str, config_file: str, functors: str | None, analysis_timeout: float, fmt: str
) -> None:
    """Start every server once and list its tools with the policy's view of each (always
    denied, escalated, pinned, changed); exit 1 if a server did not start or a pinned tool
    changed. Run it before adding the gateway to a client."""
    with internal_errors():
        import json
        import sys
        from pathlib import Path

        from ..gateway.config import ConfigError, read_config
        from ..gateway.report import check_gateway
        from ..runtime.functors import load_module
        from ..runtime.opener import load
        from .common import policy_failures

        try:
            config = read_config(config_file)
        except ConfigError as error:
            fail(str(error), EXIT_USAGE)
        try:
            module = None if functors is None else load_module(functors)
        except ImportError as error:
            fail(f"cannot load functors from `{functors}`: {error}", EXIT_USAGE)
        with policy_failures():  # a policy the gateway could not run fails the check before any server starts
            load(Path(policy), module)
        errlog = _quiet()
        report = check_gateway(policy, config, analysis_timeout, errlog)
        if fmt == "json":
            click.echo(json.dumps(report.to_json(), indent=2))
        else:
            for line in report.lines():
                click.echo(line)
            started = sum(1 for s in report.servers.values() if s.failure is None)
            click.echo(
                f"{started} of {len(report.servers)} server(s) started: "
                + ("ok" if report.ok else "not ready (a server did not start, or a pinned tool changed)")
            )
        if not report.ok:
            sys.exit(EXIT_ERRORS)
