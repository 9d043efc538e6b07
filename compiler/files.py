"""Reading an input file: a regular file only, and at most so many bytes.

Every file policyc reads as input (policies, bundles, facts, traces, models, records, keys)
goes through :func:`read_bytes`, so that a FIFO, a device such as ``/dev/zero``, a directory
or a file larger than the cap is refused with a one-line reason instead of blocking or
filling memory. A refusal is an :class:`OSError` (whose ``strerror`` is the reason), so it is
reported where every other unreadable file is: ``cannot read `x`: not a regular file (a
FIFO)``.
"""

from __future__ import annotations

import errno
import os
import stat

MiB = 1024 * 1024
POLICY_LIMIT = 16 * MiB  # a policy source file (and each file it includes)
DATA_LIMIT = 256 * MiB  # a JSON or JSON Lines file: facts, traces, bundles, models, records


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit:,} bytes"


def read_bytes(path: str | os.PathLike[str], limit: int = DATA_LIMIT) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``OSError`` otherwise: a
    directory is ``IsADirectoryError``; a FIFO, a device or a socket, or a larger file, an
    ``OSError`` whose ``strerror`` says so). Opening never blocks, even on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "it is a directory", os.fspath(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(mode)})", os.fspath(path))
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 16 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {_size(limit)}, the most policyc reads", os.fspath(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = DATA_LIMIT) -> str:
    """The UTF-8 text of a regular file (``OSError`` as for :func:`read_bytes`;
    ``UnicodeDecodeError`` if it is not UTF-8)."""
    return read_bytes(path, limit).decode("utf-8")


def replace_file(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> None:
    """Write a file whole or not at all: to a temporary file in the same folder, then renamed
    over ``path`` (a reader never sees a truncated file; a symbolic link at ``path`` is
    replaced, not written through). ``mode`` gives its permissions (default: 0666 less the
    umask, as for any new file)."""
    import tempfile

    target = os.fspath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, "it is a directory", target)
    folder = os.path.dirname(os.path.abspath(target))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        if mode is None:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


PRIVATE = 0o600  # what a file holding secrets (a log of calls, a service's database) is made


def open_private(
    path: str | os.PathLike[str], flags: int = os.O_RDWR | os.O_APPEND
) -> tuple[int, int | None]:
    """A descriptor of the regular file at ``path`` (opened with ``flags``, created if missing)
    that only its owner may read and write (0600), whatever the umask; and, when the file was
    readable or writable by others before, its old permissions (to say so: they are taken
    away). ``OSError`` when it cannot be opened, is not a regular file, or cannot be made the
    owner's only."""
    fd = os.open(path, flags | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), PRIVATE)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(found.st_mode)})", os.fspath(path))
        mode = stat.S_IMODE(found.st_mode)
        if mode != PRIVATE:
            os.fchmod(fd, PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return fd, (mode if mode & 0o077 else None)


def make_private(path: str | os.PathLike[str]) -> int | None:
    """Make an existing file its owner's only (0600); its old permissions when others could
    read or write it, None when they could not (or there is no file)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None
    if mode != PRIVATE:
        os.chmod(path, PRIVATE)
    return mode if mode & 0o077 else None
