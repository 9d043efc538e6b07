"""A real `policyc serve`: the installed command on a free port of 127.0.0.1, its keys made
by `policyc serve keygen`, and an HTTP client of it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx

from .commands import policyc_path

# the policy most service tests run: an action may not send what an untrusted result influenced
POLICY = """
.import events
Influenced(e, d) :- DependsOn(e, d).
Influenced(e, d) :- DependsOn(e, x), Influenced(x, d).
@id("untrusted-send")
@message("{a} sends what an untrusted result influenced")
Deny(a) :- ToolCall(a, "send_email"), Influenced(a, d), Label(d, "untrusted").
"""


def keys_file(folder: Path, principals: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """``folder/keys.toml`` with a new key for each principal (and its roles): the keys by principal."""
    found, tables = {}, []
    for principal, roles in principals.items():
        found[principal], table = new_key(principal, *roles)
        tables.append(table)
    (folder / "keys.toml").write_text("\n".join(tables), "utf-8")
    return found


def new_key(principal: str, *roles: str) -> tuple[str, str]:
    """A new key of ``principal`` with ``roles``: the key, and its entry for KEYS.toml."""
    args = [policyc_path(), "serve", "keygen", "--principal", principal]
    for role in roles:
        args += ["--role", role]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    return lines[0].split()[-1], "\n".join(lines[2:]) + "\n"


def serve_command(folder: Path, *extra: str) -> list[str]:
    """`policyc serve` of ``folder``'s policy.dl, keys.toml and monitor.db on 127.0.0.1, on the
    port the kernel gives it (said on its first line: no race for a free port), and ``extra``."""
    return [
        policyc_path(),
        "serve",
        str(folder / "policy.dl"),
        "--keys",
        str(folder / "keys.toml"),
        "--db",
        str(folder / "monitor.db"),
        "--port",
        "0",
        *extra,
    ]


class Server:
    """A `policyc serve` process on a free port of 127.0.0.1."""

    def __init__(self, folder: Path, *extra: str, scheme: str = "http") -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            serve_command(folder, *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(f"policyc serve: listening on {scheme}://127.0.0.1:"), line
        self.port = int(line.split()[4].rsplit(":", 1)[1])
        self.url = f"{scheme}://127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def client(server: Server, key: str | None) -> httpx.Client:
    """An HTTP client of the service, with ``key`` as its bearer key (none: anonymous)."""
    headers = {} if key is None else {"authorization": f"Bearer {key}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=10)


def event(identifier: str, kind: str = "tool_result", **fields: Any) -> dict[str, Any]:
    """An event record."""
    return {"id": identifier, "kind": kind, **fields}


def prepare(folder: Path, policy: str, principals: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Write ``policy.dl`` and ``keys.toml`` into ``folder`` for a :class:`Server`: a key for each
    principal, with its roles; the keys, by principal."""
    (folder / "policy.dl").write_text(policy, "utf-8")
    keys, tables = {}, []
    for principal, roles in principals.items():
        keys[principal], table = new_key(principal, *roles)
        tables.append(table)
    (folder / "keys.toml").write_text("\n".join(tables), "utf-8")
    return keys
