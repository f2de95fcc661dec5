"""Install the tools under test into a private cache: the retrieval tool and the coding agent's CLI.

Nothing here installs globally or touches the user's own retrieval tool or agent: every install is
``npm install --prefix <cache>/<tool>/<version>``, or a copy of a local build under ``<cache>/<tool>/``.
Installs are guarded by a file lock so that pytest-xdist workers asking for the same version at once install
it once (the second waits and reuses), and a marker written last makes a half-done install be redone rather
than trusted.

Every install and index build is appended to ``<cache>/builds.log`` (JSON lines) so a benchmark or a
test can count what was really built and how long it took.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_agent_eval.harness.progress import announce
from pytest_agent_eval.harness.provenance import git_state
from pytest_agent_eval.harness.runtimes import with_node
from pytest_agent_eval.tool import RetrievalTool

BUILDS_LOG = "builds.log"
MARKER = ".provisioned.json"
NPM_TIMEOUT = 900.0

_VERSION_RE = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
_EXACT_RE = re.compile(rf"^{_VERSION_RE.pattern}$")


class ProvisionError(RuntimeError):
    """A tool, repository or index could not be made ready; the message carries the stderr tail."""


@dataclass(frozen=True)
class Provisioned:
    """A ready-to-run tool: ``bin`` is the executable, ``version`` what it reports, ``spec`` what was asked;
    ``origin`` how it was provisioned (the record's ``tool_provision``): ``{"kind": "npm", "spec":
    "<package>@<version>", "version", "path": <install prefix>}``, ``{"kind": "local", "spec": "local:…",
    "version", "path": <checkout>, "git_state": {"commit", "dirty"} | None, "build": <built copy>}`` or
    ``{"kind": "path", "spec": "PATH", "version", "path": <executable>}``."""

    name: str
    bin: Path
    version: str
    spec: str
    origin: dict[str, Any] = field(default_factory=dict, compare=False)


def provision_tool(tool: RetrievalTool, spec: str, cache: Path) -> Provisioned:
    """Make the retrieval tool's build ``spec`` runnable from ``cache``.

    An npm tool takes "1.6.1", "latest" or "local:<checkout>"; ``local:<path>`` builds a *copy* of the checkout
    (``npm install && npm run build``), so the user's working tree is never modified and the build under test is
    a snapshot; the copy is keyed by the checkout's path and content, so an unchanged checkout is built once.
    A tool with a local ``build`` takes its version (what the build must report) or ``local:<executable>``.
    """
    cache = Path(cache)
    local = Path(spec[len("local:") :]).expanduser() if spec.startswith("local:") else None
    if tool.package is None:
        return _provision_build(tool, spec, local, cache)
    if local is not None:
        return _provision_local(tool, spec, local, cache)
    return provision_npm(tool.cli, tool.package, spec, cache)


def provision_agent(executable: str, package: str, pinned: str, spec: str | None, cache: Path) -> Provisioned:
    """A coding agent's CLI: the ``executable`` on PATH when ``spec`` is None and one exists, else an npm install
    of ``package`` at ``spec`` (default ``pinned``) into ``cache``."""
    if spec is None:
        found = shutil.which(executable)
        if found:
            path = Path(found)
            version = run_version(path, executable)
            origin = {"kind": "path", "spec": "PATH", "version": version, "path": str(path)}
            return Provisioned(executable, path, version, "PATH", origin)
        spec = pinned
    return provision_npm(executable, package, spec, Path(cache))


def record_build(cache: Path, kind: str, **fields: Any) -> None:
    """Append one line to ``<cache>/builds.log``; ``kind`` is "install" or "index"."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    line = {"kind": kind, **fields, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    # Appenders hold different item locks, so the log has its own.
    with FileLock(str(cache / (BUILDS_LOG + ".lock"))), open(cache / BUILDS_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(line, default=str) + "\n")


def read_builds(cache: Path) -> list[dict[str, Any]]:
    """Every record of ``<cache>/builds.log`` (empty when nothing was built)."""
    log = Path(cache) / BUILDS_LOG
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def tail(text: str, lines: int = 25) -> str:
    """The last lines of a tool's output, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


def tool_env(**overrides: str) -> dict[str, str]:
    """The environment for npm and the tools: quiet, no telemetry, no update checks; the bundled Node.js first on
    PATH when the machine has none of its own (:mod:`pytest_agent_eval.harness.runtimes`)."""
    env = dict(os.environ)
    env.update(
        {
            "DO_NOT_TRACK": "1",
            "npm_config_update_notifier": "false",
            "npm_config_fund": "false",
            "npm_config_audit": "false",
            "PATH": with_node(env.get("PATH", "")),
        }
    )
    env.update(overrides)
    return env


def provision_npm(name: str, package: str, spec: str, cache: Path) -> Provisioned:
    """``package@spec`` (an exact version or ``latest``) installed under ``<cache>/<name>/<version>``, whose
    ``node_modules/.bin/<name>`` must report that version; an install is done once, under a lock."""
    if spec == "latest":
        version = _npm_latest(package)
    elif _EXACT_RE.match(spec):
        version = spec
    else:
        raise ProvisionError(f"{name}: unknown version spec {spec!r} (expected e.g. 1.6.1 or 'latest')")

    root = cache / name
    root.mkdir(parents=True, exist_ok=True)
    prefix = root / version
    marker = prefix / MARKER
    origin = {"kind": "npm", "spec": f"{package}@{version}", "version": version, "path": str(prefix)}
    with FileLock(str(root / f"{version}.lock")):
        done = _done(marker)
        if done:
            return Provisioned(name, Path(done["bin"]), done["version"], spec, origin)
        # No marker: nothing here, or an install that died half-way. Start clean.
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        started = time.monotonic()
        try:
            run_tool(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{package}@{version}"],
                what=f"npm install {package}@{version}",
                cwd=prefix,
            )
            binary = prefix / "node_modules" / ".bin" / name
            if not binary.exists():
                raise ProvisionError(f"npm install {package}@{version} produced no {binary}")
            reported = run_version(binary, name)
            if reported != version:
                raise ProvisionError(f"{binary} --version reports {reported}, expected {version}")
        except ProvisionError:
            shutil.rmtree(prefix, ignore_errors=True)
            raise
        seconds = round(time.monotonic() - started, 2)
        _write_marker(marker, {"bin": str(binary), "version": reported, "package": package})
        record_build(cache, "install", what=f"{package}@{version}", version=reported, seconds=seconds)
        return Provisioned(name, binary, reported, spec, origin)


def _provision_local(tool: RetrievalTool, spec: str, checkout: Path, cache: Path) -> Provisioned:
    checkout = checkout.resolve()
    if not (checkout / "package.json").is_file():
        raise ProvisionError(f"{spec}: {checkout} is not a {tool.name} checkout (no package.json)")
    name = tool.cli
    root = cache / name
    root.mkdir(parents=True, exist_ok=True)
    skip = (*_LOCAL_SKIP, *tool.state_dirs)
    key = f"local-{checkout.name}-{_fingerprint(checkout, skip)}"
    build = root / key
    marker = build / MARKER
    origin = {
        "kind": "local",
        "spec": spec,
        "path": str(checkout),
        "git_state": git_state(checkout),
        "build": str(build),
    }
    with FileLock(str(root / f"{key}.lock")):
        done = _done(marker)
        if done:
            return Provisioned(name, Path(done["bin"]), done["version"], spec, {**origin, "version": done["version"]})
        shutil.rmtree(build, ignore_errors=True)
        started = time.monotonic()
        shutil.copytree(checkout, build, symlinks=True, ignore=shutil.ignore_patterns(*skip))
        try:
            run_tool(["npm", "install", "--no-audit", "--no-fund"], f"npm install in a copy of {checkout}", build)
            run_tool(["npm", "run", "build"], f"npm run build in a copy of {checkout}", build)
            binary = _package_bin(build, name)
            version = run_version(binary, name)
        except ProvisionError:
            shutil.rmtree(build, ignore_errors=True)
            raise
        seconds = round(time.monotonic() - started, 2)
        _write_marker(marker, {"bin": str(binary), "version": version, "checkout": str(checkout)})
        record_build(cache, "install", what=f"local:{checkout}", version=version, seconds=seconds)
        return Provisioned(name, binary, version, spec, {**origin, "version": version})


def _provision_build(tool: RetrievalTool, spec: str, local: Path | None, cache: Path) -> Provisioned:
    """A local executable copied into the cache (keyed by its path and content, so an edit makes a new copy):
    the agent's sandbox hides the cache, so the without-arm cannot reach the copy it runs."""
    source = (local or Path(tool.build or "")).expanduser().resolve()
    if not source.is_file():
        raise ProvisionError(f"{tool.name} {spec}: {source} is not an executable file")
    name = tool.cli
    root = cache / name
    root.mkdir(parents=True, exist_ok=True)
    key = f"local-{source.stem}-{hashlib.sha256(str(source).encode() + source.read_bytes()).hexdigest()[:12]}"
    folder = root / key
    marker = folder / MARKER
    with FileLock(str(root / f"{key}.lock")):
        done = _done(marker)
        if not done:
            started = time.monotonic()
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            binary = folder / source.name
            shutil.copy2(source, binary)
            binary.chmod(binary.stat().st_mode | 0o111)
            try:
                version = run_version(binary, name)
            except ProvisionError:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done = {"bin": str(binary), "version": version, "build": str(source)}
            _write_marker(marker, done)
            seconds = round(time.monotonic() - started, 2)
            record_build(cache, "install", what=f"local:{source}", version=version, seconds=seconds)
    if local is None and done["version"] != spec:
        raise ProvisionError(f"{tool.name}: {source} --version reports {done['version']}, expected {spec}")
    origin = {"kind": "local", "spec": spec, "version": done["version"], "path": str(source), "build": str(folder)}
    return Provisioned(name, Path(done["bin"]), done["version"], spec, origin)


# Build products of the checkout are not part of what gets built (nor the tool's index, RetrievalTool.state_dirs).
_LOCAL_SKIP = ("node_modules", ".git", "dist")


def _fingerprint(checkout: Path, skip: tuple[str, ...]) -> str:
    """A hash of the checkout's files (path, size, mtime), so an edited checkout is rebuilt."""
    digest = hashlib.sha256(str(checkout).encode())
    for directory, dirs, files in os.walk(checkout):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for file in sorted(files):
            path = Path(directory) / file
            try:
                stat = path.lstat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(checkout)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


def _package_bin(package_dir: Path, name: str) -> Path:
    """The executable a package declares in package.json ``bin``, made executable."""
    manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    declared = manifest.get("bin")
    if isinstance(declared, dict):
        declared = declared.get(name) or next(iter(declared.values()), None)
    if not isinstance(declared, str):
        raise ProvisionError(f"{package_dir}/package.json declares no bin for {name}")
    binary = (package_dir / declared).resolve()
    if not binary.is_file():
        raise ProvisionError(f"{package_dir}: bin {declared} does not exist after the build")
    binary.chmod(binary.stat().st_mode | 0o111)
    return binary


def _npm_latest(package: str) -> str:
    out = run_tool(["npm", "view", f"{package}@latest", "version"], what=f"npm view {package}@latest", quiet=True)
    match = _VERSION_RE.search(out)
    if not match:
        raise ProvisionError(f"npm view {package}@latest printed no version: {tail(out)}")
    return match.group(0)


def run_version(binary: Path, name: str) -> str:
    """What ``<binary> --version`` reports (its first version-like word)."""
    out = run_tool([str(binary), "--version"], what=f"{name} --version", timeout=60, quiet=True)
    match = _VERSION_RE.search(out)
    if not match:
        raise ProvisionError(f"{binary} --version printed no version: {tail(out)}")
    return match.group(0)


def run_tool(
    cmd: list[str],
    what: str,
    cwd: Path | None = None,
    timeout: float = NPM_TIMEOUT,
    env: dict[str, str] | None = None,
    quiet: bool = False,
) -> str:
    """Run a tool to completion and return its stdout; any failure is a ProvisionError with its stderr tail.

    Unless ``quiet`` (a quick query), the run is announced before and after: installs and index builds
    take minutes on a first run and must not look like a hang.
    """
    started = time.monotonic()
    if not quiet:
        announce(f"{what} …")
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=tool_env() if env is None else env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError as exc:
        raise ProvisionError(f"{what}: {cmd[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise ProvisionError(f"{what}: timed out after {timeout:.0f}s") from exc
    if proc.returncode != 0:
        raise ProvisionError(f"{what} failed (exit {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}")
    if not quiet:
        announce(f"{what}: done in {time.monotonic() - started:.1f}s")
    return proc.stdout


def _done(marker: Path) -> dict[str, Any] | None:
    """The finished install a marker describes, or None when it must be (re)done."""
    try:
        done = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return done if Path(done.get("bin", "")).is_file() else None


def _write_marker(marker: Path, data: dict[str, Any]) -> None:
    # Written last, and atomically, so its presence means everything before it finished.
    partial = marker.with_name(marker.name + ".partial")
    partial.write_text(json.dumps(data, indent=2), encoding="utf-8")
    partial.replace(marker)
