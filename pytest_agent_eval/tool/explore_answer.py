"""The shape of an explore response: its per-file sections and the files it only names.

Shared knowledge of the tool's answer format, like :mod:`pytest_agent_eval.tool.cli_matcher`: the metrics read
answers with it, and the stand-in model reads them to decide its next call, so it belongs to neither.

A file is *returned* when the response carries its section, which starts at a
``**`path`**`` header line; the last section ends where the trailing ``\\n> `` guidance
begins. The header after the path lists ``name(kind)`` for the nodes shipped in that file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agent_eval.tool import RetrievalTool
    from pytest_agent_eval.transcript import ToolCall

# A section header, wherever it is: led by a literal, the pattern is found by a fast scan for "**`", far
# quicker on tens of KB than a ``^``-anchored MULTILINE pattern; :func:`_sections` keeps those at a line start.
_SECTION_RE = re.compile(r"\*\*`([^`]+)`\*\*(.*)")
# Every ``name(kind)`` of a header. The lookbehind starts a name only where a word starts: without it the pattern
# would be retried from each character of every name (quadratic in a long header's words).
_HEADER_SYMBOL_RE = re.compile(r"(?<![\w$])([\w$]+)\((\w+)\)")
# Where a path-shaped chunk of text ends: whitespace, quotes, brackets, markdown emphasis.
_CHUNK_SPLIT_RE = re.compile(r"[\s`'\"()\[\]{}<>,;|*=‘’“”]+")
# A chunk that is a file reference: optional folders, a name with an extension, then `:126-220` or `#L12`.
_LOCATION_RE = re.compile(r"(?:[:#]L?\d[\d,-]*)+$")  # a line or range after a name: ``:126-220``, ``#L12``
_FILE_REF_RE = re.compile(r"^(?P<path>(?:[^/]*/)*[\w@+-][\w@+.-]*\.(?P<ext>[A-Za-z]\w*))(?:[:#].*)?$")


@dataclass
class FileSection:
    path: str
    chars: int
    symbols: list[tuple[str, str]] = field(default_factory=list)


def _sections(text: str) -> Iterator[re.Match[str]]:
    """Section headers at the start of a line, as ``^``-anchored MULTILINE matching would find them: each line
    that starts with ``**``` is found by a substring search (quicker than the pattern's own scan) and matched."""
    match = _SECTION_RE.match(text)
    if match is not None:
        yield match
    pos = match.end() if match is not None else 0
    while (newline := text.find("\n**`", pos)) >= 0:
        match = _SECTION_RE.match(text, newline + 1)
        if match is not None:
            yield match
            pos = match.end()
        else:
            pos = newline + 1


def file_sections(text: str) -> list[FileSection]:
    """The response's file sections, in order, each with its size in characters."""
    matches = list(_sections(text))
    if not matches:
        return []
    guidance = text.rfind("\n> ")
    sections = []
    for i, match in enumerate(matches):
        if i + 1 < len(matches):
            end = matches[i + 1].start()
        else:
            end = guidance if guidance > match.start() else len(text)
        sections.append(FileSection(match.group(1), end - match.start(), _HEADER_SYMBOL_RE.findall(match.group(2))))
    return sections


def explore_sections(calls: Iterable[ToolCall], tool: RetrievalTool) -> dict[str, list[FileSection]]:
    """The file sections of each answered explore call, by call id: parsed once for every metric that reads them."""
    return {
        call.id: file_sections(call.result.text)
        for call in calls
        if call.result is not None and not call.result.is_error and tool.is_explore(call.name)
    }


def file_references(text: str) -> list[tuple[str, str]]:
    """Path-shaped tokens in ``text`` as (path, extension), ``:line``/``#L`` suffixes dropped.

    Dotted expressions (``res.send``) are path-shaped too; callers that need files decide by
    folder or by an extension they know, as allocation's bare-basename rule does.
    """
    found: list[tuple[str, str]] = []
    # Only a chunk with a dot can carry an extension: whitespace-split words (a C-level split) without one
    # are skipped before any regex runs, which is most of an explore response's code and prose.
    for word in text.replace("\\", "/").split():
        if "." not in word:
            continue
        for chunk in _CHUNK_SPLIT_RE.split(word):
            if "." in chunk and (match := _FILE_REF_RE.match(chunk.rstrip(".,:;!?"))) is not None:
                found.append(match.group("path", "ext"))
    return list(dict.fromkeys(found))


def extensionless_references(text: str, paths: Iterable[str]) -> set[str]:
    """Which of ``paths``, files whose name :func:`file_references` does not read (no extension: ``bin/www``,
    ``Makefile``; a dot file or an odd one: ``lib/.eslintrc``, ``lib/weird.file-name``), ``text`` names: whole, or
    by a folder and the name (``/repo/bin/www:12``). No known extension tells such a name from a word, so a
    basename alone (``www``) never counts."""
    wanted = list(paths)
    if not wanted:
        return set()
    chunks = {_LOCATION_RE.sub("", chunk.rstrip(".,:;!?")) for chunk in _CHUNK_SPLIT_RE.split(text.replace("\\", "/"))}
    return {path for path in wanted if any(("/" in c or c == path) and same_file(path, c) for c in chunks if c)}


def mentioned_paths(text: str) -> set[str]:
    return {path for path, _ in file_references(text)}


def same_file(a: str, b: str) -> bool:
    """Equal, or one ends with ``/`` + the other (absolute vs relative, deeper vs shallower)."""
    a, b = a.strip(), b.strip()
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)
