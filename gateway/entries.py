"""The entries that add the gateway to a client, written so that they work as written: the
absolute path of the installed ``policyc`` and of the policy and configuration (a desktop
client starts its servers with a short ``PATH`` from the folder ``/``, where a bare
``policyc`` installed in a virtual environment is not found and a relative path means nothing).

>>> entries = client_entries("git", "/venv/bin/policyc", "/home/me/git.dl", "/home/me/gateway.toml")
>>> print(entries.inspector)
npx @modelcontextprotocol/inspector --cli --method tools/list -- /venv/bin/policyc mcp /home/me/git.dl --config /home/me/gateway.toml
>>> json.loads(entries.claude)["mcpServers"]["git"]["command"]
'/venv/bin/policyc'
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Entries:
    """The same gateway as an entry of Claude Desktop's ``claude_desktop_config.json``, of VS
    Code's ``.vscode/mcp.json`` (JSON texts), and as a command line of the MCP Inspector's CLI
    (``--`` before ``policyc``, else the Inspector takes ``--config`` as its own)."""

    claude: str
    vscode: str
    inspector: str

    def text(self) -> str:
        """The three, each under a line saying where it goes."""
        return (
            f"Claude Desktop (claude_desktop_config.json):\n{self.claude}\n"
            f"VS Code (.vscode/mcp.json):\n{self.vscode}\n"
            f"MCP Inspector CLI:\n{self.inspector}"
        )


def client_entries(name: str, policyc: str, policy: str, config: str) -> Entries:
    """The entries of a gateway named ``name`` started as ``policyc mcp POLICY --config CONFIG``
    (each path made absolute)."""
    command = os.path.abspath(policyc)
    args = ["mcp", os.path.abspath(policy), "--config", os.path.abspath(config)]
    claude = {"mcpServers": {name: {"command": command, "args": args}}}
    vscode = {"servers": {name: {"type": "stdio", "command": command, "args": args}}}
    inspector = [
        "npx",
        "@modelcontextprotocol/inspector",
        "--cli",
        "--method",
        "tools/list",
        "--",
        command,
        *args,
    ]
    return Entries(json.dumps(claude, indent=2), json.dumps(vscode, indent=2), shlex.join(inspector))


def installed_policyc() -> str:
    """The absolute path of the ``policyc`` command running now: the console script beside the
    interpreter (a virtual environment's ``bin``), else the one on ``PATH``, else the script
    this process was started as."""
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), "policyc")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("policyc")
    return os.path.abspath(found if found is not None else sys.argv[0])


def absolute_command(command: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``command`` with its program given by its absolute path when it is a bare name found on
    this process's ``PATH`` (else as it is)."""
    import shutil

    if not command or os.sep in command[0]:
        return tuple(command)
    found = shutil.which(command[0])
    return tuple(command) if found is None else (os.path.abspath(found), *command[1:])
