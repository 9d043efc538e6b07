"""Who may talk to the service: principals, their roles, and the SHA-256 of each one's keys.

``KEYS.toml`` names each principal once, with the roles it has (they become the session's
``Principal`` and ``HasRole`` facts) and the hex SHA-256 of every key it may use; a key itself
is never written down::

    [principals.support-agent]
    roles = ["agent"]
    keys = ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]

    [principals.oncall]
    roles = ["approver"]
    keys = ["..."]

A request's ``Authorization: Bearer KEY`` is hashed and looked up; two principals may not share
a key's hash. A principal may instead (or also) be named by client certificates: ``subjects``
lists their subjects as RFC 4514 strings (``["CN=ci-runner,O=Example"]``), for a service run
with ``--tls-client-ca`` (:mod:`.tls`). :func:`new_key` makes a key and the line to add. A file that does not say this is
refused with its location (:class:`KeysError`), before the service starts.

>>> key, digest = new_key()
>>> keys = parse_keys(f'[principals.a]\\nroles = ["agent"]\\nkeys = ["{digest}"]\\n', "keys.toml")
>>> keys.principal(key).name, keys.principal(key).roles, keys.principal("other")
('a', ('agent',), None)
"""

from __future__ import annotations

import hashlib
import re
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_DIGEST = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")


class KeysError(ValueError):
    """A keys file that does not say who may call; the message says where."""


@dataclass(frozen=True)
class Principal:
    """A caller of the service: its name and roles."""

    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class Keys:
    """The principals of a keys file, found by the hash of a key."""

    by_digest: Mapping[str, Principal]
    by_subject: Mapping[str, Principal] = field(default_factory=dict)

    def principal(self, key: str) -> Principal | None:
        """The principal whose key this is, or None. Looked up by the key's hash: how long the
        lookup takes says nothing about a key, only about a hash no one can invert."""
        return self.by_digest.get(digest_of(key))

    def certified(self, subject: str) -> Principal | None:
        """The principal a client certificate of this subject names, or None."""
        return self.by_subject.get(subject)


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> tuple[str, str]:
    """A new random key (256 bits, URL-safe text) and its SHA-256 as KEYS.toml holds it."""
    key = "pck_" + secrets.token_urlsafe(32)
    return key, digest_of(key)


def read_keys(path: str) -> Keys:
    """The keys file at ``path`` (:class:`KeysError` saying where, also for a file that cannot
    be read: missing, not a regular file, larger than 1 MiB)."""
    from policyc.compiler.files import read_bytes

    try:
        data = read_bytes(path, 1 << 20)
    except OSError as error:
        raise KeysError(f"{path}: cannot read the keys file: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise KeysError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    return parse_keys(text, path)


def parse_keys(text: str, origin: str) -> Keys:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise KeysError(f"{origin}: {error}") from None
    except RecursionError:
        raise KeysError(f"{origin}: nested too deeply to be a keys file") from None
    principals = data.get("principals")
    unknown = sorted(set(data) - {"principals"})
    if unknown:
        raise KeysError(f"{origin}: unknown table or key `{unknown[0]}` (expected [principals.NAME])")
    if not isinstance(principals, dict) or not principals:
        raise KeysError(f"{origin}: no principals (add a [principals.NAME] table with roles and keys)")
    by_digest: dict[str, Principal] = {}
    by_subject: dict[str, Principal] = {}
    for name, entry in principals.items():
        where = f"{origin}: [principals.{name}]"
        if not _NAME.fullmatch(name):
            raise KeysError(f"{where}: a principal's name is 1-128 letters, digits or `_.@:-`")
        if not isinstance(entry, dict):
            raise KeysError(f"{where}: expected a table with `roles` and `keys`")
        extra = sorted(set(entry) - {"roles", "keys", "subjects"})
        if extra:
            raise KeysError(f"{where}: unknown key `{extra[0]}` (expected `roles`, `keys` and `subjects`)")
        roles = _strings(entry.get("roles", []), f"{where} roles")
        digests = _strings(entry.get("keys", []), f"{where} keys")
        subjects = _strings(entry.get("subjects", []), f"{where} subjects")
        if not digests and not subjects:
            raise KeysError(
                f"{where}: no keys (add the SHA-256 that `policyc serve keygen` prints, "
                "or client certificate `subjects`)"
            )
        principal = Principal(name, tuple(roles))
        for subject in subjects:
            if not subject.strip() or "=" not in subject:
                raise KeysError(f"{where}: `{subject[:40]}` is not a certificate subject (`CN=NAME,O=...`)")
            if subject in by_subject:
                raise KeysError(f"{where}: subject `{subject[:40]}` also names `{by_subject[subject].name}`")
            by_subject[subject] = principal
        for digest in digests:
            if not _DIGEST.fullmatch(digest):
                raise KeysError(f"{where}: `{digest[:20]}` is not a SHA-256 in lower-case hex (64 digits)")
            if digest in by_digest:
                raise KeysError(f"{where}: key {digest[:12]}… is also a key of `{by_digest[digest].name}`")
            by_digest[digest] = principal
    return Keys(by_digest, by_subject)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KeysError(f"{where}: expected a list of strings")
    return list(value)
