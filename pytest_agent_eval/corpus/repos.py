"""Put a corpus repository on disk: ``git clone --depth 1`` of its URL, else its offline ``source``.

A fetch is staged in a hidden sibling folder and renamed into ``<corpus_dir>/<name>`` only when
complete, then a marker (``.<name>.fetched``) is written last; so a fetch that died half-way never
looks finished and is redone. A ``<name>`` folder already there without a marker is a checkout the
user put there (e.g. an existing ``/tmp/codegraph-corpus``) and is adopted, never deleted.
Fetches are file-locked.

The marker is the copy's origin: ``how`` ("clone", "source", "adopted"), ``from`` (the URL or source spec) and
``source``, the provenance a record carries (:func:`fetched_source`). A fetched copy is reused across sessions
only while its origin is one the entry asks for — a clone of its ``repo`` or its offline ``source`` — so an
entry whose URL or pinned version changed is fetched again. A copy that came from the offline source although
a clone was asked is a fallback: an :class:`~pytest_agent_eval.warnings.AgentEvalWarning` says so, on every
fetch that returns it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_agent_eval.corpus.load import CorpusEntry
from pytest_agent_eval.harness.progress import announce
from pytest_agent_eval.harness.provenance import git_state
from pytest_agent_eval.harness.provision import ProvisionError, run_tool, tool_env
from pytest_agent_eval.warnings import AgentEvalWarning

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
    marker = _marker(dest)
    with FileLock(str(corpus_dir / f".{entry.name}.lock")):
        origin = _read_marker(marker)
        if origin is not None and dest.is_dir() and not _asked(origin, entry):
            # Ours (it has a marker), fetched for another URL or version: the entry changed since.
            announce(f"{entry.name}: the cached copy is from {origin.get('from')}, not what the corpus asks; fetching")
            shutil.rmtree(dest)
            marker.unlink()
            origin = None
        if origin is not None and dest.is_dir():
            _warn_fallback(dest, offline)
            return dest
        if dest.is_dir():
            _write_marker(marker, {"how": "adopted", "from": str(dest), "source": _local_source(dest)})
            return dest
        # Under the lock no other fetch of this entry runs, so any staging folder left is from a dead one.
        for stale in corpus_dir.glob(f".{entry.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.partial-", dir=corpus_dir))
        try:
            origin = _fetch(entry, staging, offline)
            (staging / "repo").rename(dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _write_marker(marker, origin)
        _warn_fallback(dest, offline)
        return dest


def fetched_source(dest: Path) -> dict[str, Any] | None:
    """The provenance of a repository :func:`fetch_repo` put at ``dest``: ``{"kind": "clone", "url", "commit"}``,
    ``{"kind": "npm" | "pypi", "spec", "version"}`` or ``{"kind": "local", "path", "git_state"}``, with
    ``"fallback"`` (why the clone was not used) when the offline source stood in for a clone. None when
    ``dest`` was not fetched by it."""
    origin = _read_marker(_marker(Path(dest)))
    if origin is None:
        return None
    return origin.get("source") or _describe(Path(dest), origin)  # markers before provenance lack "source"


def _marker(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.fetched"


def _read_marker(marker: Path) -> dict[str, Any] | None:
    try:
        origin = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return origin if isinstance(origin, dict) else None


def _asked(origin: dict[str, Any], entry: CorpusEntry) -> bool:
    """Whether a fetched copy is one the entry asks for: a clone of its URL or its offline source."""
    how, where = origin.get("how"), origin.get("from")
    return how == "adopted" or (how, where) in {("clone", entry.repo), ("source", entry.source)}


def _warn_fallback(dest: Path, offline: bool) -> None:
    text = fallback_warning(dest, offline)
    if text:
        warnings.warn(text, AgentEvalWarning, stacklevel=3)


def fallback_warning(dest: Path, offline: bool) -> str | None:
    """The warning (also kept in the item's record) for a copy at ``dest`` that came from the offline source
    although a clone was asked (``offline`` False); None otherwise."""
    origin = _read_marker(_marker(Path(dest)))
    if offline or origin is None or origin.get("how") != "source":
        return None
    why = (fetched_source(dest) or {}).get("fallback") or "the clone was not tried when it was fetched"
    return f"{Path(dest).name}: the code under test is the offline source {origin.get('from')}, not a clone ({why})"


def _describe(dest: Path, origin: dict[str, Any]) -> dict[str, Any]:
    """Provenance of a copy from its marker's how/from and the files on disk."""
    how, where = origin.get("how"), str(origin.get("from"))
    if how == "clone":
        return {"kind": "clone", "url": where, "commit": (git_state(dest) or {}).get("commit")}
    if how == "source" and where.startswith(("npm:", "pypi:")):
        return {"kind": where.split(":", 1)[0], "spec": where, "version": _package_version(dest)}
    return _local_source(Path(where))


def _local_source(path: Path) -> dict[str, Any]:
    return {"kind": "local", "path": str(path), "git_state": git_state(path)}


def _package_version(root: Path) -> str | None:
    """The version an unpacked npm package (package.json) or sdist (PKG-INFO) declares."""
    try:
        return str(json.loads((root / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        for line in (root / "PKG-INFO").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _fetch(entry: CorpusEntry, staging: Path, offline: bool) -> dict[str, Any]:
    """Fill ``staging/repo``; return its origin (the marker's content)."""
    target = staging / "repo"
    clone_error = None
    if not offline:
        try:
            _git_clone(entry.repo, target)
            return {
                "how": "clone",
                "from": entry.repo,
                "source": _describe(target, {"how": "clone", "from": entry.repo}),
            }
        except ProvisionError as exc:
            clone_error = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:400]
            shutil.rmtree(target, ignore_errors=True)
    if entry.source is None:
        why = clone_error or "skipped (offline)"
        raise ProvisionError(f"{entry.name}: cannot fetch {entry.repo} and there is no offline source: {why}")
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
    described = _describe(target, {"how": "source", "from": source})  # a local source: the checkout's git state
    if clone_error is not None:
        described["fallback"] = clone_error
    return {"how": "source", "from": source, "source": described}


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


def _write_marker(marker: Path, data: dict[str, Any]) -> None:
    partial = marker.with_name(marker.name + ".partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, marker)
