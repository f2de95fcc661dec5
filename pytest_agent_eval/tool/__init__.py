"""The retrieval tool under test, described once: how it is provisioned, how it indexes and serves a repository,
which MCP tools it offers, which CLI it has, what its output looks like.

Every metric, the harness and the report take one of these, so the same code evaluates codegraph (:data:`CODEGRAPH`,
the built-in description) or any other MCP server. A project selects its own with ``--agent-eval-tool
MODULE:ATTR`` (ini ``agent_eval_tool``), naming a :class:`RetrievalTool` object (see :func:`load_tool`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import AnyStr

import ahocorasick_rs

# A line as the agent may see it: bare (Bash, Monitor, MCP) or behind the Read tool's line number
# (``    12\t`` or ``    12→``). Anchoring at a line start keeps a fingerprint from firing on the tool's own
# source, where the same words sit inside a string literal after code.
_LINE = r"^(?:[ \t]*\d+(?:\t|\u2192))?"


@dataclass(frozen=True)
class Fingerprint:
    """A named pattern that only the tool's own output produces (never a source file or a grep of one).

    Every match contains one of ``literals``: most results hold none, and one pass of an Aho-Corasick automaton
    finds the literals of every fingerprint at once, so the full pattern is tried only on the few results that
    hold one. Where no literal is rare enough (an index row is a kind, a colon and 32 hex digits), ``probe`` is
    a cheap regex every match contains, and the literals are its leads: each of its matches begins with one
    of them (a colon and a hex digit), so it is tried only where a lead occurs. The probe is matched on the
    text's UTF-8 bytes, where a lead's offset is (``\\d``, ``\\w`` and ``\\b`` are ASCII there: write the digits a
    match holds as ``[0-9]``, so the bytes see every one the text does). ``regex`` and ``probe_regex``
    are compiled (multiline) on first use: most of a tool's fingerprints never get that far in a session, and
    compiling them all took longer than ``agent-eval score`` takes to score a small session.
    """

    name: str
    regex: str
    literals: tuple[str, ...] = ()
    probe_regex: str | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return self._compile(self.regex)

    @cached_property
    def probe(self) -> re.Pattern[bytes] | None:
        """The probe, matched on the text's UTF-8 bytes (where the screen has found its leads)."""
        return self._compile(self.probe_regex.encode()) if self.probe_regex is not None else None

    def _compile(self, regex: AnyStr) -> re.Pattern[AnyStr]:
        try:
            return re.compile(regex, re.M)
        except re.error as exc:
            raise ValueError(f"fingerprint {self.name!r}: {exc}: {regex!r}") from None

    def search(self, text: str) -> re.Match[str] | None:
        if self.probe is not None:
            screened = self.probe.search(_utf8(text)) is not None
        else:
            screened = any(literal in text for literal in self.literals)
        return self.pattern.search(text) if screened else None


def fingerprint(name: str, regex: str, *literals: str, probe: str | None = None) -> Fingerprint:
    """A multiline fingerprint; ``{line}`` in ``regex`` stands for a line start (optionally Read-numbered).
    Any match of ``regex`` contains one of ``literals``; or, with ``probe`` (a regex), a match of ``probe`` that
    begins with one of them."""
    if not literals:
        raise ValueError(f"fingerprint {name!r}: give the literals every match contains (or its probe begins with)")
    return Fingerprint(name, regex.replace("{line}", _LINE), literals, probe)


# Scanners by the identity of their fingerprints (hashing sixteen patterns per result would cost more than the
# scan); each entry keeps its tuple alive, so an id is not reused while it is cached.
_SCANNERS: dict[int, tuple[tuple[Fingerprint, ...], _Scanner]] = {}


def _scanner(fingerprints: tuple[Fingerprint, ...]) -> _Scanner:
    cached = _SCANNERS.get(id(fingerprints))
    if cached is None or cached[0] is not fingerprints:
        cached = _SCANNERS[id(fingerprints)] = (fingerprints, _Scanner(fingerprints))
    return cached[1]


@functools.lru_cache(maxsize=1024)
def _contains_folded(name: str, tool_name: str) -> bool:
    """``name`` in ``tool_name``, ignoring case; remembered, since every result asks it of the same few names."""
    return name.lower() in tool_name.lower()


class _Scanner:
    """Finds the first of several fingerprints in a text; one literal pass screens out the texts that hold none.

    The automaton searches leftmost-first, without overlaps (several times faster than reporting every
    occurrence): it finds a match whenever any literal occurs, which is all the screen needs. It searches the text's
    UTF-8 bytes: a literal occurs in a text exactly when its bytes occur in the text's, and a ``str`` search costs
    about six times as much (each match's byte offset is turned back into a character index).

    A probe's leads have an automaton of their own that reports every occurrence, overlaps included: there each
    occurrence is a place to try the probe, and another literal overlapping it must not hide it. Trying the
    probes only there, rather than searching every text with each, takes a third of the time on codegraph sessions.
    """

    def __init__(self, fingerprints: tuple[Fingerprint, ...]) -> None:
        self.fingerprints = fingerprints
        literals = [_utf8(lit) for fp in fingerprints if fp.probe is None for lit in fp.literals]
        self.automaton = (
            ahocorasick_rs.BytesAhoCorasick(
                list(dict.fromkeys(literals)), matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
            )
            if literals
            else None
        )
        probes_of: dict[bytes, list[re.Pattern[bytes]]] = {}  # each lead, the probes it begins
        for fp in fingerprints:
            if fp.probe is not None:
                for lead in fp.literals:
                    probes_of.setdefault(_utf8(lead), []).append(fp.probe)
        self.lead_probes = list(probes_of.values())
        self.leads = ahocorasick_rs.BytesAhoCorasick(list(probes_of)) if probes_of else None
        # The second screen, for a literal a transform spread out (blanks widened or made tabs, quotes escaped): a pass
        # finds the longest word of each literal (its key: four or more characters, none a blank, quote or
        # backslash); around a key's place the text is searched with blanks, quotes and backslashes left out, for
        # the literals of that key left out so too. Most texts hold no key.
        key_of = {lit: _key(lit) for lit in dict.fromkeys(literals) if _WORD.search(lit)}
        keys = list(dict.fromkeys(key_of.values()))
        self.keys = (
            ahocorasick_rs.BytesAhoCorasick(keys, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest) if keys else None
        )
        self.squeezed_of = [
            [lit.translate(None, _SQUEEZED) for lit, its_key in key_of.items() if its_key == key] for key in keys
        ]

    def first(self, text: str) -> tuple[Fingerprint, re.Match[str]] | None:
        return self._match(text) if self._screened(_utf8(text)) else None

    def first_or_hidden(self, text: str) -> tuple[tuple[Fingerprint, re.Match[str]] | None, bool]:
        """The first fingerprint in ``text``; else None and whether a transform may have hidden one: a literal is
        there but no pattern matched (a line start moved), or one is there once blanks, quotes and backslashes are
        left out (blanks widened, quotes escaped), or colour codes are, or the text is a JSON document holding
        escapes."""
        data = _utf8(text)
        if self._screened(data):
            hit = self._match(text)
            return hit, hit is None
        if b"\x1b" in data or (b"\\" in data and _JSON_START.match(data)):
            return None, True
        if self.keys is None or not any(spread in data for spread in _SPREAD):
            return None, False
        for key, start, end in self.keys.find_matches_as_indexes(data):
            around = data[max(0, start - _REACH) : end + _REACH].translate(None, _SQUEEZED)
            if any(literal in around for literal in self.squeezed_of[key]):
                return None, True
        return None, False

    def _match(self, text: str) -> tuple[Fingerprint, re.Match[str]] | None:
        for candidate in self.fingerprints:
            match = candidate.search(text)
            if match:
                return candidate, match
        return None

    def _screened(self, data: bytes) -> bool:
        """Whether a literal occurs in the text, or a probe matches at one of its leads: else no fingerprint can."""
        if self.automaton is not None and self.automaton.find_matches_as_indexes(data):
            return True
        return self.leads is not None and any(
            probe.match(data, start)
            for lead, start, _ in self.leads.find_matches_as_indexes(data, overlapping=True)
            for probe in self.lead_probes[lead]
        )


_JSON_START = re.compile(rb'\s*["{\[]')  # a JSON document's first character, after any blanks
_WORD = re.compile(rb"[^\s\"'\\]{4,}")
_SQUEEZED = b" \t\r\n\x0b\x0c\"'\\"  # what the second screen leaves out of a literal and the text around a key
_REACH = 64  # bytes of text searched on either side of a key's place
_SPREAD = (b"  ", b"\t", b'\\"')  # what a spread-out literal holds: two blanks, a tab, an escaped quote


def _key(literal: bytes) -> bytes:
    """The word of a literal the second screen looks for: one with punctuation (rarer in prose and code), else
    the longest."""
    words = _WORD.findall(literal)
    marked = [word for word in words if not word.isalpha()]
    return max(marked or words, key=len)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate (JSON allows one) has bytes too


# codegraph 1.6.1's NODE_KINDS: the prefix of every node id in its index (``function:<md5>``).
_NODE_KINDS = (
    "file|module|class|struct|interface|trait|protocol|function|method|property|field|variable|constant|enum"
    "|enum_member|type_alias|namespace|parameter|import|export|route|component|union"
)
_POSITIONS = r"\|[0-9]+\|[0-9]+\|[0-9]+\|[0-9]+(?:\||$)"  # start/end line/column of a nodes row, as sqlite prints them
_BLANK_LINES = r"(?:{line}[ \t]*\n)*"  # as many empty lines (Read-numbered or bare) as there are
_DIGITS = "0123456789"
_HEX = _DIGITS + "abcdef"


def _leads(first: str, seconds: str) -> list[str]:
    """The two-character leads of a probe: ``first`` and then each of ``seconds``."""
    return [first + second for second in seconds]


# Taken from the real output of codegraph 1.6.1 (explore, node, query, callers, callees, impact, files, context,
# status, the MCP initialize response, sqlite3 rows of .codegraph/codegraph.db); tests/test_contamination.py
# checks them against that output and against codegraph's own source.
CODEGRAPH_FINGERPRINTS: tuple[Fingerprint, ...] = (
    fingerprint("explore heading", r"{line}\*\*Exploration: [^\n]+\*\*[ \t]*$", "**Exploration: "),
    # A heading of plain words is the tool's only with what follows it: a script may print "Found 12 symbols
    # across 3 files." or "Project Structure (11 files):" too, but not the tool's next lines.
    fingerprint(
        "explore symbol count",
        rf"{{line}}Found \d+ symbols? across \d+ files?\.[ \t]*\n{_BLANK_LINES}{{line}}\*\*",  # "**Blast radius"
        " symbols across ",
        " symbol across ",
    ),
    fingerprint(
        "explore file section", r"{line}\*\*`[^`\n]+`\*\* \u2014 [\w$.]+\([a-z_ ]+\)(?:,|[ \t]*$)", "`** \u2014 "
    ),
    # Survives ``| tail`` or ``| sed -n`` cutting the heading off: explore and node mark elided source so.
    fingerprint("explore gap marker", r"{line}\.\.\. \(gap(?:: [^\n]+)?\) \.\.\.[ \t]*$", "... (gap"),
    fingerprint("node location", r"{line}\*\*Location:\*\* \S+:\d+[ \t]*\n{line}\*\*Signature:\*\*", "**Location:** "),
    fingerprint("MCP serverInfo name", r'"serverInfo"\s*:\s*\{\s*"name"\s*:\s*"codegraph"', '"serverInfo"'),
    fingerprint("index row", rf"\b(?:{_NODE_KINDS}):[0-9a-f]{{32}}\b", *_leads(":", _HEX), probe=r":[0-9a-f]{32}\b"),
    fingerprint("index file row", r"{line}file:[^|\s]+\|file\|", "|file|"),
    # A ``nodes`` row without its id: kind|name|qualified_name|file_path|language|start/end line/column.
    fingerprint(
        "index node columns",
        rf"(?:{{line}}|\|)(?:{_NODE_KINDS})\|[^|\n]+\|[^|\n]+\|[^|\n]+\|[a-z+#]+{_POSITIONS}",
        *_leads("|", _DIGITS),
        probe=_POSITIONS,
    ),
    fingerprint("CLI usage", r"{line}Usage: codegraph \[options\] \[command\][ \t]*$", "Usage: codegraph "),
    fingerprint("CLI status", r"{line}CodeGraph Status[ \t]*\n", "CodeGraph Status"),
    fingerprint(
        "CLI query heading",
        rf'{{line}}Search Results for ".*":[ \t]*\n{_BLANK_LINES}'  # then a hit: "function    send"
        rf"{{line}}(?:{_NODE_KINDS})[ \t]+[^\n]+\n{{line}}[ \t]+\S+:\d+",  # and its place: "  lib/response.js:111"
        'Search Results for "',
    ),
    fingerprint(
        "CLI callers heading",
        rf'{{line}}Calle(?:r|e)s of ".*" \(\d+\):[ \t]*\n{_BLANK_LINES}{{line}}(?:{_NODE_KINDS})[ \t]+\S',
        'Callers of "',
        'Callees of "',
    ),
    fingerprint(
        "CLI impact heading", r'{line}Impact of changing ".*" \u2014 \d+ affected symbols?:', 'Impact of changing "'
    ),
    fingerprint(  # and a file of the tree below it, "init.js (javascript, 4 symbols)"
        "CLI files heading",
        r"{line}Project Structure \(\d+ files?\):[ \t]*\n(?:[^\n]*\n){0,40}?[^\n]*\([a-z+#]+, \d+ symbols?\)",
        "Project Structure (",
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


@dataclass(frozen=True, kw_only=True)
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

    A tool is only what it declares: every field but ``package``, ``build`` and ``env`` is required (by keyword), so
    that a tool which forgets its fingerprints or state folders is an error, never one gated against another's
    output or copied without another's index (:data:`CODEGRAPH` spells out all of its own).
    """

    name: str
    explore: str
    cli: str
    fingerprints: tuple[Fingerprint, ...]
    package: str | None = None
    build: Path | None = None
    version: str
    index_args: tuple[str, ...]
    serve_args: tuple[str, ...]
    state_dirs: tuple[str, ...]
    env: Mapping[str, str] = field(hash=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.package is None and self.build is None:
            raise ValueError(f"retrieval tool {self.name!r}: give an npm package or a local build")
        if not self.state_dirs:
            raise ValueError(f"retrieval tool {self.name!r}: state_dirs must name what indexing leaves behind")
        if not self.fingerprints:
            raise ValueError(
                f"retrieval tool {self.name!r}: fingerprints must name patterns only its output produces (the "
                "contamination gate looks for nothing else)"
            )

    def index_command(self, binary: Path | str, repo: Path | str) -> list[str]:
        """The command that indexes ``repo`` (run with ``repo`` as its working directory)."""
        return [str(binary), *(a.replace(REPO_PLACEHOLDER, str(repo)) for a in self.index_args)]

    def mcp_command(self, binary: Path | str, repo: Path | str) -> list[str]:
        """The command that serves ``repo`` over MCP stdio."""
        return [str(binary), *(a.replace(REPO_PLACEHOLDER, str(repo)) for a in self.serve_args)]

    def owns(self, tool_name: str) -> bool:
        """True for any tool of this server (MCP-prefixed or bare)."""
        return _contains_folded(self.name, tool_name)

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
        return _scanner(self.fingerprints).first(text)

    def first_fingerprint_or_hidden(self, text: str) -> tuple[tuple[Fingerprint, re.Match[str]] | None, bool]:
        """:meth:`first_fingerprint`, and when it finds none, whether a transform of the text may hide one (then
        the text is worth normalising: :func:`pytest_agent_eval.metrics.transforms.normalised`)."""
        return _scanner(self.fingerprints).first_or_hidden(text)


CODEGRAPH = RetrievalTool(
    name="codegraph",
    explore="codegraph_explore",
    cli="codegraph",
    fingerprints=CODEGRAPH_FINGERPRINTS,
    package="@colbymchenry/codegraph",
    version="1.6.1",
    index_args=("init", "-y", REPO_PLACEHOLDER),
    serve_args=("serve", "--mcp", "--path", REPO_PLACEHOLDER),
    state_dirs=(".codegraph",),
    env={"DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1", "CODEGRAPH_NO_PROMPT_HOOK": "1"},
)


def load_tool(reference: str) -> RetrievalTool:
    """The :class:`RetrievalTool` that ``MODULE:ATTR`` names (``MODULE`` importable: installed, or on pytest's
    ``pythonpath``); raises ValueError saying what is wrong."""
    from pytest_agent_eval.reference import load_reference

    return load_reference(reference, RetrievalTool)
