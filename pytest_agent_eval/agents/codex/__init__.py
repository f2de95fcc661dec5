"""Codex CLI (``@openai/codex``) as a coding agent."""
