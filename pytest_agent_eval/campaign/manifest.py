"""What a campaign measured (the manifest's config, written once) and what only its runs could tell (versions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agent_eval.agents.registry import origin_of
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import MANIFEST, Campaign, write_atomic
from pytest_agent_eval.corpus.load import CorpusEntry
from pytest_agent_eval.settings.config import AgentEvalConfig


def campaign_config(cfg: AgentEvalConfig, entries: list[CorpusEntry]) -> dict[str, Any]:
    """What the campaign measured, as the manifest keeps it; its hash tells equal campaigns apart. The agents are
    named only when more than one ran (a one-agent campaign's hash stays what it was before agents were an axis)."""
    agents = {"agents": [agent.name for agent in cfg.agents]} if len(cfg.agents) > 1 else {}
    return {
        "corpus": str(cfg.corpus),
        "campaign": cfg.campaign,
        "entries": [
            {
                "name": e.name,
                "language": e.language,
                "repo": e.repo,
                "questions": e.questions[: cfg.turns] if cfg.turns else e.questions,
            }
            for e in entries
        ],
        "arms": [{"label": a.label, "name": a.name, "tool_spec": cfg.tool_spec(a)} for a in cfg.arms],
        "runs": cfg.runs,
        "turns": cfg.turns,
        "tool": cfg.tool.name,
        "tool_version": cfg.default_tool_spec,
        "model": cfg.model,
        "effort": cfg.effort,
        "max_budget_usd": cfg.max_budget_usd,
        "agent_timeout": cfg.agent_timeout,
        "backend": cfg.backend,
        **agents,
    }


def plugins_of(cfg: AgentEvalConfig) -> dict[str, Any]:
    """The manifest's ``plugins``: which agents and which tool ran, and where each came from (the registry's
    origin: built-in, an entry point of a distribution, ``MODULE:ATTR``), so that what reads the campaign back
    finds them again. Outside the hashed config: a campaign's hash stays what it was before origins were kept."""
    return {
        "agents": {agent.name: origin_of(agent) for agent in cfg.agents},
        "tool": {"name": cfg.tool.name, "from": origin_of(cfg.tool)},
    }


def finish_manifest(campaign: Campaign, records: Sequence[ItemRecord], tool_name: str) -> None:
    """Add what only the runs could tell — the resolved tool and agent versions, the model backend, and
    where the code under test and the tools came from (``provenance``, see :func:`gather_provenance`).

    The manifest's config and hash stay as written; a resumed campaign keeps the versions of arms it ran before.
    """
    manifest = Campaign.open(campaign.path).manifest
    versions = dict(manifest.get("versions") or {})
    tool_versions = dict(versions.get(tool_name) or {})
    for label in dict.fromkeys(r.arm_label for r in records):
        found = sorted({str(r.tool_version) for r in records if r.arm_label == label and r.tool_version})
        if found:
            tool_versions[label] = ", ".join(found)
    versions[tool_name] = tool_versions
    for agent in dict.fromkeys(r.agent for r in records if r.agent):
        found = sorted({str(r.agent_version) for r in records if r.agent == agent and r.agent_version})
        if found:
            versions[agent] = ", ".join(found)
    manifest["versions"] = versions
    backend = next((r.backend for r in records if isinstance(r.backend, dict)), None)
    if backend is not None:
        manifest["backend"] = backend
    manifest["provenance"] = gather_provenance(records, manifest.get("provenance"))
    manifest["ran"] = what_ran(records)
    write_atomic(campaign.path / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    campaign.manifest = manifest


def what_ran(records: Sequence[ItemRecord]) -> dict[str, Any]:
    """What the campaign's items were, per test function: its entries, agents, arm labels, runs and turns, and how
    many items. The config keeps what the command line asked; an ``agent_eval`` marker may narrow it for one test."""
    tests: dict[str, dict[str, Any]] = {}
    for record in records:
        test = record.test or "(test not recorded)"  # records before nodeids
        ran = tests.setdefault(test, {"entries": [], "agents": [], "arms": [], "runs": [], "turns": [], "items": 0})
        for key, value in (("entries", record.entry), ("agents", record.agent_name), ("arms", record.arm_label),
                           ("runs", record.run), ("turns", record.turns)):  # fmt: skip
            if value is not None and value not in ran[key]:
                ran[key].append(value)
        ran["items"] += 1
    for ran in tests.values():
        ran["runs"].sort()
        ran["turns"].sort()
    return tests


def gather_provenance(records: Sequence[ItemRecord], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest's ``provenance`` from the item records (merged into ``earlier``, a resumed campaign's):
    ``{"sources": {entry: [source, …]}, "tools": {arm label: [tool_provision, …]}, "agents": [agent_provision,
    …], "warnings": [text, …]}``, each list holding every distinct value once, in order of first appearance —
    more than one means the campaign's items did not all test the same code."""
    gathered: dict[str, Any] = {"sources": {}, "tools": {}, "agents": [], "warnings": []}
    for key in gathered:
        value = (earlier or {}).get(key)
        if isinstance(value, type(gathered[key])):
            gathered[key] = value
    for record in records:
        if record.source:
            _add(gathered["sources"].setdefault(record.entry, []), record.source)
        if record.tool_provision:
            _add(gathered["tools"].setdefault(record.arm_label, []), record.tool_provision)
        if record.agent_provision:
            _add(gathered["agents"], record.agent_provision)
        for text in record.warnings:
            _add(gathered["warnings"], text)
    return gathered


def _add(values: list[Any], value: Any) -> None:
    if value not in values:
        values.append(value)


def update_manifest(campaign: Campaign, fields: Mapping[str, Any]) -> None:
    """Set top-level manifest keys outside the hashed config (the selection, the shard, the corpus hash)."""
    manifest = Campaign.open(campaign.path).manifest
    manifest.update(fields)
    write_atomic(campaign.path / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    campaign.manifest = manifest
