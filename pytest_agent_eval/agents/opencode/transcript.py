"""OpenCode transcripts → the common :class:`~pytest_agent_eval.transcript.Session`.

``opencode run --format json`` writes one JSON event a line, each naming its ``sessionID`` and carrying a
``part`` of OpenCode's message: ``step_start`` (a model request begins; ``part.messageID`` names OpenCode's
assistant message), ``tool_use`` (``part{tool, callID, state{status, input, output | error, metadata}}``, once the
call has run), ``text`` (``part.text``), ``step_finish`` (``part{reason, tokens{input, output, reasoning,
cache{read, write}}}``), ``error``. There is one ``step_finish`` per model request, with that request's usage:
``tokens.input`` is the prompt's uncached part, ``cache.read`` and ``cache.write`` the rest, as the Messages API
reports them. So the stream holds what the metrics need, and it is what is read. OpenCode's session database
(``$XDG_DATA_HOME/opencode/opencode.db``) holds the same parts and nothing more: no id of the model's responses.

Each step is one :class:`~pytest_agent_eval.transcript.Message`, named by OpenCode's message id and step number:
the model's own message ids are in none of OpenCode's records (:attr:`OpenCodeSession.own_message_ids`; the
evidence pairs the steps with the model's responses in order, :mod:`pytest_agent_eval.metrics.evidence`). A tool
call's ``callID`` is the model's own.

Tools are named in the common vocabulary the metrics read: ``bash{command}`` is ``Bash``, ``read{filePath}``
``Read{file_path}``, ``grep`` ``Grep``, ``glob`` ``Glob``…; an MCP server ``NAME``'s tool ``NAME_tool`` is
``mcp__NAME__tool``, for the servers the harness's config gave OpenCode (the driver keeps a copy beside the first
segment, :func:`kept_config`; without it, the names are kept as OpenCode gave them). What the stream does not give
is said, never guessed: :attr:`OpenCodeSession.unread`.

A subagent (a ``task`` call) runs in a child session whose steps the stream leaves out; the driver keeps them beside
the first segment (:func:`kept_subagents`, read out of OpenCode's database: :mod:`.subagents`), as events of the
stream's own kinds, and the reader puts them in the Session after the call, in the thread named by the call's id
(as Claude Code's subagents are). A child session that was not kept is said (``unread["subagents"]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_agent_eval.transcript import (
    MAIN,
    Message,
    Result,
    Session,
    ToolCall,
    ToolResult,
    TranscriptError,
    Usage,
    read_records,
)

if TYPE_CHECKING:
    from pytest_agent_eval.transcript.sample import Sample

# OpenCode's built-in tools → the common names, and their inputs' keys that differ.
TOOL_NAMES = {
    "bash": "Bash", "read": "Read", "grep": "Grep", "glob": "Glob", "list": "LS", "edit": "Edit", "write": "Write",
    "patch": "Edit", "task": "Task", "todowrite": "TodoWrite", "todoread": "TodoRead", "webfetch": "WebFetch",
    "websearch": "WebSearch", "skill": "Skill",
}  # fmt: skip
_INPUT_KEYS = {"filePath": "file_path", "oldString": "old_string", "newString": "new_string"}
# The harness's copy of the config a run was given, beside its first segment: ``run-<label>.opencode.json``.
CONFIG_SUFFIX = ".opencode.json"
# The working directory the run was given, beside its first segment: ``run-<label>.cwd`` (OpenCode's stream names
# none; a cassette rewrites it in the recorded calls to the replaying CLI's).
CWD_SUFFIX = ".cwd"
# The steps of the run's subagents (child sessions), beside its first segment: ``run-<label>.subagents``.
SUBAGENTS_SUFFIX = ".subagents"
FIRST_LINE_MAX_BYTES = 1 << 20  # a first event is a step_start of about 300 bytes; a long one may be a tool_use
STEP_END = "step_finish"
TASK_TOOL = "task"  # runs a subagent in a child session: state.metadata.sessionId names it
UNCLAIMED = "unclaimed "  # the thread of a kept child session's steps no task call ran: + the session's id
CALLS_REASON = "tool-calls"  # a step_finish that is not the turn's last

UNREAD = {
    "offered_tools": "OpenCode's stream lists no tools offered to the model: the tool's MCP names an arm exposed "
    "are seen only when called",
    "response_ids": "OpenCode records no id of the model's responses: each step is named by OpenCode's message id",
    "answering_model": "OpenCode's stream names no model",
    "user_text": "OpenCode's stream carries no user message: the question's own tokens are not read",
    "thinking": "without --thinking OpenCode streams no reasoning: thinking is counted in tokens.reasoning only",
}


@dataclass
class OpenCodeSession(Session):
    """A Session read from OpenCode's ``--format json`` streams. ``unread``: figure → why the stream does not give
    it; ``notices``: OpenCode's errors, in order."""

    # The messages are named by OpenCode's ids, not the model's (metrics.evidence pairs them in order).
    own_message_ids: ClassVar[bool] = True

    session_id: str = ""
    mcp_servers: tuple[str, ...] = ()
    unread: dict[str, str] = field(default_factory=lambda: dict(UNREAD))
    notices: list[str] = field(default_factory=list)
    unkept_subagents: list[str] = field(default_factory=list)  # child sessions of task calls whose steps were not kept


def first_event(path: str | Path) -> dict[str, Any] | None:
    """The first JSON line of ``path`` when it is an OpenCode event (an object with a ``sessionID`` and a
    ``part``), else None. Only a regular file is looked into (a FIFO may never end)."""
    if not Path(path).is_file():
        return None
    try:
        with Path(path).open("rb") as handle:
            while line := handle.readline(FIRST_LINE_MAX_BYTES):
                if line.strip():
                    event = json.loads(line)
                    ok = isinstance(event, dict) and isinstance(event.get("sessionID"), str)
                    return event if ok and isinstance(event.get("part"), dict) else None
    except (OSError, ValueError):
        return None
    return None


def _is_event(record: dict[str, Any]) -> bool:
    return isinstance(record.get("sessionID"), str)


def ends_turn(event: dict[str, Any]) -> bool:
    """Whether an event ends OpenCode's turn: the model answered (a ``step_finish`` not for tool calls)."""
    part = event.get("part") if isinstance(event.get("part"), dict) else {}
    return event.get("type") == STEP_END and part.get("reason") != CALLS_REASON


def child_session(part: Any) -> str | None:
    """The child session a ``task`` call (a ``tool_use`` event's part) ran its subagent in (None for any other
    part)."""
    if not isinstance(part, dict) or part.get("tool") != TASK_TOOL:
        return None
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    metadata = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
    child = metadata.get("sessionId")
    return child if isinstance(child, str) and child else None


def is_opencode_events(path: str | Path) -> bool:
    """Whether ``path`` is an ``opencode run --format json`` stream."""
    return first_event(path) is not None


def kept_config(events_file: str | Path) -> Path:
    """Where the harness keeps the config of the run whose first segment is ``events_file``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + CONFIG_SUFFIX)


def kept_cwd(events_file: str | Path) -> Path:
    """Where the harness keeps the working directory of the run whose first segment is ``events_file``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + CWD_SUFFIX)


def kept_subagents(events_file: str | Path) -> Path:
    """Where the harness keeps the subagents' steps of the run whose first segment is ``events_file``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + SUBAGENTS_SUFFIX)


def _children(path: Path, session: OpenCodeSession) -> dict[str, list[dict[str, Any]]]:
    """The kept steps of the child sessions, by session (none when nothing was kept)."""
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    children: dict[str, list[dict[str, Any]]] = {}
    for event in read_records(path, session, "OpenCode's subagent steps", "an OpenCode event", _is_event):
        children.setdefault(str(event["sessionID"]), []).append(event)
    return children


def mcp_servers_of(config_file: Path) -> tuple[str, ...]:
    """The MCP servers a kept config gave OpenCode (none when there is no such file)."""
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ()
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{config_file}: not OpenCode's config ({exc})") from None
    servers = config.get("mcp") if isinstance(config, dict) else None
    return tuple(servers) if isinstance(servers, dict) else ()


def read_opencode(events_files: str | Path | Sequence[str | Path], mcp_servers: Sequence[str] | None = None
                  ) -> OpenCodeSession:  # fmt: skip
    """An OpenCode session from its ``--format json`` streams, one per turn, all of one session, in order.
    ``mcp_servers``: the MCP servers it was given (default: those of the config kept beside the first)."""
    paths = [Path(events_files)] if isinstance(events_files, (str, Path)) else [Path(p) for p in events_files]
    if not paths:
        raise TranscriptError("no OpenCode events file given")
    session = _new_session(paths, mcp_servers)
    reader = _Reader(session, _children(kept_subagents(paths[0]), session))
    for segment, path in enumerate(paths):
        events = _read_stream(path, session)
        ids = sorted({str(e.get("sessionID")) for e in events})
        if len(ids) != 1:
            raise TranscriptError(f"{path}: events of {len(ids)} sessions ({', '.join(ids)})")
        if segment == 0:
            session.session_id = ids[0]
        elif ids[0] != session.session_id:
            raise TranscriptError(f"{path}: session {ids[0]}, not {paths[0]}'s {session.session_id}")
        reader.read(events, path, segment)
    _unclaimed(session, reader.children, len(paths) - 1)
    return _finished(session)


def _unclaimed(session: OpenCodeSession, children: dict[str, list[dict[str, Any]]], segment: int) -> None:
    """Read the kept steps no ``task`` call of the stream ran (a child session no call names, steps after its call
    ended), each child in a thread of its own, into the last turn: the database they come from is the agent's to
    write, and a step the model never sent must meet the integrity gate, named, not vanish (docs/sandbox.md, "What a
    turn leaves for the next")."""
    for child in list(children):
        pending, children[child] = children[child], []
        if pending:
            _Reader(session, children, f"{UNCLAIMED}{child}")._steps(pending, segment)


EVENTS_KIND, EXPORT_KIND = "run --format json stream", "export"
# An export's parts by type, as the stream's events name them (the stream's event is its part, wrapped).
_EXPORT_EVENTS = {"step-start": "step_start", "step-finish": STEP_END, "tool": "tool_use", "text": "text",
                  "reasoning": "reasoning"}  # fmt: skip


def recognise(sample: Sample) -> str | None:
    """Whether the file ``sample`` begins is OpenCode's: its ``run --format json`` stream (events naming a
    ``sessionID`` and carrying a ``part``), or an ``export`` (``opencode export``: ``{info, messages: [{info,
    parts}]}``); None for any other."""
    whole = sample.whole
    if whole is not None and isinstance(whole.get("info"), dict) and isinstance(whole.get("messages"), list):
        messages = [m for m in whole["messages"] if isinstance(m, dict)]
        if all(isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list) for m in messages):
            return EXPORT_KIND
    events = [r for r in sample.records if _is_event(r) and isinstance(r.get("part"), dict)]
    return EVENTS_KIND if events else None


def read_opencode_record(paths: Sequence[Path], kind: str) -> list[OpenCodeSession]:
    """OpenCode's sessions as a user has them: an export, the turns' streams of one session, or one log holding
    several runs appended (each its own session, in the order they began)."""
    if kind == EXPORT_KIND:
        if len(paths) > 1:
            raise TranscriptError(f"{paths[0]}: an OpenCode export holds the whole session: give it alone")
        return [read_export(paths[0])]
    if len(paths) == 1:
        probe = OpenCodeSession()
        events = _read_stream(paths[0], probe)
        runs: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            runs.setdefault(str(event.get("sessionID")), []).append(event)
        if len(runs) > 1:
            return [_one_run(paths[0], run_id, run) for run_id, run in runs.items()]
    return [read_opencode(paths)]


def _one_run(path: Path, run_id: str, events: list[dict[str, Any]]) -> OpenCodeSession:
    session = _new_session([path], None)
    session.session_id = run_id
    session.parse.events = len(events)
    _Reader(session, {}).read(events, path, 0)
    return _finished(session)


def read_export(path: Path) -> OpenCodeSession:
    """An OpenCode session from ``opencode export``: its assistant messages' parts, read as the stream's events."""
    from pytest_agent_eval.transcript.sample import whole_object

    export = whole_object(path, "an OpenCode export")
    info = export.get("info") if isinstance(export.get("info"), dict) else {}
    session = _new_session([path], None)
    session.session_id = str(info.get("id") or "")
    turns: list[list[dict[str, Any]]] = []
    for message in export.get("messages") or []:
        meta = message.get("info") if isinstance(message, dict) and isinstance(message.get("info"), dict) else {}
        if meta.get("role") == "user" or not turns:
            turns.append([])  # a question opens a turn, as a stream file of its own would (its text is in none)
        if meta.get("role") != "assistant":
            continue
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") in _EXPORT_EVENTS:
                turns[-1].append({"type": _EXPORT_EVENTS[part["type"]], "sessionID": session.session_id, "part": part})
    turns = [events for events in turns if events]
    if not turns:
        raise TranscriptError(f"{path}: an OpenCode export without a single step of the model's")
    reader = _Reader(session, {})
    for segment, events in enumerate(turns):
        session.parse.events += len(events)
        reader.read(events, path, segment)
    return _finished(session)


def _read_stream(path: Path, session: OpenCodeSession) -> list[dict[str, Any]]:
    return read_records(path, session, "an opencode run --format json stream", "an OpenCode event", _is_event)


def _new_session(paths: list[Path], mcp_servers: Sequence[str] | None) -> OpenCodeSession:
    servers = tuple(mcp_servers) if mcp_servers is not None else mcp_servers_of(kept_config(paths[0]))
    session = OpenCodeSession(mcp_servers=servers, files=paths)
    if not servers:
        session.unread["mcp_servers"] = "no config beside the stream names its MCP servers: their tools are kept " \
            "under OpenCode's names (NAME_tool)"  # fmt: skip
    return session


def _finished(session: OpenCodeSession) -> OpenCodeSession:
    if session.unkept_subagents:
        session.unread["subagents"] = "the steps of the task calls' child sessions were not kept beside the stream " \
            f"(run-<label>{SUBAGENTS_SUFFIX}): {', '.join(session.unkept_subagents)}"  # fmt: skip
        session.missing["subagents"] = (
            f"the stream leaves out the steps of the {len(session.unkept_subagents)} task call(s)' child sessions "
            "(their requests, calls and usage): OpenCode's database (opencode export <child session>) would add them"
        )
    return session


class _Reader:
    """The events of each turn in order: a step opens a message, its calls and text fill it, its finish closes it; a
    ``task`` call's child session is read after the call, in the call's thread."""

    def __init__(self, session: OpenCodeSession, children: dict[str, list[dict[str, Any]]], thread: str = MAIN
                 ) -> None:  # fmt: skip
        self.session = session
        self.children = children
        self.thread = thread
        self.message: Message | None = None
        self.steps: dict[str, int] = {}

    def read(self, events: list[dict[str, Any]], path: Path, segment: int) -> None:
        answer, ended = self._steps(events, segment)
        if ended is None:
            self.session.parse.unfinished.append(str(path))
        elif ended != "error":
            self.session.results.append(Result(answer, ended, False, None, segment))

    def _steps(self, events: list[dict[str, Any]], segment: int) -> tuple[str, str | None]:
        """Read ``events``; the answer, and how the turn ended (None: it did not)."""
        answer, ended = "", None
        for event in in_model_order(events):
            kind, part = event.get("type"), event.get("part") if isinstance(event.get("part"), dict) else {}
            if kind == "step_start":
                self._open(str(part.get("messageID") or ""), segment)
            elif kind == "tool_use":
                self._call(part, segment)
            elif kind == "text":
                self._current(segment).blocks.append({"type": "text", "text": str(part.get("text") or "")})
            elif kind == "reasoning":
                self._current(segment).blocks.append({"type": "thinking", "thinking": str(part.get("text") or "")})
            elif kind == STEP_END:
                message = self._current(segment)
                message.usage = _usage(part.get("tokens"))
                self.message = None
                if part.get("reason") != CALLS_REASON:
                    answer, ended = message.text, str(part.get("reason") or "stop")
            elif kind == "error":
                said = error_text(event.get("error"))
                self.session.notices.append(said)
                self.session.results.append(Result(said, "error", True, None, segment))
                ended = "error"
        self.message = None  # a step the run was cut off in stays as it was
        return answer, ended

    def _open(self, opencode_id: str, segment: int) -> Message:
        number = self.steps[opencode_id] = self.steps.get(opencode_id, 0) + 1
        step_id = opencode_id if number == 1 else f"{opencode_id}#{number}"
        fallback = f"opencode-step-{len(self.session.messages(None)) + 1}"
        self.message = Message(step_id or fallback, self.thread, None, segment)
        self.session.timeline.append(self.message)
        return self.message

    def _current(self, segment: int) -> Message:
        return self.message if self.message is not None else self._open("", segment)

    def _call(self, part: dict[str, Any], segment: int) -> None:
        message = self._current(segment)
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        raw_input = state.get("input") if isinstance(state.get("input"), dict) else {}
        name, arguments = self._common(str(part.get("tool") or "?"), raw_input)
        call_id = str(part.get("callID") or f"opencode-call-{len(self.session.calls)}")
        call = ToolCall(call_id, name, arguments, self.thread, message.id,
                        sent_as=(str(part.get("tool") or "?"), raw_input))  # fmt: skip
        message.calls.append(call)
        self.session.calls.append(call)
        self._subagent(call_id, part, state, segment)
        status = state.get("status")
        if status not in ("completed", "error"):
            return  # never ran: no result reached the model
        failed = status == "error"
        text = str(state.get("error") if failed else state.get("output") or "")
        metadata = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        exit_code = metadata.get("exit")
        is_error = failed or (name == "Bash" and isinstance(exit_code, int) and exit_code != 0)
        call.result = ToolResult(call_id, text, is_error, self.thread)
        self.session.timeline.append(call.result)

    def _subagent(self, call_id: str, part: dict[str, Any], state: dict[str, Any], segment: int) -> None:
        """The steps of the child session a ``task`` call ran, up to the call's end (a later call may resume the same
        session), in the call's thread, before its result."""
        child = child_session(part)
        if child is None:
            return
        if child not in self.children:
            self.session.unkept_subagents.append(child)
            return
        end = state["time"].get("end") if isinstance(state.get("time"), dict) else None
        pending = self.children[child]
        taken = list(takewhile(lambda e: not isinstance(end, int) or _count(e.get("timestamp")) <= end, pending))
        self.children[child] = pending[len(taken) :]
        _Reader(self.session, self.children, call_id)._steps(taken, segment)

    def _common(self, tool: str, raw_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        arguments = {_INPUT_KEYS.get(key, key): value for key, value in raw_input.items()}
        if tool in TOOL_NAMES:
            return TOOL_NAMES[tool], arguments
        for server in sorted(self.session.mcp_servers, key=len, reverse=True):
            if tool.startswith(server + "_"):
                return f"mcp__{server}__{tool[len(server) + 1 :]}", dict(raw_input)
        return tool, dict(raw_input)


def in_model_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with each run of ``tool_use`` events in the order the model sent the calls. OpenCode runs a step's
    calls at once and writes each one's event when it has run, so two calls' events come in the order they finished,
    which the machine's load decides; each part's id is ascending in the order OpenCode made it (``prt_`` and a hex
    count of time), as the model streamed the calls, and the next request carries them in that order."""
    ordered: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for event in [*events, {}]:
        if event.get("type") == "tool_use":
            calls.append(event)
            continue
        ids = [call["part"].get("id") for call in calls if isinstance(call.get("part"), dict)]
        if len(ids) == len(calls) and all(isinstance(i, str) and i.startswith("prt_") for i in ids):
            calls.sort(key=lambda call: call["part"]["id"])
        ordered += calls
        calls = []
        if event:
            ordered.append(event)
    return ordered


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    cache = raw.get("cache") if isinstance(raw.get("cache"), dict) else {}
    return Usage(
        _count(raw.get("input")), _count(cache.get("read")), _count(cache.get("write")), _count(raw.get("output"))
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def error_text(error: Any) -> str:
    if isinstance(error, dict):
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        return str(data.get("message") or error.get("message") or error.get("name") or error)
    return str(error)
