"""Codex CLI (``@openai/codex``) as a coding agent: :data:`CODEX` (:mod:`.agent`), selected with
``--agent-eval-agent pytest_agent_eval.agents.codex:CODEX``; its config (:mod:`.config`), its driver (:mod:`.driver`),
its transcript reader (:mod:`.transcript`), its block probe's model (:mod:`.probe`).

The description loads when first asked for: the model server and ``agent-eval score`` import the transcript reader,
and need none of it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CODEX", "CodexAgent"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_agent_eval.agents.codex import agent

    return getattr(agent, name)
