"""Load and validate ``corpus.json``: the real repositories and questions an evaluation runs on.

The file is a JSON object whose keys are languages (keys starting with ``_`` are comments) and whose
values are lists of entries::

    {"_comment": "...",
     "JavaScript": [{"name": "express", "repo": "https://github.com/expressjs/express",
                     "size": "Small", "files": 140,
                     "question": "How does res.send ...?||Where ...?",
                     "source": "npm:express@4.21.2",
                     "key": {"version": "4.21.2", "turns": [...]}}]}

``key`` is optional: what a right answer names per turn (:mod:`pytest_agent_eval.corpus.keys`).

Every mistake is reported with the file, the entry and the field, because a corpus is edited by
hand and a typo must not silently drop an entry from a campaign.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agent_eval.corpus.keys import AnswerKey, parse_key

SIZES = ("Small", "Medium", "Large")
TURN_SEPARATOR = "||"

_FIELDS = {"name", "repo", "size", "files", "question", "source", "campaign", "key"}
_REQUIRED = ("name", "repo", "size", "files", "question")
# The name becomes a directory under the corpus folder, so keep it to one safe path component.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_URL_RE = re.compile(r"^(?:(?:https?|ssh|git|file)://\S+|[\w.-]+@[\w.-]+:\S+)$")
# Offline sources are pinned so that every machine indexes the same bytes.
_NPM_RE = re.compile(r"^npm:((?:@[\w.-]+/)?[\w.-]+)@([\w.+-]+)$")
_PYPI_RE = re.compile(r"^pypi:([A-Za-z0-9][\w.-]*)==([\w.+!-]+)$")


class CorpusError(ValueError):
    """A corpus file that cannot be used; the message names file, entry and field."""


@dataclass(frozen=True)
class CorpusEntry:
    name: str
    language: str
    repo: str
    size: str
    files: int
    questions: list[str]
    source: str | None = None
    campaign: str | None = None
    key: AnswerKey | None = None  # what a right answer names, per turn (corpus/keys.py); None: not graded

    def __hash__(self) -> int:  # questions is a list, so hash on the unique name
        return hash(self.name)


def split_turns(question: str) -> list[str]:
    """The turns of a multi-turn question (``||``-separated), stripped."""
    return [turn.strip() for turn in question.split(TURN_SEPARATOR)]


def load_corpus(path: str | Path) -> list[CorpusEntry]:
    """Parse and validate a corpus file; raise :class:`CorpusError` on the first problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    except _DuplicateKey as exc:
        raise CorpusError(f"{path}: duplicate key {exc.args[0]!r}") from exc
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: top level must be an object mapping languages to lists of entries")

    entries: list[CorpusEntry] = []
    seen: dict[str, str] = {}
    for language, items in data.items():
        if language.startswith("_"):
            continue
        if not language.strip():
            raise CorpusError(f"{path}: a language name must not be empty")
        if not isinstance(items, list):
            raise CorpusError(f"{path}: language {language!r} must map to a list of entries")
        for index, item in enumerate(items, start=1):
            entry = _entry(path, language, index, item)
            where = f"{language} #{index}"
            if entry.name in seen:
                raise CorpusError(f'{path}: entry "{entry.name}" ({where}): duplicate name, also at {seen[entry.name]}')
            seen[entry.name] = where
            entries.append(entry)
    return entries


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys; in a hand-edited corpus that silently drops a language.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _entry(path: Path, language: str, index: int, item: Any) -> CorpusEntry:
    label = f"{language} #{index}"
    if not isinstance(item, dict):
        raise CorpusError(f"{path}: entry {label}: must be an object")
    name = item.get("name")
    who = f'"{name}" ({label})' if isinstance(name, str) and name else label

    def fail(field: str, problem: str) -> CorpusError:
        return CorpusError(f'{path}: entry {who}: "{field}" {problem}')

    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise fail(unknown[0], f"is not a known field (known: {', '.join(sorted(_FIELDS))})")
    for field in _REQUIRED:
        if field not in item:
            raise fail(field, "is missing")

    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise fail("name", "must be a directory name: letters, digits, '.', '_' or '-'")
    repo = item["repo"]
    if not isinstance(repo, str) or not _URL_RE.match(repo):
        raise fail("repo", "must be a git URL (https://, ssh://, git://, file:// or user@host:path)")
    size = item["size"]
    if size not in SIZES:
        raise fail("size", f"must be one of {', '.join(SIZES)}")
    files = item["files"]
    if isinstance(files, bool) or not isinstance(files, int) or files <= 0:
        raise fail("files", "must be a positive integer (an approximate file count)")
    question = item["question"]
    if not isinstance(question, str) or not question.strip():
        raise fail("question", "must be a non-empty string")
    questions = split_turns(question)
    for turn, text in enumerate(questions, start=1):
        if not text:
            raise fail("question", f"turn {turn} is empty (turns are separated by '{TURN_SEPARATOR}')")

    source = item.get("source")
    if source is not None:
        source = _source(source, path.parent, fail)
    campaign = item.get("campaign")
    if campaign is not None and (not isinstance(campaign, str) or not campaign.strip()):
        raise fail("campaign", "must be a non-empty string")
    pinned = next((m.group(2) for r in (_NPM_RE, _PYPI_RE) if (m := r.match(source or ""))), None)
    key = parse_key(item["key"], pinned, len(questions), fail) if "key" in item else None

    return CorpusEntry(
        name=name,
        language=language,
        repo=repo,
        size=size,
        files=files,
        questions=questions,
        source=source,
        campaign=campaign,
        key=key,
    )


def _source(source: Any, base: Path, fail: Callable[[str, str], CorpusError]) -> str:
    if not isinstance(source, str) or not source.strip():
        raise fail("source", "must be a non-empty string")
    if source.startswith("npm:"):
        if not _NPM_RE.match(source):
            raise fail("source", "must pin a version: npm:<package>@<version>")
        return source
    if source.startswith("pypi:"):
        if not _PYPI_RE.match(source):
            raise fail("source", "must pin a version: pypi:<project>==<version>")
        return source
    # A local path, relative to the corpus file so the corpus can travel with its checkouts.
    local = Path(source).expanduser()
    return str(local if local.is_absolute() else (base / local).resolve())
