"""Keep the retrieval tool's CLI out of the agent's reach: the two-layer block (docs/sandbox.md).

The without-arm has Bash, and the repo carries the index the with-arm needs; with the CLI on
PATH, agents run it (docs/metrics/contamination.md). So both arms run with:

1. a PATH where every directory holding the CLI is replaced, in place, by a folder of symlinks to
   everything else in it — the CLI usually sits next to ``claude`` and ``node``, so a directory cannot
   simply be dropped, and keeping the position keeps precedence;
2. a PreToolUse hook that denies Bash commands running the CLI by any other route (absolute path,
   ``npx``, ``node …/codegraph.js``), see :mod:`pytest_agent_eval.harness.hook`.

Prevention fails silently when the binary moves, so :func:`self_check` probes both layers with the
real hook program before any run, and the contamination metric re-reads every Bash command after.

Text matching cannot be complete (a quoted name, a Python subprocess), so these two layers only make the
agent's attempts visible; what seals the without-arm is the sandbox it runs in, where the tool does not
exist (:mod:`pytest_agent_eval.harness.sandbox`), and the probe through Claude Code itself
(:mod:`pytest_agent_eval.harness.probe`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOOK_MODULE = "pytest_agent_eval.harness.hook"
HOOK_TIMEOUT_S = 30.0


class IsolationError(RuntimeError):
    """The CLI block is not in place; the message names every layer that failed."""


@dataclass(frozen=True)
class CliBlock:
    """The block, probed: the PATH without the tool's CLI, and the settings file holding the denying hook."""

    path: str
    settings: Path


def shim_path(path_env: str, cli: str, shim_root: Path) -> str:
    """``path_env`` with each directory that holds an executable ``cli`` swapped for a symlink mirror without it."""
    entries = path_env.split(os.pathsep)
    shimmed = []
    for directory in entries:
        if directory and _is_executable(Path(directory) / cli):
            shimmed.append(str(_mirror(Path(directory), cli, Path(shim_root))))
        else:
            shimmed.append(directory)
    return os.pathsep.join(shimmed)


def _is_executable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except PermissionError:  # a folder this user cannot search (root's ~/.cargo/bin): nothing in it runs for them
        return False


def _mirror(directory: Path, cli: str, shim_root: Path) -> Path:
    """A folder of symlinks to every entry of ``directory`` except ``cli``; rebuilt on every call."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    mirror = shim_root / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', directory.name) or 'root'}-{digest}"
    if mirror.exists():
        shutil.rmtree(mirror)
    try:
        entries = sorted(os.listdir(directory))
    except PermissionError as error:
        raise IsolationError(
            f"PATH folder {directory} holds `{cli}` but this user cannot list it, so no copy of it without `{cli}` "
            "can be put on the agent's PATH; make the folder readable or take it off PATH"
        ) from error
    mirror.mkdir(parents=True)
    for entry in entries:
        if entry != cli:
            # The link names the original path, so relative links inside the directory still resolve.
            (mirror / entry).symlink_to(directory / entry)
    return mirror


def hook_command(cli: str) -> str:
    """The shell command Claude Code runs for the hook; quoted, as the interpreter path may hold spaces.

    Isolated (``-I``): Claude Code runs it in the agent's repository, and ``-m`` would put that folder first on
    ``sys.path``, so a ``pytest_agent_eval`` package the agent wrote there would be the hook; ``-I`` leaves the
    current folder, ``PYTHON*`` variables and the user's site-packages out, so the module comes from this
    install, which the sandbox shows read-only."""
    return shlex.join([sys.executable, "-I", "-m", HOOK_MODULE, "--cli", cli])


def write_hook_settings(dest: Path, cli: str) -> Path:
    """Write the ``--settings`` file that installs the PreToolUse hook on Bash; returns its path."""
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": hook_command(cli)}]},
            ]
        }
    }
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return dest


def self_check(
    path_env: str,
    settings: Path,
    cli: str,
    required: Sequence[str] = ("claude", "node"),
    proven_hooks: set[str] | None = None,
) -> None:
    """Refuse to start a run whose CLI block leaks: probe the real hook and the shimmed PATH.

    The hook must deny an absolute-path call and a ``VAR=1 cli …`` call and allow a mere mention
    (``grep cli src/``); ``cli`` must not resolve on ``path_env`` and every ``required`` tool must.
    A hook command already in ``proven_hooks`` passed these probes earlier in this process and is not
    run again (each probe starts an interpreter); commands that pass are added to it.
    """
    problems: list[str] = []
    found = shutil.which(cli, path=path_env)
    if found is not None:
        problems.append(f"PATH layer: `{cli}` still resolves to {found}")
    missing = [tool for tool in required if shutil.which(tool, path=path_env) is None]
    problems += [f"PATH layer: required tool `{tool}` is not found" for tool in missing]
    commands = _bash_hook_commands(Path(settings))
    if not commands:
        problems.append(f"hook layer: {settings} installs no PreToolUse hook for Bash")
    probes = [
        (f"/opt/agent-eval-probe/bin/{cli} explore probe", True),
        (f"VAR=1 {cli} explore probe", True),
        (f"grep {cli} src/", False),
    ]
    env = {**os.environ, "PATH": path_env}
    proven = proven_hooks if proven_hooks is not None else set()
    for command in commands:
        if command in proven:
            continue
        failures = len(problems)
        for probe, must_deny in probes:
            denied, error = _run_hook(command, probe, env)
            if error:
                problems.append(f"hook layer: `{command}` failed on `{probe}`: {error}")
            elif denied != must_deny:
                verdict = "allowed" if must_deny else "denied"
                problems.append(f"hook layer: `{command}` {verdict} `{probe}`")
        if len(problems) == failures:
            proven.add(command)
    if problems:
        raise IsolationError("CLI isolation self-check failed: " + "; ".join(problems))


def _bash_hook_commands(settings: Path) -> list[str]:
    """The command hooks a Bash call triggers under this settings file (matcher: exact, regex, ``*`` or empty)."""
    try:
        data = json.loads(settings.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    groups = data.get("hooks", {}).get("PreToolUse", []) if isinstance(data, dict) else []
    commands = []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict) or not _matches_bash(group.get("matcher")):
            continue
        for hook in group.get("hooks") or []:
            if isinstance(hook, dict) and hook.get("type") == "command" and isinstance(hook.get("command"), str):
                commands.append(hook["command"])
    return commands


def _matches_bash(matcher: Any) -> bool:
    if matcher in (None, "", "*"):
        return True
    if not isinstance(matcher, str):
        return False
    try:
        return re.fullmatch(matcher, "Bash") is not None
    except re.error:
        return matcher == "Bash"


def _run_hook(command: str, bash_command: str, env: dict[str, str]) -> tuple[bool, str | None]:
    """Run one hook command the way Claude Code does (shell, JSON on stdin): (denied?, error or None)."""
    event = {
        "session_id": "agent-eval-self-check",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": bash_command, "description": "isolation self-check probe"},
        "tool_use_id": "toolu_self_check",
    }
    # A neutral cwd: the hook must not work only because it happens to start inside this checkout.
    with tempfile.TemporaryDirectory(prefix="agent-eval-hook-") as cwd:
        try:
            done = subprocess.run(
                command,
                shell=True,
                input=json.dumps(event),
                capture_output=True,
                text=True,
                cwd=cwd,
                env={**env, "CLAUDE_PROJECT_DIR": cwd},
                timeout=HOOK_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return False, f"no answer within {HOOK_TIMEOUT_S:.0f}s"
    if done.returncode == 2:  # Claude Code treats exit 2 as a block
        return True, None
    if done.returncode != 0:
        return False, f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    try:
        output = json.loads(done.stdout) if done.stdout.strip() else {}
    except ValueError:
        return False, f"stdout is not JSON: {done.stdout.strip()[:200]}"
    specific = output.get("hookSpecificOutput") if isinstance(output, dict) else None
    decision = specific.get("permissionDecision") if isinstance(specific, dict) else None
    return decision == "deny", None
