"""The policies a service runs, as bundles kept in its database.

A policy file or bundle given to ``policyc serve`` (or to a reload) becomes a bundle — a bundle
as it is, verified (with ``--verify-key``, its signature too); a source file compiled, as
``policyc compile`` would, refused when it has errors — named by the SHA-256 of its bytes. The
bundle is stored in the database before any session uses it, so every session keeps the policy
it was created with across reloads and restarts, and a worker process loads it from there.
"""

from __future__ import annotations

import hashlib
from typing import Any

from policyc.runtime.opener import open_data, read_path, to_policy
from policyc.runtime.policy import Policy


def frozen(path: str, verify_key: str | None = None) -> tuple[str, bytes]:
    """The digest and bytes of the bundle of the policy at ``path`` (``PolicyError`` if it
    cannot be read, has errors, or does not verify)."""
    from policyc.runtime.bundle import Bundle, build_bundle
    from policyc.runtime.policy import planned

    data = read_path(path)
    opened = open_data(data, path, verify_key)
    if not isinstance(opened, Bundle):
        compilation = planned(opened.compilation())
        data = build_bundle(compilation, compilation.plan)
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def policy_of(data: bytes, origin: str, functors: Any = None) -> Policy:
    """The runtime policy of a stored bundle."""
    return to_policy(open_data(data, origin), functors)
