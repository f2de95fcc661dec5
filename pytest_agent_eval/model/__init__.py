"""A stand-in for the Messages API behind the same HTTP boundary as the real one.

``serve(ScriptedBackend())`` gives a URL for ``ANTHROPIC_BASE_URL``; nothing else in the house needs to know
whether the model is real. Which backend a session's settings name is chosen above, by
:mod:`pytest_agent_eval.run.backends`.

The names below load when first asked for: ``agent-eval score`` reads request records through an API's side
(``model.gemini``'s paths, for the evidence) and needs no server.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .anthropic import AnthropicBackend
    from .cassette import CassetteBackend
    from .google import GeminiForwarder
    from .openai import OpenAIBackend
    from .scripted import ScriptedBackend
    from .server import Backend, Faults, Hit, ModelEndpoint, Passthrough, RunningServer, serve
    from .sse import Reply

_LAZY = {
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


__all__ = [
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
    "serve",
]
