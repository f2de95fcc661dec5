"""pytest-agent-eval: A/B evaluations of a code-retrieval MCP server used by a coding agent."""

from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import Session, TranscriptError

__all__ = ["CODEGRAPH", "RetrievalTool", "Session", "TranscriptError"]
