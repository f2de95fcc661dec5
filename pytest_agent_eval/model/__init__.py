"""A stand-in for the Messages API behind the same HTTP boundary as the real one.

``serve(make_backend("scripted"))`` gives a URL for ``ANTHROPIC_BASE_URL``; nothing else in the
house needs to know whether the model is real.

The names below load when first asked for: ``agent-eval score`` reads request records through an API's side
(``model.gemini``'s paths, for the evidence) and needs no server.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent

    from .anthropic import AnthropicBackend
    from .cassette import CassetteBackend
    from .google import GeminiForwarder
    from .openai import OpenAIBackend
    from .scripted import ScriptedBackend
    from .server import Backend, Faults, Hit, ModelEndpoint, Passthrough, RunningServer, serve
    from .sse import Reply

_LAZY = {
    "BACKENDS": "pytest_agent_eval.settings.options",  # the option table names the backends
    "AnthropicBackend": ".anthropic",
    "CassetteBackend": ".cassette",
    "GeminiForwarder": ".google",
    "OpenAIBackend": ".openai",
    "ScriptedBackend": ".scripted",
    **dict.fromkeys(("Backend", "Faults", "Hit", "ModelEndpoint", "Passthrough", "RunningServer", "serve"), ".server"),
    "Reply": ".sse",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_LAZY[name], __name__), name)


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
        return __getattr__(backend)(**opts)
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
        from .cassette import CassetteBackend

        return CassetteBackend(listed)
    problem = agent.stand_in_problem()  # a cassette speaks the tools of a stand-in dialect, as the stand-in does
    if problem is not None or agent.stand_in is None:
        raise ValueError(f"no cassette replays a recording of {agent.title}: {problem}")
    cassette = agent.cassette(listed)
    if cassette is not None:
        return cassette
    from pytest_agent_eval.agents.registry import resolve_agent

    return resolve_agent(agent.stand_in_dialect).cassette(listed)


__all__ = [
    "BACKENDS",
    "AnthropicBackend",
    "Backend",
    "CassetteBackend",
    "Faults",
    "GeminiForwarder",
    "Hit",
    "ModelEndpoint",
    "OpenAIBackend",
    "Passthrough",
    "Reply",
    "RunningServer",
    "ScriptedBackend",
    "cassette_backend",
    "make_backend",
    "resolve_backend",
    "serve",
]
