"""The common transcript of a coding agent's run, which every metric reads: :class:`Session`.

An agent's reader (:meth:`pytest_agent_eval.agents.base.CodingAgent.read_transcript`) fills one from the agent's
own files: its model requests (:class:`Message`, each with its usage, counted once per request), its tool calls
and their results in the common vocabulary (``Bash``, ``Read``, ``mcp__<server>__<tool>``), the user's text,
compactions, and the ``result`` that closes each turn; ``thread`` is ``"main"`` or the id of the call that
spawned a subagent. Content is kept in the Messages API's block shape (``{"type": "text", "text": …}``).

A run's transcript is one file per turn, named as the harness writes them: ``run-<label>.jsonl``,
``run-<label>.t2.jsonl``, … (:func:`segment_files`).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

MAIN = "main"
STAND_IN_PREFIX = "stand-in"
DELEGATION_TOOLS = frozenset({"Agent", "Task", "invoke_agent"})  # Claude Code's, Gemini CLI's
_SEGMENT_RE = re.compile(r"\.t(\d+)\.jsonl$")
BAD_LINES_NAMED = 5
# Below this many bytes, a process that reads one session is done sooner with the standard library's decoder:
# msgspec saves about 3 ms a MB but takes about 40 ms to import (bench/load_bench.py measures the start-up).
FAST_DECODING_MIN_BYTES = 10_000_000


class TranscriptError(ValueError):
    """A file that cannot be read as an agent's transcript; the message names it."""


class Usage(NamedTuple):  # built for every message: 0.7 µs as a tuple, 1.7 µs as a frozen dataclass
    input: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    output: int = 0

    @property
    def ctx(self) -> int:
        """The exact size of the request's whole prompt."""
        return self.input + self.cache_read + self.cache_creation

    @classmethod
    def from_json(cls, raw: Any) -> Usage | None:
        if not isinstance(raw, dict):
            return None
        return cls(  # by position: a tuple built for every message
            count_of(raw.get("input_tokens")),
            count_of(raw.get("cache_read_input_tokens")),
            count_of(raw.get("cache_creation_input_tokens")),
            count_of(raw.get("output_tokens")),
        )


@dataclass
class ToolResult:
    """``text`` is what parsers read (its text blocks); ``chars`` what it puts in the prompt (:func:`content_chars`)."""

    call_id: str
    text: str
    is_error: bool
    thread: str
    chars: int = -1
    uuid: str = ""  # the event's: a compaction names the messages it keeps by it

    def __post_init__(self) -> None:
        if self.chars < 0:
            self.chars = len(self.text)


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]
    thread: str
    message_id: str
    result: ToolResult | None = None
    # (name, input) as the model sent the call, where the agent's reader renamed it into the common vocabulary
    # (OpenCode's ``bash`` as ``Bash``): what the evidence holds against the request record
    sent_as: tuple[str, dict[str, Any]] | None = None

    @property
    def answered(self) -> bool:
        return self.result is not None and not self.result.is_error

    @property
    def input_chars(self) -> int:
        """What the call occupies in the context: its name plus its input's JSON (occupancy asks once a call)."""
        return len(self.name) + len(_INPUT_ENCODER.encode(self.input))


@dataclass
class Message:
    """One assistant API request, merged from its per-block events."""

    id: str
    thread: str
    usage: Usage | None
    segment: int
    blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    model: str = ""

    @property
    def text(self) -> str:
        return "\n".join(b.get("text") or "" for b in self.blocks if b.get("type") == "text")

    @property
    def output_chars(self) -> int:
        """Characters this message adds to the next request's prompt: every block's (:func:`content_chars`)."""
        chars = content_chars(self.blocks)
        for call in self.calls:
            chars += call.input_chars
        return chars


@dataclass
class UserText:
    """User content that is not a tool result; ``chars`` counts non-text blocks (an image) too."""

    text: str
    thread: str
    chars: int = -1

    def __post_init__(self) -> None:
        if self.chars < 0:
            self.chars = len(self.text)


@dataclass
class Compaction:
    """A ``compact_boundary``: everything before it is summarised away except the messages it keeps (the uuids of
    ``compact_metadata.preserved_messages``, as Claude Code 2.1.332 names them; none when it keeps nothing)."""

    thread: str
    pre_tokens: int | None = None
    preserved: frozenset[str] = frozenset()


@dataclass
class Result:
    """The ``result`` event that closes one stream-json segment."""

    text: str
    subtype: str
    is_error: bool
    num_turns: int | None
    segment: int
    cost_usd: float | None = None
    duration_ms: int | None = None
    api_error_status: int | None = None
    # The segment's output tokens, every request's summed (``usage.output_tokens``): thinking streamed or not included
    output_tokens: int | None = None
    # Whether ``output_tokens`` counts the main thread's requests alone (Codex's: each thread's rollout declares its
    # own), not a subagent's too (Claude Code's ``result``)
    main_output_only: bool = False


Item = Message | ToolResult | UserText | Compaction


class Offer(NamedTuple):
    """What one ``system/init`` event offered the model, as it lists them: tool names, and MCP servers."""

    tools: Any
    mcp_servers: Any


@dataclass
class ParseStats:
    """What reading found: events by type, and the lines it stepped over (the first few of them by place)."""

    events: int = 0
    bad_lines: int = 0
    # "file:line: why" of the first BAD_LINES_NAMED bad lines: enough to find what went wrong, never a flood
    bad_at: list[str] = field(default_factory=list)
    event_types: Counter = field(default_factory=Counter)
    # stream-json files whose last turn has no ``result`` event: the run was cut off mid-turn
    unfinished: list[str] = field(default_factory=list)


@dataclass
class Session:
    """Everything the metrics read, in file order.

    ``timeline`` holds messages, tool results, user text and compactions of every thread;
    ``thread`` is ``"main"`` or the id of the Agent/Task call that spawned the subagent. ``denial`` is how the
    agent's records say it refused a call to the tool's CLI (Claude Code's PreToolUse hook; an agent's own reader
    says its own), as reports word a proven block.
    """

    denial: ClassVar[str] = "denied by the hook"

    timeline: list[Item] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    offers: list[Offer] = field(default_factory=list)
    parse: ParseStats = field(default_factory=ParseStats)
    files: list[Path] = field(default_factory=list)
    # The init events' lines, about 10 kB of tool and command lists each: decoded whole only when asked for.
    init_lines: list[str | bytes] = field(default_factory=list, repr=False)
    # What the agent appends to the last tool result of each message it sends, which its record does not show (Claude
    # Code's tokens-left reminder, where its version and model add it, as its reader says); occupancy counts it in
    # that result.
    result_suffix: str = ""
    # What this record does not hold that a figure needs (a companion file not given, a version that writes no usage
    # or no call ids): figure → why, said by ``agent-eval score`` beside the figures, which never read it as zero.
    missing: dict[str, str] = field(default_factory=dict)
    # Whether the messages are named by the agent's own ids, not the model's response ids (OpenCode's): the evidence
    # then pairs them with the model's responses in order (pytest_agent_eval.metrics.evidence.paired_responses).
    own_message_ids: ClassVar[bool] = False
    # How the agent's reader reads the call and result items of the API it speaks, when that is not the Messages API
    # (whose blocks are the transcript's own): the evidence holds the request record against the transcript with it
    # (pytest_agent_eval.metrics.evidence; each agent's folder sets its own: Codex's Responses items, Gemini CLI's
    # parts). None: the agent's exchanges in another API cannot be read, and the evidence says so.
    api_reading: ClassVar[Any] = None

    @property
    def inits(self) -> list[dict[str, Any]]:
        """Each ``system/init`` event, whole (what it lists varies by version), as the standard library reads it;
        decoded at each asking (the cassette asks once), so it never lags the lines."""
        return [json_object(line) or {} for line in self.init_lines]

    # -- queries ------------------------------------------------------------------------
    def messages(self, thread: str | None = MAIN) -> list[Message]:
        if thread is None:  # every thread: the commonest question, asked of the whole timeline
            return [i for i in self.timeline if isinstance(i, Message)]
        return [i for i in self.timeline if isinstance(i, Message) and i.thread == thread]

    def calls_in(self, thread: str) -> list[ToolCall]:
        return [c for c in self.calls if c.thread == thread]

    @property
    def ends_mid_turn(self) -> bool:
        """A stream-json segment ends without the ``result`` event that closes a turn (the run was cut off)."""
        return bool(self.parse.unfinished)

    @property
    def threads(self) -> list[str]:
        return list(dict.fromkeys(c.thread for c in self.calls))

    def tool_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.calls:  # counted in a dict, as Counter(…).most_common() orders them, without its machinery
            counts[call.name] = counts.get(call.name, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: item[1], reverse=True))

    def answer_texts(self) -> list[str]:
        """The final answer: every ``result`` text pooled (one per resumed segment); an
        interactive session has none, so it falls back to the last main-thread assistant text."""
        if self.results:
            return [r.text for r in self.results if r.text and not r.is_error]
        for message in reversed(self.messages(MAIN)):
            if message.text.strip() and not message.error:
                return [message.text]
        return []

    @property
    def session_ids(self) -> list[str]:
        """The session ids its init events name, in order: one, for the segments of one session."""
        ids = (init.get("session_id") for init in self.inits)
        return list(dict.fromkeys(i for i in ids if isinstance(i, str)))

    @property
    def models(self) -> list[str]:
        """The models that answered, in order of first appearance (``<synthetic>`` messages left out)."""
        return list(
            dict.fromkeys(
                [i.model for i in self.timeline if isinstance(i, Message) and i.model and i.model != "<synthetic>"]
            )
        )

    @property
    def stand_in(self) -> str | None:
        """The stand-in model that produced this session, if one did (it names itself ``stand-in-…``)."""
        return next((m for m in self.models if m.startswith(STAND_IN_PREFIX)), None)

    @property
    def infra_error(self) -> str | None:
        """Why this run produced no usable answer, if the transcript says so."""
        for message in self.messages(MAIN):
            if message.error:  # the status only when there is an error to report: most runs have none
                status = next((f" (HTTP {r.api_error_status})" for r in self.results if r.api_error_status), "")
                return f"API error in assistant message: {message.error}{status}"
        for result in self.results:
            if result.is_error:
                return f"result event is an error ({result.subtype}): {result.text[:200]}"
        return None


# ---------------------------------------------------------------------------------------
def read_records(
    path: Path,
    session: Session,
    file_kind: str,
    line_kind: str = "a JSON object",
    accepts: Callable[[dict], bool] | None = None,
) -> list[dict[str, Any]]:
    """The JSON objects of the JSON-lines file ``path`` (an agent's own format, ``file_kind``) that ``accepts`` takes,
    in order; every other line is counted (and the first few named) in ``session.parse`` as not ``line_kind``.
    Raises TranscriptError when the file cannot be read or no line is one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such file") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or (accepts is not None and not accepts(record)):
            session.parse.bad_lines += 1
            if len(session.parse.bad_at) < BAD_LINES_NAMED:
                session.parse.bad_at.append(f"{path}:{number}: not {line_kind}")
            continue
        session.parse.events += 1
        session.parse.event_types[str(record.get("type"))] += 1
        records.append(record)
    if not records:
        raise TranscriptError(f"{path}: not {file_kind} (no line is {line_kind})")
    return records


S = TypeVar("S", bound=Session)


def whole_record(paths: Sequence[Path], companion: Path | None, what: str) -> Path:
    """The one file of a record that holds the whole session (a rollout, a chat record), given alone; a TranscriptError
    naming ``what`` it is when more files, or a companion, come with it."""
    if companion is not None or len(paths) > 1:
        raise TranscriptError(f"{paths[0]}: {what} holds the whole session: give it alone")
    return paths[0]


def given_companion(
    paths: Sequence[Path], companion: Path | None, is_companion: Callable[[Path], bool]
) -> tuple[list[Path], Path | None]:
    """A companion record given among a stream's files (``agent-eval score events.jsonl rollout-….jsonl``) taken out
    of them as the companion, when none was given otherwise."""
    found = [p for p in paths[1:] if is_companion(p)]
    if companion is not None or len(found) != 1:
        return list(paths), companion
    return [p for p in paths if p != found[0]], found[0]


def with_companion(
    paths: Sequence[Path],
    companion: Path | None,
    find: Callable[[Path], Path],
    together: Callable[[Sequence[Path], Path], S],
    alone: Callable[[Sequence[Path], str], S],
) -> S:
    """Streams read ``together`` with the record that completes them (``companion``, or what ``find`` finds beside the
    first); without one, ``alone``, as far as they go, told why there is none (it says what the companion adds)."""
    if companion is None:
        try:
            companion = find(paths[0])
        except TranscriptError as exc:
            return alone(paths, str(exc))
    return together(paths, companion)


def say_read_alone(session: Session, why: str, stream: str, companion: str, adds: str) -> None:
    """Say in ``session.missing`` what a stream read without its companion record lacks: each request's own usage
    (each turn is read as one request carrying the turn's sums), and what else the companion (``companion``, named
    as the user would find it) ``adds``; ``why`` is why none was found."""
    where = f" ({why.split(': ', 1)[-1]})" if why else ""
    session.missing["requests"] = (
        f"{stream} without its {companion.split(' (')[0]}{where}: the {companion} would add each model request with "
        "its own usage (here each turn is one request carrying the turn's summed usage, so the context figures are "
        f"the turn's sums), {adds}"
    )


def segment_files(first: str | Path) -> list[Path]:
    """``run-x.jsonl`` → [run-x.jsonl, run-x.t2.jsonl, run-x.t3.jsonl, …] as they exist."""
    first = Path(first)
    stem = first.name[: -len(".jsonl")] if first.name.endswith(".jsonl") else first.stem
    later = [p for p in first.parent.glob(f"{glob.escape(stem)}.t*.jsonl") if _SEGMENT_RE.search(p.name)]
    later.sort(key=lambda p: int(_SEGMENT_RE.search(p.name).group(1)))  # type: ignore[union-attr]
    return [first, *later]


def segment_number(path: str | Path) -> tuple[str, int]:
    """A segment file's run and turn: ``run-x.t3.jsonl`` → ("run-x", 3); ``run-x.jsonl`` → ("run-x", 1)."""
    name = os.path.basename(path)  # asked of every file scored: no Path made for it
    match = _SEGMENT_RE.search(name)
    if match is not None:
        return name[: match.start()], int(match.group(1))
    return (name[: -len(".jsonl")] if name.endswith(".jsonl") else name), 1


def missing_segments(paths: Sequence[str | Path]) -> list[int]:
    """The turns missing between one run's segment files (``run.t3.jsonl`` without ``run.t2.jsonl``: [2]); a
    later turn scored alone misses none."""
    turns = _one_runs_turns(paths)
    if not turns:
        return []
    return [turn for turn in range(min(turns), max(turns)) if turn not in turns]


def check_segment_order(paths: Sequence[Path]) -> None:
    """Files named as one run's segments are read in turn order, each once: given otherwise, the turns' usage
    and results would be summed out of order (a final context below the first turn's), without a word."""
    if len(paths) < 2 or (turns := _one_runs_turns(paths)) is None:
        return
    for index in range(1, len(turns)):
        before, turn = turns[index - 1], turns[index]
        if turn <= before:
            ordered = dict.fromkeys(paths[i] for i in sorted(range(len(paths)), key=turns.__getitem__))
            wanted = " ".join(map(str, ordered))
            again = "given twice" if turn == before else f"(turn {turn}) given after {paths[index - 1]} (turn {before})"
            raise TranscriptError(f"{paths[index]}: {again}: give one run's segments once each, in order: {wanted}")


def _one_runs_turns(paths: Sequence[str | Path]) -> list[int] | None:
    """Each file's turn, when every file is named as a segment of the same run; None otherwise."""
    numbered = [segment_number(p) for p in paths]
    return [turn for _, turn in numbered] if len({run for run, _ in numbered}) == 1 else None


def fast_decoding_pays(paths: Iterable[str | Path]) -> bool:
    """Whether reading these files with msgspec (``fast``) saves more than importing it costs."""
    size = 0
    for path in paths:
        try:
            size += Path(path).stat().st_size
        except OSError:  # reading it will say what is wrong
            pass
    return size >= FAST_DECODING_MIN_BYTES


def is_later_segment(path: str | Path) -> bool:
    """Whether a file is a later turn's segment (``run-x.t2.jsonl``) rather than a session's first."""
    return _SEGMENT_RE.search(Path(path).name) is not None


def result_text(content: Any) -> str:
    """A tool_result's content as the model saw it: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    parts = []
    for block in blocks_of(content):
        if block.get("type") == "text":
            parts.append(string_of(block.get("text")))
    return "\n".join(parts)


# Keys that frame a block rather than carry its content: its kind, ids, the thinking signature, markers.
_FRAMING_KEYS = frozenset({"type", "id", "tool_use_id", "signature", "media_type", "cache_control", "is_error"})
# What ``json.dumps(value, ensure_ascii=False)`` writes, without building an encoder for every call's input.
_INPUT_ENCODER = json.JSONEncoder(ensure_ascii=False)


def content_chars(content: Any) -> int:
    """The characters a piece of message content puts in the prompt, the same way for every kind of block:
    every string in it but the framing (:data:`_FRAMING_KEYS`) — a text's text, a thinking block's thinking,
    a redacted thinking block's data, an image's encoded source; the blocks of a multi-block result summed.

    Structure (braces, keys, the block's type, ids) is not content: occupancy counts it apart, as framing."""
    if isinstance(content, str):
        return len(content)
    # Loops rather than generator sums, and a string counted where it is met: most values are strings, and this
    # runs on every block of every message.
    total = 0
    if isinstance(content, list):
        for item in content:
            total += len(item) if isinstance(item, str) else content_chars(item)
    elif isinstance(content, dict):
        for key, value in content.items():
            if key not in _FRAMING_KEYS:
                total += len(value) if isinstance(value, str) else content_chars(value)
    return total


def blocks_of(content: Any) -> list[dict]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []


def _no_constant(name: str) -> None:
    """``NaN`` and ``Infinity`` are not JSON: read as null, so no figure downstream is ever NaN."""
    return None


def _finite_float(text: str) -> float | None:
    """A number too large for a float (``1e999``) is read as null too, never as infinity."""
    value = float(text)
    return value if math.isfinite(value) else None


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def _line_text(line: str | bytes | memoryview) -> str:
    return line if isinstance(line, str) else bytes(line).decode("utf-8", errors="replace")


def json_object(line: str | bytes | memoryview) -> dict | None:
    """One line of JSON as an object, leniently: blanks around it are read past, ``NaN`` and a number too large for
    a float read as null; None when the line is not one JSON object."""
    return _loads_leniently(_line_text(line))


def _loads_leniently(line: str) -> dict | None:
    try:
        event, end = _DECODER.raw_decode(line)
    except RecursionError:
        return None
    except ValueError:
        stripped = line.strip()
        if not stripped or stripped == line:
            return None
        return _loads_leniently(stripped)
    if end != len(line) and line[end:].strip():
        return None
    return event if isinstance(event, dict) else None


def string_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


_MAX_COUNT = 1 << 53  # beyond any real count, and where a float of it would lose digits


def count_of(value: Any) -> int:
    """A token count as the API gives it; anything else (a string, a negative or an absurd number) counts as none,
    as an absent one does, rather than skewing every figure after it."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_COUNT else 0
