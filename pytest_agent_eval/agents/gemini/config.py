"""Gemini CLI's run configuration for one attempt: its ``~/.gemini`` (settings, deny policy, trusted folders), its
environment and its command line, such that neither the corpus repository's own ``.gemini/`` nor what an earlier
turn left in ``~/.gemini`` changes how it runs.

Gemini CLI reads its settings from ``~/.gemini/settings.json`` and its user policies from ``~/.gemini/policies/``,
and writes its sessions under ``~/.gemini/tmp/<project>/chats/``. Each attempt's HOME is renewed by the harness, so
each attempt gets a fresh ``.gemini``. The harness's files (:func:`protected_files`) are written into the item's
config folder, outside anything the agent can write: the policy and the trusted-folders file are named by a flag
and a variable and shown read-only at their own paths, the settings (which Gemini CLI reads only in ``~/.gemini``)
bound read-only over a placeholder there, and Gemini CLI's user configuration (:data:`EMPTY`) bound empty and
read-only the same way (:mod:`pytest_agent_eval.harness.binds`, which checks before every turn that no turn moved
them): a turn can neither loosen what the next one runs under nor leave it context or a policy. The rest of
``~/.gemini`` (sessions, history, a ``trustedFolders.json`` it is never pointed at) is the agent's.

- The model is the harness's model URL (``GOOGLE_GEMINI_BASE_URL``), reached with a placeholder key
  (``GEMINI_API_KEY``; a real key stays outside the sandbox, with the forwarder) and ``security.auth.selectedType =
  "gemini-api-key"``; one attempt per request (``general.maxAttempts = 1``, no retry of fetch errors): the harness
  retries attempts, and an unreachable model must fail the turn, not be retried for minutes.
- Its web tools off (``tools.exclude``: ``google_web_search``, ``web_fetch``, which Gemini CLI runs as requests
  offering the API's own ``googleSearch`` / ``urlContext``).
- Usage statistics, telemetry and auto-update off; ``-m`` always names the model (the default ``auto`` adds
  routing requests).
- The with-arm's retrieval tool is ``mcpServers.NAME`` with ``trust: true`` (its calls are not confirmed).
- Both arms get a policy file denying the tool's CLI to ``run_shell_command`` (``commandPrefix``; it holds under
  ``--yolo``), whose ``denyMessage`` is the harness's deny reason, so that the contamination metric recognises the
  refusal (``RetrievalTool.deny_marker``). It is given as an *admin* policy (``--admin-policy``): the policy engine
  ranks a rule by tier first (admin 5 > user 4 > workspace 3 > extension 2 > default 1, then ``priority``/1000), so
  no user policy an earlier turn wrote into ``~/.gemini/policies/`` can allow the CLI, whatever its priority; the
  flag replaces any ``adminPolicyPaths`` of settings.

What Gemini CLI 0.61.0 would take from the workspace (``<cwd>/.gemini/``), measured in its bundle
(``bundle/chunk-2YTYPKEZ.js``, ``gemini-3HFX2LNT.js``, ``chunk-JDPZ4CE3.js``) and through the real CLI
(tests/test_gemini_cli.py, a repository carrying a hostile ``.gemini/``):

- ``settings.json``: ``_doLoadSettings`` merges defaults, system defaults, user, *workspace*, system settings
  (``mergeSettings``), the workspace's only when the folder is trusted. ``main()`` loads the settings the run's
  config is made from *before* it parses ``--skip-trust`` (which only then sets ``GEMINI_CLI_TRUST_WORKSPACE=true``),
  so at that load the folder's trust is the trusted-folders file's: the harness writes its own, trusting no folder
  (``{"/": "DO_NOT_TRUST"}``), names it (``GEMINI_CLI_TRUSTED_FOLDERS_PATH``) and binds it read-only, and keeps
  ``security.folderTrust.enabled`` on. The workspace's settings (MCP servers, auth, ``tools.*``, ``policyPaths``,
  ``adminPolicyPaths``, hooks, ``tools.discoveryCommand``) are then never merged. An untrusted *session* is no way
  out: it drops ``--yolo`` to the default approval mode, starts no stdio MCP server, and headless it is fatal.
  System settings (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``, merged last) are no way either: they are skipped unless the
  file and every folder above it is owned by root and writable by no one else (``isFileAndDirectorySecureSync``),
  and a higher scope cannot take away a key the workspace adds (``mcpServers`` merge shallowly, hooks concatenate).
- ``policies/*.toml``: not loaded (``disableWorkspacePolicies = true`` in ``resolveWorkspacePolicyState``).
- ``.env`` (``<dir>/.gemini/.env``, else ``<dir>/.env``, from the cwd up, then ``~/.gemini/.env``): once the session
  is trusted, ``validateAuthMethod`` loads it (``loadEnvironment``) into the process for every variable not set
  yet; measured, ``GEMINI_SYSTEM_MD`` replaced the system prompt and ``HTTPS_PROXY`` took the model's requests
  elsewhere; ``GEMINI_RESTRICTED_MODE`` and ``GEMINI_CLI_HOME`` ended the turn. The variables that would turn the
  run are set by the harness (:data:`PINNED_ENV`, :func:`home_env`), and so, empty, are those that would run code
  of the agent's before the jail's Landlock domain or in an MCP server (``LD_PRELOAD``, ``PERL5OPT``,
  ``NODE_OPTIONS``…: :data:`~pytest_agent_eval.harness.jail.PRE_DOMAIN_ENV`; measured, a ``.gemini/.env`` a turn
  wrote made the next turn's jailed shell load a Perl module that opened Gemini CLI's ``/proc/<pid>/environ``,
  tests/test_turn_neighbours.py); any other a repository's ``.env`` sets reaches Gemini CLI and its shells, as for
  a user.
- Extensions (``~/.gemini/extensions``, which an earlier turn may write; measured, one's context reached the
  requests): off (``--extensions none``).
- ``GEMINI.md``, skills (``.gemini/skills``), agents (``.gemini/agents``), commands (``.gemini/commands``): the
  repository's context, like Claude Code's ``CLAUDE.md``; left alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import McpServer
from pytest_agent_eval.agents.gemini.transcript import SHELL_TOOL
from pytest_agent_eval.harness.binds import seal_home
from pytest_agent_eval.harness.jail import PRE_DOMAIN_ENV

GEMINI_DIR = ".gemini"  # inside the agent's HOME
SYSTEM_DIR = Path("/etc/gemini-cli")  # the machine's system settings and admin policies
SETTINGS_FILE = "settings.json"
# The harness's own files beside Gemini CLI's: outside policies/ (the deny is given as an admin policy, not loaded
# again as a user one) and under names Gemini CLI does not look for by itself.
POLICY_FILE = Path("agent-eval") / "deny.toml"
TRUSTED_FOLDERS_FILE = Path("agent-eval") / "trusted-folders.json"
KEY_VAR, BASE_URL_VAR = "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"
TRUSTED_FOLDERS_VAR = "GEMINI_CLI_TRUSTED_FOLDERS_PATH"
STANDIN_API_KEY = "agent-eval-local-stand-in"
# Gemini CLI's web tools, which have the API search or fetch on its side (the model boundary refuses them too).
WEB_TOOLS = ("google_web_search", "web_fetch")
# A deny rule's priority within its tier (0-999): the admin tier's, above any user or workspace rule.
DENY_PRIORITY = 900
# No folder trusted by the file (the longest matching path decides): the session's trust is --skip-trust's alone.
NO_TRUSTED_FOLDER = {"/": "DO_NOT_TRUST"}
# What a repository's .env (loaded once the session is trusted, for each variable not set yet) would otherwise set:
# the system prompt (or a copy of it written out), the route of the model's requests, the session's trust (an
# untrusted one starts no MCP server and drops --yolo), what runs before the jail's domain or in an MCP server
# (harness.jail.PRE_DOMAIN_ENV, pinned empty). Gemini CLI's home is pinned too (home_env).
PINNED_ENV = {
    **dict.fromkeys(PRE_DOMAIN_ENV, ""),
    "GEMINI_SYSTEM_MD": "false",  # "false": Gemini CLI's own system prompt
    "GEMINI_WRITE_SYSTEM_MD": "false",
    "HTTPS_PROXY": "",  # the first set of the four is the proxy
    "https_proxy": "",
    "HTTP_PROXY": "",
    "http_proxy": "",
    "GEMINI_RESTRICTED_MODE": "false",
}
# Flags of every turn: events on stdout, every tool call approved (the policy still denies), the copy of the corpus
# trusted for this session (no trust prompt), no extension.
TURN_FLAGS = ("--output-format", "stream-json", "--yolo", "--skip-trust", "--extensions", "none")


def gemini_dir(home: Path) -> Path:
    """Where Gemini CLI keeps its settings and sessions for an attempt whose HOME is ``home``."""
    return Path(home) / GEMINI_DIR


def settings_json(mcp_servers: Sequence[McpServer]) -> str:
    """Gemini CLI's ``settings.json``: the API key's auth, nothing reaching outside, no retries, the MCP servers."""
    settings: dict = {
        # folder trust on: the settings load before --skip-trust then sees the workspace untrusted (module docstring)
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
        # its web tools off: they reach the model as the API's own googleSearch / urlContext (docs/agents/gemini.md)
        "tools": {"exclude": list(WEB_TOOLS)},
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


# What Gemini CLI reads as its user's configuration in ~/.gemini besides its settings: global context, custom
# commands, agents, skills, user policies, extensions, a .env: each an empty file or folder, read-only, so no turn
# installs instructions, a command or a policy for the next (docs/agents/gemini.md).
EMPTY = {"GEMINI.md": "", ".env": "", "commands": None, "agents": None, "skills": None, "policies": None,
         "extensions": None}  # fmt: skip
USER_SKILLS = ".agents/skills"  # inside the agent's HOME


def write_gemini_dir(
    source: Path, home: Path, *, mcp_servers: Sequence[McpServer], denied_cli: str, deny_reason: str
) -> tuple[tuple[Path, Path], ...]:
    """Write Gemini CLI's settings (and its user configuration, empty) into the harness folder ``source`` with
    placeholders for them in ``home``'s ``.gemini`` (:func:`~pytest_agent_eval.harness.binds.seal_home`: no link
    followed), and the deny policy and trusted-folders file beside them (named by a flag and a variable, shown at
    their own paths); returns the binds (source, destination). The harness writes them again for the block probe and
    for every attempt, into a HOME an agent may have run in."""
    files: dict[str, Any] = {f"{GEMINI_DIR}/{SETTINGS_FILE}": settings_json(mcp_servers)}
    files.update({f"{GEMINI_DIR}/{name}": value for name, value in EMPTY.items()})
    files[USER_SKILLS] = None
    binds = seal_home(source / "home", home, files)
    for path, text in ((POLICY_FILE, deny_policy(denied_cli, deny_reason)),
                       (TRUSTED_FOLDERS_FILE, json.dumps(NO_TRUSTED_FOLDER) + "\n")):  # fmt: skip
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text, encoding="utf-8")
    return binds


def protected_files(source: Path) -> list[Path]:
    """The harness's settings, deny policy and trusted-folders files for Gemini CLI, in its folder ``source``."""
    return [source / "home" / GEMINI_DIR / SETTINGS_FILE, source / POLICY_FILE, source / TRUSTED_FOLDERS_FILE]


def home_env(home: Path, source: Path) -> dict[str, str]:
    """The variables naming the attempt's files: the harness's trusted-folders file, and HOME as Gemini CLI's home
    (``GEMINI_CLI_HOME``), so that no ``.env`` names others (module docstring)."""
    return {TRUSTED_FOLDERS_VAR: str(source / TRUSTED_FOLDERS_FILE), "GEMINI_CLI_HOME": str(home)}


def turn_command(
    gemini: str | Path, model: str, question: str, session_id: str, *, resume: bool, policy: Path
) -> list[str]:
    """``gemini -p`` for one turn (its deny ``policy`` given as an admin policy): a new session named
    ``session_id``, or (``resume``) the next turn of that one."""
    session = ["--resume", session_id] if resume else ["--session-id", session_id]
    return [str(gemini), "-m", model, "-p", question, *TURN_FLAGS, "--admin-policy", str(policy), *session]
