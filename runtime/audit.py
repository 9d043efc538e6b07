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

A log cut right after a closing checkpoint ends as a whole log does: only its **head**, kept
somewhere else, shows the cut. The head (:class:`Head`) names, for each chain of records the log
holds (one for a log written by one :class:`AuditLog`), the chain (the hash of its first
record), its last record's ``seq`` and hash; ``policyc audit head`` prints it, an
:class:`AuditLog` given ``head_to=`` publishes it at every checkpoint, and
``verify(..., expect=head)`` reports ``truncated`` when the log ends before it.

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
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .verdict import Decision

FORMAT = "policyc-audit/1"
HEAD_FORMAT = "policyc-audit-head/1"
GENESIS = "0" * 64
TYPES = ("header", "session", "event", "facts", "decision", "outcome", "refusal", "checkpoint")
OUTCOMES = ("approved", "refused", "timed-out", "failed", "no-approver")
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
    "truncated": "the log ends with a partial record, or before the expected head (its tail is missing)",
    "open-segment": "the log ends without its closing checkpoint: its segment is still being written, "
    "or its tail was cut (a head it reaches tells: with `--expect`, the log passes, reported open)",
    "head-mismatch": "the log does not hold the expected head's record (it was rewritten, or is another log)",
}


class AuditError(Exception):
    """The audit log cannot be opened or written (a decision that cannot be logged is denied)."""


def canonical(value: Any) -> bytes:
    """A JSON value's canonical bytes (keys sorted, no spaces, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# where orjson writes a float otherwise than the standard library: between 1e-9 and 1e-5 it writes
# `0.000015` for `1.5e-05` and `1.6e-7` for `1.6e-07` (a text holding such a run is written by the
# standard library too: slower, never different)
_SMALL = b"0.0000"
_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]")
_fast: list[Any] = []  # orjson's dumps, once looked for (empty: not looked for yet; [None]: none)


def canonical_record(value: Any) -> bytes:
    """:func:`canonical` of a value :func:`jsonable` made (string keys, no NaN), written by
    orjson where it writes exactly those bytes, and by the standard library where it may not
    (an integer past 64 bits, a lone surrogate, a float below 1e-4, or no orjson).

    >>> record = {"b": [1, 2.5, "é\\n"], "a": None, "c": 2**70, "d": 1e16, "e": [1.5e-05, 1e-07]}
    >>> canonical_record(record) == canonical(record)
    True
    """
    if not _fast:
        try:
            import orjson
        except ImportError:
            _fast.append(None)
        else:
            _fast.append(orjson)
    orjson = _fast[0]
    if orjson is not None:
        try:
            written: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except (TypeError, ValueError):  # orjson.JSONEncodeError is both
            pass
        else:
            if not _doubtful(written):
                return written
    return canonical(value)


def _doubtful(written: bytes) -> bool:
    """Whether orjson may have written a float of ``written`` otherwise than the standard library."""
    if _SMALL in written:
        return True
    return any(written[m.start() - 1 : m.start()].isdigit() for m in _NEGATIVE_EXPONENT.finditer(written))


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
    """An append-only, hash-chained audit log at ``path`` (created if missing, readable and
    writable by its owner only; an existing log is continued, its chain extended). ``key``: a
    PEM Ed25519 private key (the ``.key`` file ``policyc keygen`` writes) that signs every
    checkpoint; ``checkpoint_every``: records between checkpoints; ``redact``: argument names
    (``arg`` or ``tool.arg``) whose values are logged as hashes, besides the fields of the
    ``credential`` role; ``head_to``: where the log's head (:class:`Head`) is published at
    every checkpoint, a second place a cut of the log cannot reach: a file (replaced whole
    each time), a ``logging.Logger`` (a line at level INFO) or a callable taking the head's
    JSON line. A head that cannot be published fails as a record that cannot be written.

    A monitor given one (``Monitor(policy, audit=log)``) writes to it; :meth:`close` (also run
    at exit, and by ``with``) writes the closing checkpoint."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        key: str | os.PathLike[str] | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        redact: Iterable[str] = (),
        head_to: str | os.PathLike[str] | logging.Logger | Callable[[str], Any] | None = None,
    ) -> None:
        if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
            raise ValueError(f"checkpoint_every is a positive number of records, not {checkpoint_every!r}")
        if isinstance(redact, str):
            raise TypeError("redact= takes a sequence of argument names, not one string")
        self.path = Path(path)
        self.key_path = key
        self.checkpoint_every = checkpoint_every
        self.redact = tuple(redact)
        self.publish = publisher(head_to)
        self.head_file = os.fspath(head_to) if isinstance(head_to, str | os.PathLike) else None
        self._key: Any = None
        self._file: Any = None
        self._seq = 0
        self._prev = GENESIS
        self._chain: str | None = None  # the hash of the log's first record
        self._since = 0  # records since the last checkpoint
        self._closed = False  # whether the last record closes its segment
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
        from policyc.compiler.files import open_private

        try:
            fd, wider = open_private(self.path)
            handle = os.fdopen(fd, "ab+")  # kept open: records are appended as they come
        except OSError as error:
            raise AuditError(f"cannot open the audit log `{self.path}`: {error.strerror or error}") from None
        if wider is not None:
            warnings.warn(
                f"the audit log `{self.path}` was readable or writable by others ({wider:04o}): "
                "it is now its owner's only (0600)",
                UserWarning,
                stacklevel=2,
            )
        try:
            last = _last_line(handle)
            first = _first_line(handle) if last is not None else None
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
            self._closed = record.get("type") == "checkpoint" and bool(record.get("final"))
            self._chain = None if first is None else hashlib.sha256(first).hexdigest()
        if self.head_file is not None:
            try:
                problem = self._unreached(handle)
            except OSError as error:
                handle.close()
                raise AuditError(
                    f"cannot read the audit log `{self.path}`: {error.strerror or error}"
                ) from None
            if problem is not None:
                handle.close()
                raise AuditError(
                    f"the audit log `{self.path}` does not reach the head published in `{self.head_file}`: "
                    f"{problem}; verify it (`policyc audit verify --expect`), and remove the head's "
                    "file only to start anew on purpose"
                )
        self._file = handle
        atexit.register(self.close)

    def _unreached(self, handle: Any) -> str | None:
        """What keeps the log from reaching the head its head file holds (None: it reaches it,
        or there is none), so that a log cut or rewritten while no one wrote it is never
        continued, its head file overwritten."""
        assert self.head_file is not None
        from policyc.compiler.files import read_text

        try:
            text = read_text(self.head_file)
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            return "the head's file is not UTF-8 text"
        if not text.strip():
            return None
        try:
            expected = parse_head(text)
        except ValueError as error:
            return f"the head's file holds no head ({error})"
        handle.seek(0)
        return reached(handle, expected)

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

    def head(self) -> Head:
        """The log's head as written so far (no entry before its first record)."""
        with self._lock:
            if self._chain is None:
                return Head(())
            return Head((HeadEntry(self._chain, self._seq - 1, self._prev, self._closed),))

    def _checkpoint(self, final: bool) -> None:
        record: dict[str, Any] = {"type": "checkpoint", "final": final, "records": self._seq}
        if self._mode is not None:
            record["mode"] = self._mode
        self._write(record, seal=True)
        if self.publish is not None and self._chain is not None:
            head = Head((HeadEntry(self._chain, self._seq - 1, self._prev, final),))
            try:
                self.publish(head.line())
            except Exception as error:
                raise AuditError(
                    f"cannot publish the head of the audit log `{self.path}`: {type(error).__name__}: {error}"
                ) from None

    def _write(self, record: dict[str, Any], seal: bool = False) -> None:
        full = {**record, "seq": self._seq, "prev": self._prev, "time": round(time.time(), 6)}
        if seal:
            full = sealed(full, self._key)
        try:
            line = canonical_record(jsonable(full))
            self._file.write(line + b"\n")
            self._file.flush()
        except Exception as error:
            raise AuditError(
                f"cannot write to the audit log `{self.path}`: {type(error).__name__}: {error}"
            ) from None
        self._prev = hashlib.sha256(line).hexdigest()  # the line is the record's canonical bytes
        if self._seq == 0:
            self._chain = self._prev
        self._seq += 1
        self._since = 0 if seal else self._since + 1
        self._closed = bool(seal and record.get("final"))


def sealed(record: dict[str, Any], key: Any = None) -> dict[str, Any]:
    """A checkpoint with its ``hash`` (of the record without it) and, with ``key`` (a loaded
    Ed25519 private key), its ``signature`` over the record with its hash."""
    full = {**record, "hash": record_hash(record)}
    if key is not None:
        signature = key.sign(canonical(full))
        full["signature"] = {"algorithm": "ed25519", "value": base64.b64encode(signature).decode()}
    return full


def publisher(head_to: Any) -> Callable[[str], None] | None:
    """How a head's JSON line is published to ``head_to`` (see :class:`AuditLog`)."""
    if head_to is None:
        return None
    if isinstance(head_to, str | os.PathLike):
        target = os.fspath(head_to)

        def to_file(line: str) -> None:
            from policyc.compiler.files import replace_file

            replace_file(target, (line + "\n").encode("utf-8"))

        return to_file
    if isinstance(head_to, logging.Logger):
        logger = head_to
        return lambda line: logger.info("policyc audit head: %s", line)
    if callable(head_to):
        return lambda line: head_to(line)
    raise TypeError(f"head_to= takes a path, a logger or a callable, not {type(head_to).__name__}")


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


def _first_line(handle: Any) -> bytes:
    """The first line of a file opened for appending and reading (its first record)."""
    handle.seek(0)
    return bytes(handle.readline()).rstrip(b"\n")


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
    """The ``decision`` record of a decision: its one JSON form as the log shows it
    (:meth:`Decision.to_json`, view ``log``), with the session, the policy's hash and the ids of
    the rules that decided it."""
    record = {
        "type": "decision",
        "session": session,
        "policy": policy,
        "rules": [r.rule for r in decision.reasons],
        **decision.to_json("log"),
    }
    return scrub(jsonable(record), secrets)


def outcome_record(
    session: str, action: Any, outcome: str, approver: str | None, rules: Iterable[str]
) -> dict[str, Any]:
    """The ``outcome`` record of an escalated call: ``approved`` (by ``approver``, when named),
    ``refused``, ``timed-out``, ``failed`` (the approver raised) or ``no-approver``, with the
    escalating rules."""
    if outcome not in OUTCOMES:
        raise ValueError(f"an escalation's outcome is one of {', '.join(OUTCOMES)}, not {outcome!r}")
    return {
        "type": "outcome",
        "session": session,
        "action": jsonable(action),
        "outcome": outcome,
        "approver": approver,
        "rules": sorted(str(rule) for rule in rules),
    }


MESSAGE_LIMIT = 1000  # characters of a refusal's message kept in the log


def refusal_record(session: str, what: str, event: Any, code: str, message: str) -> dict[str, Any]:
    """The ``refusal`` record of something a session was given and refused: ``what`` (an
    ``event``, the ``events`` of a batch, ``facts``, an ``action`` to decide), the refused
    event's id when known, the refusal's code and message."""
    text = message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…"
    return {
        "type": "refusal",
        "session": session,
        "what": what,
        "event": event if isinstance(event, str) else None,
        "code": code,
        "message": text,
    }


# ------------------------------------------------------------------------------ heads

_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class HeadEntry:
    """Where one chain of a log had got to: the chain (the SHA-256 of its first record's
    canonical bytes), its last record's ``seq`` and SHA-256 (what the next record's ``prev``
    is), and whether that record closes its segment (shown, not compared)."""

    chain: str
    seq: int
    hash: str
    final: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"chain": self.chain, "seq": self.seq, "hash": self.hash, "final": self.final}


@dataclass(frozen=True)
class Head:
    """The head of a log: one entry per chain (a log one :class:`AuditLog` writes holds one;
    logs several writers share hold one each), sorted by chain. Written as JSON
    (``{"format": "policyc-audit-head/1", "heads": [...]}``, :meth:`line`) or as text, one line
    ``CHAIN SEQ HASH`` per chain (:meth:`text`); :func:`parse_head` reads both."""

    entries: tuple[HeadEntry, ...]

    @classmethod
    def of(cls, entries: Iterable[HeadEntry | tuple[str, int, str, bool]]) -> Head:
        """A head of these entries: per chain the furthest one (``ValueError`` for two
        different records at the same place of one chain)."""
        furthest: dict[str, HeadEntry] = {}
        for item in entries:
            entry = item if isinstance(item, HeadEntry) else HeadEntry(*item)
            if not _HEX.fullmatch(entry.chain) or not _HEX.fullmatch(entry.hash):
                raise ValueError("a head's `chain` and `hash` are 64 lowercase hexadecimal digits")
            if type(entry.seq) is not int or entry.seq < 0:
                raise ValueError("a head's `seq` is a non-negative integer")
            known = furthest.get(entry.chain)
            if known is not None and known.seq == entry.seq and known.hash != entry.hash:
                raise ValueError(
                    f"two heads of chain {entry.chain[:12]}… name different records at seq {entry.seq}"
                )
            if known is None or entry.seq > known.seq:
                furthest[entry.chain] = entry
        return cls(tuple(furthest[chain] for chain in sorted(furthest)))

    def to_json(self) -> dict[str, Any]:
        return {"format": HEAD_FORMAT, "heads": [entry.to_json() for entry in self.entries]}

    def line(self) -> str:
        """The head as one line of canonical JSON (what a log publishes)."""
        return canonical(self.to_json()).decode("utf-8")

    def text(self) -> str:
        """The head as text: ``CHAIN SEQ HASH`` (and ``final`` for a closed segment) per chain."""
        return "".join(f"{e.chain} {e.seq} {e.hash}{' final' if e.final else ''}\n" for e in self.entries)


def parse_head(text: str) -> Head:
    """A head as :meth:`Head.line` or :meth:`Head.text` wrote it, or the lines of a log (a
    file, syslog) a head was published to: the JSON heads found in it, per chain the furthest.
    ``ValueError`` saying what is wrong with anything else."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("no head: expected `CHAIN SEQ HASH` lines or a head's JSON")
    entries: list[HeadEntry] = []
    if stripped.startswith("{"):
        try:
            return Head.of(_json_entries(json.loads(stripped)))
        except json.JSONDecodeError:
            pass  # several lines of JSON: read one by one below
    published = [line for line in stripped.splitlines() if HEAD_FORMAT in line and "{" in line]
    if published:
        for line in published:
            try:
                value = json.loads(line[line.index("{") :])
            except json.JSONDecodeError:
                raise ValueError(f"a line naming {HEAD_FORMAT} holds no JSON head") from None
            entries.extend(_json_entries(value))
        return Head.of(entries)
    for number, line in enumerate(stripped.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) not in (3, 4) or (len(words) == 4 and words[3] != "final") or not words[1].isdigit():
            raise ValueError(f"line {number} is not `CHAIN SEQ HASH` (nor a head's JSON)")
        entries.append(HeadEntry(words[0], int(words[1]), words[2], len(words) == 4))
    return Head.of(entries)


def _json_entries(value: Any) -> list[HeadEntry]:
    if (
        not isinstance(value, dict)
        or value.get("format") != HEAD_FORMAT
        or not isinstance(value.get("heads"), list)
    ):
        raise ValueError(f'a head\'s JSON is {{"format": "{HEAD_FORMAT}", "heads": [...]}}')
    entries = []
    for item in value["heads"]:
        if not isinstance(item, dict) or not all(k in item for k in ("chain", "seq", "hash")):
            raise ValueError("each of a head's `heads` has a `chain`, a `seq` and a `hash`")
        chain, seq, digest = item["chain"], item["seq"], item["hash"]
        if not isinstance(chain, str) or not isinstance(digest, str) or type(seq) is not int:
            raise ValueError("a head's `chain` and `hash` are text, its `seq` an integer")
        entries.append(HeadEntry(chain, seq, digest, item.get("final") is True))
    return entries


def reached(lines: Iterable[bytes], expected: Head) -> str | None:
    """Whether a log's lines (as a file gives them, each with its newline: a last line without
    one is a partial record) hold every record of ``expected``, its chain unverified: None when
    they do, else what is wrong. Read as far as the furthest record of the head."""
    wanted = {entry.seq: entry for entry in expected.entries}
    if not wanted:
        return None
    chain = None
    count = 0
    furthest = max(wanted)
    for number, line in enumerate(lines):
        if not line.endswith(b"\n"):
            break
        digest = hashlib.sha256(line[:-1]).hexdigest()
        if number == 0:
            chain = digest
            for held in expected.entries:
                if held.chain != chain:
                    return (
                        f"it does not hold the chain {held.chain[:12]}… (another log, or one "
                        "rewritten from its start)"
                    )
        entry = wanted.get(number)
        if entry is not None and digest != entry.hash:
            return f"its line {number + 1} is not the head's record (it was rewritten)"
        count = number + 1
        if count > furthest:
            return None
    if chain is None:
        return "it holds no record: the head's chain is not in it (the log was removed or emptied)"
    return f"it ends at line {count}, before the head's line {furthest + 1} (it was cut)"


def head_of(path: str | os.PathLike[str]) -> Head:
    """The head of the log at ``path``: its last whole record. :class:`AuditError` if it
    cannot be read, or does not verify (a log that lacks its closing checkpoint has a head:
    it may still be being written)."""
    try:
        data = _read(path)
    except OSError as error:
        raise AuditError(f"cannot read `{path}`: {error.strerror or error}") from None
    return head_of_bytes(data, str(path))


def head_of_bytes(data: bytes, origin: str = "the log") -> Head:
    """:func:`head_of` a log's bytes."""
    verified = verify_bytes(data)
    problem = verified.problem
    if problem is not None and problem.code not in ("truncated", "open-segment"):
        raise AuditError(f"{origin} does not verify, so it has no head: {problem}")
    lines = data.split(b"\n")[:-1]
    if not lines:
        raise AuditError(f"{origin}: the log holds no record")
    starts = _chain_starts(lines)
    entries = []
    for at, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        last = json.loads(lines[end - 1])
        final = last.get("type") == "checkpoint" and bool(last.get("final"))
        entries.append(
            HeadEntry(
                hashlib.sha256(lines[at]).hexdigest(),
                end - at - 1,
                hashlib.sha256(lines[end - 1]).hexdigest(),
                final,
            )
        )
    return Head.of(entries)


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
    signature checked), the first problem (None: the log is intact), whether it was held
    against an expected head (``anchored``: without one, a log cut right after a closing
    checkpoint is intact too), how many chains it holds, and whether a chain ends in a segment
    still open (``open``: passes only against a head that it reaches; without one, it is the
    problem ``open-segment``)."""

    records: int
    checkpoints: int
    signed: int
    problem: Problem | None
    anchored: bool = False
    chains: int = 1
    open: bool = False  # a chain ends in an open segment, which the expected head reaches

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify(
    path: str | os.PathLike[str], key: str | os.PathLike[str] | None = None, expect: Head | None = None
) -> Verified:
    """Check a log's chain, sequence, header and checkpoints (with ``key``, a PEM Ed25519
    public key, every checkpoint's signature), that it ends with its closing checkpoint and,
    with ``expect``, that it reaches every entry of that head. :class:`AuditError` if the
    file or the key cannot be read."""
    public = None if key is None else public_key(key)
    try:
        data = _read(path)
    except OSError as error:
        raise AuditError(f"cannot read `{path}`: {error.strerror or error}") from None
    return verify_bytes(data, public, expect)


def verify_bytes(data: bytes, public: Any = None, expect: Head | None = None) -> Verified:
    """:func:`verify` of a log's bytes (``public``: a loaded public key, or None).

    A log may hold several chains one after the other (``policyc audit export`` of a service
    with several writers): a record with ``seq`` 0 and the genesis ``prev`` starts a chain, and
    each chain is checked on its own, its problems named with the chain; ``expect`` then names
    one entry per chain it must reach."""
    lines = data.split(b"\n")
    partial = lines.pop()  # after the last newline: empty for a whole log
    anchored = expect is not None and bool(expect.entries)  # an empty head anchors nothing
    if not lines and not partial:
        return Verified(0, 0, 0, Problem(1, "empty-log", "the log holds no record"), anchored)
    starts = _chain_starts(lines)
    several = len(starts) > 1
    found = {hashlib.sha256(lines[at]).hexdigest(): at for at in starts if at < len(lines)}
    records = checkpoints = signed = 0
    still_open = False
    if expect is not None:
        for entry in expect.entries:
            if entry.chain not in found:
                line = 1 if not lines else starts[0] + 1
                what = "chains" if several else "chain"
                return Verified(
                    0,
                    0,
                    0,
                    Problem(
                        line,
                        "head-mismatch",
                        f"the log does not hold the chain {entry.chain[:12]}… the expected head names "
                        f"(the first record of its {what} differs: another log, or one rewritten from its "
                        "start)",
                    ),
                    anchored,
                )
    bounds = [*starts, len(lines)]
    unclosed: Problem | None = (
        None  # the first chain left open, no head reaching it: the others are checked still
    )
    for index, at in enumerate(starts):
        chunk = lines[at : bounds[index + 1]]
        last_chain = index == len(starts) - 1
        chain = hashlib.sha256(lines[at]).hexdigest() if at < len(lines) else None
        wanted = {} if expect is None else {e.seq: e for e in expect.entries if e.chain == chain}
        done = _verify_chain(chunk, at, partial if last_chain else b"", public, wanted)
        records += done.records
        checkpoints += done.checkpoints
        signed += done.signed
        problem = done.problem
        if problem is not None and problem.code == "open-segment" and wanted:
            problem, still_open = None, True  # an open segment the expected head reaches
        if problem is not None and several and chain is not None:
            problem = Problem(
                problem.line,
                problem.code,
                f"chain {index + 1} of {len(starts)} ({chain[:12]}…, line {at + 1}): {problem.message}",
            )
        if problem is not None and problem.code == "open-segment":
            unclosed = unclosed or problem
        elif problem is not None:
            return Verified(records, checkpoints, signed, problem, anchored, len(starts), still_open)
    return Verified(records, checkpoints, signed, unclosed, anchored, len(starts), still_open)


def _chain_starts(lines: list[bytes]) -> list[int]:
    """Where each chain of a log starts (the index of its first line): the first line, and
    every later record with ``seq`` 0 and the genesis ``prev``."""
    starts = [0]
    for number, raw in enumerate(lines[1:], 1):
        if b'"seq":0' not in raw or GENESIS.encode() not in raw:
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and record.get("seq") == 0 and record.get("prev") == GENESIS:
            starts.append(number)
    return starts


def _verify_chain(
    lines: list[bytes], offset: int, partial: bytes, public: Any, wanted: dict[int, HeadEntry]
) -> Verified:
    """Check one chain of a log: its ``lines`` (whole ones) start at index ``offset`` of the
    log, ``partial`` is what follows its last newline (the log's last chain only), ``wanted``
    the expected head's records in it, by ``seq``."""
    records = checkpoints = signed = 0
    prev = GENESIS
    last: dict[str, Any] | None = None

    def result(line: int, code: str, message: str) -> Verified:
        return Verified(records, checkpoints, signed, Problem(offset + line, code, message))

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
        named = wanted.get(number - 1)
        if named is not None and hashlib.sha256(raw).hexdigest() != named.hash:
            return result(
                number,
                "head-mismatch",
                f"the record at line {offset + number} is not the one the expected head names: the "
                "log was rewritten at or before it",
            )
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
    end = offset + len(lines)
    if partial:
        return result(len(lines) + 1, "truncated", "the last line is not a whole record")
    if last is None:
        return result(1, "empty-log", "the log holds no record")
    beyond = [entry.seq for entry in wanted.values() if entry.seq >= len(lines)]
    if beyond:
        return result(
            len(lines) + 1,
            "truncated",
            f"the log ends at line {end}, before the expected head (line {offset + max(beyond) + 1}): "
            "records were cut from its end, whole segments included",
        )
    if not (last.get("type") == "checkpoint" and last.get("final")):
        return result(
            len(lines) + 1,
            "open-segment",
            f"the log ends at line {end} without its closing checkpoint: its last segment is open "
            "(still being written, as in the export of a running service) or its tail was cut; "
            "verify it against a head its writer published (--expect) to tell",
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
