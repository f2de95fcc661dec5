"""A small filesystem for a test's campaign folder, and a way to fill it: what a full disk does to a session.

Mounting needs root (CI runs the suite as root); elsewhere the tests that need it are skipped, saying why.
"""

from __future__ import annotations

import inspect
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FILLER = "filler"


@contextmanager
def small_disk(folder: Path, size: str = "64m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder`` (made), unmounted when the block ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the campaign folder needs root")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs on {folder}: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True, check=False)


def fill(folder: str | Path) -> None:
    """Take every byte left on the filesystem of ``folder`` (a file named filler in it)."""
    import os  # itself alone: a pytester project's conftest gets this function's source (FILL_SOURCE)

    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


FILL_SOURCE = inspect.getsource(fill)  # for a pytester project's conftest, which cannot import this package


def room_again(folder: Path) -> None:
    """Space again: the filler removed."""
    (folder / FILLER).unlink(missing_ok=True)
