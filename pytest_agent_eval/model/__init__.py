"""A stand-in for the Messages API behind the same HTTP boundary as the real one.

``serve(make_backend("scripted"))`` gives a URL for ``ANTHROPIC_BASE_URL``; nothing else in the
house needs to know whether the model is real.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.codex.transcript import is_codex_events
from pytest_agent_eval.agents.gemini.transcript import is_gemini_events
from pytest_agent_eval.agents.opencode.transcript import is_opencode_events
from pytest_agent_eval.settings.config import auto_backend
from pytest_agent_eval.settings.options import BACKENDS  # the option table names the backends

from .anthropic import AnthropicBackend
from .cassette import CassetteBackend
from .gemini_cassette import GeminiCassetteBackend
from .google import GeminiForwarder
from .openai import OpenAIBackend
from .opencode_cassette import OpenCodeCassetteBackend
from .responses_cassette import ResponsesCassetteBackend
from .scripted import ScriptedBackend
from .server import Backend, Faults, Hit, ModelEndpoint, Passthrough, RunningServer, serve
from .sse import Reply


def resolve_backend(name: str, api: str = "messages") -> str:
    """The backend ``name`` stands for with an agent speaking ``api``: ``auto`` is the forwarder to the real API when
    the key it needs (ANTHROPIC_API_KEY, or OPENAI_API_KEY for the Responses API) is a real one, else scripted."""
    return auto_backend(api)[0] if name == "auto" else name


def make_backend(name: str, api: str = "messages", **opts: Any) -> Backend:
    """A backend by name (``auto`` resolved for an agent speaking ``api``, :func:`resolve_backend`)."""
    name = resolve_backend(name, api)
    if name == "scripted":
        return ScriptedBackend(**opts)
    if name == "cassette":
        return cassette_backend(**opts)
    if name == "anthropic":
        return AnthropicBackend(**opts)
    if name == "openai":
        return OpenAIBackend(**opts)
    if name == "gemini":
        return GeminiForwarder(**opts)
    raise ValueError(f"unknown model backend {name!r}; expected one of {BACKENDS}")


_CASSETTES = {
    "claude-code": CassetteBackend,
    "codex": ResponsesCassetteBackend,
    "gemini": GeminiCassetteBackend,
    "opencode": OpenCodeCassetteBackend,
}


def cassette_backend(
    paths: str | Path | Iterable[str | Path], agent: Any = None
) -> CassetteBackend | ResponsesCassetteBackend | GeminiCassetteBackend:
    """The cassette of a recording: with ``agent`` (the CodingAgent that recorded it, as its record says), the one
    of its ``stand_in`` dialect; else by the recording's format: a Codex run's (its ``codex exec --json`` streams)
    replays the Responses API, a Gemini CLI run's (its stream-json events and chat record) the Gemini API, an
    OpenCode run's (its ``--format json`` streams) and any other (Claude Code's stream-json segments) the Messages
    API. An agent without a dialect has no cassette: a ValueError says so."""
    listed = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if agent is not None:
        cassette = _CASSETTES.get(agent.stand_in)
        if cassette is None:
            raise ValueError(f"no cassette replays a recording of {agent.title}: {agent.stand_in_problem()}")
        return cassette(listed)
    if listed and is_codex_events(listed[0]):
        return ResponsesCassetteBackend(listed)
    if listed and is_gemini_events(listed[0]):
        return GeminiCassetteBackend(listed)
    if listed and is_opencode_events(listed[0]):
        return OpenCodeCassetteBackend(listed)
    return CassetteBackend(listed)


__all__ = [
    "BACKENDS",
    "AnthropicBackend",
    "Backend",
    "CassetteBackend",
    "Faults",
    "GeminiCassetteBackend",
    "GeminiForwarder",
    "Hit",
    "ModelEndpoint",
    "OpenAIBackend",
    "OpenCodeCassetteBackend",
    "Passthrough",
    "Reply",
    "ResponsesCassetteBackend",
    "RunningServer",
    "ScriptedBackend",
    "cassette_backend",
    "make_backend",
    "resolve_backend",
    "serve",
]
