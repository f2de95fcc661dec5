"""The coding agents the harness drives: how each is provisioned, driven, given a model and an MCP server,
denied a tool, and read back into the common Session (:class:`~pytest_agent_eval.agents.base.CodingAgent`).

Everything particular to an agent lives in its folder (``agents/<name>/``: provisioning, config, driver, reader,
how the stand-in's decisions are spoken in its tools, its cassette, its evidence reading, its turn end); no module
outside ``agents/`` imports one (docs/architecture.md). The built-in ones are listed once (:mod:`.built_in`) and
found, with the agents installed distributions offer through entry points, by the registry
(:mod:`pytest_agent_eval.agents.registry`), so that a record naming one (its ``agent``) is read back with its
reader, and so that nothing is imported before it is asked for (a record, the settings and ``agent-eval score``
import this package).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.built_in import BUILT_IN_AGENTS, UNNAMED_AGENT
from pytest_agent_eval.model import speech

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.model.speech import Speech

DEFAULT_AGENT = BUILT_IN_AGENTS["claude-code"]  # --agent-eval-agent's default
__all__ = ["BUILT_IN_AGENTS", "DEFAULT_AGENT", "UNNAMED_AGENT", "agent_named", "agent_title"]


def agent_named(name: str | None, origin: Mapping[str, Any] | None = None) -> CodingAgent:
    """The agent a record names (None: a record from before agents were named), found where ``origin`` (the
    record's ``agent_from``) says it came from: built in, an installed entry point, ``MODULE:ATTR``; raises
    ValueError saying which distribution to install or which ``MODULE:ATTR`` is missing."""
    from pytest_agent_eval.agents.registry import recorded_agent  # the registry reads this package's table

    return recorded_agent(name, origin)


def agent_title(name: str | None) -> str:
    """How reports name the agent a record names: its title (``Codex``), or its name where it cannot be loaded."""
    try:
        return agent_named(name).title
    except ValueError:
        return str(name)


def _built_in_speeches() -> list[Speech]:
    """The built-in agents' speeches, the dialects an agent's ``stand_in`` names (each loaded when the model server
    first needs one)."""
    from pytest_agent_eval.agents.registry import resolve_agent

    found = (resolve_agent(name).speech() for name in BUILT_IN_AGENTS)
    return [spoken for spoken in found if spoken is not None]


speech.provide(_built_in_speeches)  # the model server asks for speeches; it names no agent itself
