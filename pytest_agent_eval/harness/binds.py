"""The harness's files for a CLI, kept where the agent cannot write and bound where the CLI insists on them.

An agent's turn can write anywhere in its HOME, and the next turn's sandbox is built again: a read-only bind named
by a path inside HOME would be resolved through whatever the turn left there (a renamed parent folder and a relative
link in its place turn the bind into a host folder of the agent's choosing, docs/sandbox.md). So everything the
harness writes for a CLI (config, rules, policies, trusted folders, an empty global config folder) is written into a
harness folder outside the workspace (:func:`seal_home`), and where the CLI reads it at a path inside HOME, a
placeholder is made there (no link followed) and the harness's file is bound over it. Before every turn the
sandbox checks each bind (:func:`check_binds`): its source and its destination are walked from a folder the harness
made, one component at a time, without following links, and must still be what the harness made (a regular file,
or a folder). A turn that changed that layout fails with :class:`LayoutChanged`, naming what changed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePath
from typing import Union

from pytest_agent_eval.harness.untrusted import UntrustedFile, open_dir

# A tree of what the harness writes: a name's text (a file; "" an empty one), a folder of its own, or None (an
# empty folder).
Tree = Mapping[str, Union[str, "Tree", None]]
# The harness folder, in an agent's config folder (the item's run folder, outside the workspace), holding what it
# shows in HOME.
HOME_FILES = "home-files"
Bind = tuple[Path, Path]  # (the harness's file or folder, where the CLI reads it)
_KINDS = {stat.S_IFREG: "a file", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a link"}


class LayoutChanged(RuntimeError):
    """A path the sandbox binds the harness's file at is no longer what the harness made (a turn changed it)."""


def seal_home(source: Path, home: Path, tree: Tree) -> tuple[Bind, ...]:
    """Write ``tree`` (keys: paths relative to HOME, e.g. ``.codex/config.toml``) into the harness folder ``source``
    (made anew), make a placeholder for each key in ``home`` (an empty file or folder, the folders on the way, no link
    followed: :class:`~pytest_agent_eval.harness.untrusted.UntrustedFile` names one), and return the binds, source
    first."""
    if source.exists():
        shutil.rmtree(source)
    home.mkdir(parents=True, exist_ok=True)  # the harness's own folder (a test's may not be made yet)
    binds = []
    for name, value in tree.items():
        relative = _relative(name)
        _write(source / relative, value)
        _placeholder(home, relative, folder=not isinstance(value, str))
        binds.append((source / relative, home / relative))
    return tuple(binds)


def _relative(name: str) -> PurePath:
    relative = PurePath(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ValueError(f"{name}: not a path inside HOME")
    return relative


def _write(path: Path, value: str | Tree | None) -> None:
    if isinstance(value, str):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value, encoding="utf-8")
        return
    path.mkdir(parents=True, exist_ok=True)
    for name, child in (value or {}).items():
        _write(path / _relative(name), child)


def _placeholder(home: Path, relative: PurePath, folder: bool) -> None:
    """An empty folder or file at ``home/relative`` to bind over (kept if one is there), the folders on the way
    made, none followed."""
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in relative.parts[:-1] if not folder else relative.parts:
        fd = _child_dir(fd, part, home / relative)  # closes the one before
    try:
        if not folder:
            try:
                made = os.open(relative.name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                               0o600, dir_fd=fd)  # fmt: skip
            except OSError as exc:
                raise UntrustedFile(f"{home / relative}: not a file the harness can bind over ({exc})") from None
            try:
                if not stat.S_ISREG(os.fstat(made).st_mode):
                    raise UntrustedFile(f"{home / relative}: not a regular file; the harness binds its file there")
            finally:
                os.close(made)
    finally:
        os.close(fd)


def make_dirs(home: Path, relative: str | PurePath) -> None:
    """The folder ``home/relative`` and those on the way, made where missing, no link followed."""
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in _relative(str(relative)).parts:
        fd = _child_dir(fd, part, home / relative)
    os.close(fd)


def _child_dir(fd: int, name: str, shown: Path) -> int:
    """The folder ``name`` in ``fd`` (made if missing, never through a link); ``fd`` is closed."""
    try:
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:
            raise UntrustedFile(f"{shown}: a link or a file on the way ({exc})") from None
    finally:
        os.close(fd)


def kind(root: Path, path: Path) -> int | None:
    """The file type (``stat.S_IFMT``) of ``path``, walked from ``root`` (a folder the harness made, which holds it)
    without following any link; None when it is missing. Raises :class:`LayoutChanged` for a link or a file on
    the way."""
    relative = path.relative_to(root)
    if not relative.parts:
        return stat.S_IFDIR
    try:
        fd = open_dir(root, relative.parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LayoutChanged(f"{path}: a link or a file on the way ({exc})") from None
    try:
        return stat.S_IFMT(os.stat(relative.name, dir_fd=fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)


def check_binds(binds: Iterable[Bind], writable: Iterable[Path]) -> None:
    """Raise :class:`LayoutChanged` unless each bind's source is a file or folder (no link on the way from ``/``)
    and its destination, walked from the writable folder that holds it (or ``/``), is one of the same kind."""
    roots = sorted(writable, key=lambda p: len(p.parts), reverse=True)
    for source, dest in binds:
        made = kind(Path("/"), source)
        if made not in (stat.S_IFREG, stat.S_IFDIR):
            raise LayoutChanged(f"{source}: the harness's file to bind at {dest} is {_said(made)}")
        root = next((r for r in roots if dest.is_relative_to(r)), Path("/"))
        found = kind(root, dest)
        if found != made:
            raise LayoutChanged(
                f"{dest}: {_said(found)} where the harness binds {_said(made)} ({source}) read-only; a turn changed "
                "the layout the sandbox binds it in"
            )


def check_within(paths: Iterable[Path], writable: Iterable[Path]) -> None:
    """Raise :class:`LayoutChanged` when a path the sandbox mounts at its own name lies in a writable folder and
    has a link on the way there, or is one (a turn would have moved the mount elsewhere)."""
    roots = list(writable)
    for path in paths:
        for root in roots:
            if path != root and path.is_relative_to(root) and kind(root, path) == stat.S_IFLNK:
                raise LayoutChanged(f"{path}: a link, where the sandbox mounts that very path; a turn left it")


def _said(mode: int | None) -> str:
    return "nothing" if mode is None else _KINDS.get(mode, "a special file")
