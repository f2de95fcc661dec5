"""Writes that a full disk cannot tear: a line appended whole or not at all, a file replaced whole or left as it was,
and the one line that says where space ran out (docs/usage.md, "When something goes wrong").

Every file of a campaign (records, the model's request record, a turn's transcript, the manifest, the summary, the
report, ``latest``) is written through these, so ENOSPC (and its kin: EDQUOT, EFBIG, EIO) never leaves half a line
or a temporary file behind, and what was written before stays readable: a resume continues from it once there is
space again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

# What a full disk, a quota or a failing device answers a write with.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


class WriteFailed(OSError):
    """A write of the campaign failed; the message is one line naming the folder and the space left in it."""

    def __str__(self) -> str:
        return str(self.strerror)


def cannot_write(path: str | Path, exc: OSError) -> str:
    """``cannot write <file> in <folder>: No space left on device (12.0 kB free)``."""
    path = Path(path)
    folder = path.parent
    return f"cannot write {path.name} in {folder}: {exc.strerror or exc} ({free_space(folder)} free)"


def free_space(folder: str | Path) -> str:
    """The space left for this user on ``folder``'s filesystem, in words (``?`` when it cannot be told)."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        try:
            return _size(shutil.disk_usage(folder).free)
        except OSError:
            return "?"
    return _size(stat.f_bavail * stat.f_frsize)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # pragma: no cover - the loop returns at GB


def append_fd(fd: int, data: bytes, path: str | Path, sync: bool = False) -> None:
    """Append ``data`` to the open descriptor ``fd`` (of ``path``) in one piece: on a failure the file is cut back to
    what it held before, and WriteFailed says where; ``sync`` makes it durable before returning. Unbuffered, so no
    piece of a failed write is left to be flushed later."""
    before = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, before)  # a truncate frees blocks: it succeeds on a full disk
            os.lseek(fd, before, os.SEEK_SET)
        raise WriteFailed(exc.errno, cannot_write(path, exc)) from exc


def append_line(path: str | Path, data: bytes, sync: bool = False) -> None:
    """Open ``path`` and append ``data`` whole (:func:`append_fd`); WriteFailed if it cannot be."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise WriteFailed(exc.errno, cannot_write(path, exc)) from exc
    try:
        append_fd(fd, data, path, sync)
    finally:
        os.close(fd)


def replace_whole(path: str | Path, data: bytes) -> None:
    """Write ``path`` through a temporary file beside it and rename it into place: the old file (or none) until
    the new one is complete. On a failure the temporary file is removed and WriteFailed says where."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(exc.errno, cannot_write(path, exc)) from exc


def unwritable(folder: Path) -> str | None:
    """Why files could not be written under ``folder``, made if missing (None: they can): what exists of its path
    must be a folder this process may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None
