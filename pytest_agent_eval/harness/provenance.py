"""Where code under test came from: a git checkout's commit and whether its working tree had changes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

GIT_TIMEOUT_S = 30.0


def git_state(path: Path) -> dict[str, Any] | None:
    """``{"commit": <sha>, "dirty": <bool>}`` of the git work tree at ``path``; None when it is not one (or git
    is missing). ``dirty`` counts untracked files too: they are part of what gets indexed."""
    commit = _git(path, "rev-parse", "HEAD")
    if commit is None:
        return None
    status = _git(path, "status", "--porcelain", "--untracked-files=normal")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _git(path: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(path), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
