"""Seal the agent's whole process tree in a bubblewrap sandbox where the retrieval tool does not exist.

Text matching on Bash commands cannot be made complete (a quoted name, a glob, a Python subprocess, a
base64 string piped to ``sh`` all get through it), so the without-arm is sealed by construction instead:
the agent, every shell and subprocess it starts, and every subagent run in a mount namespace where

* the whole filesystem is read-only, except the item's workspace (repository copy, HOME, TMPDIR);
* the provisioning cache (tool installs, indexed copies, corpus), the invoking user's HOME (``~/.npm``
  may hold the tool's tarball, ``~/.claude`` the user's hooks), ``/tmp`` (other items' workspaces and their
  indexes) and every install of the tool found on the host (its executable on ``PATH``, the package under
  npm's global root) are hidden: empty folders, or ``/dev/null`` for a file;
* read-only again on top: the Claude Code install, the Python that runs the hook and this package, the
  item's run folder (hook settings, MCP config) and whatever else the caller names — for the with-arm, the
  tool's own install, which its MCP server needs;
* processes live in their own PID namespace and die with their parent (see
  :mod:`pytest_agent_eval.harness.process`).

With a ``relay`` the sandbox has a network of its own in which only the model server's loopback port exists
(:mod:`pytest_agent_eval.harness.relay`); without one (the real API) the host's network is shared. npm and
npx are pointed at a closed loopback port with an empty cache either way (:func:`npm_env`).

bubblewrap works as root and, through unprivileged user namespaces, as an ordinary user. Where it cannot
run, :func:`check_sandbox` raises :class:`SandboxUnavailable` saying what to install or enable.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest_agent_eval
from pytest_agent_eval.harness.relay import relay_command
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool

# Tests switch the sandbox off to prove their attacks would otherwise get through; not a user option.
DISABLE_VAR = "AGENT_EVAL_INTERNAL_NO_SANDBOX"
CLOSED_REGISTRY = "http://127.0.0.1:9/"  # the discard port: nothing listens, a fetch fails at once
INSTALL_HINT = (
    "the agent runs inside a bubblewrap sandbox that hides the retrieval tool from the without-arm; "
    "install it (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`) and, as an "
    "ordinary user, allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, or on "
    "Ubuntu 24.04+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here; the message says what to install."""


@dataclass(frozen=True)
class Sandbox:
    """What the agent's process tree sees: ``hidden`` paths are emptied, then ``readable`` and ``writable``
    ones bound back in (read-only, read-write), in that order, so a path can be hidden and one of its
    sub-folders exposed again."""

    hidden: tuple[Path, ...]
    readable: tuple[Path, ...]
    writable: tuple[Path, ...]
    bwrap: str = "bwrap"
    # (port, Unix socket): no network but this loopback port, carried in by pytest_agent_eval.harness.relay
    relay: tuple[int, Path] | None = None

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside the sandbox (a bubblewrap argv)."""
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        shown = self.readable
        # Hidden first (a path inside another hidden one needs no mount of its own), then bound back in, then
        # hidden again where an exposed folder brought it back (a global node_modules, a checkout).
        first = [p for p in self.hidden if not any(p != h and p.is_relative_to(h) for h in self.hidden)]
        again = [p for p in self.hidden if any(p != s and p.is_relative_to(s) for s in shown)]
        args += _hide(first)
        for path in shown:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        args += _hide(again)
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        if self.relay is not None:
            port, path = self.relay
            args += ["--unshare-net", "--bind", str(path.parent), str(path.parent)]
            command = relay_command(port, path, command)
        return [*args, "--", *command]


def sandbox_for(
    *,
    cache: Path,
    writable: Iterable[Path],
    readable: Iterable[Path] = (),
    hidden: Iterable[Path] = (),
    relay: tuple[int, Path] | None = None,
    tool: RetrievalTool = CODEGRAPH,
    path_env: str | None = None,
) -> Sandbox:
    """The sandbox of one agent run: ``writable`` is its workspace, ``readable`` what it must read besides
    the system (the Claude Code install, the run folder, the shimmed PATH's folder, the with-arm's tool),
    ``hidden`` what it must not see besides the defaults (the campaign folder: other items' transcripts) and
    ``tool``'s installs on the host (:func:`tool_installs`)."""
    hidden = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path(cache), Path.home(), *hidden]
    for name in ("HOME", "SUDO_HOME"):
        if os.environ.get(name):
            hidden.append(Path(os.environ[name]))
    hidden += [Path("/etc/claude-code")]  # managed settings: hooks or a disableAllHooks of the machine's own
    hidden += tool_installs(tool, os.environ.get("PATH", "") if path_env is None else path_env)
    # The hook runs `<python> -m pytest_agent_eval.harness.hook`: its interpreter and this package stay readable
    # (the package folder only: a checkout around it may hold campaigns of with-arm transcripts).
    runtime = {Path(sys.prefix), Path(sys.base_prefix), Path(pytest_agent_eval.__file__).resolve().parent}
    # node installed under a hidden folder (nvm keeps it in HOME): its prefix comes back, its global packages
    # (the tool's among them) are hidden again by Sandbox.wrap.
    node = shutil.which("node", path=os.environ.get("PATH", "") if path_env is None else path_env)
    prefix = Path(node).resolve().parents[1] if node else None
    if prefix is not None and any(prefix.is_relative_to(h.resolve()) for h in hidden if h.exists()):
        runtime.add(prefix)
    return Sandbox(
        hidden=tuple(_unique(p.resolve() if not p.is_symlink() else p for p in hidden)),
        readable=tuple(_unique(Path(p).resolve() for p in [*runtime, *readable])),
        writable=tuple(_unique(Path(p).resolve() for p in writable)),
        bwrap=shutil.which("bwrap") or "bwrap",
        relay=relay,
    )


def tool_installs(tool: RetrievalTool, path_env: str) -> list[Path]:
    """Every install of the tool the host shows: its CLI on each PATH folder (and the file it links to, and
    that file's package folder), its npm package under npm's global root, its local build."""
    found: list[Path] = []
    names = {tool.cli} | ({tool.package.rsplit("/", 1)[-1]} if tool.package else set())
    for directory in path_env.split(os.pathsep):
        candidate = Path(directory or ".") / tool.cli
        if candidate.exists() or candidate.is_symlink():
            found.append(candidate)
            target = candidate.resolve()
            found.append(target)
            found += [p for p in target.parents if p.name in names and (p / "package.json").is_file()][:1]
    root = npm_global_root() if tool.package else None
    if root is not None:
        found.append(root / str(tool.package))
    if tool.build is not None:
        found.append(Path(tool.build).expanduser())
    return found


@functools.cache
def npm_global_root() -> Path | None:
    """``npm root -g`` (asked once per process), or None without npm."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        done = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def npm_env(home: Path) -> dict[str, str]:
    """npm/npx settings for the agent: no registry to fetch from, an empty cache in its own HOME, no user or
    global npmrc that could name another registry."""
    npmrc, global_npmrc = Path(home) / ".npmrc", Path(home) / ".npmrc-global"
    for path in (npmrc, global_npmrc):
        if not path.exists():
            path.write_text("", encoding="utf-8")
    return {
        "npm_config_registry": CLOSED_REGISTRY,
        "npm_config_cache": str(Path(home) / ".npm"),
        "npm_config_userconfig": str(npmrc),
        "npm_config_globalconfig": str(global_npmrc),
        "npm_config_offline": "true",
        "npm_config_update_notifier": "false",
    }


def enabled() -> bool:
    """False only when a test switched the sandbox off (:data:`DISABLE_VAR`)."""
    return os.environ.get(DISABLE_VAR) != "1"


@functools.cache
def check_sandbox(bwrap: str | None = None) -> None:
    """Raise :class:`SandboxUnavailable` unless bubblewrap can start a process here (checked once)."""
    binary = bwrap or shutil.which("bwrap")
    if binary is None:
        raise SandboxUnavailable(f"bubblewrap (`bwrap`) is not on PATH: {INSTALL_HINT}")
    probe = Sandbox(hidden=(Path(tempfile.gettempdir()),), readable=(), writable=(), bwrap=binary)
    try:
        done = subprocess.run(probe.wrap(["true"]), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap could not start: {exc}; {INSTALL_HINT}") from None
    if done.returncode != 0:
        raise SandboxUnavailable(f"bubblewrap failed here ({done.stderr.strip()[-300:]}); {INSTALL_HINT}")


def _hide(paths: Iterable[Path]) -> list[str]:
    """bubblewrap arguments emptying each folder and turning each file into ``/dev/null`` (an empty device that
    cannot be run); a symlink is left alone, its target is hidden in its own right."""
    args: list[str] = []
    for path in paths:
        if path == Path("/") or path.is_symlink() or not path.exists():
            continue
        args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", os.devnull, str(path)]
    return args


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def install_paths(binary: Path) -> list[Path]:
    """What running ``binary`` reads of its install: the file, the file it links to, and the ``node_modules``
    folder it sits in (a node shim loads its package and its dependencies; a compiled CLI needs only itself) —
    or, for a local build (``local:<checkout>``, whose bin is no package's dependency), its package folder,
    which holds its own ``node_modules``."""
    binary = Path(binary)
    target = binary.resolve()
    modules = next((p for p in target.parents if p.name == "node_modules"), None)
    if modules is None:
        modules = next((p for p in target.parents if (p / "package.json").is_file()), None)
    return [binary, target] + ([modules] if modules is not None else [])
