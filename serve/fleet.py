"""``policyc serve --processes N``: N full service processes on one port.

The first process (the supervisor) binds the port, starts N service processes that all accept
connections on it (the kernel spreads the connections), and starts again one that dies. Each
service process owns the sessions whose hash falls to it (:func:`~.routing.owner_of`), keeps
them in a database of its own (:func:`database_of`) with its own audit chain and writer, and
answers on a Unix socket of its own besides the port; a request about a session another process
owns is forwarded there (:mod:`.routing`). SIGHUP to the supervisor (``policyc serve reload``)
reloads the policy in every process; SIGINT or SIGTERM stops them all.

>>> database_of("policyc-serve.db", 0, 2), database_of("policyc-serve.db", 1, 2)
('policyc-serve.db', 'policyc-serve.p1.db')
>>> database_of("state/monitor", 2, 3)
'state/monitor.p2'
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESTART_LIMIT = 5  # starts of one process within RESTART_WINDOW seconds before the service stops
RESTART_WINDOW = 60.0
READY_TIMEOUT = 120.0  # seconds a process may take to rebuild its sessions and listen


def database_of(db: str, index: int, count: int) -> str:
    """The database of process ``index`` of ``count``: ``db`` itself for the first (and for a
    service of one process), ``NAME.pI.EXT`` beside it for the others."""
    if index == 0 or count == 1:
        return db
    path = Path(db)
    return str(path.with_name(f"{path.stem}.p{index}{path.suffix}"))


def run_fleet(settings: Any) -> None:
    """Start ``settings.processes`` service processes on the port and supervise them until
    SIGINT or SIGTERM. What keeps the first start from working (keys, policy, a database) is
    raised as ``build`` raises it, once every process is stopped."""
    from policyc.runtime.opener import frozen

    from .keys import read_keys

    read_keys(settings.keys)  # what would stop every process, said once, before any starts
    frozen(settings.policy, settings.verify_key)
    count = settings.processes
    from .server import listening

    listener = listening(settings.host, settings.port)
    listener.set_inheritable(True)
    folder = tempfile.mkdtemp(prefix="policyc-serve-")  # the owner's only (0700)
    peers = [os.path.join(folder, f"p{i}.sock") for i in range(count)]
    supervisor = _Supervisor(settings, listener, peers)
    try:
        supervisor.start_all()
        host, port = listener.getsockname()[:2]
        scheme = "https" if settings.tls_cert else "http"
        print(
            f"policyc serve: listening on {scheme}://{host}:{port} ({supervisor.sessions} sessions "
            f"from {settings.db} and its {count - 1} sibling database{'s' if count > 2 else ''}, "
            f"{count} processes)",
            flush=True,
        )
        supervisor.watch()
    finally:
        supervisor.stop_all()
        listener.close()
        for path in peers:
            for made in (path, f"{path}.fd"):
                if os.path.exists(made):
                    os.unlink(made)
        os.rmdir(folder)


class _Supervisor:
    """The service processes: started, watched, started again, stopped."""

    def __init__(self, settings: Any, listener: socket.socket, peers: list[str]) -> None:
        self.settings = settings
        self.listener = listener
        self.peers = peers
        self.pids: dict[int, int] = {}  # process index -> pid
        self.starts: dict[int, list[float]] = {i: [] for i in range(len(peers))}
        self.sessions = 0
        self.stopping = False

    def start_all(self) -> None:
        for index in range(len(self.peers)):
            self.sessions += self._start(index)

    def _start(self, index: int) -> int:
        """Start process ``index`` and wait until it listens; its sessions (``StoreError`` with
        its message when it could not start)."""
        from .store import StoreError

        self.starts[index].append(time.monotonic())
        readable, writable = os.pipe()
        pid = os.fork()
        if pid == 0:  # the service process
            os.close(readable)
            _serve_one(self.settings, index, self.listener, self.peers, writable)
        os.close(writable)
        self.pids[index] = pid
        said = _read_line(readable, READY_TIMEOUT)
        os.close(readable)
        kind, _, rest = said.partition(" ")
        if kind != "ready":
            raise StoreError(rest or f"process {index} of the service stopped while starting")
        return int(rest)

    def watch(self) -> None:
        """Wait for the processes; start again one that died, until SIGINT or SIGTERM."""

        def stop(signum: int, frame: Any) -> None:
            self.stopping = True
            self._signal(signal.SIGTERM)

        def reload(signum: int, frame: Any) -> None:
            self._signal(signal.SIGHUP)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)
        while self.pids:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            index = next((i for i, p in self.pids.items() if p == pid), None)
            if index is None:
                continue
            del self.pids[index]
            if self.stopping:
                continue
            recent = [t for t in self.starts[index] if time.monotonic() - t < RESTART_WINDOW]
            self.starts[index] = recent
            why = _status_text(status)
            if len(recent) >= RESTART_LIMIT:
                print(
                    f"policyc serve: process {index} {why} {len(recent)} times in {RESTART_WINDOW:g} s: stopping",
                    file=sys.stderr,
                    flush=True,
                )
                self.stopping = True
                self._signal(signal.SIGTERM)
                continue
            print(f"policyc serve: process {index} {why}; starting it again", file=sys.stderr, flush=True)
            try:
                self._start(index)
            except Exception as error:
                print(
                    f"policyc serve: process {index} did not start again: {error}",
                    file=sys.stderr,
                    flush=True,
                )

    def _signal(self, signum: int) -> None:
        for pid in list(self.pids.values()):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def stop_all(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        self.stopping = True
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while self.pids and time.monotonic() < deadline:
            for index, pid in list(self.pids.items()):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    del self.pids[index]
            time.sleep(0.02)
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.pids.clear()


def _serve_one(settings: Any, index: int, listener: socket.socket, peers: list[str], ready: int) -> None:
    """A service process: its sessions rebuilt from its database, then serving the port and its
    Unix socket until stopped. Never returns."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    code = 0
    try:
        from .app import principal_of
        from .handoff import Handoff, first_session
        from .routing import Router, owner_of
        from .server import build, run

        service = build(settings, index)
        if os.path.exists(peers[index]):
            os.unlink(peers[index])
        check = principal_of(service)
        router = Router(index, peers, check, settings.max_body, service.metrics)

        def owner(head: bytes, body: bytes) -> int | None:
            named = first_session(head, body)
            if named is None or not named[1]:
                return None
            try:
                principal = check(named[0], {})
            except Exception:
                return None
            return owner_of(principal.name, named[1], len(peers))

        handoff = Handoff(
            index, listener, [f"{path}.fd" for path in peers], owner, lambda c: None, service.metrics.handed
        )

        def started() -> None:
            os.write(ready, f"ready {len(service.live)}\n".encode())

        run(settings, service, sockets=[], router=router, started=started, handoff=handoff)
    except BaseException as error:  # said to the supervisor, which says it and stops
        message = str(error) or type(error).__name__
        try:
            os.write(ready, f"failed process {index}: {message}\n".encode("utf-8", "replace"))
        except OSError:
            pass
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _read_line(fd: int, timeout: float) -> str:
    """A line from the pipe of a starting process ('' when it closed the pipe or took too long)."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return ""
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"
