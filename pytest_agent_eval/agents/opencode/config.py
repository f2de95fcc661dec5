"""OpenCode's run configuration for one attempt: its config file, its environment, its command line.

OpenCode merges its config from many places, later ones winning key by key: the global config (under
``$XDG_CONFIG_HOME``), ``$OPENCODE_CONFIG``, every ``opencode.json(c)`` found upward from the working directory,
``.opencode/`` folders there (their config, agents, commands and plugins), ``$OPENCODE_CONFIG_CONTENT``, the
machine's managed config (``/etc/opencode``), and last ``$OPENCODE_PERMISSION`` over the permissions. A corpus
repository may carry its own ``opencode.json`` or ``.opencode/``: it would override the harness's config (another
provider, other MCP servers, a looser permission). So:

- ``OPENCODE_DISABLE_PROJECT_CONFIG=1``: OpenCode's own switch, which skips the project's ``opencode.json``,
  ``.opencode/`` folders and instruction files (``AGENTS.md``, ``CLAUDE.md``) of the working directory upward;
- ``OPENCODE_PERMISSION`` repeats the deny, merged last (over any config OpenCode still read);
- the config itself (``OPENCODE_CONFIG``) is written outside the workspace and shown read-only; OpenCode's global
  config folders in the attempt's HOME (:data:`GLOBAL_CONFIG_DIRS`) are a folder of the harness's holding only the
  ``.gitignore`` OpenCode writes, bound read-only over them (:func:`home_files`,
  :mod:`pytest_agent_eval.harness.binds`), so no turn leaves instructions, an agent, a plugin or an MCP server there
  for the next;
- ``--pure``: no external plugins (an offline first run would try to install some from npm).

The config points the ``anthropic`` provider at the harness's model URL (the Messages API, ``/v1``), asks for
``anthropic/claude-sonnet-4-5`` (also as the small model, for its session title), turns sharing and updates off,
gives the with-arm's MCP servers as ``"mcp": {NAME: {"type": "local", "command": [...]}}`` (OpenCode names their
tools ``NAME_tool``), and denies the tool's CLI to the ``bash`` tool. OpenCode's refusal lists the rules relevant
to the call; one of them is a deny rule whose pattern is the harness's deny reason (it matches no command but
itself), so that the refusal the model reads carries the reason and its mark (``RetrievalTool.deny_marker``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import McpServer

CONFIG_FILE = "opencode.json"
MODEL = "anthropic/claude-sonnet-4-5"
# The key the provider sends: a placeholder; a real key stays outside the sandbox (the forwarder adds it).
STANDIN_API_KEY = "sk-ant-agent-eval-local-stand-in"
# The agent ``opencode run`` uses: its resolved permissions are what check_deny reads.
RUN_AGENT = "build"
# The XDG folders OpenCode keeps its config, data (the session database, logs), cache and state in, in the HOME.
XDG_DIRS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_STATE_HOME": ".local/state",
}
# What every OpenCode process runs with: no model list fetched, no updates, no sharing, no project config, no
# Claude Code files (~/.claude) read, no LSP servers downloaded.
AGENT_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "DO_NOT_TRACK": "1",
}


def bash_permission(cli: str, reason: str) -> dict[str, str]:
    """The ``bash`` tool's rules: any command allowed, but one starting with ``cli`` denied (OpenCode matches each
    command of a pipeline or list on its own; the last matching rule wins). The reason's own rule denies only a
    command that is the reason itself: it is there so that OpenCode's refusal, which lists the rules, says why."""
    return {"*": "allow", reason: "deny", f"{cli}*": "deny"}


def permission(cli: str, reason: str) -> dict[str, Any]:
    return {"bash": bash_permission(cli, reason), "webfetch": "deny", "websearch": "deny"}


def config_json(model_url: str, mcp_servers: Sequence[McpServer], denied_cli: str, deny_reason: str) -> dict[str, Any]:
    """OpenCode's config: the harness's model server as its only provider, nothing reaching outside."""
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "model": MODEL,
        "small_model": MODEL,
        "enabled_providers": ["anthropic"],
        "autoupdate": False,
        "share": "disabled",
        "provider": {"anthropic": {"options": {"baseURL": model_url.rstrip("/") + "/v1", "apiKey": STANDIN_API_KEY}}},
        "permission": permission(denied_cli, deny_reason),
        "mcp": {
            mcp.name: {"type": "local", "command": list(mcp.command), "environment": dict(mcp.env), "enabled": True}
            for mcp in mcp_servers
        },
    }
    return config


def write_config(folder: Path, config: Mapping[str, Any]) -> Path:
    """Write the config into ``folder`` (the harness's, outside the workspace) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONFIG_FILE
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


# OpenCode's global config folders (ConfigPaths.directories of 1.18.33: $XDG_CONFIG_HOME/opencode, and ~/.opencode
# whatever OPENCODE_DISABLE_PROJECT_CONFIG says), each of which it reads a config, AGENTS.md, agents, commands,
# plugins and tools from.
GLOBAL_CONFIG_DIRS = (f"{XDG_DIRS['XDG_CONFIG_HOME']}/opencode", ".opencode")
# What OpenCode writes into each config folder unless it is there already (Config.ensureGitignore), failing the run
# on a read-only folder; the dependency install it then starts there only logs a warning when it fails.
GITIGNORE = "\n".join(["node_modules", "package.json", "package-lock.json", "bun.lock", ".gitignore"])


def home_files() -> dict[str, Any]:
    """What the harness shows in the attempt's HOME for OpenCode (paths relative to HOME): its global config
    folders, holding nothing but the ``.gitignore`` OpenCode would write; the XDG folders around them (data, cache,
    state) are the agent's."""
    return {folder: {".gitignore": GITIGNORE} for folder in GLOBAL_CONFIG_DIRS}


def environment(home: Path, config_file: Path, denied_cli: str, deny_reason: str) -> dict[str, str]:
    """The attempt's own XDG folders in its ``home``, the harness's config, and the deny once more, last."""
    env = {var: str(Path(home) / relative) for var, relative in XDG_DIRS.items()}
    return {
        **env,
        "OPENCODE_CONFIG": str(config_file),
        "OPENCODE_PERMISSION": json.dumps(permission(denied_cli, deny_reason)),
    }


def run_command(opencode: str | Path, question: str, session_id: str | None = None) -> list[str]:
    """``opencode run`` for one turn: a new session, or (``session_id``) the next turn of that one. The question is
    one argument after ``--`` (no word of it taken for a flag). OpenCode sends it to the model in double quotes
    (it quotes a command-line word holding a space, escaping its own quotes); given word by word it would not, but
    its argument parser turns a word that reads as a number into one, and fails on it."""
    resume = ["--session", session_id] if session_id else []
    return [str(opencode), "run", "--format", "json", "--pure", *resume, "--", question]
