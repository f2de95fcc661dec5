"""Whether an API key in the environment looks issued by the API's maker, not a stand-in (``sk-test``, ``dummy``):
what ``--agent-eval-backend auto`` decides by (:func:`pytest_agent_eval.settings.config.auto_backend`) and what
the forwarders check. Plain string tests, no import: the settings read them without loading a server."""

from __future__ import annotations

_PLACEHOLDER_WORDS = ("placeholder", "dummy", "fake", "test", "xxx", "your")


def is_real_key(key: str | None) -> bool:
    """An ANTHROPIC_API_KEY that looks issued by Anthropic, not a stand-in such as ``sk-test`` or ``dummy``:
    what ``--agent-eval-backend auto`` decides by."""
    if not key or not key.startswith("sk-ant-") or len(key) < 40:
        return False
    return not any(word in key.lower() for word in _PLACEHOLDER_WORDS)


def is_real_openai_key(key: str | None) -> bool:
    """An OPENAI_API_KEY that looks issued by OpenAI (``sk-…``, ``sk-proj-…``), not a stand-in: what ``auto``
    decides by for an agent speaking the Responses API."""
    if not key or not key.startswith("sk-") or key.startswith("sk-ant-") or len(key) < 40:
        return False
    return not any(word in key.lower() for word in _PLACEHOLDER_WORDS)


def is_real_gemini_key(key: str | None) -> bool:
    """A GEMINI_API_KEY that looks issued by Google (``AIza…``, 39 characters), not a stand-in: what ``auto``
    decides by for an agent speaking the Gemini API."""
    if not key or not key.startswith("AIza") or len(key) < 39:
        return False
    return not any(word in key.lower() for word in _PLACEHOLDER_WORDS)
