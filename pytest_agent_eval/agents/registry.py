"""The one registry of coding agents and retrieval tools: a built-in one by its name, a third party's through an
entry point of an installed distribution (groups ``pytest_agent_eval.agents`` and ``pytest_agent_eval.tools``,
found as pytest finds its plugins, with :mod:`importlib.metadata`), any other by ``MODULE:ATTR``.

What a name resolved to is remembered with where it came from (:func:`origin_of`): the manifest and each record
keep that origin, so that rescore, report.html, a baseline and ``agent-eval score`` read a run back with the
agent and tool that made it, or say which distribution to install or which ``MODULE:ATTR`` is missing
(docs/extending.md, "Read back").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_agent_eval.agents.built_in import BUILT_IN_AGENTS, UNNAMED_AGENT
from pytest_agent_eval.reference import load_reference

if TYPE_CHECKING:
    from importlib import metadata

    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.tool import RetrievalTool

T = TypeVar("T")

AGENT_GROUP = "pytest_agent_eval.agents"
TOOL_GROUP = "pytest_agent_eval.tools"

BUILT_IN_TOOLS = {"codegraph": "pytest_agent_eval.tool:CODEGRAPH"}
# What a campaign recorded before records named their tool ran with (their agent: UNNAMED_AGENT).
UNNAMED_TOOL = "codegraph"

# Where each object resolved here came from, by identity (each entry keeps its object alive, so an id is not
# reused while it is remembered).
_ORIGINS: dict[int, tuple[object, dict[str, str]]] = {}


def _kind_of(group: str) -> tuple[str, dict[str, str], type]:
    if group == AGENT_GROUP:
        from pytest_agent_eval.agents.base import CodingAgent

        return "agent", BUILT_IN_AGENTS, CodingAgent
    from pytest_agent_eval.tool import RetrievalTool

    return "tool", BUILT_IN_TOOLS, RetrievalTool


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The installed distributions' entry points of ``group``, by name (the first of a name wins); read only when a
    name is not a built-in one (reading every distribution's metadata is slow to start)."""
    from importlib import metadata

    found: dict[str, metadata.EntryPoint] = {}
    for point in metadata.entry_points(group=group):
        found.setdefault(point.name, point)
    return found


def _remember(found: T, origin: dict[str, str]) -> T:
    _ORIGINS.setdefault(id(found), (found, origin))
    return found


def _resolve(group: str, text: str) -> Any:
    kind, built_in, cls = _kind_of(group)
    name = str(text).strip()
    if ":" in name:
        return _remember(load_reference(name, cls), {"from": "reference", "reference": name})
    if name in built_in:
        return _remember(load_reference(built_in[name], cls), {"from": "built-in"})
    point = entry_points(group).get(name)
    if point is None:
        installed = sorted(entry_points(group))
        more = f"; installed entry points ({group}): {', '.join(installed)}" if installed else ""
        raise ValueError(
            f"unknown {kind} {name!r}: the built-in {kind}s are {', '.join(sorted(built_in))}{more}; "
            f"or give MODULE:ATTR naming a {cls.__name__}"
        )
    return _remember(_load_point(point, kind, cls, name), _point_origin(point))


def _point_origin(point: metadata.EntryPoint) -> dict[str, str]:
    dist = getattr(point, "dist", None)
    origin = {"from": "entry-point", "reference": point.value, "group": point.group}
    if dist is not None:
        origin["dist"] = dist.metadata["Name"] or ""
        origin["version"] = dist.version
    return origin


def _load_point(point: metadata.EntryPoint, kind: str, cls: type, name: str) -> Any:
    dist = getattr(point, "dist", None)
    where = f"entry point {point.name!r} ({point.group}) of {dist.metadata['Name'] if dist else 'a distribution'}"
    try:
        found = load_reference(point.value, cls)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if found.name != name:  # a record names its agent (tool) by this name: it must find the same entry point
        raise ValueError(f"{where} names a {kind} called {found.name!r}: the entry point's name must be its name")
    return found


def resolve_agent(text: str) -> CodingAgent:
    """The agent ``text`` names: a built-in name (``codex``), an installed entry point's name, or ``MODULE:ATTR``;
    raises ValueError saying what is known."""
    return _resolve(AGENT_GROUP, text)


def resolve_tool(text: str) -> RetrievalTool:
    """The retrieval tool ``text`` names, as :func:`resolve_agent` finds an agent."""
    return _resolve(TOOL_GROUP, text)


def known_agents() -> list[CodingAgent]:
    """Every agent there is to ask (whose record is this file?): the built-in ones, then those the installed
    distributions offer through entry points (:data:`AGENT_GROUP`); an entry point that does not load is a
    ValueError naming it."""
    names = [*BUILT_IN_AGENTS, *(name for name in entry_points(AGENT_GROUP) if name not in BUILT_IN_AGENTS)]
    return [resolve_agent(name) for name in names]


def origin_of(found: object) -> dict[str, str] | None:
    """Where an agent or tool came from (``{"from": "built-in" | "entry-point" | "reference", "reference": …,
    "dist": …}``), when it was resolved here or is a built-in object; None for one made some other way."""
    remembered = _ORIGINS.get(id(found))
    if remembered is not None and remembered[0] is found:
        return dict(remembered[1])
    name = getattr(found, "name", None)
    for group in (AGENT_GROUP, TOOL_GROUP):
        _, built_in, cls = _kind_of(group)
        if isinstance(found, cls) and name in built_in and load_reference(built_in[name], cls) is found:
            return {"from": "built-in"}
        if isinstance(found, cls):  # a project's own object: importable where its module sits, if it is bound there
            module = type(found).__module__
            return _reference_in(found, module) or None
    return None


def _reference_in(found: object, module_name: str) -> dict[str, str] | None:
    import sys

    module = sys.modules.get(module_name)
    for attr, value in vars(module).items() if module is not None else ():
        if value is found:
            return {"from": "reference", "reference": f"{module_name}:{attr}"}
    return None


def _recorded(group: str, name: str | None, origin: Mapping[str, Any] | None) -> Any:
    kind, _, cls = _kind_of(group)
    if not isinstance(origin, Mapping) or origin.get("from") == "built-in" or not origin.get("reference"):
        try:
            return _resolve(group, name or (UNNAMED_AGENT if group == AGENT_GROUP else UNNAMED_TOOL))
        except ValueError as exc:
            raise ValueError(f"{exc} (the campaign recorded no origin for it)") from None
    reference = str(origin["reference"])
    if origin.get("from") == "entry-point":
        point = entry_points(group).get(str(name))
        if point is not None:
            return _remember(_load_point(point, kind, cls, str(name)), _point_origin(point))
        dist = origin.get("dist") or "the distribution"
        pinned = f"=={origin['version']}" if origin.get("version") else ""
        try:  # the module may be importable though the distribution's metadata is not installed
            return load_reference(reference, cls)
        except ValueError:
            raise ValueError(
                f"{kind} {name!r} came from the entry point of {dist} ({group}: {name} = {reference}), which is "
                f"not installed: pip install '{dist}{pinned}'"
            ) from None
    try:
        return _remember(load_reference(reference, cls), dict(origin))
    except ValueError as exc:
        raise ValueError(
            f"{kind} {name!r} was loaded from {reference} (MODULE:ATTR), which is missing here: {exc}; make "
            f"its module importable (installed, or on pytest's pythonpath) or name the {kind} to use"
        ) from None


def recorded_agent(name: str | None, origin: Mapping[str, Any] | None = None) -> CodingAgent:
    """The agent a record or manifest names, from where it says it came (None: a record from before agents were
    named, or origins recorded); raises ValueError saying which distribution to install or which ``MODULE:ATTR``
    is missing."""
    return _recorded(AGENT_GROUP, name, origin)


def recorded_tool(name: str | None, origin: Mapping[str, Any] | None = None) -> RetrievalTool:
    """The retrieval tool a record or manifest names, as :func:`recorded_agent` finds an agent."""
    return _recorded(TOOL_GROUP, name, origin)
