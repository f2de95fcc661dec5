"""The coding agents the harness drives: how each is provisioned, driven, given a model and an MCP server,
denied a tool, and read back into the common Session (:class:`~pytest_agent_eval.agents.base.CodingAgent`).

The built-in agents are named here by their ``MODULE:ATTR`` reference, so that a record naming one (its
``agent``) is read back with its reader, and so that nothing is imported before it is asked for (a record, the
settings and ``agent-eval score`` import this package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent

BUILT_IN = {
    "claude-code": "pytest_agent_eval.agents.claude_code:CLAUDE_CODE",
    "codex": "pytest_agent_eval.agents.codex:CODEX",
    "gemini": "pytest_agent_eval.agents.gemini:GEMINI",
    "opencode": "pytest_agent_eval.agents.opencode:OPENCODE",
}
DEFAULT_AGENT = BUILT_IN["claude-code"]  # --agent-eval-agent's default
# What a campaign recorded before records named their agent was driven with.
UNNAMED_AGENT = "claude-code"


def agent_named(name: str | None) -> CodingAgent:
    """The built-in agent a record names (None: a record from before agents were named); raises ValueError for
    another (a project's own agent is read back with the ``--agent-eval-agent`` that ran it)."""
    from pytest_agent_eval.agents.base import load_agent

    reference = BUILT_IN.get(name or UNNAMED_AGENT)
    if reference is None:
        raise ValueError(f"unknown agent {name!r}: the built-in agents are {', '.join(sorted(BUILT_IN))}")
    return load_agent(reference)


def agent_title(name: str | None) -> str:
    """How reports name the agent a record names: a built-in agent's title (``Codex``), another's name."""
    if (name or UNNAMED_AGENT) not in BUILT_IN:
        return str(name)
    return agent_named(name).title
