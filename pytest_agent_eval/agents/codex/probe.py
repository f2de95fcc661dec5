"""The block probe's model for Codex: one shell call of the tool's CLI, then the end of the turn.

It speaks the Responses API as the scripted stand-in does (the server reads a request into a :class:`Turn` and
renders the reply, :mod:`pytest_agent_eval.model.responses`), so the call reaches Codex as ``exec_command{cmd}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agent_eval.model.scripted import Turn
from pytest_agent_eval.model.sse import Reply, tool_use


class ProbeModel:
    """Asks for one shell call of ``command``; once its result is in, ends the turn."""

    stand_in_model = "stand-in-block-probe"

    def __init__(self, command: str) -> None:
        self.command = command

    def describe(self) -> str:
        return f"block probe: one shell call `{self.command}`"

    def decide(self, turn: Turn) -> Reply:
        if turn.steps:
            return Reply.text("probe done")
        return Reply([tool_use("Bash", {"command": self.command})])

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        raise ValueError("Codex's block probe answers the Responses API only")
