"""Codex CLI (``@openai/codex``) as a coding agent: ``--agent-eval-agent pytest_agent_eval.agents.codex:CODEX``."""

from pytest_agent_eval.agents.codex.agent import CODEX, CodexAgent

__all__ = ["CODEX", "CodexAgent"]
