"""Codex CLI's run configuration for one attempt: its ``CODEX_HOME``, its command line, its environment.

Codex reads everything from ``$CODEX_HOME`` (``config.toml``, ``rules/*.rules``) and writes its sessions there
(the rollout). Each attempt gets a fresh one inside the agent's HOME, which the harness renews for every attempt
(never under ``$TMPDIR``: Codex's own sandbox refuses that, and it warns it cannot create its helper binaries
there). The harness's ``config.toml`` and rules folder are written into the item's config folder, outside anything
the agent can write, and bound read-only over placeholders in ``CODEX_HOME``, as are an empty ``AGENTS.md``,
``AGENTS.override.md``, ``agents/``, ``prompts/``, ``skills/`` and ``~/.agents/skills`` (:func:`home_files`); the
sandbox checks, before every turn, that no turn moved them (:mod:`pytest_agent_eval.harness.binds`), so a turn can
neither loosen what the next one runs under nor install instructions for it.

- The model provider is the harness's model URL, speaking the Responses API (``wire_api = "responses"``), with no
  retries of Codex's own (the harness retries attempts; a CLI retry would be an unexplained second request).
- The model is one Codex has no metadata for (the stand-in's name): for every model it knows, Codex offers MCP
  tools only behind a ``tool_search`` tool; for an unknown one it offers the MCP namespace in the first request.
- ``approval_policy = "never"`` and ``sandbox_mode = "danger-full-access"``: the harness's bubblewrap sandbox seals
  the process tree; Codex's own would nest inside it to no purpose. Web search, analytics and plugins off.
- The with-arm's retrieval tool is ``[mcp_servers.NAME]`` with ``required = true`` (else Codex may send the first
  request before the server has listed its tools: the with-arm then starts as a without-arm).
- Both arms get a rules file forbidding the tool's CLI (``prefix_rule``), whose justification is the harness's
  deny reason, so that the contamination metric recognises the refusal (``RetrievalTool.deny_marker``).
- The corpus repository's own ``.codex/`` (``config.toml``, ``rules/``, ``hooks.json``, ``agents/``) is an
  *untrusted project's*, which Codex 0.171.0 loads as a disabled layer: it takes a project layer only for a
  directory that a ``[projects."<path>"] trust_level = "trusted"`` of this file names, and this file names none.
  Measured through the harness's sandbox (tests/test_codex_cli.py holds it): Codex warns ``Untrusted project-local
  configuration is disabled``, and none of the layer's model, approval, sandbox, web search, MCP server, hooks, rules
  or agent roles takes effect; with the path marked trusted, its model, MCP server, rules and roles did. ``codex
  exec --trust`` from the agent's shell cannot add the mark: this file is read-only there (``failed to persist
  config``). Skills (``.codex/skills``, ``.agents/skills``) and ``AGENTS.md`` are read as the repository's
  instructions, as Claude Code reads ``CLAUDE.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import McpServer
from pytest_agent_eval.harness.binds import seal_home

CODEX_HOME_DIR = ".codex"  # inside the agent's HOME
CONFIG_FILE = "config.toml"
RULES_FILE = Path("rules") / "deny.rules"
PROVIDER = "agent_eval"
# The variable Codex reads its API key from (``env_key``): a placeholder; a real key stays outside the sandbox.
KEY_VAR = "AGENT_EVAL_MODEL_KEY"
STANDIN_API_KEY = "sk-agent-eval-local-stand-in"
# Flags of every ``codex exec``: events on stdout, any folder (the corpus copy is no git repository of Codex's
# trust list). The config file holds the rest.
EXEC_FLAGS = ("--json", "--skip-git-repo-check")


def codex_home(home: Path) -> Path:
    """Where Codex keeps its config and sessions for an attempt whose HOME is ``home``."""
    return Path(home) / CODEX_HOME_DIR


def _toml(value: object) -> str:
    """A TOML value for a string, a list of strings or a table of strings (JSON strings are TOML basic strings)."""
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {json.dumps(str(v))}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(str(value))


def config_toml(model_url: str, model: str, mcp_servers: Sequence[McpServer]) -> str:
    """Codex's ``config.toml``: the harness's model server as its only provider, nothing reaching outside."""
    lines = [
        f"model = {_toml(model)}",
        f"model_provider = {_toml(PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "",
        f"[model_providers.{PROVIDER}]",
        f"name = {_toml(PROVIDER)}",
        f"base_url = {_toml(model_url.rstrip('/') + '/v1')}",
        'wire_api = "responses"',
        f"env_key = {_toml(KEY_VAR)}",
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    for mcp in mcp_servers:
        lines += [
            "",
            f"[mcp_servers.{_toml(mcp.name)}]",
            f"command = {_toml(mcp.command[0])}",
            f"args = {_toml(mcp.command[1:])}",
            f"env = {_toml(mcp.env)}",
            "required = true",
        ]
    return "\n".join(lines) + "\n"


def deny_rules(cli: str, reason: str) -> str:
    """A rules file forbidding any shell command that starts with ``cli``; the refusal the model gets is
    ``reason``."""
    return (
        "prefix_rule(\n"
        f"    pattern = [{json.dumps(cli)}],\n"
        '    decision = "forbidden",\n'
        f"    justification = {json.dumps(reason)},\n"
        ")\n"
    )


# What Codex reads as its user's configuration in CODEX_HOME besides the config and the rules: global instructions,
# its roles, custom prompts and skills (and ~/.agents/skills), and its environment file: each an empty file or
# folder, read-only, so no turn installs instructions or a skill for the next, nor sets its variables. Codex reads
# ``$CODEX_HOME/.env`` at start into its own process, over the variables it was given (but ``CODEX_*``): measured,
# one a turn wrote (``PERL5OPT``) made the next turn's jailed shell load a Perl module of the agent's before its
# Landlock domain, which opened Codex's ``/proc/<pid>/environ`` (docs/agents/codex.md). Its user hooks file
# (``hooks.json``, no hooks) too: Codex runs no hook it was not told to trust, and the trust it would record lies in
# the read-only ``config.toml``, but no turn should leave hooks behind for that to decide.
EMPTY = {
    "AGENTS.md": "",
    "AGENTS.override.md": "",
    ".env": "",
    "hooks.json": '{"hooks": {}}\n',
    "agents": None,
    "prompts": None,
    "skills": None,
}
USER_SKILLS = ".agents/skills"  # inside the agent's HOME


def home_files(
    *, model_url: str, model: str, mcp_servers: Sequence[McpServer], denied_cli: str, deny_reason: str
) -> dict[str, Any]:
    """What the harness shows in the attempt's HOME for Codex (paths relative to HOME): ``config.toml``, the rules
    folder with the deny, and the rest of its user configuration empty."""
    files: dict[str, Any] = {
        f"{CODEX_HOME_DIR}/{CONFIG_FILE}": config_toml(model_url, model, mcp_servers),
        f"{CODEX_HOME_DIR}/{RULES_FILE.parent}": {RULES_FILE.name: deny_rules(denied_cli, deny_reason)},
    }
    files.update({f"{CODEX_HOME_DIR}/{name}": value for name, value in EMPTY.items()})
    files[USER_SKILLS] = None
    return files


def write_codex_home(
    source: Path,
    home: Path,
    *,
    model_url: str,
    model: str,
    mcp_servers: Sequence[McpServer],
    denied_cli: str,
    deny_reason: str,
) -> tuple[tuple[Path, Path], ...]:
    """Write Codex's config, rules and empty user configuration into the harness folder ``source`` and make their
    placeholders in ``home``'s ``CODEX_HOME`` (:func:`~pytest_agent_eval.harness.binds.seal_home`: no link followed);
    returns the binds (source, destination). The harness writes them again for the block probe and for every attempt,
    into a HOME an agent may have run in; the sandbox binds them over the placeholders and checks every turn that
    no turn moved them."""
    files = home_files(model_url=model_url, model=model, mcp_servers=mcp_servers, denied_cli=denied_cli,
                       deny_reason=deny_reason)  # fmt: skip
    return seal_home(source, home, files)


def protected_files(source: Path) -> list[Path]:
    """The harness's config file and rules file for Codex, in its folder ``source`` (bound read-only into
    ``CODEX_HOME``)."""
    return [source / CODEX_HOME_DIR / CONFIG_FILE, source / CODEX_HOME_DIR / RULES_FILE]


def exec_command(codex: str | Path, question: str, thread_id: str | None = None) -> list[str]:
    """``codex exec`` for one turn: a new session, or (``thread_id``) the next turn of that one."""
    resume = ["resume", thread_id] if thread_id else []
    return [str(codex), "exec", *resume, *EXEC_FLAGS, question]
