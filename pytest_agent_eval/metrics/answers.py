"""Answers against the corpus's answer key: did the answer name what a right one must, and did the agent see it?

Per turn (docs/metrics/answers.md):

* **key recall** — of the turn's key files, symbols and facts, the share the turn's answer names. A file is named
  however it is written (``lib/response.js``, ``./lib/response.js:111``, an absolute path, its basename); a symbol
  by its qualified name (``res.send``, ``Session::send``) anywhere, or its last part in a code span, or in prose when
  that part is distinctive (camelCase or snake_case), spelled either way; a fact by its pattern.
* **seen** — each key file the agent saw before the answer: returned by the tool (an explore section, or a path in
  another of its results), read (Read, a shell read), or listed by a search (Grep/Glob, a shell search).
* **read recall / precision** — key files read / key files, and key files read / files read.
* **first key rank** — the position of the first key file among the distinct files the tool returned in the turn.

A run's figures pool its turns: hits over items, seen and read key files over key files (turn by turn, so a file
seen in turn 1 counts as seen for turn 2), read precision over the run's distinct reads against every turn's key
files, the mean of the turns' ranks. A session whose segments do not match the key's turns one to one (an
interactive run is one segment) is graded as one: its pooled answer against each turn's key, its calls for all.
An answer that repeats its question names nothing by that: the question's text is taken out before grading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.corpus.keys import AnswerKey, TurnKey
from pytest_agent_eval.metrics.allocation import citation_paths, code_span_names
from pytest_agent_eval.metrics.sufficiency import READ_TOOLS, SEARCH_TOOLS
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.tool.explore_answer import FileSection, file_references, file_sections, same_file
from pytest_agent_eval.transcript import MAIN, Message, Session, ToolCall
from pytest_agent_eval.transcript.file_access import bash_access

RETURNED, READ, SEARCHED = "returned", "read", "searched"
_QUALIFIED_RE = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)[A-Za-z_$][\w$]*)+")
_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")
# camelCase inside, or snake_case: a name prose would not use as a word.
_DISTINCTIVE_RE = re.compile(r"[a-z][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]")


@dataclass
class TurnGrade:
    turn: int
    files: dict[str, bool]
    symbols: dict[str, bool]  # "file:name" → named
    facts: dict[str, bool]  # pattern → found
    seen: dict[str, str | None]  # key file → how it was first seen (returned, read, searched) or None
    read: list[str]  # the key files read by the end of the turn
    rank: int | None = None

    @property
    def hits(self) -> int:
        return sum(self.files.values()) + sum(self.symbols.values()) + sum(self.facts.values())

    @property
    def items(self) -> int:
        return len(self.files) + len(self.symbols) + len(self.facts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "recall": self.hits / self.items if self.items else None,
            "files": self.files,
            "symbols": self.symbols,
            "facts": self.facts,
            "seen": self.seen,
            "read": self.read,
            "rank": self.rank,
        }


@dataclass
class AnswerGrade:
    """The grade of one run; ``key`` None: the entry has no key, the run is not graded (never 0)."""

    key: AnswerKey | None = None
    questions: list[str] = field(default_factory=list)
    turns: list[TurnGrade] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)  # every distinct file the run read

    @property
    def graded(self) -> bool:
        return self.key is not None

    @property
    def recall(self) -> float | None:
        items = sum(t.items for t in self.turns)
        return sum(t.hits for t in self.turns) / items if items else None

    @property
    def seen_share(self) -> float | None:
        files = sum(len(t.seen) for t in self.turns)
        return sum(1 for t in self.turns for how in t.seen.values() if how) / files if files else None

    @property
    def read_recall(self) -> float | None:
        files = sum(len(t.seen) for t in self.turns)
        return sum(len(t.read) for t in self.turns) / files if files else None

    @property
    def read_precision(self) -> float | None:
        if not self.graded or not self.files_read:
            return None
        keyed = {f for t in self.turns for f in t.files}
        return sum(1 for path in self.files_read if any(same_file(path, k) for k in keyed)) / len(self.files_read)

    @property
    def rank(self) -> float | None:
        ranks = [t.rank for t in self.turns if t.rank is not None]
        return round(sum(ranks) / len(ranks), 2) if ranks else None

    def to_dict(self) -> dict[str, Any]:
        if self.key is None:
            return {"graded": False}
        return {
            "graded": True,
            "key": self.key.to_dict(),
            "questions": self.questions,
            "recall": self.recall,
            "seen_share": self.seen_share,
            "read_recall": self.read_recall,
            "read_precision": self.read_precision,
            "rank": self.rank,
            "files_read": self.files_read,
            "turns": [t.to_dict() for t in self.turns],
        }


def grade(
    session: Session, key: AnswerKey | None, tool: RetrievalTool, questions: Sequence[str] = ()
) -> AnswerGrade:
    """The answer grade of ``session`` against ``key`` (None: not graded); ``questions``: the turns' questions."""
    if key is None:
        return AnswerGrade()
    turns = _turns(session, len(key.turns))
    reads: list[str] = []
    out = AnswerGrade(key, list(questions))
    for n, (turn_key, (answer, calls)) in enumerate(zip(key.turns, turns, strict=True), start=1):
        for question in questions:
            answer = answer.replace(question, " ")
        seen: dict[str, str | None] = dict.fromkeys(turn_key.files)
        returned: list[str] = []
        for call in calls:
            for how, path in _accesses(call, tool):
                if how == READ and not any(same_file(path, r) for r in reads):
                    reads.append(path)
                if how == RETURNED and path not in returned:
                    returned.append(path)
        for call in (c for past in turns[:n] for c in past[1]):  # every call up to this turn's answer
            for how, path in _accesses(call, tool):
                for k in seen:
                    if seen[k] is None and same_file(path, k):
                        seen[k] = how
        out.turns.append(
            TurnGrade(
                turn=n,
                files={f: names_file(answer, f, turn_key) for f in turn_key.files},
                symbols={f"{file}:{name}": names_symbol(answer, name) for file, name in turn_key.symbols},
                facts={fact.pattern: fact.found_in(answer) for fact in turn_key.facts},
                seen=seen,
                read=[k for k in turn_key.files if any(same_file(r, k) for r in reads)],
                rank=next((i for i, p in enumerate(returned, 1) if any(same_file(p, k) for k in turn_key.files)), None),
            )
        )
    out.files_read = reads
    return out


def names_file(answer: str, path: str, turn_key: TurnKey) -> bool:
    """Whether ``answer`` names the key file ``path`` (folder, ``./``, absolute, ``:line`` or bare basename)."""
    extensions = {f.rsplit(".", 1)[1].lower() for f in turn_key.files if "." in f.rsplit("/", 1)[-1]}
    return any(same_file(path, cited) for cited in citation_paths(answer, extensions))


def names_symbol(answer: str, name: str) -> bool:
    """Whether ``answer`` names the key symbol ``name``: qualified anywhere, or its last part as a code span
    or a distinctive word; camelCase and snake_case read as one spelling."""
    parts = re.split(r"\.|::|#", name)
    wanted = _canonical(".".join(parts))
    if len(parts) > 1 and any(
        _canonical(re.sub(r"::|#|->", ".", q)).endswith(wanted) for q in _QUALIFIED_RE.findall(answer)
    ):
        return True
    last = _canonical(parts[-1])
    if any(_canonical(token) == last for token in code_span_names(answer)):
        return True
    return any(_canonical(t) == last for t in _IDENT_RE.findall(answer) if _DISTINCTIVE_RE.search(t))


def _canonical(name: str) -> str:
    return name.replace("_", "").lower()


def turn_answers(session: Session, count: int) -> list[str]:
    """Each of ``count`` turns' answer text (as the grade reads them; the judge is shown the same)."""
    return [answer for answer, _ in _turns(session, count)]


def _turns(session: Session, count: int) -> list[tuple[str, list[ToolCall]]]:
    """Each turn's answer and the calls made in it, by the session's segments (one per turn); a session whose
    segments do not match the turns one to one gives every turn the pooled answer and every call."""
    messages = session.messages(None)
    segment_of = {m.id: m.segment for m in messages}
    segments = sorted({m.segment for m in messages if m.thread == MAIN})
    if len(segments) != count:
        whole = ("\n\n".join(session.answer_texts()), list(session.calls))
        return [whole] * count
    by_id = {c.id: c for c in session.calls}

    def segment(call: ToolCall) -> int:
        """A subagent's call is in the turn of the call that spawned its thread (its own messages say segment 0)."""
        seen = {call.id}
        while call.thread != MAIN and (parent := by_id.get(call.thread)) is not None and parent.id not in seen:
            call = parent
            seen.add(call.id)
        return segment_of.get(call.message_id, 0)

    out = []
    for seg in segments:
        texts = [r.text for r in session.results if r.segment == seg and r.text and not r.is_error]
        if not texts:
            texts = _last_text([m for m in messages if m.thread == MAIN and m.segment == seg])
        out.append(("\n\n".join(texts), [c for c in session.calls if segment(c) == seg]))
    return out


def _last_text(messages: list[Message]) -> list[str]:
    return next(([m.text] for m in reversed(messages) if m.text.strip() and not m.error), [])


def _accesses(call: ToolCall, tool: RetrievalTool) -> list[tuple[str, str]]:
    """(how, path) for each file ``call`` showed the agent: returned by the tool, read, or listed by a search."""
    result = call.result
    text = result.text if result is not None and not result.is_error else ""
    if tool.owns(call.name):
        sections: list[FileSection] = file_sections(text) if tool.is_explore(call.name) else []
        paths = [s.path for s in sections] or [p for p, _ in file_references(text) if "/" in p]
        return [(RETURNED, p) for p in dict.fromkeys(paths)]
    if call.name in READ_TOOLS:
        path = call.input.get("file_path") or call.input.get("notebook_path")
        return [(READ, str(path))] if path and text else []
    command = str(call.input.get("command") or "") if call.name == "Bash" else ""
    access = bash_access(command) if command else None
    if access is not None and access.kind == "read" and access.path and text:
        return [(READ, access.path)]
    if call.name in SEARCH_TOOLS or (access is not None and access.kind == "search"):
        return [(SEARCHED, p) for p, _ in dict.fromkeys(file_references(text))]
    return []
