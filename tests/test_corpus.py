"""corpus.json loading and validation: the shipped corpus, and an error for every field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.corpus.load import CorpusEntry, CorpusError, load_corpus, split_turns

SHIPPED = Path(__file__).resolve().parent.parent / "corpus.json"

README_SEVEN = {
    "vscode": "TypeScript",
    "excalidraw": "TypeScript",
    "django": "Python",
    "tokio": "Rust",
    "okhttp": "Kotlin",
    "gin": "Go",
    "alamofire": "Swift",
}

SEED_STACKS = [
    "TypeScript",
    "JavaScript",
    "Go",
    "Python",
    "Rust",
    "Java",
    "Kotlin",
    "Swift",
    "C#",
    "Ruby",
    "PHP",
    "C",
    "C++",
    "Dart",
    "Svelte",
    "Lua",
    "Luau",
    "Objective-C",
    "Mixed iOS (Swift+ObjC)",
    "React Native",
    "Expo Modules",
    "R",
    "COBOL",
    "VB.NET",
    "Erlang",
    "Solidity",
    "CUDA",
    "Terraform",
    "ArkTS",
    "Nix",
]


@pytest.fixture(scope="module")
def shipped() -> list[CorpusEntry]:
    return load_corpus(SHIPPED)


def test_shipped_corpus_covers_the_seed_stacks(shipped: list[CorpusEntry]) -> None:
    languages = {e.language for e in shipped}
    assert len(languages) >= 28
    assert languages == set(SEED_STACKS)
    # Most stacks have a repository of every size; each has at least two.
    for language in SEED_STACKS:
        sizes = {e.size for e in shipped if e.language == language}
        assert len(sizes) >= 2 or language in {"VB.NET", "ArkTS"}, language


def test_shipped_express_entry(shipped: list[CorpusEntry]) -> None:
    (express,) = [e for e in shipped if e.name == "express"]
    assert express.language == "JavaScript"
    assert express.repo == "https://github.com/expressjs/express"
    assert express.size == "Small"
    assert express.source == "npm:express@4.21.2"
    assert len(express.questions) == 3
    assert express.questions[0] == "How does res.send decide the Content-Type and ETag?"


def test_shipped_readme_campaign(shipped: list[CorpusEntry]) -> None:
    readme = {e.name: e for e in shipped if e.campaign == "readme"}
    assert {name: e.language for name, e in readme.items()} == README_SEVEN
    # The README campaign is multi-turn: occupancy is only chargeable over later turns.
    assert all(len(e.questions) == 3 for e in readme.values())
    assert readme["gin"].questions[0] == "How does gin route requests through its middleware chain?"
    assert readme["excalidraw"].questions[0] == "How does Excalidraw render and update canvas elements?"


def test_shipped_sizes_match_file_counts(shipped: list[CorpusEntry]) -> None:
    # The corpus header: Small < ~150 files, Medium ~150-1500, Large > ~1500.
    bounds = {"Small": (1, 150), "Medium": (150, 1500), "Large": (1500, 10**6)}
    for e in shipped:
        low, high = bounds[e.size]
        assert low <= e.files <= high, (e.name, e.size, e.files)


def test_shipped_entries_are_well_formed(shipped: list[CorpusEntry]) -> None:
    for e in shipped:
        assert re.match(r"^https://github\.com/[\w.-]+/[\w.-]+$", e.repo), e.repo
        assert all(turn.endswith("?") for turn in e.questions), e.name
        assert e.source is None or e.source.startswith(("npm:", "pypi:")), e.name


def test_split_turns_strips() -> None:
    assert split_turns(" a? ||b?|| c? ") == ["a?", "b?", "c?"]
    assert split_turns("one question?") == ["one question?"]


GOOD: dict[str, Any] = {
    "name": "express",
    "repo": "https://github.com/expressjs/express",
    "size": "Small",
    "files": 140,
    "question": "How does res.send decide the Content-Type and ETag? || Where is the ETag set up?",
}


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def _load_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> list[CorpusEntry]:
    entry = {**GOOD, **changes}
    for key, value in changes.items():
        if value is _DROP:
            del entry[key]
    other = {**GOOD, "name": "axios"}
    _write(tmp_path, {"_comment": "x", "JavaScript": [other, entry]})
    monkeypatch.chdir(tmp_path)
    return load_corpus("corpus.json")


_DROP = object()


def test_good_entry_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = _load_entry(tmp_path, monkeypatch, source="npm:express@4.21.2", campaign="readme")
    express = entries[1]
    assert express == CorpusEntry(
        name="express",
        language="JavaScript",
        repo="https://github.com/expressjs/express",
        size="Small",
        files=140,
        questions=["How does res.send decide the Content-Type and ETag?", "Where is the ETag set up?"],
        source="npm:express@4.21.2",
        campaign="readme",
    )
    assert express.source is not None and express.campaign == "readme"


def test_size_error_names_file_entry_and_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CorpusError) as info:
        _load_entry(tmp_path, monkeypatch, size="Huge")
    assert str(info.value) == 'corpus.json: entry "express" (JavaScript #2): "size" must be one of Small, Medium, Large'


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": _DROP}, 'entry JavaScript #2: "name" is missing'),
        ({"name": ""}, 'entry JavaScript #2: "name" must be a directory name'),
        ({"name": "../up"}, 'entry "../up" (JavaScript #2): "name" must be a directory name'),
        ({"repo": _DROP}, '"express" (JavaScript #2): "repo" is missing'),
        ({"repo": "github.com/expressjs/express"}, '"repo" must be a git URL'),
        ({"repo": 7}, '"repo" must be a git URL'),
        ({"size": "small"}, '"size" must be one of Small, Medium, Large'),
        ({"files": 0}, '"files" must be a positive integer'),
        ({"files": "140"}, '"files" must be a positive integer'),
        ({"files": True}, '"files" must be a positive integer'),
        ({"files": _DROP}, '"files" is missing'),
        ({"question": "  "}, '"question" must be a non-empty string'),
        ({"question": ["a?"]}, '"question" must be a non-empty string'),
        ({"question": "a? || || c?"}, '"question" turn 2 is empty'),
        ({"source": "npm:express"}, '"source" must pin a version: npm:<package>@<version>'),
        ({"source": "pypi:requests"}, '"source" must pin a version: pypi:<project>==<version>'),
        ({"source": ""}, '"source" must be a non-empty string'),
        ({"campaign": ""}, '"campaign" must be a non-empty string'),
        ({"qestion": "typo?"}, '"qestion" is not a known field'),
    ],
)
def test_field_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(CorpusError) as info:
        _load_entry(tmp_path, monkeypatch, **changes)
    text = str(info.value)
    assert text.startswith("corpus.json: entry ")
    assert message in text


def test_scoped_npm_and_pypi_sources_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = _load_entry(tmp_path, monkeypatch, source="npm:@openzeppelin/contracts@5.1.0")
    assert entries[1].source == "npm:@openzeppelin/contracts@5.1.0"
    entries = _load_entry(tmp_path, monkeypatch, source="pypi:requests==2.32.3")
    assert entries[1].source == "pypi:requests==2.32.3"


def test_local_source_is_relative_to_the_corpus_file(tmp_path: Path) -> None:
    path = _write(tmp_path, {"JavaScript": [{**GOOD, "source": "checkouts/express"}]})
    (entry,) = load_corpus(path)
    assert entry.source == str((tmp_path / "checkouts" / "express").resolve())


def test_duplicate_names(tmp_path: Path) -> None:
    path = _write(tmp_path, {"JavaScript": [GOOD], "TypeScript": [{**GOOD, "size": "Medium"}]})
    with pytest.raises(CorpusError, match=r'entry "express" \(TypeScript #1\): duplicate name, also at JavaScript #1'):
        load_corpus(path)


def test_duplicate_language_key(tmp_path: Path) -> None:
    text = '{"JavaScript": [], "JavaScript": []}'
    with pytest.raises(CorpusError, match="duplicate key 'JavaScript'"):
        load_corpus(_write(tmp_path, text))


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, '{\n  "JavaScript": [\n    {"name": "express",}\n  ]\n}\n')
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    assert str(info.value).startswith(f"{path}: invalid JSON at line 3, column 24:")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([GOOD], "top level must be an object"),
        ({"JavaScript": GOOD}, "language 'JavaScript' must map to a list"),
        ({"JavaScript": ["express"]}, "entry JavaScript #1: must be an object"),
    ],
)
def test_structure_errors(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(CorpusError, match=re.escape(message)):
        load_corpus(_write(tmp_path, data))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="cannot read"):
        load_corpus(tmp_path / "nope.json")
