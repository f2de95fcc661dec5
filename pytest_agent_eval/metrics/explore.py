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
# Path-shaped tokens: an optional folder chain, then a name with an extension.
PATH_TOKEN_RE = re.compile(r"(?<![\w/.@-])((?:[\w@.+-]+/)*[\w@+-]+\.[A-Za-z][\w]{0,9})(?![\w/])")


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


def mentioned_paths(text: str) -> set[str]:
    return set(PATH_TOKEN_RE.findall(text))


def same_file(a: str, b: str) -> bool:
    """Equal, or one ends with ``/`` + the other (absolute vs relative, deeper vs shallower)."""
    a, b = a.strip(), b.strip()
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def find_file(path: str, candidates: list[str]) -> str | None:
    return next((c for c in candidates if same_file(path, c)), None)
