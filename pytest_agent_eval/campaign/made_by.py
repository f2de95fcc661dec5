"""Which agent and which retrieval tool made a record: found again from where the record (or its campaign's
manifest, ``plugins``) says each came from, through the registry (:mod:`pytest_agent_eval.agents.registry`).

A record from before origins were kept names the agent and the tool only: a built-in one, or one an installed
distribution offers under that name. What cannot be found is a ValueError saying which distribution to install
or which ``MODULE:ATTR`` is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.registry import recorded_agent, recorded_tool
from pytest_agent_eval.campaign.record import ItemRecord

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.tool import RetrievalTool


def _plugins(manifest: Mapping[str, Any] | None) -> Mapping[str, Any]:
    plugins = (manifest or {}).get("plugins")
    return plugins if isinstance(plugins, Mapping) else {}


def agent_of(record: ItemRecord, manifest: Mapping[str, Any] | None = None) -> CodingAgent:
    """The agent that ran ``record``."""
    origin = record.agent_from
    if origin is None:
        agents = _plugins(manifest).get("agents")
        origin = agents.get(record.agent_name) if isinstance(agents, Mapping) else None
    return recorded_agent(record.agent, origin)


def tool_name_of(record: ItemRecord, manifest: Mapping[str, Any] | None = None) -> str | None:
    """The name of the retrieval tool ``record`` was run (and scored) with; None where nothing says."""
    tool = _plugins(manifest).get("tool")
    named = tool.get("name") if isinstance(tool, Mapping) else None
    scored = (record.scores or {}).get("tool")
    return record.tool or (str(scored) if scored else None) or (str(named) if named else None)


def tool_of(record: ItemRecord, manifest: Mapping[str, Any] | None = None) -> RetrievalTool:
    """The retrieval tool ``record`` was run with (its fingerprints, its explore tool): the record's, else its
    campaign's; a record that names none ran the tool there was before tools were named."""
    name = tool_name_of(record, manifest)
    origin = record.tool_from
    tool = _plugins(manifest).get("tool")
    if origin is None and isinstance(tool, Mapping) and tool.get("name") == name:
        origin = tool.get("from")
    return recorded_tool(name, origin)
