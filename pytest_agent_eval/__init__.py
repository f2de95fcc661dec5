"""pytest-retrieval-ab (imported as ``pytest_agent_eval``): A/B evaluations of a code-retrieval MCP server used by a
coding agent."""

from __future__ import annotations

from typing import Any

__all__ = ["CODEGRAPH", "DISTRIBUTION", "RetrievalTool", "Session", "TranscriptError"]

DISTRIBUTION = "pytest-retrieval-ab"  # the name on PyPI (pytest-agent-eval is another project's)

# Loaded on first use: pytest imports this package for its plugin in every session, evals or not.
_HOMES = {"CODEGRAPH": "tool", "RetrievalTool": "tool", "Session": "transcript", "TranscriptError": "transcript"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'pytest_agent_eval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"pytest_agent_eval.{_HOMES[name]}"), name)
