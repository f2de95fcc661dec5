"""The block probe's model for OpenCode: Claude Code's (one shell call of the tool's CLI over the Messages API, then
the end of the turn; text for a request without tools, as OpenCode's session title is), in OpenCode's shell tool,
``bash``."""

from __future__ import annotations

from pytest_agent_eval.agents.claude_code.probe import ProbeModel as MessagesProbe
from pytest_agent_eval.agents.opencode.stand_in import SHELL_TOOL


class ProbeModel(MessagesProbe):
    """Asks for one ``bash`` call of ``command``; once its result is in, ends the turn."""

    shell = SHELL_TOOL
