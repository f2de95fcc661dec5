"""Read, copy and rewrite files in folders the agent could write, without ever following a link it planted.

The agent's HOME (its session files, the CLI's state file) is the agent's to change, so a path under it may name
a link to any host file, a folder that is a link to a host folder, a FIFO that never ends or a device. The harness
runs outside the sandbox, so following any of them would read (into the campaign folder) or write (a chmod, a
rewrite) a host file of the harness's choosing. Every path here is therefore walked from a ``root`` the harness
made itself, one component at a time, each opened with ``O_NOFOLLOW`` relative to the one before (``openat``):
a link anywhere on the way, or a final entry that is not a regular file, is refused with :class:`UntrustedFile`
naming it. What is read is what was checked, on one descriptor.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO in place of a file opens at once (and is then refused) instead of waiting for a writer.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UntrustedFile(OSError):
    """A path in the agent's folders is a link, or not a regular file or folder where one was expected."""


def _parts(relative: str | PurePath) -> list[str]:
    parts = PurePath(relative).parts
    if not parts or PurePath(relative).is_absolute() or ".." in parts:
        raise ValueError(f"{relative!s}: not a path inside its root")
    return list(parts)


def open_dir(root: Path, relative: str | PurePath = ".") -> int:
    """A descriptor of the folder ``root/relative``, no link followed on the way (``root`` itself is trusted)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if PurePath(relative) == PurePath("."):
        return fd
    try:
        for part in _parts(relative):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refused(root / relative, exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(root: Path, relative: str | PurePath) -> int:
    """A descriptor of the regular file ``root/relative``, no link followed on the way."""
    *folders, name = _parts(relative)
    parent = open_dir(root, PurePath(*folders)) if folders else open_dir(root)
    try:
        return _open_regular(parent, name, root / relative)
    finally:
        os.close(parent)


def _open_regular(parent: int, name: str, shown: Path) -> int:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refused(shown, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UntrustedFile(f"{shown}: not a regular file; the agent's files are read only when they are")
    return fd


def read_bytes(root: Path, relative: str | PurePath, offset: int = 0) -> bytes:
    """What the regular file ``root/relative`` holds from ``offset`` on."""
    fd = open_file(root, relative)
    with os.fdopen(fd, "rb") as handle:
        handle.seek(offset)
        return handle.read()


def copy_file(root: Path, relative: str | PurePath, dest: Path) -> None:
    """Copy the regular file ``root/relative`` to ``dest`` (a harness path, replaced if it exists)."""
    _copy_open(open_file(root, relative), dest)


def _copy_open(fd: int, dest: Path) -> None:
    with os.fdopen(fd, "rb") as source, open(dest, "wb") as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)


def copy_tree(root: Path, relative: str | PurePath, dest: Path) -> None:
    """Copy the folder ``root/relative`` to ``dest`` (which must not exist): folders and regular files only; a link
    or a special file anywhere in it refuses the whole copy."""
    fd = open_dir(root, relative)
    try:
        _copy_dir(fd, root / relative, dest)
    finally:
        os.close(fd)


def _copy_dir(fd: int, shown: Path, dest: Path) -> None:
    dest.mkdir()
    with os.scandir(fd) as entries:
        listed = sorted((entry.name, entry.stat(follow_symlinks=False).st_mode) for entry in entries)
    for name, mode in listed:
        if stat.S_ISDIR(mode):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refused(shown / name, exc) from None
            try:
                _copy_dir(child, shown / name, dest / name)
            finally:
                os.close(child)
        elif stat.S_ISREG(mode):
            _copy_open(_open_regular(fd, name, shown / name), dest / name)
        else:
            kind = "a link" if stat.S_ISLNK(mode) else "not a regular file"
            raise UntrustedFile(f"{shown / name}: {kind}; the agent's folders are copied only when they hold none")


def replace_files(root: Path, folder: Path, files: Mapping[str, str]) -> None:
    """Write each of ``files`` (its name under ``folder``, a folder inside ``root``: its text) as
    :func:`replace_file` does, making the folders it lies in first: an agent's config, written again for every
    attempt into a HOME an agent may have run in."""
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
    relative = folder.relative_to(root)
    for name, text in files.items():
        replace_file(root, relative / name, text.encode("utf-8"))


def replace_file(root: Path, relative: str | PurePath, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``root/relative`` as a new file (``mode``) renamed over the old entry: a link there is
    replaced, never written through, and no folder on the way may be one."""
    *folders, name = _parts(relative)
    parent = open_dir(root, PurePath(*folders)) if folders else open_dir(root)
    temporary = f".{name}.agent-eval-{os.getpid()}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                     dir_fd=parent)  # fmt: skip
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    finally:
        os.close(parent)


def _refused(path: Path, exc: OSError) -> OSError:
    """ELOOP/ENOTDIR from ``O_NOFOLLOW``/``O_DIRECTORY`` mean a link or a file stood where a folder was walked."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return UntrustedFile(f"{path}: a link on the way; the agent's files are read without following links")
    return exc
