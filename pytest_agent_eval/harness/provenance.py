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


def gather_provenance(records: list[dict[str, Any]], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest's ``provenance`` from the item records (merged into ``earlier``, a resumed campaign's):
    ``{"sources": {entry: [source, …]}, "tools": {arm label: [tool_provision, …]}, "claude": [claude_provision,
    …], "warnings": [text, …]}``, each list holding every distinct value once, in order of first appearance —
    more than one means the campaign's items did not all test the same code."""
    gathered: dict[str, Any] = {"sources": {}, "tools": {}, "claude": [], "warnings": []}
    for key in gathered:
        value = (earlier or {}).get(key)
        if isinstance(value, type(gathered[key])):
            gathered[key] = value
    for record in records:
        if record.get("source"):
            _add(gathered["sources"].setdefault(str(record.get("entry")), []), record["source"])
        if record.get("tool_provision"):
            _add(gathered["tools"].setdefault(str(record.get("arm_label")), []), record["tool_provision"])
        if record.get("claude_provision"):
            _add(gathered["claude"], record["claude_provision"])
        for text in record.get("warnings") or []:
            _add(gathered["warnings"], text)
    return gathered


def _add(values: list[Any], value: Any) -> None:
    if value not in values:
        values.append(value)
