"""The audit log: every event a monitor records and every decision it makes, in a JSON-lines
file that no one can edit unseen.

Each line is one record, written as canonical JSON (keys sorted, no spaces, UTF-8) and
flushed as it is appended. Every record carries its place in the file (``seq``, from 0) and
the SHA-256 of the previous record's canonical bytes (``prev``; the first record carries
:data:`GENESIS`), so that changing, deleting, inserting or reordering a record breaks the
chain. The first record is a ``header`` (the format, :data:`FORMAT`, the policy's hash and the
monitor's mode); ``session``, ``event``, ``facts`` and ``decision`` records follow; every
``checkpoint_every`` records and when the log is closed a ``checkpoint`` carries its own hash
(and, with a signing key in the format ``policyc keygen`` writes, an Ed25519 signature over
it, which covers the whole chain before it). The closing checkpoint says ``"final": true``:
a log that does not end with one lost its tail (or is still being written).

Argument values of fields declared with the ``credential`` role (``.field tool.arg :
credential``) or named in ``redact=`` (``arg`` for every tool, ``tool.arg`` for one) are
written as ``sha256:HEX`` of their canonical JSON, never in clear; the same values are
replaced by their hash wherever a decision's messages or facts show them.

:func:`verify` finds the first bad record with a stable code (:data:`CODES`); ``policyc audit
verify`` and ``policyc audit show`` read logs from the command line (docs/verdicts.md).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
>>> log = AuditLog(path, checkpoint_every=2)
>>> log.append({"type": "header", "format": FORMAT, "policy": "sha256:0", "mode": "enforce"})
>>> log.append({"type": "event", "session": "s1", "event": {"id": "e1"}})
>>> log.close()
>>> verify(path).ok, len(read_records(path))
(True, 4)
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .verdict import Decision, Reason

FORMAT = "policyc-audit/1"
GENESIS = "0" * 64
TYPES = ("header", "session", "event", "facts", "decision", "checkpoint")
DEFAULT_CHECKPOINT_EVERY = 1000

# what `verify` finds, by code (the first bad record is named by its line)
CODES = {
    "unreadable": "the log cannot be read",
    "empty-log": "the log holds no record",
    "malformed-record": "a line is not a JSON object",
    "not-canonical": "a record is not written as canonical JSON (it was edited)",
    "bad-header": "the log does not start with a header of this format",
    "bad-sequence": "a record's `seq` is not its place in the log (one was deleted or inserted)",
    "chain-broken": "a record's `prev` is not the hash of the record before it",
    "bad-record": "a record has an unknown type or lacks its fields",
    "bad-checkpoint": "a checkpoint's own hash does not match it",
    "unsigned-checkpoint": "a checkpoint carries no signature, and a key was given",
    "bad-signature": "a checkpoint's signature does not verify with the key",
    "after-close": "a record follows a closing checkpoint without a new header",
    "unclosed-segment": "a header follows records that end without their closing checkpoint",
    "truncated": "the log does not end with its closing checkpoint (its tail is missing)",
}


class AuditError(Exception):
    """The audit log cannot be opened or written (a decision that cannot be logged is denied)."""


def canonical(value: Any) -> bytes:
    """A JSON value's canonical bytes (keys sorted, no spaces, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def record_hash(record: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of a record's canonical bytes: the next record's ``prev``."""
    return hashlib.sha256(canonical(record)).hexdigest()


def value_hash(value: Any) -> str:
    """What a redacted value is logged as: ``sha256:`` and the hash of its canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical(jsonable(value))).hexdigest()


_PLAIN = frozenset({str, int, bool, type(None)})


def jsonable(value: Any) -> Any:
    """A value as JSON can hold it (anything else as its ``repr``; numbers JSON cannot write,
    such as NaN, as text)."""
    kind = type(value)
    if kind in _PLAIN:  # the common cases first, without the abstract classes' checks
        return value
    if kind is dict:
        return {str(k): jsonable(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [jsonable(v) for v in value]
        if isinstance(value, set | frozenset):
            items.sort(key=lambda v: canonical(v))
        return items
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


# ------------------------------------------------------------------------------ writing


class AuditLog:
    """An append-only, hash-chained audit log at ``path`` (created if missing; an existing log
    is continued, its chain extended). ``key``: a PEM Ed25519 private key (the ``.key`` file
    ``policyc keygen`` writes) that signs every checkpoint; ``checkpoint_every``: records
    between checkpoints; ``redact``: argument names (``arg`` or ``tool.arg``) whose values are
    logged as hashes, besides the fields of the ``credential`` role.

    A monitor given one (``Monitor(policy, audit=log)``) writes to it; :meth:`close` (also run
    at exit, and by ``with``) writes the closing checkpoint."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        key: str | os.PathLike[str] | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        redact: Iterable[str] = (),
    ) -> None:
        if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
            raise ValueError(f"checkpoint_every is a positive number of records, not {checkpoint_every!r}")
        if isinstance(redact, str):
            raise TypeError("redact= takes a sequence of argument names, not one string")
        self.path = Path(path)
        self.key_path = key
        self.checkpoint_every = checkpoint_every
        self.redact = tuple(redact)
        self._key: Any = None
        self._file: Any = None
        self._seq = 0
        self._prev = GENESIS
        self._since = 0  # records since the last checkpoint
        self._mode: str | None = None  # the mode the last header named (checkpoints say it too)
        self._lock = threading.Lock()
        self.closed = False

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Open the file for appending (done on the first record; :class:`AuditError` if it
        cannot be opened, or if an existing log does not end with a whole record)."""
        with self._lock:
            self._open()

    def _open(self) -> None:
        if self._file is not None:
            return
        if self.closed:
            raise AuditError(f"the audit log `{self.path}` is closed")
        if self.key_path is not None and self._key is None:
            self._key = private_key(self.key_path)
        try:
            handle = open(self.path, "ab+")  # kept open: records are appended as they come
        except OSError as error:
            raise AuditError(f"cannot open the audit log `{self.path}`: {error.strerror or error}") from None
        try:
            last = _last_line(handle)
        except OSError as error:
            handle.close()
            raise AuditError(f"cannot read the audit log `{self.path}`: {error.strerror or error}") from None
        if last is not None:
            try:
                record = json.loads(last)
                seq = record["seq"]
                if not isinstance(record, dict) or not isinstance(seq, int) or canonical(record) != last:
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                handle.close()
                raise AuditError(
                    f"the audit log `{self.path}` does not end with a whole record: verify it "
                    "(`policyc audit verify`) and start a new one"
                ) from None
            self._seq, self._prev = seq + 1, record_hash(record)
        self._file = handle
        atexit.register(self.close)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append a record (``type`` and its fields; ``seq``, ``prev`` and ``time`` are added),
        flushed before this returns, and a checkpoint when one is due (:class:`AuditError` if
        it cannot be written)."""
        with self._lock:
            self._open()
            if record.get("type") == "header":
                self._mode = record.get("mode")
            self._write(dict(record))
            if self._since >= self.checkpoint_every:
                self._checkpoint(final=False)

    def checkpoint(self) -> None:
        """Write a checkpoint now."""
        with self._lock:
            self._open()
            self._checkpoint(final=False)

    def close(self) -> None:
        """Write the closing checkpoint and close the file (again: nothing)."""
        with self._lock:
            if self.closed:
                return
            try:
                if self._file is not None:
                    self._checkpoint(final=True)
            finally:
                self.closed = True
                if self._file is not None:
                    self._file.close()
                    self._file = None
                atexit.unregister(self.close)

    def _checkpoint(self, final: bool) -> None:
        record: dict[str, Any] = {"type": "checkpoint", "final": final, "records": self._seq}
        if self._mode is not None:
            record["mode"] = self._mode
        self._write(record, seal=True)

    def _write(self, record: dict[str, Any], seal: bool = False) -> None:
        full = {**record, "seq": self._seq, "prev": self._prev, "time": round(time.time(), 6)}
        if seal:
            full["hash"] = record_hash(full)
            if self._key is not None:
                signature = self._key.sign(canonical(full))
                full["signature"] = {"algorithm": "ed25519", "value": base64.b64encode(signature).decode()}
        try:
            line = canonical(jsonable(full))
            self._file.write(line + b"\n")
            self._file.flush()
        except Exception as error:
            raise AuditError(
                f"cannot write to the audit log `{self.path}`: {type(error).__name__}: {error}"
            ) from None
        self._prev = hashlib.sha256(line).hexdigest()  # the line is the record's canonical bytes
        self._seq += 1
        self._since = 0 if seal else self._since + 1


def _last_line(handle: Any) -> bytes | None:
    """The last line of a file opened for appending and reading (None if it is empty)."""
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    if size == 0:
        return None
    block = 4096
    data = b""
    position = size
    while position > 0:
        step = min(block, position)
        position -= step
        handle.seek(position)
        data = handle.read(step) + data
        if data.rstrip(b"\n").count(b"\n") >= 1:
            break
    if not data.endswith(b"\n"):
        return b""  # a partial record: not a whole line
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1]


def _read(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """A regular file's bytes (never blocking on a FIFO, never reading a device without end)."""
    from policyc.compiler.files import DATA_LIMIT, read_bytes

    return read_bytes(path, DATA_LIMIT if limit is None else limit)


def private_key(path: str | os.PathLike[str]) -> Any:
    """The Ed25519 private key in a PEM file (:class:`AuditError` if it is not one)."""
    from .ed25519_keys import private_key as load

    return load(path, AuditError)


def public_key(path: str | os.PathLike[str]) -> Any:
    """The Ed25519 public key in a PEM file (the ``.pub`` of ``policyc keygen``)."""
    from .ed25519_keys import public_key as load

    return load(path, AuditError)


# ------------------------------------------------------------------------------ redaction


class Redactor:
    """Which argument values are logged as hashes: fields of the ``credential`` role
    (``fields``: ``(tool, argument) -> role``) and the names of ``redact`` (``arg`` for every
    tool, ``tool.arg`` for one; a tool's name may hold dots, the argument's is after the last)."""

    def __init__(self, fields: Mapping[tuple[str, str], str], redact: Iterable[str] = ()) -> None:
        self.pairs = {pair for pair, role in fields.items() if role == "credential"}
        self.names: set[str] = set()
        for name in redact:
            tool, dot, argument = name.rpartition(".")
            if dot:
                self.pairs.add((tool, argument))
            else:
                self.names.add(name)

    def secret(self, tool: Any, argument: str) -> bool:
        return argument in self.names or (tool, argument) in self.pairs

    def event(self, event: Any, secrets: set[str]) -> Any:
        """The event as it is logged (secret argument values hashed; their text kept in
        ``secrets``, to be hashed wherever else it shows)."""
        if not isinstance(event, Mapping):
            return jsonable(event)
        logged = {str(k): jsonable(v) for k, v in event.items()}
        args = event.get("args")
        if isinstance(args, Mapping):
            tool = event.get("tool")
            shown = {}
            for name, value in args.items():
                if isinstance(name, str) and self.secret(tool, name):
                    shown[name] = value_hash(value)
                    text = value if isinstance(value, str) else json.dumps(jsonable(value))
                    if text:
                        secrets.add(text)
                else:
                    shown[str(name)] = jsonable(value)
            logged["args"] = shown
        return logged


def scrub(value: Any, secrets: set[str]) -> Any:
    """A JSON value with every secret text in its strings replaced by the secret's hash."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, value_hash(secret))
        return value
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    return value


def decision_record(session: str, decision: Decision, policy: str, secrets: set[str]) -> dict[str, Any]:
    """The ``decision`` record of a decision: verdict, rule ids, messages, the policy's hash,
    the approval used, the would-deny reasons and the shadow policy's result."""
    approval = decision.approval
    shadow = decision.shadow
    record = {
        "type": "decision",
        "session": session,
        "action": decision.action,
        "verdict": decision.verdict,
        "allowed": decision.allowed,
        "errored": decision.errored,
        "mode": decision.mode,
        "policy": policy,
        "rules": [r.rule for r in decision.reasons],
        "reasons": [reason_record(r) for r in decision.reasons],
        "approval": None if approval is None else approval.to_json(),
        "would_deny": [reason_record(r) for r in decision.would_deny],
        "shadow": None if shadow is None else shadow.to_json(),
    }
    return scrub(jsonable(record), secrets)


def reason_record(reason: Reason) -> dict[str, Any]:
    return {
        "rule": reason.rule,
        "message": reason.message,
        "suggestion": reason.suggestion,
        "severity": reason.severity,
        "facts": list(reason.facts),
        "code": reason.code,
    }


# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Problem:
    """What is wrong with a log: the first bad record's line (1-based), a code of
    :data:`CODES`, and a message."""

    line: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class Verified:
    """The result of :func:`verify`: the records read, the checkpoints (and how many had their
    signature checked), and the first problem (None: the log is intact)."""

    records: int
    checkpoints: int
    signed: int
    problem: Problem | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify(path: str | os.PathLike[str], key: str | os.PathLike[str] | None = None) -> Verified:
    """Check a log's chain, sequence, header and checkpoints (with ``key``, a PEM Ed25519
    public key, every checkpoint's signature) and that it ends with its closing checkpoint.
    :class:`AuditError` if the file or the key cannot be read."""
    public = None if key is None else public_key(key)
    try:
        data = _read(path)
    except OSError as error:
        raise AuditError(f"cannot read `{path}`: {error.strerror or error}") from None
    return verify_bytes(data, public)


def verify_bytes(data: bytes, public: Any = None) -> Verified:
    """:func:`verify` of a log's bytes (``public``: a loaded public key, or None)."""
    lines = data.split(b"\n")
    partial = lines.pop()  # after the last newline: empty for a whole log
    records = checkpoints = signed = 0
    prev = GENESIS
    last: dict[str, Any] | None = None

    def result(line: int, code: str, message: str) -> Verified:
        return Verified(records, checkpoints, signed, Problem(line, code, message))

    for number, raw in enumerate(lines, 1):
        try:
            record = json.loads(raw)
            written = canonical(record)  # a lone surrogate has no UTF-8: not a record
        except (ValueError, RecursionError):
            return result(number, "malformed-record", "the line is not JSON")
        if not isinstance(record, dict):
            return result(number, "malformed-record", "the line is not a JSON object")
        if written != raw:
            return result(number, "not-canonical", "the record is not written as canonical JSON")
        if record.get("prev") != prev:
            return result(
                number,
                "chain-broken",
                "`prev` is not the hash of the record before it (a record was "
                "changed, deleted, inserted or moved)",
            )
        if record.get("seq") != number - 1:
            return result(number, "bad-sequence", f"`seq` is {record.get('seq')!r}, not {number - 1}")
        kind = record.get("type")
        if kind not in TYPES:
            return result(number, "bad-record", f"unknown record type {kind!r}")
        if number == 1 and (kind != "header" or record.get("format") != FORMAT):
            return result(number, "bad-header", f"the log does not start with a `{FORMAT}` header")
        if last is not None and last.get("type") == "checkpoint" and last.get("final") and kind != "header":
            return result(number, "after-close", "a record follows the closing checkpoint")
        if (
            kind == "header"
            and last is not None
            and not (last.get("type") == "checkpoint" and last.get("final"))
        ):
            return result(
                number,
                "unclosed-segment",
                "a new header follows records that end without their "
                "closing checkpoint (the log before it was truncated or not closed)",
            )
        if kind == "header" and record.get("format") != FORMAT:
            return result(number, "bad-header", f"the header is not of the format `{FORMAT}`")
        if kind == "checkpoint":
            found = _checkpoint_problem(record, number, public)
            if found is not None:
                return result(number, *found)
            checkpoints += 1
            signed += public is not None
        records += 1
        prev = record_hash(record)
        last = record
    if partial:
        return result(len(lines) + 1, "truncated", "the last line is not a whole record")
    if last is None:
        return result(1, "empty-log", "the log holds no record")
    if not (last.get("type") == "checkpoint" and last.get("final")):
        return result(
            len(lines) + 1,
            "truncated",
            f"the log ends at line {len(lines)} without its closing checkpoint: records after the "
            "last checkpoint may be missing (or the log is still being written)",
        )
    return Verified(records, checkpoints, signed, None)


def _checkpoint_problem(record: dict[str, Any], number: int, public: Any) -> tuple[str, str] | None:
    sealed = {k: v for k, v in record.items() if k not in ("hash", "signature")}
    if record.get("hash") != record_hash(sealed) or record.get("records") != number - 1:
        return "bad-checkpoint", "the checkpoint's hash does not match it"
    if public is None:
        return None
    signature = record.get("signature")
    if not isinstance(signature, dict) or signature.get("algorithm") != "ed25519":
        return "unsigned-checkpoint", "the checkpoint is not signed, and a key was given"
    from cryptography.exceptions import InvalidSignature

    try:
        value = base64.b64decode(signature.get("value", ""), validate=True)
        public.verify(value, canonical({k: v for k, v in record.items() if k != "signature"}))
    except (ValueError, TypeError, InvalidSignature):
        return "bad-signature", "the checkpoint's signature does not verify with this key"
    return None


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a log, each with its ``line`` (it is not verified: :func:`verify` says
    whether it is intact). :class:`AuditError` if the file cannot be read, holds no record, or
    has a line that is not an audit record (naming the file and the line)."""
    try:
        data = _read(path)
    except OSError as error:
        raise AuditError(f"cannot read `{path}`: {error.strerror or error}") from None
    records = list(_records(data, str(path)))
    if not records:
        raise AuditError(f"{path}: the log holds no record")
    return records


def _records(data: bytes, origin: str) -> Iterator[dict[str, Any]]:
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            record = None
        if not isinstance(record, dict):
            raise AuditError(f"{origin}:{number}: the line is not a JSON object [malformed-record]")
        if record.get("type") not in TYPES or not isinstance(record.get("seq"), int):
            raise AuditError(f"{origin}:{number}: the line is not an audit record [bad-record]")
        yield {**record, "line": number}


def decisions(
    records: Iterable[Mapping[str, Any]], session: str | None = None, verdict: str | None = None
) -> list[Mapping[str, Any]]:
    """The decision records, of one session and one verdict when given."""
    return [
        r
        for r in records
        if r.get("type") == "decision"
        and (session is None or r.get("session") == session)
        and (verdict is None or r.get("verdict") == verdict)
    ]


def render_decision(record: Mapping[str, Any]) -> str:
    """A decision record as ``policyc audit show`` prints it (every character that is not
    printable escaped: a log's text never writes control characters to a terminal)."""
    mode = " (shadow mode: not enforced)" if record.get("mode") == "shadow" else ""
    lines = [
        f"line {record.get('line')}: session {_shown(record.get('session'))} action "
        f"{_shown(record.get('action'))}: {_shown(record.get('verdict'))}{mode}"
    ]
    for label, key in (("", "reasons"), ("would-deny ", "would_deny")):
        for reason in _dicts(record.get(key)):
            message = reason.get("message")
            lines.append(
                f"  - {label}{_shown(reason.get('rule'))}" + (f": {_shown(message)}" if message else "")
            )
    approval = record.get("approval")
    if isinstance(approval, dict):
        lines.append(f"  approval {_shown(approval.get('id'))}")
    shadow = record.get("shadow")
    if isinstance(shadow, dict) and shadow.get("differs"):
        rules = ", ".join(_shown(r.get("rule")) for r in _dicts(shadow.get("reasons")))
        lines.append(f"  shadow policy: {_shown(shadow.get('verdict'))}" + (f" ({rules})" if rules else ""))
    return "\n".join(lines)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode() for c in text
    )
