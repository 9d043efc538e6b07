"""Trace archives: JSON Lines files of recorded sessions, plain, gzip or zstd, or folders of
them, read as shards that engines replay independently, line by line (never a file whole).

A plain file is cut into shards of about :data:`SHARD_BYTES` at line ends, each knowing the
number of its first line, so that anything wrong is reported at ``file:line``; a compressed
file is one shard (it cannot be read from the middle: split large archives into several files
to replay them in parallel). Compression is told by the file's first bytes, not its name.
A folder is every ``*.jsonl``, ``*.jsonl.gz`` and ``*.jsonl.zst`` below it, in path order.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "a.jsonl")
>>> _ = open(path, "w").write('{"events": []}\\n\\n{"events": [1]}\\n')
>>> (shard,) = shards([path])[0]
>>> [(line, text) for line, text in lines(shard)]
[(1, '{"events": []}'), (3, '{"events": [1]}')]
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

SHARD_BYTES = 1 << 20  # bytes of a plain file per shard
LINE_LIMIT = 64 << 20  # bytes of one line (a session)
SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")
_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}


@dataclass(frozen=True)
class Shard:
    """A part of an archive file: bytes ``start`` to ``end`` (None: the end) of a plain file, or
    a whole compressed one; ``line`` is the number of its first line, ``source`` the file's
    position in the archive (what orders results)."""

    path: str
    source: int
    start: int = 0
    end: int | None = None
    line: int = 1
    compression: str = ""


@dataclass(frozen=True)
class Unreadable:
    """A file of the archive that could not be read: where, and why."""

    path: str
    line: int
    message: str


def files(paths: Sequence[str]) -> list[str]:
    """The files of an archive: each path given, or a folder's trace files below it (sorted)."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            below = []
            for folder, subfolders, names in os.walk(path):
                subfolders.sort()
                below += [os.path.join(folder, n) for n in names if n.endswith(SUFFIXES)]
            found += sorted(below)
        else:
            found.append(path)
    return found


def shards(paths: Sequence[str], size: int = SHARD_BYTES) -> tuple[list[Shard], list[Unreadable]]:
    """The shards of an archive, in order, and the files that could not be opened."""
    out: list[Shard] = []
    unreadable: list[Unreadable] = []
    for source, path in enumerate(files(paths)):
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would never end
                unreadable.append(Unreadable(path, 0, "not a regular file, so not a trace file"))
                continue
            with open(path, "rb") as stream:
                head = stream.read(4)
                compression = _MAGIC.get(head[:2]) or _MAGIC.get(head) or ""
                if compression:
                    out.append(Shard(path, source, compression=compression))
                else:
                    stream.seek(0)
                    cuts = _cuts(stream, size)
                    out += [
                        Shard(path, source, start, end, line)
                        for (start, line), (end, _) in zip(cuts, [*cuts[1:], (None, 0)], strict=True)
                    ]
        except OSError as error:
            unreadable.append(Unreadable(path, 0, f"cannot read the file: {error.strerror or error}"))
    return out, unreadable


def _cuts(stream: IO[bytes], size: int) -> list[tuple[int, int]]:
    """Where shards of a plain file start: (byte offset, line number), each at a line's start
    about ``size`` bytes after the one before."""
    cuts = [(0, 1)]
    offset = 0  # of the block in the file
    newlines = 0  # before the block
    want = size  # the next cut is at the first line start at or after this offset
    while block := stream.read(1 << 20):
        while want < offset + len(block):
            at = block.find(b"\n", max(0, want - offset - 1))  # a line end at or after want - 1
            if at < 0:
                break  # the cut is in a later block
            cut = offset + at + 1
            cuts.append((cut, newlines + block.count(b"\n", 0, at + 1) + 1))
            want = cut + size
        newlines += block.count(b"\n")
        offset += len(block)
    if cuts[-1][0] >= offset and len(cuts) > 1:
        cuts.pop()  # a cut at the very end starts an empty shard
    return cuts


def lines(shard: Shard) -> Iterator[tuple[int, str | Unreadable]]:
    """The non-blank lines of a shard, each with its number: its text, or why it cannot be read
    (not UTF-8, longer than :data:`LINE_LIMIT`); a file that fails while being read (a truncated
    or corrupt compressed file) ends with an :class:`Unreadable` line."""
    number = shard.line
    try:
        with _opened(shard) as stream:
            position = shard.start
            while shard.end is None or position < shard.end:
                raw = stream.readline(LINE_LIMIT + 1)
                if not raw:
                    break
                position += len(raw)
                if len(raw) > LINE_LIMIT and not raw.endswith(b"\n"):
                    while (rest := stream.readline(LINE_LIMIT)) and not rest.endswith(b"\n"):
                        position += len(rest)
                    position += len(rest)
                    yield number, Unreadable(shard.path, number, f"a line longer than {LINE_LIMIT:,} bytes")
                    number += 1
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    reason = f"not UTF-8 text ({error.reason} at byte {error.start} of the line)"
                    yield number, Unreadable(shard.path, number, reason)
                else:
                    if text.strip():
                        yield number, text.rstrip("\n")
                number += 1
    except (OSError, EOFError, ValueError) as error:  # a corrupt or truncated compressed file
        yield number, Unreadable(shard.path, number, f"the file cannot be read further: {error}")


def _opened(shard: Shard) -> IO[bytes]:
    if shard.compression == "gzip":
        import gzip

        return gzip.open(shard.path, "rb")
    if shard.compression == "zstd":
        import zstandard

        raw = open(shard.path, "rb")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True))
    stream = open(shard.path, "rb")
    stream.seek(shard.start)
    return stream


def sessions(paths: Sequence[str]) -> Iterator[tuple[str, str, int, dict]]:
    """Every session of an archive, in order: its name, file, line and record, for those that
    read recorded sessions in bulk (forecasting, calibration, translation) and stop at the first
    problem: :class:`~policyc.runtime.replay.TraceError` naming its file and line (``OSError``
    for a path that does not exist)."""
    from policyc.runtime.replay import TraceError, session_line

    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(2, "no such file or folder", path)
    found, unreadable = shards(paths)
    if unreadable:
        raise TraceError(f"{unreadable[0].path}: {unreadable[0].message}")
    for shard in found:
        for number, text in lines(shard):
            if isinstance(text, Unreadable):
                raise TraceError(f"{text.path}:{number}: {text.message}")
            name, record = session_line(text, shard.path, number)
            yield name, shard.path, number, record
