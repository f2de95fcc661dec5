"""Headless Chromium over a report.html: the page's own script draws its charts, and the DOM it leaves is read."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

CHROMIUM = next((path for path in map(shutil.which, ("chromium", "chromium-browser")) if path), None)


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with no network chatter; its whole process group is stopped even on a timeout."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def chart(dom: str, chart_id: str) -> str:
    match = re.search(rf'<div class="chart" id="{chart_id}" data-rendered="true">(.*?)</div>', dom, re.S)
    assert match, f"{chart_id} was not rendered"
    return match.group(1)
