"""Codex CLI (``@openai/codex``) as a coding agent: :data:`CODEX` (:mod:`.agent`), selected with
``--agent-eval-agent pytest_agent_eval.agents.codex:CODEX``; its config (:mod:`.config`), its driver (:mod:`.driver`),
its transcript reader (:mod:`.transcript`, with its reading of the Responses API's items for the evidence), the
stand-in's decisions spoken in its tools (:mod:`.stand_in`), its cassette (:mod:`.cassette`).

The description loads when first asked for: ``agent-eval score`` imports the transcript reader, and needs none of
it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CODEX", "CodexAgent"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_agent_eval.agents.codex import agent

    return getattr(agent, name)
