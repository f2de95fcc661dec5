"""Index a repository with the retrieval tool under test, once per (repository, tool build).

The index must be built by the same binary that later serves queries (versions extract
differently), so every build gets its own copy: ``<cache>/indexed/<repo-id>/<version>-<bin-id>``.
Any tool state (``RetrievalTool.state_dirs``) that came with the repository is removed first. The tool
runs with a scratch HOME and its own environment (``RetrievalTool.env``: no telemetry, no daemon), so
indexing leaves nothing behind in the user's home.
A marker beside the copy is written last, so an interrupted build is redone; each build is
appended to ``<cache>/builds.log`` (see :func:`pytest_agent_eval.harness.provision.read_builds`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from pytest_agent_eval.harness.provision import Provisioned, ProvisionError, record_build, run_tool, tool_env
from pytest_agent_eval.tool import RetrievalTool

INDEX_TIMEOUT = 3600.0

# Variables that would point the tool at the user's own config, cache or data despite a scratch HOME.
_XDG = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


def indexed_copy(
    repo: Path, tool: RetrievalTool, build: Provisioned, cache: Path, timeout: float = INDEX_TIMEOUT
) -> Path:
    """A copy of ``repo`` with a fresh index of ``tool`` built by ``build``; built once, then reused."""
    repo = Path(repo).resolve()
    cache = Path(cache)
    if not repo.is_dir():
        raise ProvisionError(f"cannot index {repo}: not a directory")
    root = cache / "indexed" / f"{repo.name}-{_short_hash(str(repo))}"
    root.mkdir(parents=True, exist_ok=True)
    # The binary's path is part of the key: a local build and a published one may print the same version.
    build_id = f"{build.version}-{_short_hash(str(Path(build.bin).resolve()))}"
    target = root / build_id
    marker = root / f"{build_id}.indexed"
    with FileLock(str(root / f"{build_id}.lock")):
        if marker.exists() and all((target / state).exists() for state in tool.state_dirs):
            return target
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        shutil.copytree(repo, target, symlinks=True, ignore=shutil.ignore_patterns(*tool.state_dirs))
        with tempfile.TemporaryDirectory(prefix=f"{tool.name}-home-", dir=cache) as home:
            env = tool_env(HOME=home, **tool.env)
            for name in _XDG:
                env.pop(name, None)
            what = f"{tool.name} {build.version} indexing {repo}"
            try:
                run_tool(tool.index_command(build.bin, target), what, target, timeout, env)
                missing = [state for state in tool.state_dirs if not (target / state).exists()]
                if missing:
                    raise ProvisionError(f"{what}: finished without creating {target / missing[0]}")
            except ProvisionError:
                shutil.rmtree(target, ignore_errors=True)
                raise
        seconds = round(time.monotonic() - started, 2)
        partial = marker.with_name(marker.name + ".partial")
        partial.write_text(json.dumps({"repo": str(repo), "version": build.version, "seconds": seconds}))
        os.replace(partial, marker)
        record_build(cache, "index", repo=str(repo), version=build.version, path=str(target), seconds=seconds)
        return target


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]
