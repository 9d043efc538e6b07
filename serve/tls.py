"""Client certificates (mutual TLS): which principal a connection's certificate names.

With ``--tls-client-ca CA.pem`` the service asks every connection for a certificate signed by
that CA and refuses the handshake without one. The certificate's subject, as an RFC 4514 string
(``CN=ci-runner,O=Example``: what ``openssl x509 -noout -subject -nameopt RFC2253`` prints), is
looked up among the ``subjects`` of KEYS.toml's principals.

uvicorn does not hand the application the peer's certificate, so the service runs uvicorn's
httptools protocol with one addition: each request's scope carries the ASGI TLS extension
(``scope["extensions"]["tls"]``, with ``client_cert_name``, the subject, and
``client_cert_chain``, the certificate in PEM), read once per connection from the transport's
SSL object after the handshake verified it.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any


def tls_extension(transport: Any) -> dict[str, Any] | None:
    """The ASGI TLS extension of a connection: its verified client certificate's subject and
    PEM (None for a connection without TLS; the names None without a certificate)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return {"client_cert_name": None, "client_cert_chain": [], "client_cert_error": None}
    from cryptography import x509

    certificate = x509.load_der_x509_certificate(der)
    return {
        "client_cert_name": certificate.subject.rfc4514_string(),
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)],
        "client_cert_error": None,
        "tls_version": None,
        "cipher_suite": None,
    }


def protocol() -> type:
    """uvicorn's httptools HTTP protocol, with the TLS extension in every request's scope."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class WithClientCertificates(HttpToolsProtocol):
        tls: dict[str, Any] | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.tls = tls_extension(transport)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self.tls is not None:
                scope: dict[str, Any] = self.scope  # type: ignore[assignment]
                scope["extensions"] = {"tls": self.tls}

    return WithClientCertificates


def subject_of(scope: Mapping[str, Any]) -> str | None:
    """The subject of the request's verified client certificate, or None."""
    extension = scope.get("extensions", {}).get("tls")
    return extension.get("client_cert_name") if isinstance(extension, dict) else None
