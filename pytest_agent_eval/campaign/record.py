"""The item record: one corpus entry × arm × run, as the campaign keeps it — written and read here only.

A record is versioned (``"schema": 3``). Version 1 is what campaigns before the schema wrote (and what
``summary.json`` lists): no ``schema`` key, the occupancy family of the retrieval tool keyed ``codegraph``,
figures under their old names. Version 2 named no agent: every run was Claude Code's, its version and
provisioning in ``claude_version`` and ``claude_provision`` (today ``agent``, ``agent_version``,
``agent_provision``). :func:`upgrade` turns any version into today's, so an old campaign still reads, rescores
and compares.

A line of the wrong shape is a :class:`RecordError` naming the field, never a traceback further up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pytest_agent_eval.agents import UNNAMED_AGENT
from pytest_agent_eval.corpus.cases import Arm
from pytest_agent_eval.metrics.figures import ALIASES, figures_of

SCHEMA = 3
UNKNOWN_ARM = "?"
# Occupancy's per-family tables that schema 1 keyed by "codegraph".
_FAMILY_TABLES = (
    "residual",
    "residual_chars",
    "residual_results",
    "contributed",
    "contributed_chars",
    "contributed_results",
)


class RecordError(ValueError):
    """A stored record of the wrong shape; the message names the field."""


@dataclass
class ItemRecord:
    id: str
    entry: str
    arm: str  # the arm's name: with / without
    arm_label: str  # the arm as shown: with@1.6.1
    run: int | None = None
    outcome: str = "passed"
    error: str | None = None
    infra_error: str | None = None
    scores: dict[str, Any] | None = None  # Scorecard.to_dict()
    figures: dict[str, float | None] = field(default_factory=dict)  # metrics.figures.figures_of(scores)
    contaminated: bool = False
    gates: list[dict[str, Any]] = field(default_factory=list)
    segments: list[str] = field(default_factory=list)  # relative to the campaign folder
    nodeid: str | None = None
    language: str | None = None
    questions: list[str] = field(default_factory=list)
    turns: int | None = None
    model: str | None = None
    effort: str | None = None
    backend: dict[str, Any] | str | None = None
    tool_version: str | None = None
    tool_spec: str | None = None
    agent: str | None = None  # the coding agent's name (CodingAgent.name)
    # Where the agent and the tool came from, as the registry resolved them (agents/registry.py: built-in, an
    # entry point of a distribution, MODULE:ATTR): read back with the same ones. None: not recorded.
    agent_from: dict[str, Any] | None = None
    tool: str | None = None  # the retrieval tool's name (RetrievalTool.name)
    tool_from: dict[str, Any] | None = None
    agent_version: str | None = None
    mode: str | None = None
    driver: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    run_dir: str | None = None
    wall_s: float | None = None
    agent_s: float | None = None
    resumed: bool = False
    # A turn of the run was silent longer than the driver's threshold (driver["stalled_turns"] says which): its
    # time is the CLI waiting, not the agent working, so no time comparison may count it.
    stalled: bool = False
    # Where the code under test came from: {"kind": "clone", "url", "commit"} | {"kind": "npm" | "pypi", "spec",
    # "version"} | {"kind": "local", "path", "git_state": {"commit", "dirty"} | None}, + "fallback" (why the
    # clone was not used) when the offline source stood in for a clone.
    source: dict[str, Any] | None = None
    # How the arm's tool and the agent's CLI were provisioned: {"kind": "npm" | "local" | "path", "spec",
    # "version", "path"}, a local build also "git_state" and "build".
    tool_provision: dict[str, Any] | None = None
    agent_provision: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)  # what ran not quite as asked (AgentEvalWarning texts)
    blocks: str | None = None  # the printed metric blocks: shown in the terminal, never stored
    extra: dict[str, Any] = field(default_factory=dict)  # keys a newer writer added: kept, not interpreted
    schema: int = SCHEMA

    @property
    def has_tool(self) -> bool:
        return Arm(self.arm).has_tool

    @property
    def agent_name(self) -> str:
        """The agent that ran it; a record that names none: the one there was before agents were named."""
        return self.agent or UNNAMED_AGENT

    @property
    def test(self) -> str | None:
        """The test function that ran the item: its nodeid without the parametrization (None before nodeids)."""
        return self.nodeid.split("[", 1)[0] if self.nodeid else None

    @property
    def scored(self) -> bool:
        """A run with figures to read (an infrastructure error has none)."""
        return bool(self.figures) and self.outcome != "error"

    def to_dict(self, stored: bool = True) -> dict[str, Any]:
        """Plain JSON-ready data; ``stored`` leaves out what the campaign does not keep (the blocks)."""
        data = asdict(self)
        extra = data.pop("extra")
        if stored:
            data.pop("blocks")
        return {**extra, **data}

    @classmethod
    def from_dict(cls, data: Any) -> ItemRecord:
        """Today's record from any stored version; :class:`RecordError` if it has the wrong shape."""
        if not isinstance(data, Mapping):
            raise RecordError(f"expected a JSON object, got {type(data).__name__}")
        data = upgrade(dict(data))
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        _check(values)
        record = cls(**values, extra=extra)
        if record.scores and not record.figures:
            record.figures = figures_of(record.scores, has_tool=record.has_tool, wall_s=record.agent_s)
        return record


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record of any schema version as today's (schema 3) dict."""
    version = data.get("schema", 1)
    if not isinstance(version, int) or version < 1 or version > SCHEMA:
        raise RecordError(f"schema: unknown record version {version!r} (this version reads 1–{SCHEMA})")
    if version == 1:
        if "scores" not in data and isinstance(data.get("score"), dict):  # summary.json before campaigns
            data["scores"] = data.pop("score")
        scores = data.get("scores")
        if isinstance(scores, dict) and isinstance(scores.get("occupancy"), dict):
            occupancy = dict(scores["occupancy"])
            for table in _FAMILY_TABLES:
                if isinstance(occupancy.get(table), dict) and "codegraph" in occupancy[table]:
                    renamed = {("tool" if k == "codegraph" else k): v for k, v in occupancy[table].items()}
                    occupancy[table] = renamed
            data["scores"] = {**scores, "occupancy": occupancy}
            data.pop("figures", None)  # derived: recomputed from the scores under today's names
        elif isinstance(data.get("figures"), dict):
            data["figures"] = {ALIASES.get(k, k): v for k, v in data["figures"].items()}
    if version <= 2:  # the agent was not named: the one there was then ran every item
        data["agent_version"] = data.pop("claude_version", None)
        data["agent_provision"] = data.pop("claude_provision", None)
        if data.get("agent_version") is not None or data.get("agent_provision") is not None:
            data["agent"] = UNNAMED_AGENT
    data["schema"] = SCHEMA
    data.setdefault("entry", data.get("id"))
    if data.get("arm") is None:
        data["arm"] = UNKNOWN_ARM  # an old folder's label may not say
    if data.get("arm_label") is None:
        data["arm_label"] = data["arm"]
    if "id" not in data and data.get("entry") is not None:
        data["id"] = "-".join(str(data[k]) for k in ("entry", "arm_label", "run") if data.get(k) is not None)
    return data


_TYPES: dict[str, tuple[type, ...]] = {
    "run": (int, type(None)),
    "outcome": (str,),
    "scores": (dict, type(None)),
    "figures": (dict,),
    "gates": (list,),
    "segments": (list,),
    "questions": (list,),
    "attempts": (list,),
    "backend": (dict, str, type(None)),  # a dict since the harness describes it; a name before
    "driver": (dict, type(None)),
    "contaminated": (bool,),
    "resumed": (bool,),
    "stalled": (bool,),
    "source": (dict, type(None)),
    "tool_provision": (dict, type(None)),
    "agent": (str, type(None)),
    "agent_version": (str, type(None)),
    "agent_from": (dict, type(None)),
    "tool": (str, type(None)),
    "tool_from": (dict, type(None)),
    "agent_provision": (dict, type(None)),
    "warnings": (list,),
    "wall_s": (int, float, type(None)),
    "agent_s": (int, float, type(None)),
}


def _check(values: dict[str, Any]) -> None:
    for name in ("id", "entry", "arm", "arm_label"):
        if not isinstance(values.get(name), str) or not values[name]:
            raise RecordError(f"{name}: expected a non-empty string, got {values.get(name)!r}")
    for name, types in _TYPES.items():
        value = values.get(name)
        # bool is an int to isinstance, but a run number or a duration of True is a broken record
        if name in values and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            raise RecordError(f"{name}: expected {' or '.join(t.__name__ for t in types)}, got {value!r}")
    if not all(isinstance(s, str) for s in values.get("segments") or []):
        raise RecordError(f"segments: expected a list of paths, got {values['segments']!r}")
    figures = values.get("figures") or {}
    for name, value in figures.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise RecordError(f"figures.{name}: expected a number or null, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            figures[name] = None  # no defined value, as json_text writes it: a NaN would pass any gate


def same_item(nodeid: str, other: str) -> bool:
    """Two nodeids of one item, whatever the rootdir or ``--pyargs`` made of its file's path (a resume from
    another folder names ``evals/test_ab.py`` as ``…/site-packages/pytest_agent_eval/evals/test_ab.py``): the
    file's name and everything after it agree."""
    return _located(nodeid) == _located(other)


def _located(nodeid: str) -> tuple[str, str]:
    path, _, rest = nodeid.partition("::")
    return path.replace("\\", "/").rsplit("/", 1)[-1], rest


def as_records(records: Iterable[ItemRecord | Mapping[str, Any]]) -> list[ItemRecord]:
    """Typed records from records or their dicts (tests, summary.json, older callers)."""
    return [r if isinstance(r, ItemRecord) else ItemRecord.from_dict(r) for r in records]
