"""A disposable place for one agent run: a working copy of the indexed repository, its own HOME and TMPDIR.

The indexed copy in the cache is shared by every run of a (repository, tool build) pair, so an agent
that edits files, or a tool that rewrites its index, must do it in a copy of its own. A without-arm copy
carries none of the tool's state (``RetrievalTool.state_dirs``, passed as ``without``), so no route (sqlite3,
a copied binary, a script of the agent's own) can read answers out of it.
"""

from __future__ import annotations

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
    shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(*without) if without else None)
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return Workspace(repo=repo, home=home, tmp=tmp)
