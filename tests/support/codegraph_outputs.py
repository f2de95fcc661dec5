"""Real codegraph 1.6.1 output recorded on express (tests/data): each file with the fingerprint it must carry, an
explore answer, and a file as Claude Code's Read tool shows it."""

from __future__ import annotations

from support.paths import DATA

REAL = DATA / "codegraph-1.6.1"
EXPLORE = (DATA / "explore-express-1.6.1.txt").read_text()


def read_tool_view(text: str, arrow: bool = False) -> str:
    """A file as the Read tool shows it: every line behind its number."""
    mark = "\u2192" if arrow else "\t"
    return "\n".join(f"{n:>6}{mark}{line}" for n, line in enumerate(text.splitlines(), 1))


# Each real output of codegraph 1.6.1 (express, tests/data/codegraph-1.6.1) and the fingerprint it must carry.
REAL_OUTPUTS = {
    "status.txt": "CLI status",
    "help.txt": "CLI usage",
    "query.txt": "CLI query heading",
    "callers.txt": "CLI callers heading",
    "callees.txt": "CLI callers heading",
    "impact.txt": "CLI impact heading",
    "files.txt": "CLI files heading",
    "context.txt": "CLI context heading",
    "node.txt": "node location",
    "mcp-initialize.json": "MCP serverInfo name",
    "sqlite3-nodes.txt": "index row",
    "sqlite3-nodes.json": "index row",
    "sqlite3-node-columns.txt": "index node columns",
}
