"""Claude Code transcripts → the common :class:`~pytest_agent_eval.transcript.Session`.

Two sources produce the same Session:

* the segment files of ``claude -p --output-format stream-json --verbose`` (``run.jsonl``,
  ``run.t2.jsonl``, …). ``--resume`` does not replay earlier messages, so segments concatenate
  (:func:`read_segments`);
* an interactive session file (``~/.claude/projects/<escaped-cwd>/<session>.jsonl``) with its
  subagent files stitched back in, each as its own thread (:func:`read_session_file`).

Claude Code writes one ``assistant`` event per content block, all repeating the same
``message.id`` and ``usage``; the reader merges them into one :class:`Message`, so usage is
counted once per API request. Anything it does not understand is stepped over, never fatal.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pytest_agent_eval.agents.claude_code.unshown import result_suffix
from pytest_agent_eval.transcript import (
    BAD_LINES_NAMED,
    MAIN,
    Compaction,
    Message,
    Offer,
    Result,
    Session,
    ToolCall,
    ToolResult,
    TranscriptError,
    Usage,
    UserText,
    blocks_of,
    check_segment_order,
    content_chars,
    count_of,
    json_object,
    result_text,
    string_of,
)

if TYPE_CHECKING:
    from pytest_agent_eval.transcript.sample import Sample

KNOWN_EVENT_TYPES = frozenset({"system", "assistant", "user", "result"})
# Session files carry ``sessionId``/``parentUuid`` on their events, stream-json ``session_id``: a single file given
# as a session's segments is read as a session file when one of its first lines does.
SNIFF_LINES = 20
# A line longer than this is a bad line, read past in bounded steps: a runaway file never exhausts memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
# An editor on Windows may begin a file with it; the first event is read past it rather than lost.
_UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"


def read_segments(paths: Iterable[str | Path], fast: bool = True) -> Session:
    """One stream-json session from its segment files, in the order given (files named as one run's
    segments, ``run.jsonl``, ``run.t2.jsonl``, …, must be given in that order, each once).

    A single interactive session file is read as one, with its subagent files stitched in. ``fast`` decodes
    with msgspec, which reads a large input faster; without it, the standard library's json, which a process
    that reads one small session starts sooner with (msgspec takes longer to import). Both read the same.
    """
    paths = [p if isinstance(p, Path) else Path(p) for p in paths]
    check_segment_order(paths)
    builder = _Builder(fast)
    for segment, path in enumerate(paths):
        # A single file's first lines say whether it is a session file: read once, whichever it is.
        builder.read_file(path, segment=segment, thread=None, expect_result=True, sniff=len(paths) == 1)
    if builder.interactive:
        builder.read_subagents(paths[0])
    return builder.finish()


def read_session_file(path: str | Path, fast: bool = True) -> Session:
    """An interactive session: a ``<session>.jsonl`` file, or a project folder (newest file); ``fast``: as
    in :func:`read_segments`."""
    session_file = find_session_file(Path(path))
    builder = _Builder(fast)
    builder.interactive = True
    builder.read_file(session_file, segment=0, thread=None)
    builder.read_subagents(session_file)
    return builder.finish()


def read_lines(lines: Iterable[str | bytes], name: str = "<lines>", fast: bool = True) -> Session:
    """A session from JSON lines in memory (tests and the live harness use this)."""
    builder = _Builder(fast)
    builder.read_lines(lines, segment=0, thread=None, name=name)
    return builder.finish()


def find_session_file(path: Path) -> Path:
    if path.exists() and not path.is_dir():  # a FIFO or device too: reading it says why it is refused
        return path
    if path.is_dir():
        candidates = [p for p in path.glob("*.jsonl") if not p.name.startswith("agent-")]
        if candidates:
            return max(candidates, key=lambda p: p.stat().st_mtime)
        raise TranscriptError(f"{path}: no session .jsonl file in this folder")
    raise TranscriptError(f"{path}: no such file or folder")


def _subagent_threads(session_file: Path, links: dict[str, str]) -> Iterator[tuple[Path, str]]:
    """Subagent files of a session, each with the thread id it belongs to.

    The thread is the ``toolUseId`` in ``agent-*.meta.json``; without a meta file, the
    parent's Task result names the agent (``toolUseResult.agentId``). An agent no call
    spawned (the compaction agent) keeps a thread of its own, so it is never scored as main.
    """
    # Claude Code writes <session>/subagents/; older versions wrote agent files beside the session,
    # and copies of single sessions often keep a bare subagents/ folder beside it.
    folders = [
        session_file.parent,
        session_file.parent / session_file.stem / "subagents",
        session_file.parent / "subagents",
    ]
    seen: set[Path] = set()
    for folder in folders:
        for agent_file in sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []:
            if agent_file in seen:
                continue
            seen.add(agent_file)
            agent_id = agent_file.stem[len("agent-") :]
            if folder != folders[1] and not belongs_to(agent_file, session_file.stem):
                continue
            yield agent_file, _meta_tool_use_id(agent_file) or links.get(agent_id) or f"agent:{agent_id}"


def belongs_to(agent_file: Path, session_id: str) -> bool:
    """A flat-layout agent file shares its folder with other sessions' agents."""
    try:
        for line in _lines(agent_file):
            event = json_object(line) if line is not None else None  # its first lines tell
            if event is not None and "sessionId" in event:
                return event["sessionId"] == session_id
    except (OSError, TranscriptError):
        return False
    return True


# Opening does not wait for a FIFO's writer with this flag: the descriptor is checked before anything is read.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
# What a file that grew while being read is read on by (a read's buffer is allocated at the size asked for).
_GROWTH_READ_BYTES = 1 << 20


def _open_regular(path: Path) -> tuple[int, int]:
    """The file opened for reading, and its size in bytes. Only a regular file is read: a FIFO, socket or device
    (``/dev/zero``) may never end, so it is refused. Opened first, then checked by the descriptor: what is checked
    is what is read, and no ``stat`` goes before the ``open`` (a system call costs microseconds)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such file") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise TranscriptError(f"{path}: is a folder, not a transcript file")
        raise TranscriptError(
            f"{path}: not a regular file (a pipe, socket or device may never end); save the transcript to a file first"
        )
    return fd, info.st_size


def _lines(path: Path) -> Iterator[bytes | memoryview | None]:
    """The file's lines as bytes (the decoder reads UTF-8 itself, which saves making a str of every line);
    ``None`` stands for a line over ``MAX_LINE_BYTES``, read past in bounded steps."""
    fd, size = _open_regular(path)
    if size > MAX_LINE_BYTES:
        with open(fd, "rb") as handle:
            if handle.peek(len(_GZIP_MAGIC)).startswith(_GZIP_MAGIC):
                yield from _gunzipped_lines(path, handle)
            else:
                yield from _stream_lines(handle)
        return
    try:  # no line can be too long: the whole file at once, by the descriptor (a file object costs more calls)
        data = os.read(fd, size)
        if more := os.read(fd, 1):  # the file grew while being read: the rest too, to its end
            chunks = [data, more]
            while more := os.read(fd, _GROWTH_READ_BYTES):
                chunks.append(more)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    if data.startswith(_GZIP_MAGIC):
        import io

        yield from _gunzipped_lines(path, io.BytesIO(data))
    else:
        yield from _split_lines(data)


def _gunzipped_lines(path: Path, compressed: BinaryIO) -> Iterator[bytes | None]:
    """A gzipped transcript's lines (as archived: ``run.jsonl.gz``), decompressed as they are read, in bounded
    steps like a large file's, so a small archive that inflates hugely never exhausts memory."""
    import gzip
    import zlib

    try:
        yield from _stream_lines(gzip.GzipFile(fileobj=compressed))  # type: ignore[arg-type]
    except (OSError, EOFError, zlib.error) as exc:
        raise TranscriptError(f"{path}: a gzip file that cannot be decompressed ({exc})") from None


def _split_lines(data: bytes) -> Iterator[memoryview]:
    """Each line as a view into ``data``: no line is copied (a ``split`` copies the whole file once more)."""
    view = memoryview(data)
    start = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    while (end := data.find(b"\n", start)) >= 0:
        yield view[start:end]
        start = end + 1
    yield view[start:]


def _stream_lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """Lines read one at a time, ``None`` for a line over ``MAX_LINE_BYTES`` (read past in bounded steps)."""
    if handle.read(len(_UTF8_BOM)) != _UTF8_BOM:
        handle.seek(0)
    while line := handle.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES:
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield line


def _meta_tool_use_id(agent_file: Path) -> str | None:
    meta = agent_file.with_name(agent_file.stem + ".meta.json")
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("toolUseId") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


class _Builder:
    def __init__(self, fast: bool = True) -> None:
        self.event = _msgspec_events() if fast else _stdlib_event
        self.session = Session()
        self.messages: dict[tuple[str, str], Message] = {}
        self.calls: dict[str, ToolCall] = {}
        self.agent_links: dict[str, str] = {}
        # Reading an interactive session file (or a file read with ``sniff`` turned out to be one): only then are
        # subagents linked to the calls that spawned them (a stream-json subagent's events name their call), which
        # saves searching every result's structured copy for an agent id.
        self.interactive = False
        self.version: str | None = None  # the CLI's, as a session file's events name it
        self.asked: tuple[str | None, str | None] | None = None  # (version, model) as the first init names them

    def finish(self) -> Session:
        # What the CLI added unseen depends on its version and the model it asked for: stream-json's init names both;
        # a session file's events name the version and its messages the model that answered.
        if self.asked is not None:
            version, model = self.asked
        else:
            version, model = self.version, next((m.model for m in self.session.messages(MAIN) if m.model), None)
        self.session.result_suffix = result_suffix(version, model)
        return self.session

    def read_file(
        self, path: Path, segment: int, thread: str | None, expect_result: bool = False, sniff: bool = False
    ) -> None:
        """``expect_result``: a stream-json segment, which ends with a ``result`` event unless cut off; ``sniff``:
        unless the file turns out to be an interactive session file (see :data:`SNIFF_LINES`)."""
        before = self.session.parse.event_types.total()
        try:
            self.read_lines(_lines(path), segment, thread, str(path), expect_result=expect_result, sniff=sniff)
        except OSError as exc:
            raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
        read = self.session.parse.event_types.total() - before
        if read == 0:
            raise TranscriptError(f"{path}: not a Claude Code transcript (no line is a JSON object)")
        if not any(self.session.parse.event_types[t] for t in KNOWN_EVENT_TYPES):
            kinds = "/".join(sorted(KNOWN_EVENT_TYPES))
            raise TranscriptError(
                f'{path}: not a Claude Code transcript: {read} JSON object(s), none with a "type" of {kinds} '
                "(Claude Code writes one such event a line: stream-json or a session file)"
            )
        self.session.files.append(path)

    def read_subagents(self, session_file: Path) -> None:
        for agent_file, thread in _subagent_threads(session_file, self.agent_links):
            self.read_file(agent_file, segment=0, thread=thread)

    def read_lines(
        self,
        lines: Iterable[str | bytes | memoryview | None],
        segment: int,
        thread: str | None,
        name: str,
        expect_result: bool = False,
        sniff: bool = False,
    ) -> None:
        # The hot loop of scoring: one decode per line and a dispatch on the event's type, nothing else.
        parse = self.session.parse
        turn_open = True  # until a result event closes it; any later assistant/user event opens the next
        unlinked: list[tuple[_Event, str]] = []  # results read while sniffing, before the file's format was known
        for number, line in enumerate(lines):
            if line is not None and not line:  # the empty line after the last newline: nothing to decode
                continue
            event = self.event(line) if line is not None else None  # None: a line too long to read
            if event is None:
                if line is None or not _blank(line):
                    parse.bad_lines += 1
                    if len(parse.bad_at) < BAD_LINES_NAMED:
                        why = f"longer than {MAX_LINE_BYTES >> 20} MiB" if line is None else "not a JSON object"
                        parse.bad_at.append(f"{name}:{number + 1}: {why}")
                continue
            if sniff and number < SNIFF_LINES and (event.session_id is not _ABSENT or event.parent_uuid is not _ABSENT):
                self.interactive = True
                for earlier, result_id in unlinked:
                    self._link_agent(earlier, result_id)
                unlinked.clear()
            parse.events += 1
            kind = event.type
            if not isinstance(kind, str):
                kind = "?"
            parse.event_types[kind] += 1
            if kind not in KNOWN_EVENT_TYPES:
                continue
            event_thread = thread or _thread_of(event)
            if kind == "assistant":
                self._on_assistant(event, segment, event_thread)
            elif kind == "user":
                result_id = self._on_user(event, event_thread)
                if result_id is not None and self.interactive:
                    self._link_agent(event, result_id)
                elif result_id is not None and sniff and number < SNIFF_LINES:  # linked if the file is a session's
                    unlinked.append((event, result_id))
            elif kind == "system":
                self._on_system(event, line, event_thread)
            else:
                self._on_result(event, segment)
            turn_open = kind != "result" and (turn_open or kind != "system")
        if expect_result and turn_open and not self.interactive:
            parse.unfinished.append(name)

    # -- event handlers -----------------------------------------------------------------
    def _on_system(self, event: _Event, line: str | bytes | memoryview, thread: str) -> None:
        subtype = event.subtype
        if subtype == "init":
            self.session.offers.append(Offer(event.tools, event.mcp_servers))
            if self.asked is None and event.model:
                self.asked = (string_of(event.cli_version), string_of(event.model))
            # A copy of a view: the view would keep the whole file's bytes alive.
            self.session.init_lines.append(line if isinstance(line, (str, bytes)) else bytes(line))
        elif subtype in ("compact_boundary", "compaction"):
            meta = event.compaction or event.compaction_snake or {}
            meta = meta if isinstance(meta, dict) else {}
            pre = meta.get("preTokens", meta.get("pre_tokens"))
            kept = meta.get("preserved_messages", meta.get("preservedMessages"))
            uuids = kept.get("uuids") if isinstance(kept, dict) else None
            preserved = frozenset(u for u in uuids if isinstance(u, str)) if isinstance(uuids, list) else frozenset()
            self.session.timeline.append(Compaction(thread, pre if isinstance(pre, int) else None, preserved))

    def _on_assistant(self, event: _Event, segment: int, thread: str) -> None:
        raw = event.message
        if not isinstance(raw, dict):
            return
        if self.version is None:  # the first message's says it ("" where it does not, as stream-json's)
            self.version = string_of(event.version)
        msg_id = string_of(raw.get("id")) or string_of(event.uuid) or f"anon-{len(self.session.timeline)}"
        key = (thread, msg_id)
        message = self.messages.get(key)
        if message is None:
            message = Message(
                msg_id, thread, Usage.from_json(raw.get("usage")), segment, model=string_of(raw.get("model"))
            )
            self.messages[key] = message
            self.session.timeline.append(message)
        if isinstance(event.error, str):
            message.error = event.error
        for block in blocks_of(raw.get("content")):
            if block.get("type") == "tool_use":
                self._add_call(block, message)
            else:
                message.blocks.append(block)

    def _add_call(self, block: dict, message: Message) -> None:
        call_id = string_of(block.get("id")) or f"call-{len(self.calls)}"
        if call_id in self.calls:  # a repeated event for a block already read
            return
        raw_input = block.get("input")
        call = ToolCall(
            id=call_id,
            name=string_of(block.get("name")) or "?",
            input=raw_input if isinstance(raw_input, dict) else {},
            thread=message.thread,
            message_id=message.id,
        )
        self.calls[call_id] = call
        message.calls.append(call)
        self.session.calls.append(call)

    def _link_agent(self, event: _Event, result_id: str) -> None:
        agent_id = event.agent_id()
        if agent_id:
            self.agent_links[agent_id] = result_id

    def _on_user(self, event: _Event, thread: str) -> str | None:
        """The call id of the event's last tool result, if it carried any."""
        raw = event.message
        if not isinstance(raw, dict):
            return None
        content = raw.get("content")
        if isinstance(content, str):
            self.session.timeline.append(UserText(content, thread))
            return None
        result_id: str | None = None
        for block in blocks_of(content):
            if block.get("type") == "tool_result":
                call_id = string_of(block.get("tool_use_id"))
                content = block.get("content")
                result = ToolResult(
                    call_id,
                    result_text(content),
                    block.get("is_error") is True,
                    thread,
                    content_chars(content),
                    string_of(event.uuid),
                )
                call = self.calls.get(call_id)
                if call is not None:
                    call.result = result
                self.session.timeline.append(result)
                result_id = call_id
            elif block.get("type") == "text":
                self.session.timeline.append(UserText(string_of(block.get("text")), thread))
            else:  # an image or a document the user attached still occupies the window
                self.session.timeline.append(UserText("", thread, content_chars(block)))
        return result_id

    def _on_result(self, event: _Event, segment: int) -> None:
        cost = event.total_cost_usd
        duration = event.duration_ms
        turns = event.num_turns
        self.session.results.append(
            Result(
                text=string_of(event.result),
                subtype=string_of(event.subtype),
                is_error=event.is_error is True,
                num_turns=turns if isinstance(turns, int) else None,
                segment=segment,
                cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
                duration_ms=duration if isinstance(duration, int) else None,
                api_error_status=count_of(event.api_error_status) or None,
                output_tokens=count_of(event.usage.get("output_tokens")) if isinstance(event.usage, dict) else None,
            )
        )


def _thread_of(event: _Event) -> str:
    parent = event.parent_tool_use_id
    return parent if isinstance(parent, str) and parent else MAIN


# The fields of an event the reader uses, each with its key in the JSON; every other field is stepped over.
_EVENT_FIELDS = (
    ("type", "type"),
    ("subtype", "subtype"),
    ("message", "message"),
    ("uuid", "uuid"),
    ("error", "error"),
    ("parent_tool_use_id", "parent_tool_use_id"),
    ("compaction", "compactMetadata"),
    ("compaction_snake", "compact_metadata"),
    ("result", "result"),
    ("is_error", "is_error"),
    ("num_turns", "num_turns"),
    ("total_cost_usd", "total_cost_usd"),
    ("duration_ms", "duration_ms"),
    ("api_error_status", "api_error_status"),
    ("usage", "usage"),
    ("tools", "tools"),
    ("mcp_servers", "mcp_servers"),
    ("model", "model"),  # an init event's: the model the CLI asked for (an assistant event's is in its message)
    ("cli_version", "claude_code_version"),
    ("version", "version"),  # a session file's events': the CLI's version
)
# Fields read only for whether they are there (a session file's ``sessionId``/``parentUuid``), or only for a Task
# result's agent id (the structured copy of a tool result, about half of a stream-json file's bytes): msgspec leaves
# them undecoded. An absent one is :data:`_ABSENT`, so a field present as null still counts as present.
_LAZY_FIELDS = (
    ("session_id", "sessionId"),
    ("parent_uuid", "parentUuid"),
    ("structured", "toolUseResult"),
    ("structured_snake", "tool_use_result"),
)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


class _Event:
    """An event as the standard library reads it: the fields of :data:`_EVENT_FIELDS` and :data:`_LAZY_FIELDS`,
    each taking any JSON value, so the handlers judge types as they would a dict's. msgspec's events
    (:func:`_msgspec_events`) have the same attributes."""

    __slots__ = tuple(name for name, _ in _EVENT_FIELDS + _LAZY_FIELDS)

    def __init__(self, raw: dict) -> None:
        for name, key in _EVENT_FIELDS:
            setattr(self, name, raw.get(key))
        for name, key in _LAZY_FIELDS:
            setattr(self, name, raw.get(key, _ABSENT))

    def agent_id(self) -> str | None:
        """The subagent a Task/Agent result names (``toolUseResult.agentId``)."""
        return _agent_id(self.structured if self.structured is not _ABSENT else self.structured_snake)


def _agent_id(structured: Any) -> str | None:
    agent_id = structured.get("agentId") if isinstance(structured, dict) else None
    return agent_id if isinstance(agent_id, str) else None


def _stdlib_event(line: str | bytes | memoryview) -> _Event | None:
    """One event per line, as :func:`~pytest_agent_eval.transcript.json_object` reads it: a line it would not read
    as a JSON object is None."""
    raw = json_object(line)
    return _Event(raw) if raw is not None else None


@functools.cache
def _msgspec_events() -> Callable[[str | bytes | memoryview], Any]:
    """msgspec decodes a line about three times as fast as the standard library (into only the fields the reader
    uses), but importing it takes longer than reading a small session does: it is imported on first use. Where it
    does not read a line as JSON, the standard library's reading decides, so both decodings agree line for line."""
    import msgspec

    fields: list[tuple[str, Any, Any]] = [
        (name, Any, msgspec.field(default=None, name=key)) for name, key in _EVENT_FIELDS
    ]
    fields += [(name, msgspec.Raw, msgspec.field(default=_ABSENT, name=key)) for name, key in _LAZY_FIELDS]
    plain = msgspec.json.Decoder()

    def agent_id(self: Any) -> str | None:
        structured = self.structured if self.structured is not _ABSENT else self.structured_snake
        if structured is _ABSENT or b'"agentId"' not in bytes(structured):  # most results are no agent's
            return None
        return _agent_id(plain.decode(structured))

    events = msgspec.json.Decoder(msgspec.defstruct("_Event", fields, namespace={"agent_id": agent_id}))

    def event(line: str | bytes | memoryview) -> Any:
        try:
            return events.decode(line)
        except msgspec.DecodeError:  # not an object, or not JSON to msgspec (NaN, 1e999, odd whitespace, bad UTF-8)
            return _stdlib_event(line)
        except RecursionError:  # msgspec's own depth limit: the standard library would go no deeper
            return None

    return event


def _blank(line: str | bytes | memoryview) -> bool:
    return not (line if isinstance(line, str) else bytes(line)).strip()


# Record types only a session file writes (beside its user and assistant messages, which carry a sessionId there).
_SESSION_FILE_TYPES = frozenset({"summary", "file-history-snapshot", "queue-operation", "progress"})


def recognise(sample: Sample) -> str | None:
    """Whether the file ``sample`` begins is Claude Code's: ``stream-json`` (a ``system/init`` event, or messages
    and a ``result`` as ``claude -p --output-format stream-json`` writes them) or a ``session file`` (messages
    carrying ``sessionId`` and ``uuid``); None for any other."""
    kind = None
    for record in sample.records:
        rtype, message = record.get("type"), record.get("message")
        if rtype in ("assistant", "user") and isinstance(message, dict) and "role" in message:
            if "sessionId" in record and "uuid" in record:
                return "session file"
            kind = kind or ("stream-json" if "session_id" in record else None)
        elif rtype == "system" and record.get("subtype") == "init" and "session_id" in record:
            kind = "stream-json"
        elif rtype == "result" and "num_turns" in record and "session_id" in record:
            kind = "stream-json"
        elif rtype in _SESSION_FILE_TYPES and "sessionId" in record:
            return "session file"
    return kind
