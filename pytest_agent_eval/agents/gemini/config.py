"""Gemini CLI's run configuration for one attempt: its ``~/.gemini`` (settings and deny policy), its command line.

Gemini CLI reads its settings from ``~/.gemini/settings.json`` and its user policies from ``~/.gemini/policies/``,
and writes its sessions under ``~/.gemini/tmp/<project>/chats/``. Each attempt's HOME is renewed by the harness, so
each attempt gets a fresh ``.gemini``, written before the attempt's agent runs; ``settings.json`` and the policy file
are then bound read-only into the sandbox (:func:`protected_files`): a turn cannot loosen what the next one runs
under.

- The model is the harness's model URL (``GOOGLE_GEMINI_BASE_URL``), reached with a placeholder key
  (``GEMINI_API_KEY``; a real key stays outside the sandbox, with the forwarder) and ``security.auth.selectedType =
  "gemini-api-key"``; one attempt per request (``general.maxAttempts = 1``, no retry of fetch errors): the harness
  retries attempts, and an unreachable model must fail the turn, not be retried for minutes.
- Usage statistics, telemetry and auto-update off; ``-m`` always names the model (the default ``auto`` adds
  routing requests).
- The with-arm's retrieval tool is ``mcpServers.NAME`` with ``trust: true`` (its calls are not confirmed).
- Both arms get a policy file denying the tool's CLI to ``run_shell_command`` (``commandPrefix``; it holds under
  ``--yolo``), whose ``denyMessage`` is the harness's deny reason, so that the contamination metric recognises the
  refusal (``RetrievalTool.deny_marker``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pytest_agent_eval.agents.base import McpServer
from pytest_agent_eval.agents.gemini.transcript import SHELL_TOOL
from pytest_agent_eval.harness.untrusted import replace_files

GEMINI_DIR = ".gemini"  # inside the agent's HOME
SETTINGS_FILE = "settings.json"
POLICY_FILE = Path("policies") / "agent-eval-deny.toml"
KEY_VAR, BASE_URL_VAR = "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"
STANDIN_API_KEY = "agent-eval-local-stand-in"
# A deny rule's priority: high in the user tier (a rule's priority is 0-999 within its tier).
DENY_PRIORITY = 900
# Flags of every turn: events on stdout, every tool call approved (the policy still denies), the copy of the corpus
# trusted for this session (no trust prompt).
TURN_FLAGS = ("--output-format", "stream-json", "--yolo", "--skip-trust")


def gemini_dir(home: Path) -> Path:
    """Where Gemini CLI keeps its settings and sessions for an attempt whose HOME is ``home``."""
    return Path(home) / GEMINI_DIR


def settings_json(mcp_servers: Sequence[McpServer]) -> str:
    """Gemini CLI's ``settings.json``: the API key's auth, nothing reaching outside, no retries, the MCP servers."""
    settings: dict = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "maxAttempts": 1,
            "retryFetchErrors": False,
        },
    }
    if mcp_servers:
        settings["mcpServers"] = {
            mcp.name: {"command": mcp.command[0], "args": list(mcp.command[1:]), "env": dict(mcp.env), "trust": True}
            for mcp in mcp_servers
        }
    return json.dumps(settings, indent=2) + "\n"


def deny_policy(cli: str, reason: str) -> str:
    """A policy file denying any shell command that starts with ``cli``; the refusal the model gets carries
    ``reason``."""
    return (
        "[[rule]]\n"
        f"toolName = {json.dumps(SHELL_TOOL)}\n"
        f"commandPrefix = {json.dumps(cli)}\n"
        'decision = "deny"\n'
        f"priority = {DENY_PRIORITY}\n"
        f"denyMessage = {json.dumps(reason)}\n"
    )


def write_gemini_dir(home: Path, *, mcp_servers: Sequence[McpServer], denied_cli: str, deny_reason: str) -> Path:
    """Write ``~/.gemini``'s settings and policy inside ``home`` and return the folder. Each file is written anew and
    renamed into place, never through a link, and no folder on the way may be one
    (:func:`~pytest_agent_eval.harness.untrusted.replace_files`): the harness writes them again for the block probe
    and for every attempt, into a HOME an agent may have run in."""
    folder = gemini_dir(home)
    files = {SETTINGS_FILE: settings_json(mcp_servers), POLICY_FILE: deny_policy(denied_cli, deny_reason)}
    replace_files(home, folder, files)
    return folder


def protected_files(home: Path) -> list[Path]:
    """The files of an attempt's ``~/.gemini`` the agent may read but not change (bound read-only)."""
    folder = gemini_dir(home)
    return [folder / SETTINGS_FILE, folder / POLICY_FILE]


def turn_command(gemini: str | Path, model: str, question: str, session_id: str, resume: bool) -> list[str]:
    """``gemini -p`` for one turn: a new session named ``session_id``, or (``resume``) the next turn of that one."""
    session = ["--resume", session_id] if resume else ["--session-id", session_id]
    return [str(gemini), "-m", model, "-p", question, *TURN_FLAGS, *session]
