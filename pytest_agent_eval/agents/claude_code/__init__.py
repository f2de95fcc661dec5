"""Claude Code (``@anthropic-ai/claude-code``) as a coding agent: :data:`CLAUDE_CODE`, the built-in one
(:mod:`.agent`); its config and deny (:mod:`.deny`, :mod:`.hook`), its drivers (:mod:`.headless`, :mod:`.tmux`,
:mod:`.events`), its transcript reader (:mod:`.transcript`), which the Messages cassette replays. Its tools are the
stand-in's common vocabulary: it needs no speech of its own.

The description loads when first asked for: the hook program and ``agent-eval score`` import modules of this
package, and need none of it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AGENT_ENV", "CLAUDE_CODE", "STANDIN_API_KEY", "ClaudeCode"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_agent_eval.agents.claude_code import agent

    return getattr(agent, name)
