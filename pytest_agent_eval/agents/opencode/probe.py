"""The block probe's model for OpenCode: one ``bash`` call of the tool's CLI, then the end of the turn.

It speaks the Messages API in OpenCode's tool names; OpenCode's title request (no tools) gets a title."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_agent_eval.model.opencode import SHELL_TOOL
from pytest_agent_eval.model.sse import Reply, tool_use


class ProbeModel:
    """Asks for one ``bash`` call of ``command``; once its result is in, ends the turn."""

    stand_in_model = "stand-in-block-probe"

    def __init__(self, command: str) -> None:
        self.command = command

    def describe(self) -> str:
        return f"block probe: one bash call `{self.command}`"

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        if not request.get("tools"):
            return Reply.text("Block probe")
        if '"tool_result"' in json.dumps(request.get("messages") or []):
            return Reply.text("probe done")
        return Reply([tool_use(SHELL_TOOL, {"command": self.command, "description": "agent-eval block probe"})])
