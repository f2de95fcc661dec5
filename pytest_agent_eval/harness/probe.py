"""Prove the CLI block through Claude Code itself: a short session whose Bash call of the tool must come back
denied by the harness's hook.

:func:`pytest_agent_eval.harness.isolation.self_check` calls the hook program directly; that proves the
program, not that the CLI runs it under the flags and sandbox a run gets (a settings source that is skipped, a
hook the sandbox cannot start). This probe starts the real CLI, in the run's sandbox, with the run's settings,
against a one-purpose stand-in model on loopback that asks for exactly that Bash call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.harness.drivers import STANDIN_API_KEY
from pytest_agent_eval.harness.drivers.headless import HeadlessOptions, run_headless
from pytest_agent_eval.harness.isolation import IsolationError
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.model.server import serve
from pytest_agent_eval.model.sse import Reply, tool_use

PROBE_TIMEOUT_S = 120.0
DENIAL_MARK = "agent-eval: the `{cli}` CLI is not available"  # the hook's permissionDecisionReason


class _ProbeModel:
    """Asks for one Bash call of the tool, then ends the turn."""

    stand_in_model = "stand-in-block-probe"

    def __init__(self, command: str) -> None:
        self.command = command

    def describe(self) -> str:
        return f"block probe: one Bash call `{self.command}`"

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        if not request.get("tools"):
            return Reply.text("OK.")  # the CLI's side requests (titles, summaries)
        if '"tool_result"' in json.dumps(request.get("messages") or []):
            return Reply.text("probe done")
        return Reply([tool_use("Bash", {"command": self.command, "description": "agent-eval block probe"})])


def prove_block(options: HeadlessOptions, cli: str, *, cwd: Path, env: Mapping[str, str], out_dir: Path) -> None:
    """Run the probe session; raise IsolationError unless the CLI ran the Bash call through the hook, which
    denied it. ``options`` are the run's (claude, settings, sandbox); the model is the probe's own."""
    command = f"{cli} --version"
    empty = out_dir / "mcp-empty.json"
    out_dir.mkdir(parents=True, exist_ok=True)
    empty.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    with serve(_ProbeModel(command)) as server, ExitStack() as stack:
        probe_env = {**env, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": STANDIN_API_KEY}
        probe = replace(options, mcp_config=empty, timeout_s=PROBE_TIMEOUT_S, max_budget_usd=1.0)
        if probe.sandbox is not None:  # no network: carry the probe's port in, instead of the run's model or API
            relay = stack.enter_context(carried(server.url))
            # and show its MCP file: of the run folder the sandbox shows only the files the CLI is given
            readable = (*probe.sandbox.readable, empty)
            probe = replace(probe, sandbox=replace(probe.sandbox, relay=relay, readable=readable))
        record = run_headless(["agent-eval block probe"], label="block-probe", out_dir=out_dir, cwd=cwd,
                              env=probe_env, options=probe)  # fmt: skip
    calls = [c for c in read_segments(record.segments).calls if c.name == "Bash"]
    results = [c.result.text for c in calls if c.result is not None]
    denial = DENIAL_MARK.format(cli=cli)
    if not results:
        raise IsolationError(f"block probe: Claude Code never ran the Bash call `{command}` ({record.segments[0]})")
    if not any(denial in text for text in results):
        raise IsolationError(
            f"block probe: Claude Code ran `{command}` and the hook did not deny it; the agent saw: "
            f"{results[0][:300]!r} ({record.segments[0]})"
        )
