"""Answer keys: per corpus entry and turn, what a right answer must name (docs/metrics/answers.md).

An entry's optional ``key`` field::

    "key": {"version": "4.21.2",
            "turns": [{"files": ["lib/response.js", "lib/utils.js"],
                       "symbols": {"lib/response.js": ["res.send"], "lib/utils.js": ["compileETag"]},
                       "facts": [{"pattern": "etag\\s+setting", "says": "res.send reads the etag setting"}]}]}

``files`` are paths relative to the repository's root; ``symbols`` maps a key file to the names it defines;
``facts`` are regular expressions (matched case-insensitively) with ``says``, a sentence the pattern matches (the
loader checks it does, so a pattern is never untested). ``version`` is the version the key holds for: an entry whose
offline source is pinned (npm:, pypi:) must pin the same one, so bumping a source without rechecking its key is an
error, not a silently wrong grade. :func:`check_key` holds a key against a checkout of its source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_KEY_FIELDS = {"version", "turns"}
_TURN_FIELDS = {"files", "symbols", "facts"}
_FACT_FIELDS = {"pattern", "says"}
_SYMBOL_RE = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|::|#)[A-Za-z_$][\w$]*)*$")


@dataclass(frozen=True)
class Fact:
    pattern: str
    says: str

    def found_in(self, text: str) -> bool:
        return re.search(self.pattern, text, re.I) is not None


@dataclass(frozen=True)
class TurnKey:
    files: tuple[str, ...]
    symbols: tuple[tuple[str, str], ...]  # (file, name), in the key's order
    facts: tuple[Fact, ...] = ()

    @property
    def items(self) -> int:
        return len(self.files) + len(self.symbols) + len(self.facts)

    def to_dict(self) -> dict[str, Any]:
        symbols: dict[str, list[str]] = {}
        for file, name in self.symbols:
            symbols.setdefault(file, []).append(name)
        return {
            "files": list(self.files),
            "symbols": symbols,
            "facts": [{"pattern": f.pattern, "says": f.says} for f in self.facts],
        }


@dataclass(frozen=True)
class AnswerKey:
    version: str
    turns: tuple[TurnKey, ...]

    def first(self, turns: int) -> AnswerKey:
        """The key of a run that asked the first ``turns`` questions only (``--agent-eval-turns``)."""
        return AnswerKey(self.version, self.turns[:turns])

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "turns": [turn.to_dict() for turn in self.turns]}

    @classmethod
    def from_dict(cls, data: Any) -> AnswerKey | None:
        """A key as :meth:`to_dict` (or a corpus) writes it; None for anything else (an old record has none)."""
        try:
            return parse_key(data, None, 0, lambda field, problem: ValueError(f"{field} {problem}"))
        except ValueError:
            return None


def parse_key(data: Any, pinned: str | None, turns: int, fail: Callable[[str, str], Exception]) -> AnswerKey:
    """The ``key`` field of an entry with ``turns`` question turns (0: any number) whose offline source pins version
    ``pinned`` (None: it pins none); ``fail(field, problem)`` builds the error that names the file and the entry."""
    if not isinstance(data, dict):
        raise fail("key", "must be an object with version and turns")
    unknown = sorted(set(data) - _KEY_FIELDS)
    if unknown:
        raise fail("key", f"has an unknown field {unknown[0]!r} (known: version, turns)")
    version = data.get("version")
    if not isinstance(version, str) or not version.strip():
        raise fail("key", "needs version: the version of the source the key holds for")
    if pinned is not None and pinned != version:
        raise fail("key", f"holds for {version} but the source pins {pinned}: recheck the key")
    raw_turns = data.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise fail("key", "needs turns: a list with one key per question turn")
    if turns and len(raw_turns) != turns:
        raise fail("key", f"has {len(raw_turns)} turn(s) but the question has {turns}")
    return AnswerKey(version, tuple(_turn(t, n, fail) for n, t in enumerate(raw_turns, start=1)))


def _turn(data: Any, n: int, fail: Callable[[str, str], Exception]) -> TurnKey:
    where = f"key turn {n}"
    if not isinstance(data, dict):
        raise fail(where, "must be an object with files, symbols and facts")
    unknown = sorted(set(data) - _TURN_FIELDS)
    if unknown:
        raise fail(where, f"has an unknown field {unknown[0]!r} (known: files, symbols, facts)")
    files = data.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and _relative(f) for f in files):
        raise fail(where, "needs files: a non-empty list of paths relative to the repository's root")
    symbols = data.get("symbols", {})
    if not isinstance(symbols, dict):
        raise fail(where, "symbols must map a key file to the names it defines")
    pairs = []
    for file, names in symbols.items():
        if file not in files:
            raise fail(where, f"symbols name {file!r}, which is not one of its files")
        if not isinstance(names, list) or not all(isinstance(s, str) and _SYMBOL_RE.match(s) for s in names):
            raise fail(where, f"symbols of {file!r} must be a list of names (a.b, A::b and A#b qualify one)")
        pairs += [(file, name) for name in names]
    facts = []
    for fact in data.get("facts", []):
        shaped = isinstance(fact, dict) and set(fact) == _FACT_FIELDS
        if not shaped or not all(isinstance(v, str) for v in fact.values()):
            raise fail(where, "facts must be objects with a pattern and what it says")
        try:
            matched = re.search(fact["pattern"], fact["says"], re.I)
        except re.error as exc:
            raise fail(where, f"fact pattern {fact['pattern']!r} is not a regular expression: {exc}") from exc
        if matched is None:
            raise fail(where, f"fact pattern {fact['pattern']!r} does not match what it says: {fact['says']!r}")
        facts.append(Fact(fact["pattern"], fact["says"]))
    return TurnKey(tuple(files), tuple(pairs), tuple(facts))


def _relative(path: str) -> bool:
    return bool(path) and not path.startswith(("/", "./", "../")) and ".." not in path.split("/")


# How a name is defined, per language the corpus holds: `function send(`, `res.send = function`, `def send`,
# `class Send`, a method `send(...) {`, `send: function`, a Solidity `function`/`contract`/`modifier`.
_DEFINITION_FORMS = (
    r"\b(?:function\*?|def|class|interface|contract|library|struct|enum|modifier|event|type|func|fn|fun)\s+{name}\b",
    # a binding defines, an import binding (`var send = require('./send')`) does not
    r"\b(?:const|let|var)\s+{name}\s*(?::[^=\n]+)?=(?!\s*(?:require|import)\s*\()",
    r"(?:^|[\s.]){name}\s*[:=]\s*(?:async\s+)?(?:function\b|\(|[\w$]+\s*=>|class\b)",
    # a method: `send(body) {`, `async _request(a) {`, Java's `public void multiSet(...) {` (arguments may span lines)
    r"^\s*(?:(?:public|private|protected|static|async|override|export|default|readonly|final|synchronized|"
    r"get|set)\s+)*(?:[\w<>\[\],.]+\s+)?{name}\s*(?:<[^>\n]*>)?\s*\([^;{{}}]*?\)\s*(?::\s*[^{{;\n]+)?"
    r"(?:throws[^{{;]*)?\{{",
    r"^[\w:<>&* \t]*\b(?:\w+::)+{name}\s*\([^;\n]*$",  # C++: `void TurboModuleBinding::install(`
    r"^\s*[-+]\s*\([^)]*\)\s*{name}\b",  # Objective-C: `- (void)updateProps:`
    r"@(?:implementation|interface)\s+{name}\b|RCT_EXPORT_METHOD\(\s*{name}\b",
    r"\b{name}\s*\([^)]*\)\s*(?:external|public|internal|private|view|pure|override|virtual|returns)",  # Solidity
)


def defines(text: str, name: str) -> bool:
    """Whether ``text`` (a file's content) defines ``name`` (its last ``.``/``::``/``#`` component)."""
    last = re.split(r"\.|::|#", name)[-1]
    escaped = re.escape(last)
    return any(re.search(form.format(name=escaped), text, re.M) for form in _DEFINITION_FORMS)


def check_key(key: AnswerKey, root: Path) -> list[str]:
    """What does not hold in ``root`` (a checkout of the key's source): each key file that does not exist, each
    symbol its file does not define. Empty when the key holds."""
    problems = []
    for n, turn in enumerate(key.turns, start=1):
        for file in turn.files:
            if not (root / file).is_file():
                problems.append(f"turn {n}: {file} does not exist in {root}")
        for file, name in turn.symbols:
            path = root / file
            if path.is_file() and not defines(path.read_text(encoding="utf-8", errors="replace"), name):
                problems.append(f"turn {n}: {file} does not define {name}")
    return problems


def answer_sheet(entries: Iterable[Any]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Each keyed question's text → what its key names: (files, symbols, facts' sentences); the stand-in's
    ``key`` answer policy reads it (model/scripted.py), so the grades can be shown to tell a right answer."""
    sheet = {}
    for entry in entries:
        if entry.key is None:
            continue
        for question, turn in zip(entry.questions, entry.key.turns, strict=False):
            symbols = tuple(dict.fromkeys(name for _, name in turn.symbols))
            sheet[question] = (turn.files, symbols, tuple(fact.says for fact in turn.facts))
    return sheet
