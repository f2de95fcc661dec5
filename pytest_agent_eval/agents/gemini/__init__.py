"""Gemini CLI (``@google/gemini-cli``) as a coding agent: :data:`GEMINI` (:mod:`.agent`), selected with
``--agent-eval-agent gemini`` (or ``pytest_agent_eval.agents.gemini:GEMINI``); its config (:mod:`.config`), its
driver (:mod:`.driver`), its transcript reader (:mod:`.transcript`, with its reading of the Gemini API's parts for the
evidence), the stand-in's decisions spoken in its tools (:mod:`.stand_in`), its cassette (:mod:`.cassette`).

The description loads when first asked for: ``agent-eval score`` imports the transcript reader, and needs none of
it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GEMINI", "GeminiAgent"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_agent_eval.agents.gemini import agent

    return getattr(agent, name)
