"""What the service refuses, in its own terms: a :class:`ServiceError` of a kind (not found, a
conflict, an invalid request, ...) with a stable code and a message.

The sessions (:mod:`.sessions`) and the requests' logic (:mod:`.service`) raise these; only the
application (:mod:`.app`) knows HTTP, and gives each kind its status there
(:data:`policyc.serve.app.STATUS`).

>>> error = NotFound("not-found", "no such session")
>>> error.code, str(error)
('not-found', 'no such session')
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses, with a stable ``code`` (docs/serve.md lists them)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Malformed(ServiceError):
    """The request cannot be read (its body is not JSON)."""


class Unauthenticated(ServiceError):
    """No key, or one the service does not know."""


class Forbidden(ServiceError):
    """The key's principal may not do this (a role it does not hold)."""


class NotFound(ServiceError):
    """No such session, decision or escalated call (for this principal)."""


class Conflict(ServiceError):
    """The request collides with what the database holds (a session that exists, an escalated
    call answered before)."""


class TooLarge(ServiceError):
    """The request holds more than the service takes (bytes, events)."""


class Invalid(ServiceError):
    """The request is refused for what it holds: a malformed event or fact, an event only the
    host records, a number policyc cannot hold. Logged as a refusal in the audit log."""


class Unavailable(ServiceError):
    """The service cannot answer now (the database refused the write, an evaluator failed);
    nothing was changed."""


class Failed(ServiceError):
    """The service failed on the request (a stored policy missing, an evaluator's own error)."""


# every kind of refusal, by name (the application gives each its own status)
KINDS: dict[str, type[ServiceError]] = {
    kind.__name__: kind
    for kind in (
        Malformed,
        Unauthenticated,
        Forbidden,
        NotFound,
        Conflict,
        TooLarge,
        Invalid,
        Unavailable,
        Failed,
    )
}
