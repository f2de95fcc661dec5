"""A fifth agent whose tools are named its own way: OwnCLI (``owncli`` beside this module) offers ``shell_exec``,
``open_file`` and ``search_text`` where Claude Code offers ``Bash``, ``Read`` and ``Grep``. It declares them as its
``stand_in`` (docs/extending.md, "The stand-in model and a new agent"), so that the scripted stand-in asks for them
in its names, and its reader gives them back in the common vocabulary, as the metrics read them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_agent_eval.agents.base import StandIn
from pytest_agent_eval.agents.claude_code.agent import ClaudeCode
from pytest_agent_eval.model.scripted import SpokenTool
from pytest_agent_eval.transcript import Session

OWNCLI = Path(__file__).resolve().parent / "owncli"
TOOLS = (
    SpokenTool("Bash", "shell_exec", (("command", "cmd"),)),
    SpokenTool("Read", "open_file", (("file_path", "path"),)),
    SpokenTool("Grep", "search_text", (("pattern", "query"),)),
)


@dataclass(frozen=True)
class OwnToolsAgent(ClaudeCode):
    name: str = "own-tools-agent"
    title: str = "Own Tools Agent"
    executable: str = "owncli"
    stand_in: str | StandIn | None = StandIn("claude-code", TOOLS)  # noqa: RUF009 (frozen: one object shared is fine)

    def read_transcript(self, segments: Sequence[Path]) -> Session:
        """Its stream-json, its calls renamed into the common vocabulary (``sent_as`` keeps what the model sent)."""
        session = super().read_transcript(segments)
        by_name = {tool.name: tool for tool in TOOLS}
        for call in session.calls:
            tool = by_name.get(call.name)
            if tool is not None:
                call.sent_as = (call.name, call.input)
                call.name, call.input = tool.common, tool.heard(call.input)
        return session


OWN_TOOLS_AGENT = OwnToolsAgent()
UNDECLARED = replace(OWN_TOOLS_AGENT, name="undeclared-tools-agent", stand_in="claude-code")
