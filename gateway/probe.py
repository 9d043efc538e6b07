"""Saying loudly why an upstream server is not running (docs/mcp.md, "When a server does not start").

At start the gateway starts every server once (start, ``initialize``, list its tools). A server
that did not start stops ``policyc mcp`` with a :class:`ServersMissing` naming each server and
why, unless ``--allow-missing``: then the gateway serves the others, and says what did not start
in its log and in the instructions it gives the client (:func:`instructions`).

A stdio server's command is looked up before it is started (:func:`missing_command`), on the
``PATH`` the server would get (its own ``env``'s, else the gateway's), so that the message names
that ``PATH``: a desktop client starts the gateway with a short one.

>>> from policyc.gateway.config import Upstream
>>> print(missing_command(Upstream("fs", command="no-such-server-x"), {"PATH": "/usr/bin:/bin"}))
the command `no-such-server-x` was not found on the PATH `/usr/bin:/bin`
>>> missing_command(Upstream("sh", command="sh"), {"PATH": "/usr/bin:/bin"}) is None
True
>>> print(missing({"fs": "it exited at once"}))
the MCP server `fs` did not start: it exited at once
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .config import Upstream


class ServersMissing(Exception):
    """Servers that did not start, when the gateway was not told ``--allow-missing``."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        super().__init__(missing(failures) + " (--allow-missing serves the servers that did start)")
        self.failures = dict(failures)


def search_path(server: Upstream, environ: Mapping[str, str] | None = None) -> str:
    """The ``PATH`` a stdio server's command is looked up on: its own ``env``'s, else the gateway's."""
    environ = os.environ if environ is None else environ
    return server.env.get("PATH", environ.get("PATH", os.defpath))


def missing_command(server: Upstream, environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``server``'s command cannot be started (not found on its ``PATH``, or not an
    executable file), None when it can be, or when the server is reached at a URL."""
    import shutil

    command = server.command
    if command is None:
        return None
    if os.sep in command:
        where = command if os.path.isabs(command) else os.path.join(server.cwd or os.getcwd(), command)
        if os.path.isfile(where) and os.access(where, os.X_OK):
            return None
        return f"the command `{command}` is not an executable file"
    path = search_path(server, environ)
    if shutil.which(command, path=path) is not None:
        return None
    return f"the command `{command}` was not found on the PATH `{path}`"


def missing(failures: Mapping[str, str]) -> str:
    """One line per server that did not start, saying why."""
    return "\n".join(
        f"the MCP server `{name}` did not start: {why}" for name, why in sorted(failures.items())
    )


def instructions(failures: Mapping[str, str]) -> str | None:
    """What the client is told when some servers did not start (None when every server did)."""
    if not failures:
        return None
    lines = [f"- `{name}`: {why}" for name, why in sorted(failures.items())]
    return "policyc mcp serves without these MCP servers, which did not start:\n" + "\n".join(lines)
