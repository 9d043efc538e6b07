"""Who may use the gateway over streamable HTTP (``policyc mcp --listen``).

Clients present ``Authorization: Bearer KEY`` with a key of a ``KEYS.toml`` — the file
``policyc serve`` reads (:mod:`policyc.serve.keys`): each key names a principal and its roles,
which become the ``Principal`` and ``HasRole`` facts of the policy sessions its requests open.
The checking is the MCP SDK's own bearer authentication (:class:`KeyVerifier` is its token
verifier): a request without a valid key is answered 401 before it reaches the gateway, and a
streamable HTTP session can be used only by the principal that opened it (another's requests
for it are answered as for a session that does not exist). ``--no-auth`` serves without keys,
on a loopback address only.

>>> loopback("127.0.0.1"), loopback("::1"), loopback("localhost"), loopback("0.0.0.0"), loopback("10.1.2.3")
(True, True, True, False, False)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from policyc.serve.keys import Keys, digest_of


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class KeyVerifier:
    """The SDK's token verifier over a keys file: a key's principal as the token's client id,
    its roles as the token's scopes (the key itself is not kept: its digest stands for it)."""

    keys: Keys

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        principal = self.keys.principal(token)
        if principal is None:
            return None
        return AccessToken(token=digest_of(token), client_id=principal.name, scopes=list(principal.roles))


def caller() -> tuple[str, tuple[str, ...]] | None:
    """The principal and roles of the key the current request came with (None without keys)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return None if token is None else (token.client_id, tuple(token.scopes))


def http_options(keys: Keys, url: str) -> dict[str, Any]:
    """The arguments of the SDK's ``streamable_http_app`` that make it ask for keys."""
    from mcp.server.auth.settings import AuthSettings

    return {
        "auth": AuthSettings(issuer_url=url, resource_server_url=None),  # type: ignore[arg-type]
        "token_verifier": KeyVerifier(keys),
    }
