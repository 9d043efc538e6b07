"""Tool pinning: the lock file of the tools a user approved, and what changed since.

A lock records, for each upstream server, its name and version as it announced them and, for
each of its tools ``S.T``, the tool's description (as it was) and the SHA-256 of its canonical
input schema (JSON with sorted keys and no spaces, so key order is no change). A later listing
is compared with the lock: a tool whose description or schema differs, a tool the lock does
not have, and a pinned tool that is gone are :class:`Change` values. The gateway hides every
changed or new tool and logs which field changed, until the lock is written again (docs/mcp.md,
"Tool pinning"). The server's version is recorded for the reader, not compared: a server that
is upgraded without changing a tool changes nothing that is pinned.

The gateway calls three functions (their names are the contract between the gateway and this
module):

* :func:`read_lock` ``(path) -> Lock | LockError`` — the lock file, or why it cannot be used
  (``LockError.code == "lock-missing"`` for a file that does not exist: a first run writes it);
* :func:`pins` ``(tools, servers={}) -> Lock`` — the lock of the tools listed now, where
  ``tools`` maps a server's name to its ``mcp.types.Tool`` list, or is the gateway's
  :class:`~.upstreams.UpstreamTool` values (``upstreams.tools.values()``), and ``servers``
  maps a server's name to the ``mcp.types.Implementation`` it announced;
* :func:`changes` ``(lock, tools) -> list[Change]`` — what differs, sorted by tool and field
  (``tools`` as for :func:`pins`).

:func:`write_lock` writes a lock whole or not at all, and :func:`dump_lock` is its text.
:func:`listing` starts the servers of a configuration and gives what :func:`pins` takes.

>>> from mcp.types import Tool
>>> echo = Tool(name="echo", description="Echoes", input_schema={"type": "object"})
>>> lock = pins({"demo": [echo]})
>>> changes(lock, {"demo": [echo]})
[]
>>> moved = Tool(name="echo", description="Echoes, then mails it", input_schema={"type": "object"})
>>> [str(change) for change in changes(lock, {"demo": [moved]})]
['demo.echo: the description changed since the lock']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

if TYPE_CHECKING:
    from .config import GatewayConfig

LOCK_VERSION = 1
"""The version of the lock's layout this module reads and writes."""

LOCK_LIMIT = 16 << 20
"""The largest lock file read, in bytes."""

Field = Literal["description", "inputSchema", "new", "removed"]
"""What changed: a pinned field of a tool, or the tool itself (``new``: not in the lock;
``removed``: in the lock, no longer listed)."""


class ToolLike(Protocol):
    """What a pin reads of an ``mcp.types.Tool``."""

    name: str
    description: str | None
    input_schema: dict[str, Any]


@dataclass(frozen=True, order=True)
class Pin:
    """One tool as approved: its server, its name there, its description (None when it has
    none) and ``sha256:`` followed by the hex SHA-256 of its canonical input schema."""

    server: str
    tool: str
    description: str | None
    schema: str

    @property
    def name(self) -> str:
        """The tool's name in a policy: ``S.T``."""
        return f"{self.server}.{self.tool}"


@dataclass(frozen=True)
class Server:
    """An upstream server as the lock records it: the name it is configured under, and the
    name and version it announced (None when it announced none)."""

    name: str
    info_name: str | None = None
    info_version: str | None = None


@dataclass(frozen=True)
class Lock:
    """The pinned servers and tools, each sorted by name."""

    servers: tuple[Server, ...]
    pins: tuple[Pin, ...]

    def pin(self, server: str, tool: str) -> Pin | None:
        """The pin of ``server``'s tool ``tool``, or None."""
        for pin in self.pins:
            if pin.server == server and pin.tool == tool:
                return pin
        return None


@dataclass(frozen=True, order=True)
class Change:
    """A difference between the lock and the tools listed now: the server, the tool's name
    there, and the field that changed."""

    server: str
    tool: str
    field: Field

    @property
    def name(self) -> str:
        """The tool's name in a policy: ``S.T``."""
        return f"{self.server}.{self.tool}"

    def __str__(self) -> str:
        what = {
            "description": "the description changed since the lock",
            "inputSchema": "the input schema changed since the lock",
            "new": "a new tool, not in the lock",
            "removed": "in the lock, no longer listed by the server",
        }[self.field]
        return f"{self.name}: {what}"


@dataclass(frozen=True)
class LockError:
    """Why a lock file cannot be used: the file, where in it (``line:column`` for text that is
    not JSON, a path of keys such as ``servers.fs.tools.read_file`` otherwise, "" for the whole
    file), a stable code and a message."""

    file: str
    location: str
    code: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.location}" if self.location else self.file
        return f"{where}: {self.message} [{self.code}]"


# ---------------------------------------------------------------------------- computing


def schema_hash(schema: Any) -> str:
    """``sha256:`` and the hex SHA-256 of ``schema`` as canonical JSON: keys sorted, no
    whitespace, text as UTF-8 (a lone surrogate, which JSON allows in a string, escaped).

    >>> schema_hash({"b": 1, "a": [True]}) == schema_hash({"a": [True], "b": 1})
    True
    """
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def pin_of(server: str, tool: ToolLike) -> Pin:
    """The pin of ``server``'s ``tool`` as it is listed now."""
    return Pin(server, tool.name, tool.description, schema_hash(tool.input_schema))


Listed = Mapping[str, Sequence[ToolLike]] | Iterable[Any]
"""Tools as :func:`pins` and :func:`changes` take them: a server's name → its tools, or
values with ``server`` and ``tool`` (the gateway's ``UpstreamTool``)."""


def by_server(tools: Listed) -> Mapping[str, Sequence[ToolLike]]:
    """``tools`` as a server's name → its tools."""
    if isinstance(tools, Mapping):
        return tools
    grouped: dict[str, list[ToolLike]] = {}
    each: Any
    for each in tools:
        grouped.setdefault(each.server, []).append(each.tool)
    return grouped


def pins(tools: Listed, servers: Mapping[str, Any] | None = None) -> Lock:
    """The lock of ``tools`` (a server's name → its tools, or ``UpstreamTool`` values), with
    each server's announced ``Implementation`` from ``servers`` when given. A tool listed twice
    by one server is pinned as it is listed first (:func:`changes` then reports the other)."""
    tools = by_server(tools)
    infos = servers or {}
    found: dict[tuple[str, str], Pin] = {}
    for server, listed in tools.items():
        for tool in listed:
            found.setdefault((server, tool.name), pin_of(server, tool))
    described = tuple(Server(name, *_announced(infos.get(name))) for name in sorted({*tools, *infos}))
    return Lock(described, tuple(sorted(found.values())))


def _announced(info: Any) -> tuple[str | None, str | None]:
    if info is None:
        return None, None
    name, version = getattr(info, "name", None), getattr(info, "version", None)
    return (name if isinstance(name, str) else None, version if isinstance(version, str) else None)


def changes(lock: Lock, tools: Listed) -> list[Change]:
    """What differs between ``lock`` and ``tools`` listed now (as for :func:`pins`): for a
    pinned tool, each field whose value differs (``description``, ``inputSchema``); a tool the
    lock does not have (``new``); a pinned tool no longer listed, also when its server is not
    in ``tools`` (``removed``). A tool listed twice is compared twice. Sorted."""
    tools = by_server(tools)
    found: set[Change] = set()
    listed: set[tuple[str, str]] = set()
    pinned_by = {(pin.server, pin.tool): pin for pin in lock.pins}
    for server, current in tools.items():
        for tool in current:
            listed.add((server, tool.name))
            pinned = pinned_by.get((server, tool.name))
            if pinned is None:
                found.add(Change(server, tool.name, "new"))
                continue
            now = pin_of(server, tool)
            if now.description != pinned.description:
                found.add(Change(server, tool.name, "description"))
            if now.schema != pinned.schema:
                found.add(Change(server, tool.name, "inputSchema"))
    for pin in lock.pins:
        if (pin.server, pin.tool) not in listed:
            found.add(Change(pin.server, pin.tool, "removed"))
    return sorted(found)


@dataclass(frozen=True)
class Listing:
    """What the servers of a configuration list now: each running server's tools and the
    ``Implementation`` it announced, and why each other server is not running."""

    tools: Mapping[str, Sequence[Any]]
    servers: Mapping[str, Any]
    failures: Mapping[str, str]


def listing(config: GatewayConfig, errlog: TextIO | None = None) -> Listing:
    """Start the servers of ``config``, list their tools and stop them (``errlog`` receives
    the stdio servers' standard error)."""
    import sys

    import anyio

    from .upstreams import Upstreams

    async def run() -> Listing:
        async with Upstreams(config, errlog=errlog or sys.stderr) as upstreams:
            listed = await upstreams.list_tools()
            running = upstreams.running()
            tools: dict[str, list[Any]] = {name: [] for name in running}
            for each in listed:
                tools.setdefault(each.server, []).append(each.tool)
            infos = {}
            for name in running:
                session = upstreams.session(name)
                infos[name] = getattr(session, "server_info", None) if session is not None else None
            return Listing(tools, infos, dict(upstreams.failures))

    return anyio.run(run)


# ----------------------------------------------------------------------------- the file


def dump_lock(lock: Lock) -> str:
    """The text of ``lock``'s file: JSON, keys sorted, two spaces of indent, one line per
    value (so a changed description is a one-line diff in review)."""
    servers: dict[str, Any] = {}
    for server in lock.servers:
        servers[server.name] = {
            "server": {"name": server.info_name, "version": server.info_version},
            "tools": {},
        }
    for pin in lock.pins:
        entry = servers.setdefault(pin.server, {"server": {"name": None, "version": None}, "tools": {}})
        entry["tools"][pin.tool] = {"description": pin.description, "inputSchema": pin.schema}
    document = {"version": LOCK_VERSION, "servers": servers}
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_lock(path: str, lock: Lock) -> None:
    """Write ``lock`` to ``path`` whole or not at all (``OSError`` when it cannot be)."""
    from policyc.compiler.files import replace_file

    # a lone surrogate (JSON allows one in a string) is written as the JSON escape `\udXXX`
    replace_file(path, dump_lock(lock).encode("utf-8", "backslashreplace"))


def read_lock(path: str) -> Lock | LockError:
    """The lock file at ``path``, or a :class:`LockError` saying where it is wrong
    (``lock-missing``: no such file; ``lock-unreadable``: not a regular file, too large, not
    UTF-8; ``lock-syntax``: not JSON; ``lock-version``: a layout this version does not know;
    ``lock-invalid``: JSON that is not a lock)."""
    from policyc.compiler.files import read_bytes

    try:
        data = read_bytes(path, LOCK_LIMIT)
    except FileNotFoundError:
        return LockError(path, "", "lock-missing", "no lock file (`policyc mcp lock` writes one)")
    except OSError as error:
        return LockError(path, "", "lock-unreadable", f"cannot read the lock file: {error.strerror or error}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return LockError(
            path, "", "lock-unreadable", f"not UTF-8 text ({error.reason} at byte {error.start})"
        )
    return parse_lock(text, path)


def parse_lock(text: str, origin: str) -> Lock | LockError:
    """The lock in ``text`` (read from ``origin``, for the errors), as :func:`read_lock`."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        return LockError(origin, f"{error.lineno}:{error.colno}", "lock-syntax", f"not JSON: {error.msg}")
    except RecursionError:
        return LockError(origin, "", "lock-syntax", "nested too deeply to be a lock file")
    try:
        return _lock_of(document)
    except _Invalid as invalid:
        return LockError(origin, invalid.location, invalid.code, invalid.message)


class _Invalid(Exception):
    def __init__(self, location: str, message: str, code: str = "lock-invalid") -> None:
        self.location, self.message, self.code = location, message, code


def _table(value: Any, location: str, keys: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(location, f"expected an object with {_keys(keys)}")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise _Invalid(location, f"unknown key `{unknown[0]}` (expected {_keys(keys)})")
    missing = sorted(keys - set(value))
    if missing:
        raise _Invalid(location, f"missing key `{missing[0]}`")
    return value


def _keys(keys: set[str]) -> str:
    return ", ".join(f"`{key}`" for key in sorted(keys))


def _text(value: Any, location: str, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Invalid(location, "expected a string" + (" or null" if optional else ""))
    return value


def _lock_of(document: Any) -> Lock:
    if isinstance(document, dict) and "version" in document and document["version"] != LOCK_VERSION:
        raise _Invalid(
            "version",
            f"layout version {document['version']!r}, this policyc reads version {LOCK_VERSION}",
            "lock-version",
        )
    top = _table(document, "", {"version", "servers"})
    if not isinstance(top["servers"], dict):
        raise _Invalid("servers", "expected an object naming each server")
    servers: list[Server] = []
    found: list[Pin] = []
    for name, entry in top["servers"].items():
        where = f"servers.{name}"
        entry = _table(entry, where, {"server", "tools"})
        info = _table(entry["server"], f"{where}.server", {"name", "version"})
        servers.append(
            Server(
                name,
                _text(info["name"], f"{where}.server.name"),
                _text(info["version"], f"{where}.server.version"),
            )
        )
        if not isinstance(entry["tools"], dict):
            raise _Invalid(f"{where}.tools", "expected an object naming each tool")
        for tool, pinned in entry["tools"].items():
            at = f"{where}.tools.{tool}"
            pinned = _table(pinned, at, {"description", "inputSchema"})
            schema = _text(pinned["inputSchema"], f"{at}.inputSchema", optional=False)
            if schema is None or not _is_hash(schema):
                raise _Invalid(f"{at}.inputSchema", "expected `sha256:` and 64 hex digits")
            found.append(Pin(name, tool, _text(pinned["description"], f"{at}.description"), schema))
    return Lock(tuple(sorted(servers, key=lambda server: server.name)), tuple(sorted(found)))


def _is_hash(value: str) -> bool:
    digest = value.removeprefix("sha256:")
    return value.startswith("sha256:") and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
