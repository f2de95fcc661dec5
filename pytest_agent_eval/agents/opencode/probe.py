"""The block probe's model for OpenCode: the Messages API's (one shell call of the tool's CLI, then the end of the
turn; text for a request without tools, as OpenCode's session title is), in OpenCode's shell tool, ``bash``."""

from __future__ import annotations

from pytest_agent_eval.agents.opencode.stand_in import SHELL_TOOL
from pytest_agent_eval.model.probe import MessagesProbe


class ProbeModel(MessagesProbe):
    """Asks for one ``bash`` call of ``command``; once its result is in, ends the turn."""

    shell = SHELL_TOOL
