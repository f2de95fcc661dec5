"""Running harness code in a process that file permissions bind: the test's own user, and as root without the two
capabilities that let root read and search any folder, so that a folder of mode 000 is to it what root's 0700 HOME
(and the ``~/.cargo/bin`` on its PATH) is to an ordinary user."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.paths import REPO

PERMISSION_CAPS = "-dac_override,-dac_read_search"


def run_bound_by_permissions(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in such a process (as root: ``setpriv`` takes the capabilities out of the
    bounding and inheritable sets, so the interpreter it starts never holds them)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to run root's code without CAP_DAC_OVERRIDE")
        prefix = ["setpriv", f"--inh-caps={PERMISSION_CAPS}", f"--bounding-set={PERMISSION_CAPS}"]
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


@contextlib.contextmanager
def folder_mode(folder: Path, mode: int) -> Iterator[Path]:
    """``folder`` with ``mode`` for the block's length (0o000: unreadable; 0o111: searchable, not listable), then
    0o755 again, so that pytest can remove it."""
    folder.chmod(mode)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
