"""The retrieval tool under test: which MCP tools, which explore tool, which CLI.

Every metric takes one of these, so the same code scores codegraph or any other MCP server.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalTool:
    """Names that identify the retrieval tool in a transcript.

    ``name`` is matched (case-insensitively) inside MCP tool names such as
    ``mcp__codegraph__codegraph_explore``; ``explore`` is the tool whose responses carry
    ``**`path`**`` file sections; ``cli`` is the executable an arm must not reach from Bash.
    """

    name: str = "codegraph"
    explore: str = "codegraph_explore"
    cli: str = "codegraph"

    def owns(self, tool_name: str) -> bool:
        """True for any tool of this server (MCP-prefixed or bare)."""
        return self.name.lower() in tool_name.lower()

    def is_explore(self, tool_name: str) -> bool:
        return tool_name == self.explore or tool_name.endswith("__" + self.explore)


CODEGRAPH = RetrievalTool()
