"""Starting the service: open the policy, the keys and the database, rebuild the sessions, and
serve the application on uvicorn, saying where it listens once the socket is bound."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from typing import Any

from .app import MAX_BODY, WAIT, Service, application
from .keys import read_keys
from .store import Store


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
    max_body: int = MAX_BODY
    wait: float = WAIT
    sync: str = "normal"
    workers: int = 0


def policy_digest(path: str) -> str:
    """``sha256:`` and the hex digest of the policy file or bundle as read."""
    with open(path, "rb") as file:
        return "sha256:" + hashlib.sha256(file.read()).hexdigest()


def build(settings: Settings, policy: Any) -> Service:
    """The service of a loaded policy, its sessions rebuilt from the database (in this process,
    or in ``settings.workers`` worker processes that load the policy themselves)."""
    keys = read_keys(settings.keys)  # a bad keys file is refused before the database is touched
    store = Store(settings.db, settings.sync)
    evaluator: Any
    if settings.workers:
        from .workers import Pool

        evaluator = Pool(settings.workers, settings.policy, settings.functors, settings.db)
    else:
        from policyc.runtime.session import Monitor

        from .sessions import Local, Sessions

        evaluator = Local(Sessions(Monitor(policy), store))
    service = Service(
        evaluator,
        policy_digest(settings.policy),
        keys,
        store,
        max_body=settings.max_body,
        wait=settings.wait,
    )
    service.restore()
    return service


def run(settings: Settings, service: Service) -> None:
    """Serve until interrupted (SIGINT, SIGTERM)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            for server in self.servers:
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    scheme = "https" if settings.tls_cert else "http"
                    print(
                        f"policyc serve: listening on {scheme}://{host}:{port} "
                        f"({len(service.live)} sessions from {settings.db})",
                        flush=True,
                    )

    config = uvicorn.Config(
        application(service),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        lifespan="off",
    )
    try:
        Server(config).run()
    finally:
        service.evaluator.stop()
        service.store.close()
    sys.stdout.flush()
