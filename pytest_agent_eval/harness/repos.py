"""Put a corpus repository on disk: ``git clone --depth 1`` of its URL, else its offline ``source``.

A fetch is staged in a hidden sibling folder and renamed into ``<corpus_dir>/<name>`` only when
complete, then a marker (``.<name>.fetched``) is written last; so a fetch that died half-way never
looks finished and is redone. A ``<name>`` folder already there without a marker is a checkout the
user put there (e.g. an existing ``/tmp/codegraph-corpus``) and is adopted, never deleted.
Fetched repositories are reused across sessions and never updated. Fetches are file-locked.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from filelock import FileLock

from pytest_agent_eval.corpus import CorpusEntry
from pytest_agent_eval.harness.provision import ProvisionError, run_tool, tool_env

CLONE_TIMEOUT = 1800.0
DOWNLOAD_TIMEOUT = 900.0


def fetch_repo(entry: CorpusEntry, corpus_dir: Path, offline: bool = False) -> Path:
    """The repository of ``entry`` under ``corpus_dir``, fetching it once.

    Online, the URL is cloned and the offline ``source`` is the fallback when the clone fails;
    ``offline=True`` goes straight to the source.
    """
    corpus_dir = Path(corpus_dir)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    dest = corpus_dir / entry.name
    marker = corpus_dir / f".{entry.name}.fetched"
    with FileLock(str(corpus_dir / f".{entry.name}.lock")):
        if marker.exists() and dest.is_dir():
            return dest
        if dest.is_dir() and not marker.exists():
            _write_marker(marker, {"how": "adopted", "from": str(dest)})
            return dest
        # Under the lock no other fetch of this entry runs, so any staging folder left is from a dead one.
        for stale in corpus_dir.glob(f".{entry.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.partial-", dir=corpus_dir))
        try:
            how, origin = _fetch(entry, staging, offline)
            (staging / "repo").rename(dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _write_marker(marker, {"how": how, "from": origin})
        return dest


def _fetch(entry: CorpusEntry, staging: Path, offline: bool) -> tuple[str, str]:
    """Fill ``staging/repo``; return how and from where."""
    target = staging / "repo"
    clone_error = "skipped (offline)"
    if not offline:
        try:
            _git_clone(entry.repo, target)
            return "clone", entry.repo
        except ProvisionError as exc:
            clone_error = str(exc)
            shutil.rmtree(target, ignore_errors=True)
    if entry.source is None:
        raise ProvisionError(f"{entry.name}: cannot fetch {entry.repo} and there is no offline source: {clone_error}")
    source = entry.source
    if source.startswith("npm:"):
        _npm_source(source[len("npm:") :], staging, target)
    elif source.startswith("pypi:"):
        _pypi_source(source[len("pypi:") :], staging, target)
    else:
        local = Path(source)
        if not local.is_dir():
            raise ProvisionError(f"{entry.name}: offline source {local} is not a directory")
        shutil.copytree(local, target, symlinks=True)
    return "source", source


def _git_clone(url: str, target: Path) -> None:
    # No credential prompts: a private or missing URL must fail, not hang a test run.
    env = tool_env(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true")
    cmd = ["git", "clone", "--depth", "1", "--quiet", url, str(target)]
    run_tool(cmd, f"git clone {url}", timeout=CLONE_TIMEOUT, env=env)


def _npm_source(spec: str, staging: Path, target: Path) -> None:
    downloads = staging / "download"
    downloads.mkdir()
    cmd = ["npm", "pack", spec, "--pack-destination", str(downloads)]
    run_tool(cmd, f"npm pack {spec}", downloads, DOWNLOAD_TIMEOUT)
    archives = list(downloads.glob("*.tgz"))
    if len(archives) != 1:
        raise ProvisionError(f"npm pack {spec}: expected one .tgz, found {[p.name for p in archives]}")
    archive = archives[0]
    _unpack_single_root(archive, staging / "unpacked", target)


def _pypi_source(spec: str, staging: Path, target: Path) -> None:
    downloads = staging / "download"
    downloads.mkdir()
    run_tool(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(downloads), spec],
        f"pip download {spec}",
        timeout=DOWNLOAD_TIMEOUT,
        env=tool_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    archives = [p for p in downloads.iterdir() if p.name.endswith((".tar.gz", ".tgz", ".zip", ".tar.bz2"))]
    if len(archives) != 1:
        raise ProvisionError(f"pip download {spec}: expected one sdist, found {[p.name for p in archives]}")
    _unpack_single_root(archives[0], staging / "unpacked", target)


def _unpack_single_root(archive: Path, into: Path, target: Path) -> None:
    """Unpack an archive whose content sits in one top folder (npm's ``package/``, an sdist's
    ``name-version/``) and move that folder to ``target``."""
    into.mkdir()
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                _check_member(archive, member)
            zf.extractall(into)
    else:
        with tarfile.open(archive) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(into, filter="data")
            else:  # Python < 3.10.12 / 3.11.4: no extraction filters, check names ourselves
                for member in tf.getmembers():
                    _check_member(archive, member.name)
                    if member.issym() or member.islnk():
                        raise ProvisionError(f"{archive.name}: refusing link member {member.name}")
                tf.extractall(into)
    roots = [p for p in into.iterdir()]
    if len(roots) != 1 or not roots[0].is_dir():
        raise ProvisionError(f"{archive.name}: expected one top-level folder, found {[p.name for p in roots]}")
    roots[0].rename(target)


def _check_member(archive: Path, name: str) -> None:
    if name.startswith(("/", "\\")) or ".." in Path(name).parts:
        raise ProvisionError(f"{archive.name}: refusing unsafe member {name}")


def _write_marker(marker: Path, data: dict[str, str]) -> None:
    partial = marker.with_name(marker.name + ".partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, marker)
