"""What ``policyc mcp check POLICY --config CONFIG`` reports: every server of the configuration
started once as the gateway starts it, and each tool with the policy's view of it (docs/mcp.md,
"Checking before a client uses it").

A tool's view is one of ``listed`` (each call decided by the policy), ``always denied`` (the
analyzer proves every call denied: the gateway hides it), ``escalated`` (every call is put to
a person first: only the `Escalate` rules stop it), or ``changed`` (its definition differs from
the lock: the gateway hides it); a tool the lock has unchanged is also ``pinned``. The check
passes when every server started and no pinned tool changed.

>>> report = Report({"fs": ServerView("fs", None, (ToolView("fs.read", "listed"),))})
>>> report.ok, report.lines()
(True, ['server `fs`: 1 tool(s)', '  fs.read: listed'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import GatewayConfig


@dataclass(frozen=True)
class ToolView:
    """A tool ``S.T``, the policy's view of it, why (the analyzer's message or the change), and
    whether the lock pins it."""

    name: str
    view: str  # "listed", "always denied", "escalated", "changed"
    why: str | None = None
    pinned: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.name, "view": self.view, "why": self.why, "pinned": self.pinned}


@dataclass(frozen=True)
class ServerView:
    """A server: why it did not start (None when it did), and its tools."""

    name: str
    failure: str | None
    tools: tuple[ToolView, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.name,
            "started": self.failure is None,
            "failure": self.failure,
            "tools": [tool.to_json() for tool in self.tools],
        }


@dataclass(frozen=True)
class Report:
    """Every server of the configuration, in its order; ``note`` says what the analysis could
    not do (the tools are then only ``listed``)."""

    servers: Mapping[str, ServerView]
    note: str | None = None

    @property
    def ok(self) -> bool:
        """Every server started, and no pinned tool changed."""
        return all(
            s.failure is None and all(t.view != "changed" for t in s.tools) for s in self.servers.values()
        )

    def lines(self) -> list[str]:
        out = []
        for server in self.servers.values():
            if server.failure is not None:
                out.append(f"server `{server.name}`: did not start: {server.failure}")
                continue
            out.append(f"server `{server.name}`: {len(server.tools)} tool(s)")
            for tool in server.tools:
                pinned = ", pinned" if tool.pinned else ""
                why = f": {tool.why}" if tool.why else ""
                out.append(f"  {tool.name}: {tool.view}{pinned}{why}")
        if self.note is not None:
            out.append(f"note: {self.note}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "servers": [server.to_json() for server in self.servers.values()],
            "note": self.note,
        }


def check_gateway(policy: str, config: GatewayConfig, timeout: float, errlog: Any = None) -> Report:
    """Start every server of ``config`` once, list its tools, and view each with the policy at
    ``policy`` (its analysis bounded by ``timeout`` seconds) and the configuration's lock."""
    from .analysis import always_denied
    from .pins import LockError, changes, listing, read_lock

    hidden, note = always_denied(policy, timeout)
    stopped, _ = always_denied(policy, timeout, escalations_deny=True)
    listed = listing(config, errlog=errlog)
    lock = None if config.lock is None else read_lock(config.lock)
    changed: dict[str, list[str]] = {}
    if lock is not None and not isinstance(lock, LockError):
        for change in changes(lock, listed.tools):
            if change.field != "removed":
                changed.setdefault(change.name, []).append(str(change).split(": ", 1)[-1])
    elif isinstance(lock, LockError) and lock.code != "lock-missing":
        note = f"{note}; {lock}" if note else str(lock)
    usable = None if lock is None or isinstance(lock, LockError) else lock
    servers = {}
    for server in config.servers:
        if server.name in listed.failures:
            servers[server.name] = ServerView(server.name, listed.failures[server.name])
            continue
        tools = []
        for tool in listed.tools.get(server.name, ()):
            name = f"{server.name}.{tool.name}"
            pinned = (
                usable is not None and name not in changed and usable.pin(server.name, tool.name) is not None
            )
            if name in changed:
                tools.append(ToolView(name, "changed", "; ".join(changed[name]), pinned))
            elif name in hidden:
                tools.append(ToolView(name, "always denied", hidden[name], pinned))
            elif name in stopped:
                tools.append(
                    ToolView(name, "escalated", "no call of it runs without a person's approval", pinned)
                )
            else:
                tools.append(ToolView(name, "listed", None, pinned))
        servers[server.name] = ServerView(server.name, None, tuple(tools))
    return Report(servers, note)
