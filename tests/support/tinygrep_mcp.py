#!/usr/bin/env python3
"""tinygrep: a tiny retrieval tool with an MCP stdio server, the second tool the test suite runs the harness on.

Standard library only (it runs inside the agent's sandbox, under whatever ``python3`` is on PATH)::

    tinygrep_mcp.py --version          # "tinygrep 0.1.0"
    tinygrep_mcp.py index <repo>       # writes <repo>/.tinygrep/index.json: the definitions of every source file
    tinygrep_mcp.py serve <repo>       # MCP over stdio (newline-delimited JSON-RPC): one tool, tinygrep_find
    tinygrep_mcp.py find <repo> <query...>  # the same answer on stdout (the CLI the without-arm must not reach)

An answer is a heading, then one ``**`path`** · name(kind), …`` section per file ranked by how many of the
query's words its definitions and text hold, each with a line-numbered excerpt around the matching definitions
— the section shape the harness's explore parsers read (``pytest_agent_eval.tool.explore_answer``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

VERSION = "0.1.0"
STATE = ".tinygrep"
INDEX_FORMAT = "tinygrep-index/1"
SOURCE_SUFFIXES = {".js", ".mjs", ".cjs", ".ts", ".py", ".go", ".rb", ".java", ".rs"}
SKIP_DIRS = {".git", "node_modules", STATE, "dist", "build"}
MAX_FILE_BYTES = 200_000
MAX_FILES = 3  # sections per answer
CONTEXT = 12  # lines shown after a matching definition
DEFINITIONS = (
    (re.compile(r"^\s*(?:export\s+)?(?:async\s+)?function\s*\*?\s*([\w$]+)"), "function"),
    (re.compile(r"^\s*(?:[\w$]+\.)+([\w$]+)\s*=\s*(?:async\s+)?function\b"), "method"),
    (re.compile(r"^\s*(?:export\s+)?class\s+([\w$]+)"), "class"),
    (re.compile(r"^\s*(?:async\s+)?def\s+(\w+)"), "function"),
    (re.compile(r"^\s*func\s+(?:\([^)]*\)\s*)?(\w+)"), "function"),
)
WORD = re.compile(r"[A-Za-z_$][\w$]{2,}")
STOPWORDS = set("the and for how does what when where which with this that from into are its".split())
TOOL = {
    "name": "tinygrep_find",
    "description": "Find the source files and definitions that answer a question about this repository.",
    "inputSchema": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "the question or symbol names"}},
        "required": ["query"],
    },
}


def index(repo: Path) -> Path:
    """Write the definitions of every source file of ``repo`` to ``<repo>/.tinygrep/index.json``."""
    files: dict[str, list[list]] = {}
    for directory, dirs, names in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = Path(directory) / name
            if path.suffix not in SOURCE_SUFFIXES or path.stat().st_size > MAX_FILE_BYTES:
                continue
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            files[path.relative_to(repo).as_posix()] = [
                [match.group(1), kind, number]
                for number, line in enumerate(lines, 1)
                for pattern, kind in DEFINITIONS
                if (match := pattern.match(line))
            ]
    state = repo / STATE
    state.mkdir(exist_ok=True)
    target = state / "index.json"
    # The format tag comes first on its own line: the harness's fingerprint for a read of the index.
    target.write_text('{"format": "' + INDEX_FORMAT + '",\n"files": ' + json.dumps(files) + "}\n", encoding="utf-8")
    return target


def find(repo: Path, query: str) -> str:
    """The answer to ``query``: the best-matching files' sections."""
    data = json.loads((repo / STATE / "index.json").read_text(encoding="utf-8"))
    words = [w.lower() for w in dict.fromkeys(WORD.findall(query)) if w.lower() not in STOPWORDS]
    ranked = []
    for path, definitions in data["files"].items():
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        lowered = text.lower()
        hits = [d for d in definitions if any(w in d[0].lower() for w in words)]
        score = 3 * len(hits) + sum(lowered.count(w) for w in words)
        if score:
            ranked.append((-score, path, hits or definitions[:1], text.splitlines()))
    ranked.sort()
    chosen = ranked[:MAX_FILES]
    out = [f'### tinygrep: {len(chosen)} section{"s" if len(chosen) != 1 else ""} for "{query}"', ""]
    for _, path, hits, lines in chosen:
        names = ", ".join(f"{name}({kind})" for name, kind, _ in hits[:6])
        out += [f"**`{path}`** · {names}", "", "```"]
        shown: set[int] = set()
        for _, _, line in hits[:4]:
            shown.update(range(line, min(line + CONTEXT, len(lines) + 1)))
        previous = 0
        for number in sorted(shown):
            if previous and number != previous + 1:
                out.append("...")
            out.append(f"{number}\t{lines[number - 1]}")
            previous = number
        out += ["```", ""]
    out.append("> tinygrep: ranked by query words in definitions and text; Read a file for more.")
    return "\n".join(out)


def serve(repo: Path) -> None:
    """Answer MCP JSON-RPC requests, one per line, until stdin closes."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification (notifications/initialized, cancelled): nothing to answer
        method, params = request.get("method"), request.get("params") or {}
        reply: dict = {"jsonrpc": "2.0", "id": request["id"]}
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": dict(name="tinygrep", version=VERSION),  # (a literal would match its fingerprint)
            }
        elif method == "tools/list":
            reply["result"] = {"tools": [TOOL]}
        elif method == "tools/call" and params.get("name") == TOOL["name"]:
            query = str((params.get("arguments") or {}).get("query", ""))
            reply["result"] = {"content": [{"type": "text", "text": find(repo, query)}], "isError": False}
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"tinygrep: no method {method}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:
        print(f"tinygrep {VERSION}")
        return 0
    if len(argv) >= 2 and argv[0] in ("index", "serve"):
        repo = Path(argv[1]).resolve()
        if argv[0] == "index":
            print(index(repo))
        else:
            serve(repo)
        return 0
    if len(argv) >= 3 and argv[0] == "find":
        print(find(Path(argv[1]).resolve(), " ".join(argv[2:])))
        return 0
    print("usage: tinygrep --version | index <repo> | serve <repo> | find <repo> <query>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
