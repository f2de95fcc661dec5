"""Which model backend a session's settings name, made: ``auto`` resolved by the keys in the environment
(:func:`~pytest_agent_eval.settings.config.auto_backend`), a cassette by the agent whose recording it is (asked
through the registry). It composes the settings, the agents and the model server, so it sits above them
(docs/architecture.md); the model package itself knows neither."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval import model

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.model import Backend


def resolve_backend(name: str, api: str = "messages") -> str:
    """The backend ``name`` stands for with an agent speaking ``api``: ``auto`` is the forwarder to the real API when
    the key it needs (ANTHROPIC_API_KEY, or OPENAI_API_KEY for the Responses API) is a real one, else scripted."""
    from pytest_agent_eval.settings.config import auto_backend

    return auto_backend(api)[0] if name == "auto" else name


def make_backend(name: str, api: str = "messages", **opts: Any) -> Backend:
    """A backend by name (``auto`` resolved for an agent speaking ``api``, :func:`resolve_backend`)."""
    name = resolve_backend(name, api)
    if name == "cassette":
        return cassette_backend(**opts)
    if name in ("scripted", "anthropic", "openai", "gemini"):
        backend = {"scripted": "ScriptedBackend", "anthropic": "AnthropicBackend", "openai": "OpenAIBackend",
                   "gemini": "GeminiForwarder"}[name]  # fmt: skip
        return getattr(model, backend)(**opts)
    from pytest_agent_eval.settings.options import BACKENDS

    raise ValueError(f"unknown model backend {name!r}; expected one of {BACKENDS}")


def cassette_backend(paths: str | Path | Iterable[str | Path], agent: CodingAgent | None = None) -> Backend:
    """The cassette of a recording, the recording agent's own (:meth:`CodingAgent.cassette`: it replays the API the
    agent speaks), or that of the built-in agent its ``stand_in`` names: ``agent`` when given (the one its record
    names), else the agent whose record the first file is, as each agent says (``CodingAgent.recognise``; a file none
    claims is Claude Code's stream-json). An agent that cannot be replayed says why in a ValueError."""
    listed = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if agent is None and listed:
        from pytest_agent_eval.agents.recognition import recognise

        agent = recognise(listed[0]).agent
    if agent is None:
        from pytest_agent_eval.agents.registry import recorded_agent
        from pytest_agent_eval.model.cassette import CassetteBackend

        return CassetteBackend(listed, recorded_agent(None))  # a record from before records named their agent
    problem = agent.stand_in_problem()  # a cassette speaks the tools of a stand-in dialect, as the stand-in does
    if problem is not None or agent.stand_in is None:
        raise ValueError(f"no cassette replays a recording of {agent.title}: {problem}")
    cassette = agent.cassette(listed)
    if cassette is not None:
        return cassette
    from pytest_agent_eval.agents.registry import resolve_agent

    return resolve_agent(agent.stand_in_dialect).cassette(listed)
