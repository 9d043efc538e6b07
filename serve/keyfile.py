"""Adding a principal's key to a KEYS.toml in place (``policyc serve keygen --append``).

The file is rewritten as a whole and atomically: the new text goes to a temporary file beside
it (with the file's permissions), is flushed to disk and renamed over it, so that a service
reading it (at SIGHUP or ``policyc serve reload``) sees the old file or the new one, never a
part. A principal already in the file is refused, unless ``force``: then its table (from its
``[principals.NAME]`` line to the next table) is replaced by the new one, everything else of
the file (comments included) kept as it was. Before the rename the new text is read as a keys
file must read (:func:`~.keys.parse_keys`), and the principal must have exactly the new key.

>>> text = add_principal('[principals.a]\\nroles = []\\nkeys = ["' + "1" * 64 + '"]\\n', "b", ("x",), "2" * 64, "k")
>>> sorted(p.name for p in parse_keys(text, "k").by_digest.values())
['a', 'b']
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

from policyc.compiler.files import replace_file

from .keys import KeysError, parse_keys


def table(principal: str, roles: Sequence[str], digest: str) -> str:
    """The ``[principals.NAME]`` table of one principal with one key."""
    return f'[principals.{json.dumps(principal)}]\nroles = {json.dumps(list(roles))}\nkeys = ["{digest}"]\n'


def add_principal(
    text: str, principal: str, roles: Sequence[str], digest: str, origin: str, force: bool = False
) -> str:
    """``text`` (a keys file, possibly empty) with ``principal``'s table added (or, with
    ``force``, put in place of the one it has). :class:`KeysError` saying why not."""
    present = _present(text, origin)
    lines = text.splitlines(keepends=True)
    if principal in present:
        if not force:
            raise KeysError(f"{origin}: `{principal}` already has a table (--force replaces it)")
        lines = _without(lines, principal)
    kept = "".join(lines)
    if kept and not kept.endswith("\n"):
        kept += "\n"
    new = kept + ("\n" if kept.strip() else "") + table(principal, roles, digest)
    keys = parse_keys(new, origin)
    mine = [d for d, p in keys.by_digest.items() if p.name == principal]
    if mine != [digest]:
        raise KeysError(
            f"{origin}: the table of `{principal}` could not be replaced here; edit the file by hand"
        )
    return new


def append_key(path: str, principal: str, roles: Sequence[str], digest: str, force: bool = False) -> None:
    """Add ``principal``'s key to the keys file at ``path`` (made if it does not exist), atomically."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        text, mode = "", 0o600
    except (OSError, UnicodeDecodeError) as error:
        raise KeysError(
            f"{path}: cannot read the keys file: {getattr(error, 'strerror', None) or error}"
        ) from None
    new = add_principal(text, principal, roles, digest, path, force)
    replace_file(path, new.encode("utf-8"), mode)


def _present(text: str, origin: str) -> set[str]:
    """The principals of ``text`` (none for an empty file); a file that is not a keys file is refused."""
    if not text.strip():
        return set()
    keys = parse_keys(text, origin)
    return {p.name for p in keys.by_digest.values()} | {p.name for p in keys.by_subject.values()}


def _without(lines: list[str], principal: str) -> list[str]:
    """``lines`` less the table of ``principal`` (its header line up to the next table's)."""
    header = re.compile(
        r"\s*\[\s*principals\s*\.\s*(?:"
        + re.escape(principal)
        + "|"
        + re.escape(json.dumps(principal))
        + r")\s*\]\s*(#.*)?$"
    )
    kept, skipping = [], False
    for line in lines:
        if header.match(line.rstrip("\n")):
            skipping = True
            continue
        if skipping and line.lstrip().startswith("["):
            skipping = False
        if not skipping:
            kept.append(line)
    return kept
