"""Starting the service: read the keys, keep the policy's bundle in the database, rebuild the
sessions, and serve the application on uvicorn, saying where it listens once the socket is
bound. SIGHUP reloads the policy (:func:`reload`): new sessions run the new one, existing ones
keep theirs; ``policyc serve reload`` sends it and prints what the service did."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyc.runtime.opener import frozen

from .app import application
from .keys import read_keys
from .ownership import LEASE_TTL
from .service import MAX_BODY, WAIT, Service
from .store import Store, StoreError


@dataclass(frozen=True)
class Settings:
    """What ``policyc serve`` was asked for."""

    policy: str
    keys: str
    db: str = "policyc-serve.db"
    host: str = "127.0.0.1"
    port: int = 8181
    functors: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    max_body: int = MAX_BODY
    wait: float = WAIT
    sync: str = "normal"
    processes: int = 1  # full service processes on one port, each owning a share of the sessions
    instance: str | None = None  # this instance's name in a PostgreSQL database (None: host and pid)
    advertise: str | None = None  # where the other instances reach this one (None: its scheme, host, port)
    lease_ttl: float = LEASE_TTL  # seconds a session's lease runs without renewal (PostgreSQL)
    verify_key: str | None = None
    audit_key: str | None = None  # signs the audit log's checkpoints (a `policyc keygen` .key)
    audit_head: str | None = None  # where the audit log's head is published: a file, or "-" (stdout)


def build(settings: Settings, index: int = 0) -> Service:
    """The service, its sessions rebuilt from the database; with
    ``settings.processes`` above 1, the service of process ``index``, on its own database
    (:func:`~.fleet.database_of`). ``PolicyError`` for a policy that cannot be read, has errors
    or does not verify; ``KeysError`` for a bad keys file (read first: the database is not
    touched then); ``StoreError`` for a database written by another number of processes."""
    from .fleet import database_of
    from .stores import SCHEMES, open_store

    keys = read_keys(settings.keys)
    digest, bundle = frozen(settings.policy, settings.verify_key)
    shared = settings.db.startswith(SCHEMES)  # PostgreSQL: instances may share it
    if shared and settings.processes > 1:
        raise StoreError(
            "--processes keeps SQLite files; with a PostgreSQL database, start several "
            "instances (--instance NAME) instead"
        )
    db = database_of(settings.db, index, settings.processes)
    settings = dataclasses.replace(settings, db=db)
    store: Any = open_store(db, settings.sync, chain(settings), instance=settings.instance)
    for path, mode in store.widened:
        print(
            f"policyc serve: {path} was readable or writable by others ({mode:04o}): it is now its "
            "owner's only (0600)",
            file=sys.stderr,
            flush=True,
        )
    if settings.audit_head not in (None, "-"):
        anchored(store, settings.audit_head)
    written = None if shared else store.meta("processes")
    if written is not None and int(written) != settings.processes:
        store.close()
        raise StoreError(
            f"{db}: the sessions of this database were shared out over {written} processes: start "
            f"with --processes {written} (the owner of a session is chosen by their number)"
        )
    store.keep_policy(digest, settings.policy, bundle)
    store.set_meta("current", digest)
    if shared:
        store.set_meta(f"pid:{store.instance}", str(os.getpid()))
        store.announce(settings.advertise or address_of(settings))
    else:
        store.set_meta("processes", str(settings.processes))
        # the process `policyc serve reload` signals: the one that started the processes, if several
        store.set_meta("pid", str(os.getpid() if settings.processes == 1 else os.getppid()))
    from .ownership import Leased, Ownership, Sole

    ownership: Ownership = Leased(store, settings.lease_ttl) if shared else Sole()
    from policyc.runtime.functors import load_module

    from .audit import DatabaseAudit
    from .sessions import Local, Sessions

    functors = load_module(settings.functors) if settings.functors else None
    audit = DatabaseAudit(store.path, owner=store)
    evaluator = Local(Sessions(store, functors, ownership.owns, audit))
    service = Service(
        evaluator, digest, keys, store, max_body=settings.max_body, wait=settings.wait, ownership=ownership
    )
    service.restore()
    if settings.audit_head not in (None, "-"):  # at once: a file that cannot be written stops it
        try:
            publish(settings.audit_head, store.audit_head().line())
        except OSError as error:
            raise StoreError(
                f"--audit-head {settings.audit_head}: cannot write it: {error.strerror or error}"
            ) from None
    return service


def address_of(settings: Settings) -> str:
    """Where this service answers, as the settings say (``--advertise`` gives it when the host it
    binds is not the one others reach it at, such as 0.0.0.0)."""
    scheme = "https" if settings.tls_cert else "http"
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"{scheme}://{host}:{settings.port}"


def chain(settings: Settings) -> Any:
    """How the service writes its audit log: signed with ``--audit-key``, its head published to
    ``--audit-head`` after every checkpoint (``AuditError`` for a key that cannot be read)."""
    from policyc.runtime.audit import private_key

    from .audit import Chain

    key = None if settings.audit_key is None else private_key(settings.audit_key)
    target = settings.audit_head
    if target is None:
        return Chain(key=key)

    def published(line: str) -> None:
        try:
            publish(target, line)
        except OSError as error:  # the commit is made: the head stays at GET /v1/audit/head
            print(
                f"policyc serve: cannot publish the audit log's head to {target}: {error.strerror or error}",
                file=sys.stderr,
                flush=True,
            )

    return Chain(key=key, publish=published)


def publish(target: str | None, line: str) -> None:
    """Publish the audit log's head: a line on standard output (``-``), or the file ``target``
    replaced whole (``OSError`` when it cannot be written)."""
    if target == "-":
        print(f"policyc serve: audit head {line}", flush=True)
    elif target is not None:
        from policyc.compiler.files import replace_file

        replace_file(target, (line + "\n").encode("utf-8"))


def anchored(store: Store, target: str) -> None:
    """Refuse to go on writing a log that does not reach the head published in ``target`` (a
    log cut, or rewritten, while the service was stopped): ``StoreError`` saying so."""
    from policyc.compiler.files import read_text
    from policyc.runtime.audit import parse_head

    from .store import StoreError

    try:
        text = read_text(target)
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as error:
        raise StoreError(
            f"--audit-head {target}: cannot read it: {getattr(error, 'strerror', None) or error}"
        ) from None
    if not text.strip():
        return
    try:
        expected = parse_head(text)
    except ValueError as error:
        raise StoreError(f"--audit-head {target}: not a head of an audit log: {error}") from None
    problem = store.reaches(expected)
    if problem is not None:
        raise StoreError(
            f"the audit log of {store.path} does not reach the head published in {target}: {problem}; "
            "export and verify it (`policyc audit verify --expect`), and remove the head file only "
            "to start anew on purpose"
        )


def reload(settings: Settings, service: Service) -> dict[str, Any]:
    """Read the policy and the keys again: new sessions run the policy, existing ones keep
    theirs; the next requests are checked against the keys. What happened is kept in the database (meta ``reload``) for ``policyc serve reload`` to print; a policy
    that cannot be used leaves the service as it was."""
    from policyc.runtime.errors import PolicyError

    try:
        digest, bundle = frozen(settings.policy, settings.verify_key)
    except PolicyError as error:
        outcome = {"ok": False, "policy": service.policy_digest, "message": f"not reloaded: {error}"}
    else:
        service.store.keep_policy(digest, settings.policy, bundle)
        service.store.set_meta("current", digest)
        kept = sum(1 for stored in service.store.sessions() if stored.policy != digest)
        changed = digest != service.policy_digest
        service.policy_digest = digest
        outcome = {
            "ok": True,
            "policy": digest,
            "message": (
                f"reloaded {settings.policy}: new sessions run {digest}; "
                f"{kept} existing session{'s' if kept != 1 else ''} keep their policy"
                + ("" if changed else " (the policy did not change)")
            ),
        }
    keys = _reload_keys(settings, service)
    outcome["keys"] = keys
    outcome["message"] = f"{outcome['message']}; {keys}"
    outcome["at"] = time.time()
    service.store.set_meta(_reload_key(service.store), json.dumps(outcome))
    print(f"policyc serve: {outcome['message']}", flush=True)
    return outcome


def _reload_keys(settings: Settings, service: Service) -> str:
    """Read the keys file again: the next requests are checked against it. A file that cannot
    be used leaves the keys as they were; what happened, in a phrase."""
    from .keys import KeysError

    try:
        keys = read_keys(settings.keys)
    except KeysError as error:
        return f"keys not reloaded, the old ones still hold: {error}"
    service.keys = keys
    principals = len(set(keys.by_digest.values()) | set(keys.by_subject.values()))
    return f"keys reloaded from {settings.keys} ({principals} principal{'s' if principals != 1 else ''})"


def run(
    settings: Settings,
    service: Service,
    *,
    sockets: list[Any] | None = None,
    router: Any = None,
    started: Callable[[], None] | None = None,
    handoff: Any = None,
) -> None:
    """Serve until interrupted (SIGINT, SIGTERM); SIGHUP reloads the policy. One process of
    ``--processes N`` serves with its ``router``, accepts the shared port's connections through
    its ``handoff`` (:mod:`.handoff`: each goes to the process that owns its first request's
    session), and calls ``started`` instead of saying where it listens."""
    import asyncio

    import uvicorn

    def finish() -> None:
        """Stop the workers, close the audit log's segment, give up the leases and close the
        database (once)."""
        if not service.store.closed:
            service.evaluator.stop()
            try:
                service.ownership.stop()
            except Exception as error:  # they run out by themselves
                print(f"policyc serve: the leases were not given up: {error}", file=sys.stderr, flush=True)
            service.store.set_meta("pid", "")
            service.store.close()
            sys.stdout.flush()

    class Server(uvicorn.Server):
        accepting: set[Any] = set()  # noqa: RUF012  (replaced per instance when it accepts itself)
        renewing: Any = None

        async def shutdown(self, sockets: Any = None) -> None:
            if handoff is not None:
                handoff.stop()
            # before uvicorn raises the signal that stopped it again (which ends the process)
            await super().shutdown(sockets)
            finish()

        def serve_connection(self, connection: Any) -> None:
            """Serve an accepted connection as uvicorn serves those of its own listeners."""
            config = self.config

            def protocol() -> asyncio.Protocol:
                return config.http_protocol_class(  # type: ignore[call-arg]
                    config=config, server_state=self.server_state, app_state=self.lifespan.state
                )

            loop = asyncio.get_running_loop()
            self.accepting.add(
                loop.create_task(loop.connect_accepted_socket(protocol, sock=connection, ssl=config.ssl))
            )
            self.accepting = {task for task in self.accepting if not task.done()}

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, reload, settings, service)
            if router is not None:
                await router.start()
            self.renewing = loop.create_task(_renewing(service, settings.lease_ttl))
            if handoff is not None:
                self.accepting = set()
                handoff.serve = self.serve_connection
                handoff.start()
            leased = service.ownership
            if settings.port == 0 and settings.advertise is None and isinstance(leased, Leased):
                # `--port 0`: the other instances reach this one at the port it got
                bound = self.servers[0].sockets[0].getsockname()[1]
                leased.store.announce(address_of(dataclasses.replace(settings, port=bound)))
            if started is not None:
                started()
                return
            for server in self.servers:
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    scheme = "https" if settings.tls_cert else "http"
                    print(
                        f"policyc serve: listening on {scheme}://{host}:{port} "
                        f"({len(service.live)} sessions from {settings.db})",
                        flush=True,
                    )

    from .ownership import Leased

    if router is None and isinstance(service.ownership, Leased):  # instances sharing PostgreSQL
        from .app import principal_of
        from .routing import InstanceRouter

        router = InstanceRouter(service, principal_of(service), settings.max_body)
    from .hotpath import protocol
    from .routing import Router

    # the hot routes answered by the HTTP protocol itself (:mod:`.hotpath`), but over TLS with
    # client certificates (their own protocol) and among instances on PostgreSQL (leases route)
    settings_of_tls = _client_certificates(settings.tls_client_ca)
    if "http" not in settings_of_tls and not isinstance(service.ownership, Leased):
        settings_of_tls["http"] = protocol(service, router if isinstance(router, Router) else None)
    config = uvicorn.Config(
        application(service, router),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        **settings_of_tls,
        lifespan="off",
    )
    try:
        Server(config).run(
            sockets=sockets if sockets is not None else [listening(settings.host, settings.port)]
        )
    finally:
        finish()


class PortInUse(OSError):
    """The address the service was to listen on is taken (by another service, most likely)."""

    def __init__(self, address: str) -> None:
        super().__init__(errno.EADDRINUSE, "address already in use", address)
        self.address = address


def listening(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A socket bound to ``host:port`` and listening; :class:`PortInUse` when it is taken."""
    try:
        return socket.create_server((host, port), backlog=backlog)
    except OSError as error:
        shown = f"[{host}]" if ":" in host else host
        if error.errno == errno.EADDRINUSE:
            raise PortInUse(f"{shown}:{port}") from None
        raise OSError(error.errno, error.strerror, f"{shown}:{port}") from None


async def _renewing(service: Service, ttl: float) -> None:
    """Renew the leases of the sessions this instance owns every third of their time, from a
    thread: the event loop goes on answering while the database is asked."""
    import asyncio

    from .ownership import Sole

    if isinstance(service.ownership, Sole):
        return
    while True:
        await asyncio.sleep(ttl / 3)
        try:
            service.lost(await asyncio.to_thread(service.ownership.renew))
        except Exception as error:  # the database is away: tried again; writes are fenced meanwhile
            print(f"policyc serve: the leases could not be renewed: {error}", file=sys.stderr, flush=True)


def _client_certificates(ca: str | None) -> dict[str, Any]:
    """uvicorn's settings that ask every connection for a certificate signed by ``ca``, and
    give the application its subject (:mod:`.tls`)."""
    if ca is None:
        return {}
    import ssl

    from .tls import protocol

    return {"ssl_ca_certs": ca, "ssl_cert_reqs": ssl.CERT_REQUIRED, "http": protocol()}


def _reload_key(store: Any) -> str:
    """Where a service says what its last reload did: per instance in a shared database."""
    instance = getattr(store, "instance", None)
    return "reload" if instance is None else f"reload:{instance}"


def ask_reload(db: str, timeout: float = 60.0, instance: str | None = None) -> dict[str, Any]:
    """Send SIGHUP to the service of database ``db`` (with a PostgreSQL database, to its
    instance ``instance``, running on this machine) and wait for what it did (``OSError`` when
    no such service runs; ``TimeoutError`` when it does not answer)."""
    from .stores import SCHEMES, open_store

    shared = db.startswith(SCHEMES)
    if shared and instance is None:
        raise StoreError("with a PostgreSQL database, say which instance to reload (--instance NAME)")
    store: Any = open_store(db, instance=instance) if shared else Store(db)
    try:
        pid = store.meta(f"pid:{instance}" if shared else "pid")
        if not pid or not _is_service(int(pid)):
            where = f"as the instance `{instance}` on this machine" if shared else "on this database"
            raise ProcessLookupError(f"{store.path}: no policyc serve runs {where}")
        key = _reload_key(store)
        before = store.meta(key)
        os.kill(int(pid), signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = store.meta(key)
            if now is not None and now != before:
                return dict(json.loads(now))
            time.sleep(0.05)
        raise TimeoutError(f"the service (pid {pid}) did not reload within {timeout:g} s")
    finally:
        store.close()


def _is_service(pid: int) -> bool:
    """Whether ``pid`` is a running ``policyc serve`` (checked before it is sent a signal)."""
    try:
        command = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        try:
            os.kill(pid, 0)  # no /proc: at least a process of ours by that number
        except OSError:
            return False
        return True
    return b"serve" in command and (b"policyc" in command or b"uvicorn" in command)
