"""The gateway's configuration: which MCP servers it starts or reaches, the labels their results
carry, and how a connection's events depend on each other (docs/mcp.md, "Configuration").

``gateway.toml`` names each upstream server once, by a command it starts (stdio) or a URL
(streamable HTTP)::

    [servers.fetch]
    command = "uvx"
    args = ["mcp-server-fetch"]
    labels = ["untrusted"]          # every result of this server

    [servers.git]
    command = "uvx"
    args = ["mcp-server-git", "--repository", "."]

    [servers.git.tools.git_log]
    labels = ["untrusted"]          # and of this tool, besides the server's

    [servers.docs]
    url = "http://127.0.0.1:9000/mcp"

    [session]
    depends = "all"                 # or "call": a result depends on its call only

A file that does not say this is refused with where and a stable code (:class:`ConfigError`,
whose ``problem`` is a :class:`Problem`), before any server starts. :func:`quick_config` gives
the same object for ``policyc mcp POLICY --name fs -- COMMAND ARGS...``.

>>> config = parse_config('[servers.fs]\\ncommand = "srv"\\nlabels = ["untrusted"]\\n', "g.toml")
>>> config.servers[0].name, config.servers[0].transport, config.servers[0].labels_of("read")
('fs', 'stdio', ('untrusted',))
>>> parse_config('[servers.fs]\\nargs = []\\n', "g.toml")
Traceback (most recent call last):
...
policyc.gateway.config.ConfigError: g.toml:1: servers.fs: a server needs `command` (stdio) or `url` (streamable HTTP) [PCG004]
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policyc.compiler.reading import Cursor, FormatError, Source

# the stable codes of configuration problems (docs/mcp.md, "Configuration errors")
UNREADABLE = "PCG001"  # the file cannot be read, is not UTF-8 or not TOML
UNKNOWN_KEY = "PCG002"  # a table or key the format does not have
WRONG_VALUE = "PCG003"  # a value of the wrong type or out of range
TRANSPORT = "PCG004"  # a server with neither or both of `command` and `url`
NO_SERVERS = "PCG005"  # no [servers.NAME] table
BAD_NAME = "PCG006"  # a server name that cannot be the `S` of `S.T`

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
DEPENDS = ("all", "call")
DEFAULT_TIMEOUT = 60.0  # seconds a call to an upstream server may take
DEFAULT_DECIDE_TIMEOUT = 10.0  # seconds a decision may take before the call is denied

_TOP = ("servers", "session", "lock")
_SERVER = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "labels",
    "tools",
    "timeout",
    "restart",
    "shared",
)
_TOOL = ("labels",)
_SESSION = ("depends", "principal", "roles", "decide_timeout")


@dataclass(frozen=True)
class Problem:
    """What is wrong with a configuration, and where: ``file:line: field: message [code]``."""

    file: str
    line: int | None
    field: str
    message: str
    code: str

    def render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.field:
            where += f": {self.field}"
        return f"{where}: {self.message} [{self.code}]"


class ConfigError(ValueError):
    """A configuration that cannot be used; ``problem`` says what and where."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.render())


@dataclass(frozen=True)
class ToolOptions:
    """What the configuration says of one tool of a server: the labels its results carry."""

    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Upstream:
    """One MCP server behind the gateway: started with ``command`` (stdio) or reached at ``url``
    (streamable HTTP), its results labelled ``labels`` (and each tool's own)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    labels: tuple[str, ...] = ()
    tools: Mapping[str, ToolOptions] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = DEFAULT_TIMEOUT
    restart: int = 0  # how many times the gateway starts it again after it stopped (with backoff)
    shared: bool = False  # behind --listen: one connection for every client session, not one each

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    def labels_of(self, tool: str) -> tuple[str, ...]:
        """The labels of a result of ``tool`` (this server's own name, unqualified): the
        server's, then the tool's own."""
        own = self.tools.get(tool)
        if own is None:
            return self.labels
        return tuple(dict.fromkeys((*self.labels, *own.labels)))


@dataclass(frozen=True)
class SessionOptions:
    """How a client connection's session is kept.

    ``depends``: ``all`` (every event depends on every earlier one, the default) or ``call``
    (a tool result depends on its call only; calls still depend on everything before them).
    ``principal`` and ``roles`` become the session's ``Principal`` and ``HasRole`` facts;
    ``decide_timeout`` bounds each decision (seconds; past it the call is denied)."""

    depends: str = "all"
    principal: str | None = None
    roles: tuple[str, ...] = ()
    decide_timeout: float = DEFAULT_DECIDE_TIMEOUT


@dataclass(frozen=True)
class GatewayConfig:
    """The servers behind the gateway, the session options, and the lock file of pinned tool
    definitions (None: no pinning). ``origin`` is the file it came from (or how it was given)."""

    servers: tuple[Upstream, ...]
    session: SessionOptions = SessionOptions()
    lock: str | None = None
    origin: str = "<command line>"

    def server(self, name: str) -> Upstream | None:
        return self._by_name.get(name)

    @functools.cached_property
    def _by_name(self) -> dict[str, Upstream]:
        return {s.name: s for s in reversed(self.servers)}  # the first of a name, as a search finds


def read_config(path: str) -> GatewayConfig:
    """The configuration at ``path`` (:class:`ConfigError` saying where, also for a file that
    cannot be read: missing, not a regular file, larger than 1 MiB)."""
    from policyc.compiler.files import read_bytes

    try:
        data = read_bytes(path, 1 << 20)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(
            Problem(path, None, "", f"cannot read the configuration: {reason}", UNREADABLE)
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        message = f"not UTF-8 text ({error.reason} at byte {error.start})"
        raise ConfigError(Problem(path, None, "", message, UNREADABLE)) from None
    return parse_config(text, path, base=os.path.dirname(os.path.abspath(path)))


def parse_config(text: str, origin: str, base: str | None = None) -> GatewayConfig:
    """The configuration in ``text`` (read from ``origin``); relative ``cwd`` and ``lock``
    paths are taken from ``base`` (the file's folder), when given."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        where = re.search(r"\s*\(at line (\d+), column \d+\)$", message)
        line = int(where.group(1)) if where else None
        message = message[: where.start()] if where else message
        raise ConfigError(Problem(origin, line, "", f"not TOML: {message}", UNREADABLE)) from None
    except RecursionError:
        raise ConfigError(
            Problem(origin, None, "", "nested too deeply to be a configuration", UNREADABLE)
        ) from None
    lines = _Lines(text)
    top = Cursor.root(data, Source(origin, lines.locate))
    try:
        return _config(top, origin, base)
    except FormatError as error:
        code = UNKNOWN_KEY if error.problem.startswith("unknown key") else WRONG_VALUE
        raise ConfigError(Problem(error.file, error.line, error.field, error.problem, code)) from None


def quick_config(
    name: str,
    command: Sequence[str],
    labels: Sequence[str] = (),
    session: SessionOptions | None = None,
    lock: str | None = None,
) -> GatewayConfig:
    """The configuration of ``policyc mcp POLICY --name NAME -- COMMAND ARGS...``: one stdio
    server (:class:`ConfigError` for a name that cannot be a server's, or no command)."""
    origin = "<command line>"
    if not NAME.fullmatch(name):
        raise ConfigError(Problem(origin, None, "--name", _name_problem(name), BAD_NAME))
    if not command or not command[0]:
        raise ConfigError(Problem(origin, None, "", "no server command after `--`", TRANSPORT))
    server = Upstream(name, command=command[0], args=tuple(command[1:]), labels=tuple(labels))
    return GatewayConfig((server,), session or SessionOptions(), lock, origin)


# ------------------------------------------------------------------------------ reading


def _config(top: Cursor, origin: str, base: str | None) -> GatewayConfig:
    top.object(_TOP)
    servers = top.child("servers")
    if servers.value is None or servers.value == {}:
        raise _problem(top, "no servers (add a [servers.NAME] table with `command` or `url`)", NO_SERVERS)
    upstreams = tuple(_server(name, entry, base) for name, entry in servers.entries())
    session = top.optional("session", _session, SessionOptions())
    lock = top.optional("lock", lambda c: c.string(empty=False), None)
    if lock is not None and base is not None:
        lock = os.path.join(base, lock)
    return GatewayConfig(upstreams, session, lock, origin)


def _server(name: str, entry: Cursor, base: str | None) -> Upstream:
    if not NAME.fullmatch(name):
        raise _problem(entry, _name_problem(name), BAD_NAME)
    entry.object(_SERVER)
    command = entry.optional("command", lambda c: c.string(empty=False), None)
    url = entry.optional("url", lambda c: c.string(empty=False), None)
    if (command is None) == (url is None):
        problem = (
            "a server has both `command` and `url` (give one)"
            if command is not None
            else "a server needs `command` (stdio) or `url` (streamable HTTP)"
        )
        raise _problem(entry, problem, TRANSPORT)
    if url is not None:
        if not re.match(r"https?://", url):
            raise entry["url"].fail("expected an http:// or https:// URL")
        for key in ("args", "env", "cwd"):
            if entry.has(key):
                raise _problem(entry.child(key), "only a server started with `command` has this", TRANSPORT)
    elif entry.has("headers"):
        raise _problem(entry.child("headers"), "only a server reached at a `url` has this", TRANSPORT)
    cwd = entry.optional("cwd", lambda c: c.string(empty=False), None)
    if cwd is not None and base is not None:
        cwd = os.path.join(base, cwd)
    no_tools: dict[str, ToolOptions] = {}
    tools = entry.optional("tools", _tools, no_tools)
    return Upstream(
        name=name,
        command=command,
        args=entry.optional("args", Cursor.strings, ()),
        env=MappingProxyType(entry.optional("env", _text_mapping, {})),
        cwd=cwd,
        url=url,
        headers=MappingProxyType(entry.optional("headers", _text_mapping, {})),
        labels=entry.optional("labels", _labels, ()),
        tools=MappingProxyType(tools),
        timeout=entry.optional("timeout", lambda c: c.number(0.001, 86400.0), DEFAULT_TIMEOUT),
        restart=entry.optional("restart", lambda c: c.count(101, "a count of restarts (0 to 100)"), 0),
        shared=entry.optional("shared", Cursor.boolean, False),
    )


def _tools(cursor: Cursor) -> dict[str, ToolOptions]:
    found = {}
    for tool, entry in cursor.entries():
        entry.object(_TOOL)
        found[tool] = ToolOptions(entry.optional("labels", _labels, ()))
    return found


def _session(cursor: Cursor) -> SessionOptions:
    cursor.object(_SESSION)
    return SessionOptions(
        depends=cursor.optional("depends", lambda c: c.choice(DEPENDS), "all"),
        principal=cursor.optional("principal", lambda c: c.string(empty=False), None),
        roles=cursor.optional("roles", _labels, ()),
        decide_timeout=cursor.optional(
            "decide_timeout", lambda c: c.number(0.001, 3600.0), DEFAULT_DECIDE_TIMEOUT
        ),
    )


def _labels(cursor: Cursor) -> tuple[str, ...]:
    return tuple(dict.fromkeys(cursor.strings(empty=False)))


def _text_mapping(cursor: Cursor) -> dict[str, str]:
    return cursor.mapping(Cursor.string)


def _name_problem(name: str) -> str:
    return (
        f"`{name}` cannot name a server: 1-64 letters, digits, `_` or `-` (no `.`: tools are `SERVER.TOOL`)"
    )


def _problem(cursor: Cursor, message: str, code: str) -> ConfigError:
    error = cursor.fail(message)
    return ConfigError(Problem(error.file, error.line, error.field, error.problem, code))


class _Lines:
    """Where a value of the configuration is written (:mod:`tomllib` keeps no positions): the
    line of its ``[table]`` header, or of its ``key =`` inside that table; found on an error
    only."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: list[tuple[int, tuple[str, ...]]] = []
        for number, line in enumerate(self.lines, 1):
            match = _HEADER.match(line)
            if match:
                self.headers.append((number, _keys(match.group(1))))

    def locate(self, path: tuple[Any, ...]) -> int | None:
        keys = tuple(str(k) for k in path if isinstance(k, str))
        best: tuple[int, tuple[str, ...]] | None = None
        for number, header in self.headers:
            if keys[: len(header)] == header and (best is None or len(header) > len(best[1])):
                best = (number, header)
        start, header = best if best is not None else (0, ())
        rest = keys[len(header) :]
        if not rest:
            return start or None
        end = next((n for n, _ in self.headers if n > start), len(self.lines) + 1)
        written = re.compile(rf"\s*(?:{re.escape(rest[0])}|\"{re.escape(rest[0])}\")\s*[=.]")
        for number in range(start + 1, end):
            if written.match(self.lines[number - 1]):
                return number
        return start or None


_HEADER = re.compile(r"\s*\[([^\[\]]+)\]\s*(?:#.*)?$")


def _keys(dotted: str) -> tuple[str, ...]:
    return tuple(
        part.strip().strip('"').strip("'") for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', dotted)
    )


def from_mapping(data: Mapping[str, Any], origin: str = "<config>") -> GatewayConfig:
    """The configuration held in ``data`` (a parsed ``gateway.toml``)."""
    try:
        return _config(Cursor.root(dict(data), Source(origin)), origin, None)
    except FormatError as error:
        code = UNKNOWN_KEY if error.problem.startswith("unknown key") else WRONG_VALUE
        raise ConfigError(Problem(error.file, error.line, error.field, error.problem, code)) from None
