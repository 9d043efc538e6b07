"""The screen of tool pins the gateway runs each time it lists the servers' tools: a tool whose
definition changed since the lock (or that the lock does not have) is hidden, saying which field
changed (docs/mcp.md, "Tool pinning"). On the first run, when the lock file does not exist yet,
the tools listed are written to it and none is hidden.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from .upstreams import UpstreamTool

Screen = Callable[[list[UpstreamTool], Mapping[str, Any]], Mapping[str, str]]


def pin_screen(path: str) -> Screen | str:
    """The screen of the lock at ``path``, or why the lock cannot be used (a string). The
    screen takes the tools listed and what each server announced (its name and version, which
    a lock written on the first run records)."""
    from .pins import LockError, changes, pins, read_lock, write_lock

    found = read_lock(path)
    if isinstance(found, LockError) and found.code != "lock-missing":
        return str(found)
    state: dict[str, Any] = {"lock": None if isinstance(found, LockError) else found}

    def screen(tools: list[UpstreamTool], announced: Mapping[str, Any]) -> Mapping[str, str]:
        lock = state["lock"]
        if lock is None:
            lock = pins(tools, dict(announced) or None)
            write_lock(path, lock)
            state["lock"] = lock
            print(f"policyc mcp: pinned {len(tools)} tools in `{path}`", file=sys.stderr)
            return {}
        hidden: dict[str, str] = {}
        for change in changes(lock, tools):
            if change.field == "removed":
                continue
            why = str(change).split(": ", 1)[-1]
            hidden[change.name] = f"{hidden[change.name]}; {why}" if change.name in hidden else why
        return {name: f"{why} (`policyc mcp lock` to accept it)" for name, why in hidden.items()}

    return screen
