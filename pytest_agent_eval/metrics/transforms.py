"""Undo what a transform of the tool's output can change, so that its fingerprints still match.

An agent (or a script it ran) can pass the tool's output through something that keeps every word but moves the
line starts the fingerprints anchor to: ``sed 's/^/| /'``, ``cat -n``, ``nl``, a quoting ``> ``, a commenting ``# ``,
``jq -R .`` or ``json.dumps`` (the lines turned into one JSON string, ``\\n`` and ``\\"`` escaped), colours
(ANSI escape codes), runs of spaces or tabs. :func:`normalised` gives the text with those undone:

* ANSI escape sequences removed, and ``\\r\\n`` or a lone ``\\r`` made a line break;
* where the text (or a line of it) is a JSON string, the string decoded in its place; where it is another JSON
  document, the strings it holds, decoded, after it (its keys may be what a fingerprint reads) — at most twice,
  for JSON inside JSON; a source file's ``"\\n"`` inside code is no JSON document, so it stays as it is;
* at each line start, any run of prefixes: ``|``, ``>``, ``#`` followed by a blank, or a number followed by a tab,
  ``→``, ``:``, ``|`` or a blank (a line number), each with one blank after it;
* every run of spaces and tabs made one space.

None of the fingerprints begins with one of those prefixes, so taking them off lets a line start be seen where
the tool put one, and never makes one where a source line had code in front.
"""

from __future__ import annotations

import json
import re
from typing import Any

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_PREFIXES = re.compile(r"^(?:[ \t]*(?:[|>]|#(?=[ \t])|\d+(?:[\t\u2192:|]|(?=[ \t])))[ \t]?)+", re.M)
_BLANKS = re.compile(r"[ \t]+")
_ESCAPED = re.compile(r'\\[n"t\\u]')  # a JSON escape: the text may hold encoded lines
_JSON_START = ('"', "{", "[")
_JSON_DEPTH = 2


def normalised(text: str) -> str:
    """``text`` with what a transform can change undone (see the module docstring)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    for _ in range(_JSON_DEPTH):
        if not _ESCAPED.search(text):
            break
        text = _decoded(text)
    text = _PREFIXES.sub("", text)
    return _BLANKS.sub(" ", text)


def _decoded(text: str) -> str:
    """The text with each JSON document in it (the whole, else each line) replaced by the strings it holds."""
    whole = _strings(text.strip())
    if whole is not None:
        return whole
    lines = text.split("\n")
    changed = False
    for number, line in enumerate(lines):
        decoded = _strings(line.strip()) if "\\" in line else None
        if decoded is not None:
            lines[number], changed = decoded, True
    return "\n".join(lines) if changed else text


def _strings(candidate: str) -> str | None:
    """A JSON string decoded; another JSON document followed by the strings it holds, on lines of their own; None
    when ``candidate`` is no JSON document."""
    if not candidate.startswith(_JSON_START):
        return None
    try:
        value = json.loads(candidate)
    except ValueError:
        return None
    if isinstance(value, str):
        return value
    parts: list[str] = [candidate]
    _collect(value, parts)
    return "\n".join(parts)


def _collect(value: Any, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, parts)
    elif isinstance(value, list):
        for item in value:
            _collect(item, parts)
