"""OpenCode (``opencode-ai``) as a coding agent: :data:`OPENCODE` (:mod:`.agent`), selected with
``--agent-eval-agent pytest_agent_eval.agents.opencode:OPENCODE``; its config (:mod:`.config`), its driver
(:mod:`.driver`), its transcript reader (:mod:`.transcript`), its block probe's model (:mod:`.probe`), the stand-in's
decisions spoken in its tools (:mod:`.stand_in`), its cassette (:mod:`.cassette`), its turn end
(``OpenCodeAgent.ends_turn``).

The description loads when first asked for: ``agent-eval score`` imports the transcript reader, and needs none of
it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPENCODE", "OpenCodeAgent"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_agent_eval.agents.opencode import agent

    return getattr(agent, name)
