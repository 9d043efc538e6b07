"""Ed25519 keys in PEM files, as `policyc keygen` writes them: the private key that signs (a
bundle, an audit log's checkpoints) and the public key that verifies.

A file that cannot be read, is not PEM or holds another kind of key is refused with a message
saying which, raised as the caller's own error (``refuse(message)``): a bundle's
``PolicyError``, an audit log's ``AuditError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

KEY_LIMIT = 64 * 1024  # a PEM key is a few hundred bytes

Refuse = Callable[[str], Exception]


def private_key(path: str | os.PathLike[str], refuse: Refuse) -> Any:
    """The Ed25519 private key in the PEM file at ``path``."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(_read(path, "signing", refuse), password=None)
    except (ValueError, TypeError):
        raise refuse(f"`{path}` is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise refuse(f"`{path}` is not an Ed25519 key")
    return key


def public_key(source: str | os.PathLike[str] | bytes, refuse: Refuse) -> Any:
    """The Ed25519 public key in a PEM file at ``source`` (or in the bytes given)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = source if isinstance(source, bytes) else _read(source, "verification", refuse)
    name = "the verification key" if isinstance(source, bytes) else f"`{source}`"
    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError):
        raise refuse(f"{name} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise refuse(f"{name} is not an Ed25519 key")
    return key


def _read(path: str | os.PathLike[str], what: str, refuse: Refuse) -> bytes:
    from policyc.compiler.files import read_bytes

    try:
        return read_bytes(path, KEY_LIMIT)
    except OSError as error:
        raise refuse(f"cannot read the {what} key `{path}`: {error.strerror or error}") from None
