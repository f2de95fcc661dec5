"""The stand-in model of Claude Code's block probe (:func:`pytest_agent_eval.harness.probe.prove_block`): it asks
for one Bash call of the tool's CLI over the Messages API, then ends the turn."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_agent_eval.model.sse import Reply, tool_use


class ProbeModel:
    """Asks for one Bash call of ``command``, then ends the turn."""

    stand_in_model = "stand-in-block-probe"
    shell = "Bash"  # the shell tool's name (another agent speaking the Messages API names it otherwise)

    def __init__(self, command: str) -> None:
        self.command = command

    def describe(self) -> str:
        return f"block probe: one Bash call `{self.command}`"

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        if not request.get("tools"):
            return Reply.text("OK.")  # the CLI's side requests (titles, summaries)
        if '"tool_result"' in json.dumps(request.get("messages") or []):
            return Reply.text("probe done")
        return Reply([tool_use(self.shell, {"command": self.command, "description": "agent-eval block probe"})])
