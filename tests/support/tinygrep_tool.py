"""tinygrep described for the harness: the second retrieval tool, a local build rather than an npm package.

Selected with ``--agent-eval-tool support.tinygrep_tool:TINYGREP`` (tests/ importable), or, copied with tinygrep_mcp.py
into a folder on PYTHONPATH, ``tinygrep_tool:TINYGREP``.
"""

from __future__ import annotations

from pathlib import Path

from pytest_agent_eval.tool import RetrievalTool, fingerprint

SERVER = Path(__file__).resolve().parent / "tinygrep_mcp.py"

# What only tinygrep's output holds (see tinygrep_mcp.py): its heading, its section headers, the first line of
# its index file, its MCP initialize answer.
TINYGREP_FINGERPRINTS = (
    fingerprint("tinygrep heading", r'{line}### tinygrep: \d+ sections? for "', "### tinygrep: "),
    fingerprint("tinygrep section", r"{line}\*\*`[^`\n]+`\*\* \u00b7 [\w$]+\(\w+\)", "`** \u00b7 "),
    fingerprint("tinygrep index", r'{line}\{"format": "tinygrep-index/\d+",', '"tinygrep-index/'),
    fingerprint("MCP serverInfo name", r'"serverInfo"\s*:\s*\{\s*"name"\s*:\s*"tinygrep"', '"serverInfo"'),
)

TINYGREP = RetrievalTool(
    name="tinygrep",
    explore="tinygrep_find",
    cli="tinygrep",
    fingerprints=TINYGREP_FINGERPRINTS,
    package=None,
    build=SERVER,
    version="0.1.0",
    index_args=("index", "{repo}"),
    serve_args=("serve", "{repo}"),
    state_dirs=(".tinygrep",),
    env={"DO_NOT_TRACK": "1"},
)
