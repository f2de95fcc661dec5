"""Claude Code's deny of the retrieval tool's CLI: a PreToolUse hook on Bash, installed by a ``--settings`` file,
which runs :mod:`.hook`; and the check that the hook denies what it must before any run.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HOOK_MODULE = "pytest_agent_eval.agents.claude_code.hook"
HOOK_TIMEOUT_S = 30.0


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


def hook_problems(settings: Path, cli: str, env: Mapping[str, str], proven_hooks: set[str]) -> list[str]:
    """What is wrong with the PreToolUse hook ``settings`` installs: each must deny an absolute-path call and a
    ``VAR=1 cli …`` call and allow a mere mention (``grep cli src/``). A hook command already in
    ``proven_hooks`` passed these probes earlier in this process and is not run again (each probe starts an
    interpreter); commands that pass are added to it."""
    problems: list[str] = []
    commands = _bash_hook_commands(Path(settings))
    if not commands:
        problems.append(f"hook layer: {settings} installs no PreToolUse hook for Bash")
    probes = [
        (f"/opt/agent-eval-probe/bin/{cli} explore probe", True),
        (f"VAR=1 {cli} explore probe", True),
        (f"grep {cli} src/", False),
    ]
    for command in commands:
        if command in proven_hooks:
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
            proven_hooks.add(command)
    return problems


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


def _run_hook(command: str, bash_command: str, env: Mapping[str, str]) -> tuple[bool, str | None]:
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
