"""Codex CLI transcripts → the common :class:`~pytest_agent_eval.transcript.Session`.

A Codex run leaves two records: the ``codex exec --json`` event stream (``thread.started``, ``item.*``,
``turn.completed``…), and its own session file, the *rollout* (``$CODEX_HOME/sessions/YYYY/MM/DD/
rollout-<time>-<thread id>.jsonl``). The rollout is read for the session, because only it has what the
metrics need:

* every model request: its output items (``response_item`` ``function_call`` / ``message``), closed by a
  ``token_usage_record`` naming the ``response_id`` and its usage (the same figures as the ``token_count``
  event's ``info.last_token_usage``, whose ``input_tokens`` is the whole prompt, cached part included);
* every tool result as the model saw it (``function_call_output``: a shell command's output is truncated there
  to Codex's own budget, while the event stream's ``aggregated_output`` is whole), and calls Codex refused
  itself (a deny rule), which the event stream leaves out.

The event stream gives the turns' ends (``turn.completed`` / ``turn.failed``) and errors. A turn is a segment: its
messages are the requests between its ``task_started`` and the next, and its result declares its output (every
request's summed, reasoning included: the last usage record's ``turn_token_usage``; the stream's ``turn.completed`` of
a resumed turn counts the whole thread's), which tells occupancy what the reasoning hid. A ``reasoning`` item is a
thinking block holding its summary (empty when the model showed none): its encrypted content is the API's own.

Codex's tools are named in the house's common vocabulary, the one the metrics read: an MCP tool
(``function_call{namespace: "mcp__NAME", name}``) is ``mcp__NAME__<name>``; the shell, ``exec_command{cmd}``,
is ``Bash{command}``, so the file-access classifier decides, as for Claude Code's Bash, whether it read or
searched. What Codex's records do not give is said, never guessed: :attr:`CodexSession.unread`.

A subagent Codex's own ``multi_agent_v1.spawn_agent`` started runs on a thread of its own, with a rollout of its own
that the parent's records never show: the harness keeps those beside the first segment (:func:`kept_subagents`), and
each is read where its spawn call got its answer (the call's output names its thread), in the thread named by the
call's id, as Claude Code's subagents are. A turn's declared output is then its main thread's alone.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_agent_eval.transcript import (
    MAIN,
    Compaction,
    Message,
    Result,
    Session,
    ToolCall,
    ToolResult,
    TranscriptError,
    Usage,
    UserText,
    content_chars,
    given_companion,
    read_records,
    say_read_alone,
    whole_record,
    with_companion,
)
from pytest_agent_eval.transcript.sample import sample as sample_of

if TYPE_CHECKING:
    from pytest_agent_eval.transcript.sample import Sample

SHELL_TOOL = "exec_command"
# The shell tool of Codex before its unified exec (0.40 and its time): ``shell{command: [argv…], workdir}``, its
# output a JSON object ``{"output", "metadata": {"exit_code"}}``; read as the same Bash.
OLD_SHELL_TOOL = "shell"
# Calls that are items of their own, not function calls: the Responses API's hosted web search (no call id, no
# output item: the model gets its findings itself) and the older local shell call.
WEB_SEARCH_ITEM, LOCAL_SHELL_ITEM = "web_search_call", "local_shell_call"
CALL_ITEMS = (WEB_SEARCH_ITEM, LOCAL_SHELL_ITEM)
WEB_SEARCH_NAME = "WebSearch"
# The common name of Codex's shell tool: the name the metrics read a shell command under.
SHELL_NAME = "Bash"
# What a shell result carries before the command's output, and where it says the exit code.
_OUTPUT_MARK = "\nOutput:\n"
_EXIT_RE = re.compile(r"^Process exited with code (-?\d+)$", re.M)
# The part Codex puts before an MCP tool's own content in the result the model sees.
_HEADER_RE = re.compile(r"^Wall time: [\d.]+ seconds\nOutput:$")
# The first event of a ``codex exec --json`` stream.
FIRST_EVENT = "thread.started"
# The harness's copy of a run's rollout, beside its first segment: ``run-<label>.rollout`` (no ``*.jsonl``: no segment).
ROLLOUT_SUFFIX = ".rollout"
# Codex's own subagents (its default ``multi_agent`` feature, the ``multi_agent_v1`` namespace): ``spawn_agent``
# starts a thread of its own, whose rollout is a file of its own; the call's output names it (``agent_id``).
SPAWN_TOOL = "multi_agent_v1__spawn_agent"
# The harness's copy of the subagents' rollouts, beside the first segment: ``run-<label>.subagents``.
SUBAGENTS_SUFFIX = ".subagents"
_UNKEPT = "the rollouts of threads spawn_agent started were not kept beside the stream (run-<label>.subagents):"
# A thread.started event is about 80 bytes: a first line longer than this is some other file's.
FIRST_EVENT_MAX_BYTES = 4096

# What a Codex session's records never show, and why: kept on every CodexSession read.
UNREAD = {
    "offered_tools": "Codex records no list of the tools it offered the model (no init event): the tool's MCP "
    "names an arm exposed are seen only when called",
    "answering_model": "Codex records the model it asked for (turn_context.model), not the one that answered",
}


@dataclass
class CodexSession(Session):
    """A Session read from Codex's records. ``unread``: figure → why Codex's records do not give it; ``notices``:
    the CLI's warnings and errors (``error`` items, e.g. a model it has no metadata for), in order."""

    # Codex answers a call its rules forbid with "… rejected: <justification>" (its exec policy's Rejected)
    denial: ClassVar[str] = "rejected by its rules"

    thread_id: str = ""
    version: str = ""  # the CLI's version its rollout names (session_meta.cli_version)
    events_file: Path | None = None
    rollout_file: Path | None = None
    unread: dict[str, str] = field(default_factory=lambda: dict(UNREAD))
    notices: list[str] = field(default_factory=list)


def is_codex_events(path: str | Path) -> bool:
    """Whether ``path`` is a ``codex exec --json`` stream: its first JSON line is a ``thread.started`` event. Only a
    regular file is looked into (a FIFO may never end: the Claude Code reader refuses it, saying so)."""
    if not Path(path).is_file():
        return False
    try:
        with Path(path).open("rb") as handle:
            while line := handle.readline(FIRST_EVENT_MAX_BYTES):  # bounded: a Claude Code file's line may be huge
                if line.strip():
                    event = json.loads(line)
                    return isinstance(event, dict) and event.get("type") == FIRST_EVENT
    except (OSError, ValueError):
        return False
    return False


def kept_rollout(events_file: str | Path) -> Path:
    """Where the harness keeps the rollout of the run whose first segment is ``events_file``:
    ``run-<label>.rollout`` beside ``run-<label>.jsonl``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + ROLLOUT_SUFFIX)


def kept_subagents(events_file: str | Path) -> Path:
    """Where the harness keeps the rollouts of the subagents of the run whose first segment is ``events_file``, one
    after another (each opens with its ``session_meta``): ``run-<label>.subagents``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + SUBAGENTS_SUFFIX)


def spawned_agent(output: str) -> str | None:
    """The thread a ``spawn_agent`` call started, from its output (``{"agent_id": …, "nickname": …}``); None when it
    started none (``collab spawn failed: …``)."""
    try:
        said = json.loads(output)
    except ValueError:
        return None
    agent_id = said.get("agent_id") if isinstance(said, dict) else None
    return agent_id if isinstance(agent_id, str) and agent_id else None


def spawned_agents(records: list[dict[str, Any]]) -> list[str]:
    """The threads a rollout's ``spawn_agent`` calls started, in order."""
    spawns = {p.get("call_id") for p in _payloads(records, "function_call") if _is_spawn(p)}
    outputs = [p for p in _payloads(records, "function_call_output") if p.get("call_id") in spawns]
    found = [spawned_agent(text_of(o.get("output"))) for o in outputs]
    return [agent for agent in found if agent]


def _payloads(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r["payload"] for r in records if r.get("type") == "response_item" and isinstance(r.get("payload"), dict)
            and r["payload"].get("type") == kind]  # fmt: skip


def _is_spawn(item: dict[str, Any]) -> bool:
    return common_call(item)[0] == SPAWN_TOOL


def _children(path: Path, session: CodexSession) -> dict[str, list[dict[str, Any]]]:
    """The kept subagents' rollouts by thread (none when nothing was kept); each must descend from the session's
    thread (its ``session_meta.parent_thread_id`` the main thread's or another kept subagent's)."""
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    children: dict[str, list[dict[str, Any]]] = {}
    parents: dict[str, object] = {}
    current: list[dict[str, Any]] | None = None
    for record in _read_jsonl(path, session):
        meta = record.get("payload")
        if record.get("type") == "session_meta" and isinstance(meta, dict) and isinstance(meta.get("id"), str):
            current = children.setdefault(meta["id"], [])
            parents[meta["id"]] = meta.get("parent_thread_id")
        if current is None:
            raise TranscriptError(f"{path}: a record before any subagent's session_meta")
        current.append(record)
    for child, parent in parents.items():
        if parent != session.thread_id and parent not in children:
            raise TranscriptError(f"{path}: thread {child}'s parent {parent} is not {session.thread_id} nor a subagent")
    return children


def find_rollout(events_file: str | Path) -> Path:
    """The rollout beside an events file: the harness's copy (``run-<label>.rollout`` beside ``run-<label>.jsonl``),
    else ``rollout-*<thread id>.jsonl`` in its folder (as Codex names it)."""
    events_file = Path(events_file)
    kept = kept_rollout(events_file)
    if kept.is_file():
        return kept
    thread_id = _thread_id(_read_jsonl(events_file, Session()), events_file)
    found = sorted(events_file.parent.glob(f"rollout-*{thread_id}.jsonl"))
    if not found:
        raise TranscriptError(
            f"{events_file}: no rollout-*{thread_id}.jsonl beside it: give Codex's session file "
            f"($CODEX_HOME/sessions/…/rollout-…-{thread_id}.jsonl) with --rollout"
        )
    return found[-1]


def read_codex(events_files: str | Path | Sequence[str | Path], rollout_file: str | Path | None = None) -> CodexSession:
    """A Codex session from its ``--json`` events file(s) and its rollout (found beside the first when not given).

    A session resumed (``codex exec resume <thread id>``) has one events file per turn, all of one thread, and one
    rollout, which Codex appends to: give the turns' events files in order."""
    paths = [Path(events_files)] if isinstance(events_files, (str, Path)) else [Path(p) for p in events_files]
    if not paths:
        raise TranscriptError("no Codex events file given")
    rollout = Path(rollout_file) if rollout_file is not None else find_rollout(paths[0])
    session = CodexSession(events_file=paths[0], rollout_file=rollout)
    turns = [_read_jsonl(path, session) for path in paths]
    session.thread_id = _thread_id(turns[0], paths[0])
    for path, events in zip(paths[1:], turns[1:], strict=True):
        if _thread_id(events, path) != session.thread_id:
            raise TranscriptError(f"{path}: thread {_thread_id(events, path)}, not {paths[0]}'s {session.thread_id}")
    records = _read_jsonl(rollout, session)
    meta = next((r.get("payload") for r in records if r.get("type") == "session_meta"), None)
    if not isinstance(meta, dict):
        raise TranscriptError(f"{rollout}: not a Codex rollout file (no session_meta record)")
    if meta.get("id") != session.thread_id:
        raise TranscriptError(
            f"{rollout}: the rollout of session {meta.get('id')}, not of {paths[0]}'s thread {session.thread_id}"
        )
    session.version = str(meta.get("cli_version") or "")
    rollout = _Rollout(session, _children(kept_subagents(paths[0]), session))
    rollout.read(records)
    rollout.say_gaps()
    for segment, (path, events) in enumerate(zip(paths, turns, strict=True)):
        _read_events(session, events, path, segment, rollout.turn_output.get(segment))
    session.files = paths  # the rollout is rollout_file: a segment count would call it one more turn
    return session


ROLLOUT_KIND, EVENTS_KIND = "rollout", "exec --json stream"
_ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "token_usage_record"})
_EVENT_TYPES = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed"})


def recognise(sample: Sample) -> str | None:
    """Whether the file ``sample`` begins is Codex's: a ``rollout`` (``{timestamp, type, payload}`` records, a
    ``session_meta`` among them) or an ``exec --json stream`` (``thread.started``, ``turn.*`` and ``item.*``
    events); None for any other."""
    rollout = [r for r in sample.records if r.get("type") in _ROLLOUT_TYPES and isinstance(r.get("payload"), dict)]
    if any(r.get("type") == "session_meta" and "id" in r["payload"] for r in rollout) or len(rollout) >= 2:
        return ROLLOUT_KIND
    for record in sample.records:
        kind = record.get("type")
        if kind == FIRST_EVENT and isinstance(record.get("thread_id"), str):
            return EVENTS_KIND
        if kind in _EVENT_TYPES or (isinstance(kind, str) and kind.startswith("item.") and
                                    isinstance(record.get("item"), dict)):  # fmt: skip
            return EVENTS_KIND
    return None


def read_codex_record(paths: Sequence[Path], kind: str, rollout: Path | None = None) -> CodexSession:
    """A Codex session as a user has it: a rollout alone, or the turns' ``--json`` streams with their rollout (given,
    or found beside the first), or, without it, the streams alone, read as far as they go."""
    if kind == ROLLOUT_KIND:
        return read_rollout(whole_record(paths, rollout, "a Codex rollout"))
    paths, rollout = given_companion(paths, rollout, lambda path: recognise(sample_of(path)) == ROLLOUT_KIND)
    return with_companion(paths, rollout, find_rollout, read_codex, read_events_alone)


def read_rollout(rollout_file: str | Path) -> CodexSession:
    """A Codex session from its rollout alone: every request, call, result and usage is there; the turns' ends are
    the rollout's own (each turn's answer its last assistant text), and what only the stream has is said."""
    path = Path(rollout_file)
    session = CodexSession(rollout_file=path)
    records = _read_jsonl(path, session)
    meta = next((r.get("payload") for r in records if r.get("type") == "session_meta"), None)
    if isinstance(meta, dict):
        session.thread_id, session.version = str(meta.get("id") or ""), str(meta.get("cli_version") or "")
    rollout = _Rollout(session, {})
    rollout.read(records)
    rollout.say_gaps()
    for segment in range(max(1, rollout.turn)):
        texts = [m.text for m in session.messages() if m.segment == segment and m.text.strip()]
        output = rollout.turn_output.get(segment)
        session.results.append(Result(texts[-1] if texts else "", ROLLOUT_KIND, False, None, segment,
                                      output_tokens=output, main_output_only=True))  # fmt: skip
    session.files = [path]
    session.missing["turn_ends"] = (
        "a rollout given alone: its codex exec --json stream would add how each turn ended (completed or failed) "
        "and the CLI's errors; each turn is taken as answered by its last assistant text"
    )
    return session


def read_events_alone(paths: Sequence[Path], why: str = "") -> CodexSession:
    """Codex's ``--json`` streams without their rollout, read as far as they go: each turn's items (its calls, as
    the stream shows them, and its answer) as one request carrying the turn's usage; what the rollout would add is
    said (``missing``)."""
    session = CodexSession(events_file=paths[0])
    turns = [_read_jsonl(path, session) for path in paths]
    session.thread_id = _thread_id(turns[0], paths[0])
    for segment, (path, events) in enumerate(zip(paths, turns, strict=True)):
        if segment and _thread_id(events, path) != session.thread_id:
            raise TranscriptError(f"{path}: thread {_thread_id(events, path)}, not {paths[0]}'s {session.thread_id}")
        _stream_turn(session, events, segment)
        _read_events(session, events, path, segment, None)
    session.files = list(paths)
    say_read_alone(session, why, "a codex exec --json stream", f"rollout (rollout-…-{session.thread_id}.jsonl)",
                   "the results as the model saw them, and calls Codex refused itself")  # fmt: skip
    session.missing["call_ids"] = "the stream names its items (item_N), not the model's call ids"
    return session


def _stream_turn(session: CodexSession, events: list[dict[str, Any]], segment: int) -> None:
    """One turn's items from its stream: a request holding its reasoning, calls and answer, then the calls' results."""
    message = Message(f"codex-turn-{segment + 1}", MAIN, None, segment)
    session.timeline.append(message)
    for event in events:
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        if event.get("type") == "turn.completed" and isinstance(event.get("usage"), dict):
            message.usage = _usage(event["usage"])
        if event.get("type") != "item.completed":
            continue
        kind = item.get("type")
        if kind == "agent_message":
            message.blocks.append({"type": "text", "text": str(item.get("text") or "")})
        elif kind == "reasoning":
            message.blocks.append({"type": "thinking", "thinking": str(item.get("text") or "")})
        elif kind in STREAM_CALLS:
            name, arguments, output, failed = _stream_call(item)
            call = ToolCall(str(item.get("id") or f"item-{len(session.calls)}"), name, arguments, MAIN, message.id)
            call.result = ToolResult(call.id, output, failed, MAIN)
            message.calls.append(call)
            session.calls.append(call)
            session.timeline.append(call.result)


# The stream's call items: a shell command, a patch, an MCP tool's call, a web search.
STREAM_CALLS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def _stream_call(item: dict[str, Any]) -> tuple[str, dict[str, Any], str, bool]:
    """A stream's call item as the common call: (name, input, output, failed)."""
    kind, failed = item.get("type"), item.get("status") == "failed"
    if kind == "command_execution":
        code = item.get("exit_code")
        return SHELL_NAME, {"command": str(item.get("command") or "")}, str(item.get("aggregated_output") or ""), \
            failed or (isinstance(code, int) and code != 0)  # fmt: skip
    if kind == "file_change":  # the rollout's apply_patch
        return "apply_patch", {"changes": item.get("changes")}, "", failed
    if kind == "web_search":
        return WEB_SEARCH_NAME, {"query": str(item.get("query") or "")}, "", failed
    arguments = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
    result = item.get("result") if isinstance(item.get("result"), dict) else {}
    error = item.get("error") if isinstance(item.get("error"), dict) else None
    output = str(error.get("message") or "") if error else text_of(result.get("content"))
    return f"mcp__{item.get('server')}__{item.get('tool')}", dict(arguments), output, failed or error is not None


# -- reading ------------------------------------------------------------------------------------
def _read_jsonl(path: Path, session: Session) -> list[dict[str, Any]]:
    return read_records(path, session, "a Codex record")


def _thread_id(events: list[dict[str, Any]], path: Path) -> str:
    first = events[0]
    if first.get("type") != FIRST_EVENT or not isinstance(first.get("thread_id"), str):
        raise TranscriptError(f'{path}: not a codex exec --json stream (its first event is not "{FIRST_EVENT}")')
    return first["thread_id"]


def _read_events(
    session: CodexSession, events: list[dict[str, Any]], path: Path, segment: int, output: int | None
) -> None:
    """Turn ends and errors from the event stream of the turn ``segment``; the answer is the turn's last agent message,
    its output the rollout's (``output``; the stream's ``turn.completed`` of a resumed turn counts the thread's)."""
    answer, turn_open = "", False
    for event in events:
        kind = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        if kind == "turn.started":
            turn_open, answer = True, ""
        elif kind == "item.completed" and item.get("type") == "agent_message":
            answer = str(item.get("text") or "")
        elif kind == "item.completed" and item.get("type") == "error":
            session.notices.append(str(item.get("message") or ""))
        elif kind in ("turn.completed", "turn.failed", "error"):
            failed = kind != "turn.completed"
            error = event.get("error") if isinstance(event.get("error"), dict) else event
            text = str(error.get("message") or kind) if failed else answer
            result = Result(text, kind, failed, None, segment, output_tokens=output, main_output_only=True)
            session.results.append(result)
            turn_open = turn_open and kind == "error"
    if turn_open:
        session.parse.unfinished.append(str(path))


def is_model_output(item: dict[str, Any]) -> bool:
    """Whether a rollout's (or a request's) item is one the model sent: a call, reasoning, or assistant text."""
    kind = item.get("type")
    return kind in ("function_call", "custom_tool_call", "reasoning", *CALL_ITEMS) or (
        kind == "message" and item.get("role") == "assistant"
    )


def _closes_request(record: dict[str, Any]) -> bool:
    """A rollout record that closes a model request's output: its usage record, or (an older Codex, without usage
    records) its ``token_count`` event."""
    payload = record.get("payload")
    return record.get("type") == "token_usage_record" or (
        record.get("type") == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count"
    )


def recorded_responses(rollout: str | Path) -> tuple[str, list[list[dict[str, Any]]]]:
    """What the model sent in a rollout, for a replay: the working directory the session ran in (its
    ``session_meta``'s, '' when none) and each request's output items as recorded, in order (a request with none
    is left out: it showed the CLI nothing to answer)."""
    cwd, responses, pending = "", [], []
    for record in _read_jsonl(Path(rollout), Session()):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.get("type") == "session_meta" and isinstance(payload.get("cwd"), str):
            cwd = cwd or payload["cwd"]
        elif record.get("type") == "response_item" and is_model_output(payload):
            pending.append(payload)
        elif _closes_request(record) and pending:
            responses.append(pending)
            pending = []
    return cwd, [*responses, pending] if pending else responses


class _Rollout:
    """The rollout's records in order: each request's output items, closed by its usage record. A subagent's
    (``children``: its records by its thread id) is read where the call that spawned it got its answer, in the
    call's thread (``thread``), its messages in the spawning turn (``segment``)."""

    def __init__(self, session: CodexSession, children: dict[str, list[dict[str, Any]]] | None = None,
                 thread: str = MAIN, segment: int | None = None) -> None:  # fmt: skip
        self.session = session
        self.children = children if children is not None else {}
        self.thread = thread
        self.segment = segment
        self.pending: list[dict[str, Any]] = []
        self.calls: dict[str, ToolCall] = {}
        self.model = ""
        self.closed_by_record = False
        # Codex before its usage records writes a request's token_count event once, or (0.40) before the request's
        # output: ``early`` holds such a usage until its output ends; ``usage_first`` says which order the rollout
        # has (None until its first token_count with figures); ``total`` the last cumulative count (one written
        # again, as 0.104 writes each after the next turn_context, is the same request's).
        self.early: Any = None
        self.usage_first: bool | None = None
        self.total: Any = None
        self.token_counts = 0
        self.unnamed: dict[str, int] = {}  # item type → its calls that carry no call id
        self.turn = 0  # the turns started so far: a message's segment is its turn's (one events file a turn)
        # turn (from 0) → its output tokens, every request's summed, reasoning included: its last usage record's
        self.turn_output: dict[int, int] = {}

    def read(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            payload = record.get("payload")
            if not isinstance(payload, dict):
                continue
            kind = record.get("type")
            if kind == "turn_context" and isinstance(payload.get("model"), str):
                self._output_ended()
                self.model = payload["model"]
            elif kind == "event_msg" and payload.get("type") == "task_started":
                self._output_ended()
                self.turn += 1
            elif kind == "response_item":
                self._item(payload)
            elif kind == "compacted":  # Codex replaced the history with its summary: what was before leaves
                self._output_ended()
                self.session.timeline.append(Compaction(self.thread))
            elif kind == "token_usage_record":
                self._close(str(payload.get("response_id") or ""), payload.get("usage"))
                turn = payload.get("turn_token_usage")
                if isinstance(turn, dict) and _count(turn.get("output_tokens")):
                    self.turn_output[max(0, self.turn - 1)] = _count(turn.get("output_tokens"))
                self.closed_by_record = True
            elif kind == "event_msg" and payload.get("type") == "token_count" and not self.closed_by_record:
                self._token_count(payload.get("info") if isinstance(payload.get("info"), dict) else {})
        if self.pending:  # output no usage closed: the run was cut off mid-request (or wrote its usage first)
            self._close("", self.early)
            self.early = None

    def say_gaps(self) -> None:
        """What the rollout's version did not record, in ``session.missing``: no usage at all, calls without ids."""
        where = f"Codex {self.session.version}" if self.session.version else "this Codex rollout"
        if not self.closed_by_record and not self.token_counts and self.session.messages(None):
            self.session.missing["usage"] = (
                f"{where} wrote no token_count with figures: every request's usage is unknown (not 0), so the token "
                "figures (occupancy, the residuals) cannot be made"
            )
        if self.unnamed:
            items = ", ".join(f"{count} {kind}" for kind, count in sorted(self.unnamed.items()))
            self.session.missing["call_ids"] = (
                f"{where} records no call id for {items} (named call-N here): no result item answers them"
            )

    def _token_count(self, info: dict[str, Any]) -> None:
        """A rollout without usage records: its token_count events carry each request's usage (``last_token_usage``),
        after the request's output, or (Codex 0.40) before it, where it waits for the output it belongs to."""
        usage, total = info.get("last_token_usage"), info.get("total_token_usage")
        if not isinstance(usage, dict) or total == self.total:
            return  # no figures yet (written as a turn starts), or the last request's written again
        self.total = total
        self.token_counts += 1
        if self.usage_first is None:
            self.usage_first = not self.pending
        if not self.usage_first:
            if self.pending:
                self._close("", usage)
            return
        self._output_ended()
        self.early = usage

    def _output_ended(self) -> None:
        """What follows a request's output (a result, the next request's context): in a rollout that writes usage
        first, the request is whole, and closed with the usage held for it."""
        if self.usage_first and self.pending:
            self._close("", self.early)
            self.early = None

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if is_model_output(item):
            self.pending.append(item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output_ended()
            self._result(item)
        elif kind == "message":
            self._output_ended()
            text = text_of(item.get("content"))
            self.session.timeline.append(UserText(text, self.thread, content_chars(item.get("content"))))

    def _segment(self) -> int:
        return self.segment if self.segment is not None else max(0, self.turn - 1)

    def _close(self, response_id: str, raw_usage: Any) -> None:
        number = len(self.session.messages(None)) + 1
        if not response_id:
            self.session.unread.setdefault("response_ids", "some requests' usage records name no response id")
        message = Message(response_id or f"codex-request-{number}", self.thread, _usage(raw_usage), self._segment(),
                          model=self.model)  # fmt: skip
        for item in self.pending:
            if item.get("type") == "message":
                message.blocks.append({"type": "text", "text": text_of(item.get("content"))})
            elif item.get("type") == "reasoning":
                summary = "\n".join(text_of([s]) for s in item.get("summary") or [] if isinstance(s, dict))
                message.blocks.append({"type": "thinking", "thinking": summary})  # empty: hidden (encrypted)
            else:
                self._call(item, message)
        self.pending = []
        self.session.timeline.append(message)

    def _call(self, item: dict[str, Any], message: Message) -> None:
        name, arguments = common_call(item)
        if not item.get("call_id"):
            self.unnamed[str(item.get("type"))] = self.unnamed.get(str(item.get("type")), 0) + 1
        call = ToolCall(str(item.get("call_id") or f"call-{len(self.calls)}"), name, arguments, self.thread, message.id)
        self.calls[call.id] = call
        message.calls.append(call)
        self.session.calls.append(call)

    def _result(self, item: dict[str, Any]) -> None:
        call_id = str(item.get("call_id") or "")
        output = item.get("output")
        call = self.calls.get(call_id)
        text, is_error = shown_output(output, call.name if call is not None else "")
        is_error = is_error if call is not None and call.name == SHELL_NAME else item.get("success") is False
        result = ToolResult(call_id, text, is_error, self.thread, content_chars(output))
        if call is not None:
            call.result = result
        self.session.timeline.append(result)
        if call is not None and call.name == SPAWN_TOOL:
            self._subagent(call_id, spawned_agent(text))

    def _subagent(self, call_id: str, agent_id: str | None) -> None:
        """The thread ``spawn_agent`` started, read in the call's thread; said when it was not kept."""
        if agent_id is None:
            return
        records = self.children.pop(agent_id, None)
        if records is None:
            self.session.unread["subagents"] = f"{self.session.unread.get('subagents', _UNKEPT)} {agent_id}"
            return
        _Rollout(self.session, self.children, call_id, self._segment()).read(records)


def common_call(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ``function_call`` (or ``custom_tool_call``) item, of the rollout or of a Responses API exchange, as the
    call it is in the common vocabulary: (name, input)."""
    if item.get("type") == WEB_SEARCH_ITEM:
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        return WEB_SEARCH_NAME, {"query": str(action.get("query") or "")}
    if item.get("type") == LOCAL_SHELL_ITEM:
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        return SHELL_NAME, {"command": _command_line(action.get("command"))}
    name = str(item.get("name") or "?")
    raw = item.get("arguments") if item.get("type") == "function_call" else item.get("input")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) and item.get("type") == "function_call" else raw
    except ValueError:
        arguments = {"arguments": raw}
    arguments = arguments if isinstance(arguments, dict) else {"input": arguments}
    if item.get("namespace"):  # "mcp__NAME" (0.171), or "mcp__NAME__" as later versions write it
        namespace = str(item["namespace"])
        return f"{namespace}{'' if namespace.endswith('__') else '__'}{name}", arguments
    if name == SHELL_TOOL:
        return SHELL_NAME, {
            "command": str(arguments.get("cmd") or ""),
            **{k: v for k, v in arguments.items() if k != "cmd"},
        }
    if name == OLD_SHELL_TOOL and "command" in arguments:
        return SHELL_NAME, {**arguments, "command": _command_line(arguments.get("command"))}
    return name, arguments


def _command_line(argv: Any) -> str:
    """The command an old shell call ran, as a line: the script of ``bash -lc SCRIPT`` (what the model wrote, which
    the file-access classifier reads), else the argv quoted."""
    if isinstance(argv, str):
        return argv
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return ""
    if len(argv) == 3 and argv[1] in ("-lc", "-c") and Path(argv[0]).name in ("bash", "sh", "zsh"):
        return argv[2]
    return shlex.join(argv)


def shown_output(output: Any, name: str) -> tuple[str, bool]:
    """A ``function_call_output``'s output (of the rollout, or of a Responses request) as the session shows it, for
    a call named ``name`` in the common vocabulary, and whether it failed: an MCP result without Codex's ``Wall time:
    …\nOutput:`` part, a shell's own output without its header (:func:`command_output`). The one transformation
    between what the model received and what the session shows (the evidence applies it to the request's side)."""
    if isinstance(output, list) and output and _HEADER_RE.match(text_of(output[:1])):
        text = text_of(output[1:])  # an MCP result behind Codex's "Wall time: …\nOutput:" part
    else:
        text = output if isinstance(output, str) else text_of(output)
    return command_output(text) if name == SHELL_NAME else (text, False)


def command_output(output: str) -> tuple[str, bool]:
    """A shell result's own output (what parsers read) and whether it failed (exit code not 0; a result without
    Codex's header — a refusal by a deny rule — is an error too). The old shell tool's output is a JSON object
    ``{"output", "metadata": {"exit_code"}}``."""
    if output.startswith("{"):
        try:
            said = json.loads(output)
        except ValueError:
            said = None
        metadata = said.get("metadata") if isinstance(said, dict) else None
        if isinstance(metadata, dict) and isinstance(said.get("output"), str):
            return said["output"], metadata.get("exit_code") != 0
    exit_code = _EXIT_RE.search(output.split(_OUTPUT_MARK, 1)[0])
    at = output.find(_OUTPUT_MARK)
    text = output[at + len(_OUTPUT_MARK) :] if at >= 0 else output
    return text, exit_code is None or exit_code.group(1) != "0"


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    whole, cached = _count(raw.get("input_tokens")), _count(raw.get("cached_input_tokens"))
    written = _count(raw.get("cache_write_input_tokens"))
    return Usage(max(0, whole - cached - written), cached, written, _count(raw.get("output_tokens")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text") for p in content or [] if isinstance(p, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


class ResponsesReading:
    """How this reader reads the Responses API's items (:attr:`~pytest_agent_eval.transcript.Session.api_reading`):
    a call in the common vocabulary, an output's text, and that text as the session shows it."""

    common_call = staticmethod(common_call)
    text_of = staticmethod(text_of)
    shown_output = staticmethod(shown_output)


CodexSession.api_reading = ResponsesReading
