"""Explore allocation efficiency: the share of returned bytes the final answer drew on.

    efficiency = chars of file sections whose file the answer cited / chars of all file sections

The envelope is every file section of every answered explore call; a file returned twice is
charged twice, because it occupied the window twice. A file is *used* when the answer cites it:

* **path** — the answer names the file (relative, absolute, ``:line`` suffixed, or a bare
  basename whose extension the envelope shipped, so ``res.send`` is not a file);
* **symbol** — a name inside a code span of the answer that the file's section header lists
  with a defining kind. Guarded so it costs efficiency rather than inflating it: call sites and
  imports never count, a definition beats a ``variable``/``constant`` alias, and a name owned
  by 3+ returned files identifies none of them.

With hand-specified ``answer_globs`` (``--answer``) the globs decide and citations are not read.
It is a relative metric: compare builds on the same question, never quote it as absolute waste.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.tool.explore_answer import (
    FileSection,
    explore_sections,
    extensionless_references,
    file_references,
    same_file,
)
from pytest_agent_eval.transcript import Session

# Header kinds that mean "this file defines the name" (never calls/imports/instantiates/references).
DEFINING_KINDS = frozenset(
    {
        "module", "class", "struct", "interface", "trait", "protocol", "function", "method", "property",
        "field", "variable", "constant", "enum", "enum_member", "type_alias", "namespace", "route", "component",
    }
)  # fmt: skip
# An import binding (`var compileETag = require('./utils')`) is a variable node: weaker than a definition.
WEAK_KINDS = frozenset({"variable", "constant"})
# A name on this many returned files is too generic (`send`, `get`) to identify any of them.
AMBIGUITY_LIMIT = 3
# Shorter tokens are far more likely prose or loop variables than a symbol citation.
MIN_SYMBOL_LEN = 4
# Keywords and prose words agents put in code spans that name no particular symbol.
STOPWORDS = frozenset(
    {
        "this", "that", "self", "true", "false", "null", "none", "data", "value", "error", "result",
        "object", "string", "number", "type", "name", "function", "return", "undefined", "const",
        "class", "import", "export", "async", "await", "default", "super", "void", "boolean", "array",
        "else", "then", "from", "with",
    }
)  # fmt: skip

# Code in the answer: fenced blocks and inline spans (the symbol channel reads only these).
_FENCE_RE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)(?:^[ \t]*(?P=fence)[ \t]*$|\Z)", re.M | re.S
)
# A run of backticks not preceded by one: written as a backtick first (the look-behind after it), so the search
# jumps from backtick to backtick instead of trying every position.
_INLINE_CODE_RE = re.compile(r"(?P<ticks>`(?<!``)`*)(?!`)(?P<body>[^\n]+?)(?<!`)(?P=ticks)(?!`)")
_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")


@dataclass
class FileUse:
    """One file section of one explore call, and whether the answer used it."""

    path: str
    chars: int
    call: int
    via: str | None = None  # "path" | "symbol" | "glob" | None (unused)
    symbol: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "chars": self.chars, "via": self.via, "symbol": self.symbol, "call": self.call}


@dataclass
class CallAllocation:
    """One answered explore call: its sections' chars and how many the answer used."""

    index: int
    query: str
    envelope_chars: int
    used_chars: int
    path_used_chars: int
    files: int
    used_files: int
    call_id: str = ""  # the explore call's tool_use id

    @property
    def efficiency(self) -> float | None:
        return self.used_chars / self.envelope_chars if self.envelope_chars else None

    @property
    def path_efficiency(self) -> float | None:
        return self.path_used_chars / self.envelope_chars if self.envelope_chars else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "call": self.call_id,
            "query": self.query,
            "efficiency": self.efficiency,
            "path_efficiency": self.path_efficiency,
            "used_chars": self.used_chars,
            "envelope_chars": self.envelope_chars,
            "files": self.files,
            "used_files": self.used_files,
        }


@dataclass
class Allocation:
    """Per section (``files``, in call order), per call, and pooled over the session."""

    files: list[FileUse] = field(default_factory=list)
    calls: list[CallAllocation] = field(default_factory=list)
    answer_source: str = "none"  # "result" | "assistant" | "globs" | "none"
    explore: str = field(kw_only=True)  # the explore tool's name, for the rendered block

    @property
    def envelope_chars(self) -> int:
        return sum(f.chars for f in self.files)

    def unmatched(self, answer_globs: Sequence[str]) -> list[str]:
        """The ``--answer`` globs that match no returned file: a typo there would score 0% without a word."""
        return [glob for glob in answer_globs if not any(_matches_glob(f.path, [glob]) for f in self.files)]

    @property
    def used_chars(self) -> int:
        return sum(f.chars for f in self.files if f.via)

    @property
    def path_used_chars(self) -> int:
        return sum(f.chars for f in self.files if f.via == "path")

    @property
    def efficiency(self) -> float | None:
        """None when no explore returned a file section: there is nothing to divide."""
        envelope = self.envelope_chars
        return self.used_chars / envelope if envelope else None

    @property
    def path_efficiency(self) -> float | None:
        """The path channel alone; None when nothing was returned or globs, not citations, decided."""
        envelope = self.envelope_chars
        if not envelope or self.answer_source == "globs":
            return None
        return self.path_used_chars / envelope

    def by_file(self) -> list[FileUse]:
        """One row per distinct file, chars summed over the calls that returned it, largest first."""
        pooled: dict[str, FileUse] = {}
        for f in self.files:
            row = pooled.get(f.path)
            if row is None:  # a file's first section makes its row (setdefault would build one for every section)
                row = pooled[f.path] = FileUse(f.path, 0, f.call, f.via, f.symbol)
            row.chars += f.chars
        return sorted(pooled.values(), key=lambda f: -f.chars)

    def to_dict(self) -> dict[str, Any]:
        return {
            "efficiency": self.efficiency,
            "path_efficiency": self.path_efficiency,
            "used_chars": self.used_chars,
            "envelope_chars": self.envelope_chars,
            "path_used_chars": self.path_used_chars,
            "answer_source": self.answer_source,
            "files": [f.to_dict() for f in self.files],
            "calls": [c.to_dict() for c in self.calls],
        }


def allocation(
    session: Session,
    tool: RetrievalTool,
    answer_globs: Sequence[str] = (),
    sections_by_call: Mapping[str, list[FileSection]] | None = None,
) -> Allocation:
    """Allocation efficiency of every answered explore call in ``session`` (all threads); ``sections_by_call``:
    :func:`~pytest_agent_eval.tool.explore_answer.explore_sections` of the session, when the caller has them."""
    if sections_by_call is None:
        sections_by_call = explore_sections(session.calls, tool)
    files: list[FileUse] = []
    sections: list[FileSection] = []
    calls: list[CallAllocation] = []
    answered = [c for c in session.calls if tool.is_explore(c.name) and c.answered]
    for index, call in enumerate(answered, start=1):
        returned = sections_by_call[call.id]
        # A response without sections (no match, a usage hint) spent nothing on files.
        if not returned:
            continue
        sections += returned
        files += [FileUse(s.path, s.chars, index) for s in returned]
        query = call.input.get("query")
        calls.append(CallAllocation(index, query if isinstance(query, str) else "", 0, 0, 0, len(returned), 0, call.id))

    if answer_globs:
        source = "globs"
        verdict = {path: ("glob", None) for path in {f.path for f in files} if _matches_glob(path, answer_globs)}
    else:
        answers = session.answer_texts()
        source = _answer_source(session, answers)
        verdict = _cited(sections, "\n\n".join(answers))

    by_index = {c.index: c for c in calls}
    for f in files:
        f.via, f.symbol = verdict.get(f.path, (None, None))
        c = by_index[f.call]
        c.envelope_chars += f.chars
        if f.via:
            c.used_chars += f.chars
            c.used_files += 1
        if f.via == "path":
            c.path_used_chars += f.chars
    return Allocation(files, calls, source, explore=tool.explore)


def _answer_source(session: Session, answers: list[str]) -> str:
    if not answers:
        return "none"
    return "result" if any(r.text and not r.is_error for r in session.results) else "assistant"


def _matches_glob(path: str, globs: Sequence[str]) -> bool:
    """fnmatch on the whole path or on any folder-boundary suffix (`response.js` matches `lib/response.js`)."""
    parts = path.split("/")
    suffixes = ["/".join(parts[i:]) for i in range(len(parts))]
    patterns = [g.strip().removeprefix("./") for g in globs]
    return any(fnmatchcase(s, g) for g in patterns for s in suffixes)


def _cited(sections: list[FileSection], answer: str) -> dict[str, tuple[str, str | None]]:
    """path → (channel, symbol) for every returned file the answer cites; the path channel wins."""
    if not sections:  # nothing returned, nothing to credit: skip reading the answer
        return {}
    paths = list(dict.fromkeys(s.path for s in sections))
    extensions = {p.rsplit(".", 1)[1].lower() for p in paths if "." in p.rsplit("/", 1)[-1]}
    # Two paths are the same file only if their basenames are equal: compare within a basename, not all pairs.
    cited_by_name: dict[str, list[str]] = {}
    for cited in citation_paths(answer, extensions):
        cited_by_name.setdefault(_basename(cited), []).append(cited)
    verdict: dict[str, tuple[str, str | None]] = {}
    for path in paths:
        candidates = cited_by_name.get(_basename(path))
        if candidates and any(same_file(path, c) for c in candidates):
            verdict[path] = ("path", None)
    # Rare: a name no reference pattern reads (`bin/www`, `Makefile`, `lib/.eslintrc`, `lib/weird.file-name`) is
    # cited whole or with its folder (docs/metrics/allocation.md, "Path references").
    bare = [path for path in paths if not file_references(path)]
    for path in extensionless_references(answer, bare):
        verdict[path] = ("path", None)
    names = code_span_names(answer)
    owners = symbol_owners(sections, set(names)) if names else {}  # an answer without code spans names no symbol
    for name in names:
        for path in owners.get(name, ()):
            verdict.setdefault(path, ("symbol", name))
    return verdict


def _basename(path: str) -> str:
    return path.strip().rsplit("/", 1)[-1]


def symbol_owners(sections: Iterable[FileSection], names: set[str] | None = None) -> dict[str, set[str]]:
    """name → the returned files that identify it: its definers, or its variable/constant
    owners when nothing defines it more strongly; names on 3+ files are dropped. ``names``: only those
    are looked up (the answer's), so the headers' other names are never collected."""
    strong: dict[str, set[str]] = {}
    weak: dict[str, set[str]] = {}
    for section in sections:
        for name, kind in section.symbols:
            if (names is None or name in names) and kind in DEFINING_KINDS:  # most names are not asked for
                (weak if kind in WEAK_KINDS else strong).setdefault(name, set()).add(section.path)
    owners = {**weak, **strong}
    return {name: paths for name, paths in owners.items() if len(paths) < AMBIGUITY_LIMIT}


def citation_paths(text: str, extensions: set[str]) -> list[str]:
    """File references in ``text``, ``:line``/``#L`` suffixes dropped.

    A reference with a folder always counts; a bare basename only when its (lower-cased)
    extension is in ``extensions``, which keeps dotted expressions such as ``res.send`` and
    ``mime.contentType`` from reading as files.
    """
    found = [path for path, ext in file_references(text) if "/" in path or ext.lower() in extensions]
    return list(dict.fromkeys(found))


def code_span_names(text: str) -> list[str]:
    """Identifiers inside inline code spans and fenced blocks, in order, minus short names and stopwords.

    Prose mentions do not count: a backtick is the agent marking the token as code.
    """
    spans: list[str] = []

    def keep_fence(match: re.Match[str]) -> str:
        spans.append(match.group("body"))
        return "\n"

    # Each pattern needs its delimiter: a text without one skips that scan.
    prose = _FENCE_RE.sub(keep_fence, text) if "```" in text or "~~~" in text else text
    if "`" in prose:
        spans += [body for _ticks, body in _INLINE_CODE_RE.findall(prose)]
    # One scan of the spans joined by a newline, which no identifier holds: the same tokens, in the same order.
    tokens = dict.fromkeys(_IDENT_RE.findall("\n".join(spans)))
    return [token for token in tokens if len(token) >= MIN_SYMBOL_LEN and token.lower() not in STOPWORDS]
