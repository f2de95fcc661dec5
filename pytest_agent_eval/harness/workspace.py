"""A disposable place for one agent run: a working copy of the indexed repository, its own HOME and TMPDIR.

The indexed copy in the cache is shared by every run of a (repository, tool build) pair, so an agent
that edits files, or a tool that rewrites its index, must do it in a copy of its own. A without-arm copy
carries none of the tool's state (``RetrievalTool.state_dirs``, passed as ``without``), so no route (sqlite3,
a copied binary, a script of the agent's own) can read answers out of it.

Each attempt of a run starts from a HOME and TMPDIR no earlier process wrote (:func:`fresh_attempt`), and a
retried attempt from a fresh copy of the repository too: an attempt that left notes, links or a planted module
there hands nothing to the next one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Variables that would lead tools back to the user's own config or cache despite the isolated HOME.
_XDG = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


@dataclass(frozen=True)
class Workspace:
    repo: Path
    home: Path
    tmp: Path

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (e.g. ``os.environ``) with HOME, TMPDIR/TMP/TEMP and the XDG folders inside this workspace."""
        env = dict(base or {})
        env.update({"HOME": str(self.home), "TMPDIR": str(self.tmp), "TMP": str(self.tmp), "TEMP": str(self.tmp)})
        for name in _XDG:
            env.pop(name, None)
        return env


def make_workspace(source: Path, dest: Path, without: tuple[str, ...] = ()) -> Workspace:
    """Copy ``source`` to ``dest/repo`` (less any file or folder named in ``without``, at any depth) and create
    ``dest/home`` and ``dest/tmp``.

    ``dest`` must not hold a workspace already: reusing one would carry an earlier run's edits.
    """
    source = Path(source)
    dest = Path(dest)
    if not source.is_dir():
        raise NotADirectoryError(f"workspace source {source} is not a directory")
    repo, home, tmp = dest / "repo", dest / "home", dest / "tmp"
    if repo.exists():
        raise FileExistsError(f"{repo} already exists; a workspace is made once, in a fresh folder")
    dest.mkdir(parents=True, exist_ok=True)
    _copy_repo(source, repo, without)
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return Workspace(repo=repo, home=home, tmp=tmp)


def _copy_repo(source: Path, repo: Path, without: tuple[str, ...]) -> None:
    shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(*without) if without else None)


def fresh_attempt(workspace: Workspace, source: Path | None = None, without: tuple[str, ...] = ()) -> None:
    """Move the workspace's HOME and TMPDIR (and, given ``source``, its repository) aside to ``<name>.old-<k>``
    and make them anew (the repository copied from ``source`` less ``without``, as :func:`make_workspace` does).

    Moved, not removed: a rename cannot fail on what the agent left there (a folder it made unreadable, a link),
    and the sandbox binds the three folders by name, so what was moved aside is out of every later attempt's
    reach while it stays on disk for a look."""
    folders = [workspace.home, workspace.tmp] + ([workspace.repo] if source is not None else [])
    for folder in folders:
        k = 1
        while os.path.lexists(folder.with_name(f"{folder.name}.old-{k}")):
            k += 1
        if os.path.lexists(folder):
            folder.rename(folder.with_name(f"{folder.name}.old-{k}"))
    workspace.home.mkdir()
    workspace.tmp.mkdir()
    if source is not None:
        _copy_repo(Path(source), workspace.repo, without)
