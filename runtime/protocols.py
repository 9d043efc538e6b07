"""What a front needs of a monitor and its sessions, as types: :class:`MonitorLike` and
:class:`SessionLike`. The in-process :class:`~policyc.runtime.session.Monitor` and the client of
a ``policyc serve`` service (``policyc.connect``) both satisfy them (mypy checks it), so the
guards, the chat helpers and the MCP gateway take either without asking which it is.

A session is opened the same way on both: ``monitor.session(session_id, principal=...,
roles=...)``, principal and roles by keyword (roles None: the monitor's default, none in
process and the key's at a service). A service's session acts for its key's principal: its
client refuses another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .session import Monitor
    from .verdict import Decision


class SessionLike(Protocol):
    """A session a front records events in and asks decisions of."""

    id: str
    events: dict[str, dict[str, Any]]
    order: list[str]

    @property
    def monitor(self) -> MonitorLike: ...

    def record(self, event: Mapping[str, Any]) -> Any: ...

    def authorize(self, event: Mapping[str, Any]) -> Decision: ...

    def decide(self, action: Any) -> Decision: ...

    def add_facts(self, facts: Mapping[str, Any]) -> Any: ...


class MonitorLike(Protocol):
    """A monitor a front opens sessions of; who approves its escalated calls (``approver``, or
    elsewhere: ``approves_elsewhere``), within ``approval_timeout`` seconds, an approval valid
    for ``approval_ttl`` seconds."""

    @property
    def approver(self) -> Callable[[Any], Any] | None: ...

    @property
    def approval_timeout(self) -> float | None: ...

    @property
    def approval_ttl(self) -> float: ...

    @property
    def approves_elsewhere(self) -> bool: ...

    def session(
        self, session_id: str, *, principal: str | None = None, roles: Iterable[str] | None = None
    ) -> SessionLike: ...


if TYPE_CHECKING:

    def _in_process(monitor: Monitor) -> MonitorLike:  # checked by mypy: Monitor satisfies it
        return monitor
