"""The shape of an explore response: its per-file sections and the files it only names.

A file is *returned* when the response carries its section, which starts at a
``**`path`**`` header line; the last section ends where the trailing ``\\n> `` guidance
begins. The header after the path lists ``name(kind)`` for the nodes shipped in that file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION_RE = re.compile(r"^\*\*`([^`]+)`\*\*(.*)$", re.M)
_HEADER_SYMBOL_RE = re.compile(r"([\w$]+)\((\w+)\)")
# Where a path-shaped chunk of text ends: whitespace, quotes, brackets, markdown emphasis.
_CHUNK_DELIMITERS = r"\s`'\"()\[\]{}<>,;|*=‘’“”"
# A chunk that may be a file reference: a whole chunk (it starts after a delimiter) holding ``.`` + a letter,
# the only way an extension can start. Found in one C-level pass, so the prose and code around it cost nothing.
_CANDIDATE_RE = re.compile(rf"(?<![^{_CHUNK_DELIMITERS}])[^{_CHUNK_DELIMITERS}]*?\.[A-Za-z][^{_CHUNK_DELIMITERS}]*")
# A chunk that is a file reference: optional folders, a name with an extension, then `:126-220` or `#L12`.
_FILE_REF_RE = re.compile(r"^(?P<path>(?:[^/]*/)*[\w@+-][\w@+.-]*\.(?P<ext>[A-Za-z]\w*))(?:[:#].*)?$")


@dataclass
class FileSection:
    path: str
    chars: int
    symbols: list[tuple[str, str]] = field(default_factory=list)


def file_sections(text: str) -> list[FileSection]:
    """The response's file sections, in order, each with its size in characters."""
    matches = list(_SECTION_RE.finditer(text))
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


def returned_files(text: str) -> list[str]:
    return [m.group(1) for m in _SECTION_RE.finditer(text)]


def file_references(text: str) -> list[tuple[str, str]]:
    """Path-shaped tokens in ``text`` as (path, extension), ``:line``/``#L`` suffixes dropped.

    Dotted expressions (``res.send``) are path-shaped too; callers that need files decide by
    folder or by an extension they know, as allocation's bare-basename rule does.
    """
    found: list[tuple[str, str]] = []
    for chunk in _CANDIDATE_RE.findall(text.replace("\\", "/")):
        match = _FILE_REF_RE.match(chunk.rstrip(".,:;!?"))
        if match is not None:
            found.append((match.group("path"), match.group("ext")))
    return list(dict.fromkeys(found))


def mentioned_paths(text: str) -> set[str]:
    return {path for path, _ in file_references(text)}


def same_file(a: str, b: str) -> bool:
    """Equal, or one ends with ``/`` + the other (absolute vs relative, deeper vs shallower)."""
    a, b = a.strip(), b.strip()
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)
