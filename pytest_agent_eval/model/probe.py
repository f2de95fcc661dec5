"""The stand-in models of the block probe (:func:`pytest_agent_eval.run.probe.prove_block`): each asks for one
shell call of the tool's CLI, then ends the turn. An agent's ``block_probe`` picks the one for the API it speaks.

:class:`MessagesProbe` answers the Messages API in the shell tool it is given (Claude Code's ``Bash``; OpenCode's
``bash``); :class:`TurnProbe` decides on the turn the model server reads from a request of another API and speaks
back in the agent's tools (:mod:`.speech`: Codex CLI's ``exec_command{cmd}``, Gemini CLI's
``run_shell_command``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .scripted import Turn
from .sse import Reply, tool_use


class MessagesProbe:
    """Asks for one shell call of ``command`` over the Messages API, then ends the turn."""

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


class TurnProbe:
    """Asks for one shell call of ``command`` (in the common vocabulary: the agent's speech renders it); once its
    result is in, ends the turn."""

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
        raise ValueError("this block probe answers an API whose requests an agent's speech reads, not the Messages API")
