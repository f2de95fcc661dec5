"""A stand-in for the Messages API behind the same HTTP boundary as the real one.

``serve(make_backend("scripted"))`` gives a URL for ``ANTHROPIC_BASE_URL``; nothing else in the
house needs to know whether the model is real.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_agent_eval.settings.config import is_real_key
from pytest_agent_eval.settings.options import BACKENDS  # the option table names the backends

from .anthropic import AnthropicBackend
from .cassette import CassetteBackend
from .google import GeminiForwarder
from .scripted import ScriptedBackend
from .server import Backend, Faults, Hit, ModelEndpoint, Passthrough, RunningServer, serve
from .sse import Reply


def make_backend(name: str, **opts: Any) -> Backend:
    """A backend by name; ``auto`` is the real API when ANTHROPIC_API_KEY holds a real key, else scripted."""
    if name == "auto":
        name = "anthropic" if is_real_key(os.environ.get("ANTHROPIC_API_KEY")) else "scripted"
    if name == "scripted":
        return ScriptedBackend(**opts)
    if name == "cassette":
        return CassetteBackend(**opts)
    if name == "anthropic":
        return AnthropicBackend(**opts)
    if name == "gemini":
        return GeminiForwarder(**opts)
    raise ValueError(f"unknown model backend {name!r}; expected one of {BACKENDS}")


__all__ = [
    "BACKENDS",
    "AnthropicBackend",
    "Backend",
    "CassetteBackend",
    "Faults",
    "GeminiForwarder",
    "Hit",
    "ModelEndpoint",
    "Passthrough",
    "Reply",
    "RunningServer",
    "ScriptedBackend",
    "make_backend",
    "serve",
]
