"""Starting the gateway, as ``policyc serve`` starts the service (``serve/server.py``): what
``policyc mcp`` was asked for (:class:`Settings`), the gateway built from it (:func:`build`: its
configuration, the monitor deciding the calls, the tools the policy proves always denied, the
screen of tool pins, where it listens) and run (:func:`run`).

Settings the gateway cannot start with are a :class:`StartError` saying which (a usage error); a
configuration that cannot be read is a :class:`~.config.ConfigError`; a policy that cannot be
used is the runtime's ``PolicyError`` (with its diagnostics) or ``MissingFunctors``. The command
prints each and exits; nothing here knows about the command line.

>>> check(Settings("policy.dl"))
Traceback (most recent call last):
...
policyc.gateway.launch.StartError: give --config gateway.toml, or --name NAME -- COMMAND ARGS... (one of them)
>>> address("127.0.0.1:8765"), address("[::1]:0")
(('127.0.0.1', 8765), ('::1', 0))
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyc.runtime.approvals import DEFAULT_TIMEOUT

from .analysis import ANALYSIS_TIMEOUT
from .config import GatewayConfig

if TYPE_CHECKING:
    from policyc.runtime.protocols import MonitorLike

    from .screen import Screen

MAX_SESSIONS = 10  # behind --listen: the sessions one key's principal may hold at once, by default


class StartError(Exception):
    """Settings the gateway cannot start with; the message says which and what to give."""


@dataclass(frozen=True)
class Settings:
    """What ``policyc mcp`` was asked for: the policy, the servers (a configuration file, or one
    server's ``name`` and ``command``), and where and how calls are decided."""

    policy: str
    config: str | None = None  # gateway.toml
    name: str | None = None  # with `command`: the one server's name
    command: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # with `name`: labels of every result
    listen: str | None = None  # HOST:PORT for streamable HTTP; None: stdio
    lock: str | None = None  # the tool pins' lock file (over the configuration's)
    functors: str | None = None  # a module implementing the policy's functors
    verify_key: str | None = None  # run only a bundle signed with this key
    audit: str | None = None  # the in-process monitor's audit log
    monitor: str | None = None  # the URL of a `policyc serve` service deciding instead
    key: str | None = None  # that service's key
    approval_timeout: float = DEFAULT_TIMEOUT
    analysis_timeout: float = ANALYSIS_TIMEOUT  # 0: no start-up analysis
    allow_missing: bool = False  # serve the servers that started (else a failure stops the gateway)
    fast: bool = True  # tools/call on stdio through the fast path (else through the SDK)
    keys: str | None = None  # with `listen`: the clients' bearer keys (KEYS.toml)
    no_auth: bool = False  # with `listen` on a loopback address: no keys asked
    max_sessions: int | None = None  # with `listen`: the sessions of one key (None: MAX_SESSIONS)


@dataclass(frozen=True)
class Prepared:
    """A gateway ready to run: its configuration, the monitor, the tools hidden as always
    denied (name -> why), where it listens (None: stdio), its pin screen, and what to close
    when it ends (the audit log)."""

    config: GatewayConfig
    monitor: MonitorLike
    hidden: Mapping[str, str]
    address: tuple[str, int] | None = None
    screen: Screen | None = None
    closing: Callable[[], None] | None = None
    allow_missing: bool = False
    fast: bool = True
    keys: Any = None  # the clients' keys (policyc.serve.keys.Keys) with --keys
    max_sessions: int = 0  # with --listen: the sessions one key's principal may hold at once


def check(settings: Settings) -> None:
    """Refuse settings that do not go together (:class:`StartError`)."""
    if (settings.config is None) == (settings.name is None):
        raise StartError("give --config gateway.toml, or --name NAME -- COMMAND ARGS... (one of them)")
    if settings.config is not None and settings.command:
        raise StartError(
            f"unexpected arguments `{' '.join(settings.command)}` (a command goes with --name, not --config)"
        )
    if settings.labels and settings.name is None:
        raise StartError("--label goes with --name (a configuration file gives labels per server)")
    if (settings.monitor is None) != (settings.key is None):
        raise StartError("--monitor and --key go together")
    if settings.monitor is not None and settings.audit is not None:
        raise StartError(
            "--audit is the in-process monitor's; a `policyc serve` monitor keeps its own audit log"
        )
    if settings.listen is None:
        if settings.keys is not None or settings.no_auth or settings.max_sessions is not None:
            raise StartError(
                "--keys, --no-auth and --max-sessions-per-key go with --listen (over stdio the "
                "client is the one who started it)"
            )
        return
    host, _ = address(settings.listen)
    from .access import loopback

    if settings.keys is not None and settings.no_auth:
        raise StartError("--keys or --no-auth: one of them")
    if settings.keys is None and not settings.no_auth:
        raise StartError(
            "--listen needs --keys KEYS.toml (the clients' bearer keys, the file `policyc serve` reads), "
            "or --no-auth on a loopback address"
        )
    if settings.no_auth and not loopback(host):
        raise StartError(f"--no-auth only on a loopback address (127.0.0.1, ::1, localhost), not {host}")
    if settings.keys is not None and settings.monitor is not None:
        raise StartError(
            "--keys with --monitor: the service knows its callers by its own key; decide in process, "
            "or give each client a gateway of its own"
        )


def build(settings: Settings) -> Prepared:
    """The gateway of ``settings``: checked, its configuration read, its policy loaded and
    analysed, its monitor made (in process, or the service's client), its lock read. What the
    start-up analysis could not do is said on standard error; the tools stay listed then."""
    from .config import quick_config, read_config

    check(settings)
    if settings.config is not None:
        config = read_config(settings.config)
    else:
        assert settings.name is not None
        config = quick_config(settings.name, settings.command, settings.labels)
    if settings.lock is not None:
        config = dataclasses.replace(config, lock=settings.lock)
    monitor, closing = _monitor(settings)
    hidden: dict[str, str] = {}
    if settings.analysis_timeout > 0:
        from .analysis import always_denied

        hidden, why = always_denied(settings.policy, settings.analysis_timeout)
        if why is not None:
            print(f"policyc mcp: every tool is listed: {why}", file=sys.stderr)
    where = None if settings.listen is None else address(settings.listen)
    try:
        screen = _screen(config)
    except StartError:
        if closing is not None:
            closing()
        raise
    keys = None
    if settings.keys is not None:
        from policyc.serve.keys import KeysError, read_keys

        try:
            keys = read_keys(settings.keys)
        except KeysError as error:
            if closing is not None:
                closing()
            raise StartError(str(error)) from None
    return Prepared(
        config,
        monitor,
        hidden,
        where,
        screen,
        closing,
        settings.allow_missing,
        settings.fast,
        keys,
        MAX_SESSIONS if settings.max_sessions is None else settings.max_sessions,
    )


def run(gateway: Prepared) -> None:
    """Serve until the client goes (stdio) or the process is stopped (HTTP); the audit log is
    closed either way. A server that did not start is a :class:`~.probe.ServersMissing` unless
    the gateway may serve without it."""
    import functools

    import anyio

    from policyc.serve.server import PortInUse

    from .probe import ServersMissing
    from .server import serve

    serving = functools.partial(
        serve,
        allow_missing=gateway.allow_missing,
        fast=gateway.fast,
        keys=gateway.keys,
        max_sessions=gateway.max_sessions,
    )
    try:
        anyio.run(
            serving,
            gateway.config,
            gateway.monitor,
            gateway.hidden,
            gateway.address,
            gateway.screen,
            None,
            gateway.closing,
        )
    except (ServersMissing, PortInUse):
        if gateway.closing is not None:
            gateway.closing()
        raise
    except BaseExceptionGroup as group:  # raised inside the gateway's task group
        found, _ = group.split((ServersMissing, PortInUse))
        if found is None:
            raise
        first: BaseException = found
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        if gateway.closing is not None:
            gateway.closing()
        raise first from None


def address(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (a bracketed IPv6 host too) as a host and a port (:class:`StartError`)."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise StartError(f"--listen `{listen}`: expected HOST:PORT (such as 127.0.0.1:8765)")
    return host.strip("[]"), int(port)


def _monitor(settings: Settings) -> tuple[Any, Callable[[], None] | None]:
    """The monitor deciding the calls, and what closes its audit log (None without one). The
    policy is loaded either way, so that a bad policy stops the gateway before it serves."""
    from pathlib import Path

    from policyc.runtime.functors import load_module
    from policyc.runtime.opener import load

    try:
        functors = None if settings.functors is None else load_module(settings.functors)
    except ImportError as error:
        raise StartError(f"cannot load functors from `{settings.functors}`: {error}") from None
    loaded = load(Path(settings.policy), functors, verify_key=settings.verify_key)
    if settings.monitor is not None:
        from policyc.serve.client import connect

        assert settings.key is not None
        return connect(settings.monitor, settings.key), None
    from policyc.runtime.audit import AuditError, AuditLog
    from policyc.runtime.session import Monitor

    from .decide import Approvers

    try:
        log = None if settings.audit is None else AuditLog(settings.audit)
    except (AuditError, OSError) as error:
        why = getattr(error, "strerror", None) or error
        raise StartError(f"cannot open the audit log `{settings.audit}`: {why}") from None
    monitor = Monitor(loaded, approver=Approvers(), approval_timeout=settings.approval_timeout, audit=log)
    return monitor, None if log is None else log.close


def _screen(config: GatewayConfig) -> Screen | None:
    """The screen of tool pins when the configuration names a lock file (docs/mcp.md, "Tool
    pinning"); a lock that cannot be used is a :class:`StartError`."""
    if config.lock is None:
        return None
    from .screen import pin_screen

    screen = pin_screen(config.lock)
    if isinstance(screen, str):
        raise StartError(screen)
    return screen
