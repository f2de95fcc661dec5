"""Claude Code's description: :class:`ClaudeCode`, and :data:`CLAUDE_CODE`, the built-in agent.

It speaks the Messages API, taking its endpoint and key from ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``;
its MCP servers and the PreToolUse hook that denies the tool's CLI are files it is given by flags
(``--mcp-config``, ``--settings``, with every other settings source off: :mod:`.headless`), written into the
item's run folder; it is driven headless (``claude -p``, stream-json, ``--resume`` for later turns:
:mod:`.headless`) or interactive (the TUI in tmux, scored from its session file: :mod:`.tmux`); its transcripts
are read by :mod:`.transcript`. Each Bash command runs behind ``$CLAUDE_CODE_SHELL_PREFIX``, where the sandbox
puts its jail.

This module loads no more than the description; its methods load the rest when called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.base import (
    HEADLESS,
    INTERACTIVE,
    AgentConfig,
    AgentSetup,
    CodingAgent,
    Drive,
    ModelApi,
)

if TYPE_CHECKING:
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.transcript import Session
    from pytest_agent_eval.transcript.sample import Sample

# What every Claude Code process runs with, whatever drives it (besides the retrieval tool's own RetrievalTool.env):
# no telemetry or updates, bypassPermissions allowed as root, MCP tools offered directly, Grep/Glob not hidden
# by tasks.
AGENT_ENV = {
    "DO_NOT_TRACK": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "IS_SANDBOX": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "CLAUDE_CODE_ENABLE_TASKS": "false",
}
# No retries of the CLI's own, as Codex and Gemini CLI are configured: the harness's model server retries the model's
# transient errors for every agent, and what it cannot retry (its own port unreachable, a request left unanswered, a
# stream cut after it reached the agent) ends the turn rather than wait out Claude Code's 10 retries' back-off
# (docs/model-boundary.md). CLAUDE_CODE_MAX_RETRIES in the harness's environment still sets it (passed_env).
OWN_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "0"}
# The CLI only needs *a* key to talk to the harness's loopback server (a stand-in, or the forwarder that adds the
# real one outside the sandbox); a real key never goes into the agent's environment. Nor does any other way to
# one: CLAUDE_CONFIG_DIR (the user's own hooks and apiKeyHelper), CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_AUTH_TOKEN,
# CLAUDE_CODE_USE_BEDROCK or _VERTEX are not in the allow-list (harness.drivers.ALLOWED_ENV).
STANDIN_API_KEY = "sk-ant-agent-eval-local-stand-in"
# What Claude Code reads as its user's configuration in ~/.claude besides settings: memory, subagents, commands, skills,
# output styles. ``--setting-sources ""`` keeps 2.1.332 from reading them (tests/test_turn_seal.py); they are bound
# empty and read-only anyway, as every agent's global configuration is (docs/sandbox.md). Its state (~/.claude.json,
# projects/, todos/) stays the agent's.
EMPTY_USER_CONFIG = {".claude/CLAUDE.md": "", **dict.fromkeys(
    (".claude/agents", ".claude/commands", ".claude/skills", ".claude/output-styles"))}  # fmt: skip


@dataclass(frozen=True)
class ClaudeCode(CodingAgent):
    """Claude Code, pinned to the release the harness was checked with (its engines field says node>=22; it runs
    on 20)."""

    name: str = "claude-code"
    title: str = "Claude Code"
    package: str = "@anthropic-ai/claude-code"
    version: str = "2.1.332"
    executable: str = "claude"
    api: ModelApi = "messages"
    stand_in: str | None = "claude-code"  # the scripted stand-in speaks its tools (CodingAgent.stand_in)
    modes: tuple[str, ...] = (HEADLESS, INTERACTIVE)
    runtimes: tuple[str, ...] = ("node",)
    passed_env: frozenset[str] = frozenset({"CLAUDE_CODE_MAX_RETRIES"})  # the CLI's own retry knob
    shell_prefix_var: str | None = "CLAUDE_CODE_SHELL_PREFIX"
    # the machine's managed settings: hooks, or a disableAllHooks that would switch the deny off
    managed_paths: tuple[Path, ...] = field(default=(Path("/etc/claude-code"),))

    def environment(self, model_url: str) -> dict[str, str]:
        return {**AGENT_ENV, "ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": STANDIN_API_KEY}

    def process_environment(self, base: Mapping[str, str], model_url: str) -> dict[str, str]:
        return {**OWN_RETRIES, **super().process_environment(base, model_url)}  # the harness's own setting wins

    def configure(self, setup: AgentSetup) -> AgentConfig:
        from pytest_agent_eval.agents.claude_code.deny import write_hook_settings
        from pytest_agent_eval.harness.binds import HOME_FILES, seal_home

        folder = setup.config_dir
        folder.mkdir(parents=True, exist_ok=True)
        settings = write_hook_settings(folder / "hook-settings.json", setup.denied_cli)
        servers = {
            server.name: {
                "type": "stdio", "command": server.command[0], "args": list(server.command[1:]), "env": dict(server.env)
            }
            for server in setup.mcp_servers
        }  # fmt: skip
        mcp = folder / (f"mcp-{'-'.join(servers)}.json" if servers else "mcp-empty.json")
        mcp.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n", encoding="utf-8")
        # its user configuration, empty and read-only: no turn installs memory, an agent or a command for the next
        binds = seal_home(folder / HOME_FILES, setup.home, dict(EMPTY_USER_CONFIG))
        return AgentConfig(files={"settings": settings, "mcp": mcp}, readable=(settings, mcp), binds=binds)

    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        from pytest_agent_eval.agents.claude_code.deny import hook_problems

        return hook_problems(config.files["settings"], cli, env, proven)

    def block_probe(self, command: str) -> Any:
        from pytest_agent_eval.model.probe import MessagesProbe

        return MessagesProbe(command)

    def run_session(self, run: Drive) -> RunRecord:
        from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, run_headless

        options, files = run.options, run.config.files
        headless = HeadlessOptions(
            claude=str(run.build.bin),
            mcp_config=files["mcp"],
            settings=files["settings"],
            model=options.model,
            effort=options.effort,
            max_budget_usd=options.max_budget_usd,
            timeout_s=options.timeout_s,
            stall_s=options.stall_s,
            sandbox=options.sandbox,
        )
        where = {"label": run.label, "out_dir": run.out_dir, "cwd": run.cwd, "env": run.env}
        if run.mode == INTERACTIVE:
            from pytest_agent_eval.agents.claude_code.tmux import TmuxOptions, run_tmux

            return run_tmux(run.questions, **where, options=TmuxOptions(run=headless))
        return run_headless(run.questions, **where, options=headless)

    def recognise(self, sample: Sample) -> str | None:
        from pytest_agent_eval.agents.claude_code.transcript import recognise

        return recognise(sample)

    def read_record(self, files: Sequence[Path], kind: str, companion: Path | None = None) -> list[Session]:
        """A stream-json run's segments, or a session file (its subagents' files found beside it)."""
        from pytest_agent_eval.agents.claude_code.transcript import read_segments
        from pytest_agent_eval.transcript import fast_decoding_pays

        return [read_segments(files, fast_decoding_pays(files))]

    def read_transcript(self, segments: Sequence[Path]) -> Session:
        from pytest_agent_eval.agents.claude_code.transcript import read_segments

        return read_segments(segments)

    def cassette(self, segments: Sequence[Path]) -> Any:
        """Its stream-json segments replayed over the Messages API, in its own tools (the common vocabulary)."""
        from pytest_agent_eval.model.cassette import CassetteBackend

        return CassetteBackend(segments, self)

    def read_interactive(self, path: Path) -> Session:
        """An interactive session file (``~/.claude/projects/<project>/<session>.jsonl``), or the newest in a
        project folder, its subagents' files found beside it."""
        from pytest_agent_eval.agents.claude_code.transcript import find_session_file, read_session_file
        from pytest_agent_eval.transcript import fast_decoding_pays

        session_file = find_session_file(Path(path))
        return read_session_file(session_file, fast_decoding_pays([session_file]))


CLAUDE_CODE = ClaudeCode()
