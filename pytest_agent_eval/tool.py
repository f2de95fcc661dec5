"""The retrieval tool under test, described once: how it is provisioned, how it indexes and serves a repository,
which MCP tools it offers, which CLI it has, what its output looks like.

Every metric, the harness and the report take one of these, so the same code evaluates codegraph (:data:`CODEGRAPH`,
the built-in description) or any other MCP server. A project selects its own with ``--agent-eval-tool
MODULE:ATTR`` (ini ``agent_eval_tool``), naming a :class:`RetrievalTool` object (see :func:`load_tool`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# A line as the agent may see it: bare (Bash, Monitor, MCP) or behind the Read tool's line number
# (``    12\t`` or ``    12→``). Anchoring at a line start keeps a fingerprint from firing on the tool's own
# source, where the same words sit inside a string literal after code.
_LINE = r"^(?:[ \t]*\d+(?:\t|\u2192))?"


@dataclass(frozen=True)
class Fingerprint:
    """A named pattern that only the tool's own output produces (never a source file or a grep of one).

    ``probe`` is a cheap pattern every match contains (a literal, mostly): most results lack it, and a
    search for it costs a fraction of the full pattern's, which is tried only where the probe is found.
    """

    name: str
    pattern: re.Pattern[str]
    probe: re.Pattern[str]

    def search(self, text: str) -> re.Match[str] | None:
        return self.pattern.search(text) if self.probe.search(text) else None


def fingerprint(name: str, regex: str, probe: str) -> Fingerprint:
    """A multiline fingerprint; ``{line}`` in ``regex`` stands for a line start (optionally Read-numbered);
    ``probe`` is a regex (usually an escaped literal) that any match of ``regex`` contains."""
    return Fingerprint(name, re.compile(regex.replace("{line}", _LINE), re.M), re.compile(probe, re.M))


# codegraph 1.6.1's NODE_KINDS: the prefix of every node id in its index (``function:<md5>``).
_NODE_KINDS = (
    "file|module|class|struct|interface|trait|protocol|function|method|property|field|variable|constant|enum"
    "|enum_member|type_alias|namespace|parameter|import|export|route|component|union"
)
_POSITIONS = r"\|\d+\|\d+\|\d+\|\d+(?:\||$)"  # start/end line/column of a nodes row

# Taken from the real output of codegraph 1.6.1 (explore, node, query, callers, callees, impact, files, context,
# status, the MCP initialize response, sqlite3 rows of .codegraph/codegraph.db); tests/test_contamination.py
# checks them against that output and against codegraph's own source.
CODEGRAPH_FINGERPRINTS: tuple[Fingerprint, ...] = (
    fingerprint("explore heading", r"{line}\*\*Exploration: [^\n]+\*\*[ \t]*$", re.escape("**Exploration: ")),
    fingerprint("explore symbol count", r"{line}Found \d+ symbols? across \d+ files?\.", r"Found \d+ symbols? across "),
    fingerprint(
        "explore file section", r"{line}\*\*`[^`\n]+`\*\* \u2014 [\w$.]+\([a-z_ ]+\)(?:,|[ \t]*$)", "`\\*\\* \u2014 "
    ),
    # Survives ``| tail`` or ``| sed -n`` cutting the heading off: explore and node mark elided source so.
    fingerprint("explore gap marker", r"{line}\.\.\. \(gap(?:: [^\n]+)?\) \.\.\.[ \t]*$", re.escape("... (gap")),
    fingerprint(
        "node location", r"{line}\*\*Location:\*\* \S+:\d+[ \t]*\n{line}\*\*Signature:\*\*", re.escape("**Location:** ")
    ),
    fingerprint("MCP serverInfo name", r'"serverInfo"\s*:\s*\{\s*"name"\s*:\s*"codegraph"', re.escape('"serverInfo"')),
    fingerprint("index row", rf"\b(?:{_NODE_KINDS}):[0-9a-f]{{32}}\b", r":[0-9a-f]{32}\b"),
    fingerprint("index file row", r"{line}file:[^|\s]+\|file\|", re.escape("|file|")),
    # A ``nodes`` row without its id: kind|name|qualified_name|file_path|language|start/end line/column.
    fingerprint(
        "index node columns",
        rf"(?:{{line}}|\|)(?:{_NODE_KINDS})\|[^|\n]+\|[^|\n]+\|[^|\n]+\|[a-z+#]+{_POSITIONS}",
        _POSITIONS,
    ),
    fingerprint("CLI usage", r"{line}Usage: codegraph \[options\] \[command\][ \t]*$", re.escape("Usage: codegraph ")),
    fingerprint("CLI status", r"{line}CodeGraph Status[ \t]*\n", "CodeGraph Status"),
    fingerprint("CLI query heading", r'{line}Search Results for ".*":[ \t]*$', 'Search Results for "'),
    fingerprint("CLI callers heading", r'{line}Calle(?:r|e)s of ".*" \(\d+\):[ \t]*$', 'Calle[re]s of "'),
    fingerprint(
        "CLI impact heading", r'{line}Impact of changing ".*" \u2014 \d+ affected symbols?:', 'Impact of changing "'
    ),
    fingerprint(
        "CLI files heading", r"{line}Project Structure \(\d+ files?\):[ \t]*$", re.escape("Project Structure (")
    ),
    fingerprint(
        "CLI context heading",
        r"{line}## Code Context[ \t]*\n(?:{line}[ \t]*\n)?{line}\*\*Query:\*\* ",
        "## Code Context",
    ),
)

# The PreToolUse hook's own denial: the hook writes the reason, the contamination metric reads the marker (its
# first clause, which Claude Code passes through verbatim) as the only proof that a call was blocked.
HOOK_DENY_MARKER = "agent-eval: the `{cli}` CLI is not available in this evaluation arm"
HOOK_DENY_REASON = HOOK_DENY_MARKER + "; use the tools you were given (Read, Grep, Glob, Bash without it)."


# Placeholders in RetrievalTool's command templates.
REPO_PLACEHOLDER = "{repo}"


@dataclass(frozen=True)
class RetrievalTool:
    """Everything the harness needs to know of a retrieval tool; nothing outside this description names it.

    Naming: ``name`` is the MCP server's name in the agent's config (``mcp__<name>__…`` tools) and is matched
    (case-insensitively) inside tool names; ``explore`` is the tool whose responses carry ``**`path`**`` file
    sections; ``cli`` is the executable an arm must not reach from Bash; ``fingerprints`` recognise the tool's
    output wherever the agent saw it.

    Provisioning: ``package`` is the npm package to install (``npm install <package>@<version>`` into the cache;
    a spec ``local:<checkout>`` builds a copy of a checkout with ``npm install && npm run build``); with no
    package, ``build`` is a local executable (or a spec ``local:<path>`` names one), copied into the cache.
    ``version`` is the spec used when neither ``--agent-eval-tool-version`` nor the arm pins one; the build
    must report it from ``<cli> --version``.

    Running: ``index_args`` and ``serve_args`` follow the executable in the index and MCP server commands,
    ``{repo}`` standing for the repository; ``state_dirs`` are the files or folders indexing leaves in the
    repository (the without-arm's copy holds none of them); ``env`` is the tool's own environment (telemetry,
    daemons, prompt hooks off) for indexing, its MCP server and the agent.
    """

    name: str = "codegraph"
    explore: str = "codegraph_explore"
    cli: str = "codegraph"
    fingerprints: tuple[Fingerprint, ...] = field(default=CODEGRAPH_FINGERPRINTS)
    package: str | None = "@colbymchenry/codegraph"
    build: Path | None = None
    version: str = "1.6.1"
    index_args: tuple[str, ...] = ("init", "-y", REPO_PLACEHOLDER)
    serve_args: tuple[str, ...] = ("serve", "--mcp", "--path", REPO_PLACEHOLDER)
    state_dirs: tuple[str, ...] = (".codegraph",)
    env: Mapping[str, str] = field(
        hash=False,
        default_factory=lambda: {"DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1", "CODEGRAPH_NO_PROMPT_HOOK": "1"},
    )

    def __post_init__(self) -> None:
        if self.package is None and self.build is None:
            raise ValueError(f"retrieval tool {self.name!r}: give an npm package or a local build")
        if not self.state_dirs:
            raise ValueError(f"retrieval tool {self.name!r}: state_dirs must name what indexing leaves behind")

    def index_command(self, binary: Path | str, repo: Path | str) -> list[str]:
        """The command that indexes ``repo`` (run with ``repo`` as its working directory)."""
        return [str(binary), *(a.replace(REPO_PLACEHOLDER, str(repo)) for a in self.index_args)]

    def mcp_command(self, binary: Path | str, repo: Path | str) -> list[str]:
        """The command that serves ``repo`` over MCP stdio."""
        return [str(binary), *(a.replace(REPO_PLACEHOLDER, str(repo)) for a in self.serve_args)]

    def owns(self, tool_name: str) -> bool:
        """True for any tool of this server (MCP-prefixed or bare)."""
        return self.name.lower() in tool_name.lower()

    def is_explore(self, tool_name: str) -> bool:
        return tool_name == self.explore or tool_name.endswith("__" + self.explore)

    @property
    def deny_reason(self) -> str:
        """What the PreToolUse hook tells the agent when it denies a call to this CLI."""
        return HOOK_DENY_REASON.format(cli=self.cli)

    @property
    def deny_marker(self) -> str:
        """The part of ``deny_reason`` whose presence in a result proves the hook denied the call."""
        return HOOK_DENY_MARKER.format(cli=self.cli)

    def first_fingerprint(self, text: str) -> tuple[Fingerprint, re.Match[str]] | None:
        """The first of the tool's fingerprints found in ``text``, with its match."""
        for candidate in self.fingerprints:
            match = candidate.search(text)
            if match:
                return candidate, match
        return None


CODEGRAPH = RetrievalTool()


def load_tool(reference: str) -> RetrievalTool:
    """The :class:`RetrievalTool` that ``MODULE:ATTR`` names (``MODULE`` importable: installed, or on pytest's
    ``pythonpath``); raises ValueError saying what is wrong."""
    module_name, sep, attr = reference.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTR naming a RetrievalTool, got {reference!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for {reference!r}: {exc}") from None
    tool = module
    for part in attr.split("."):
        if not hasattr(tool, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        tool = getattr(tool, part)
    if not isinstance(tool, RetrievalTool):
        raise ValueError(f"{reference} is a {type(tool).__name__}, not a RetrievalTool")
    return tool
