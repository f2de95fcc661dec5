"""Read a Gemini CLI session (``gemini -p … --output-format stream-json`` events, and its chat record) into the
common :class:`~pytest_agent_eval.transcript.Session`, so the metrics read it as they read Claude Code's.

Gemini CLI writes two records of a session:

* the event stream on stdout (one file per turn): ``init{session_id, model}``, ``message{role, content, delta}``
  (the answer in chunks), ``tool_use{tool_name, tool_id, parameters}``, ``tool_result{tool_id, status, output,
  error}``, ``result{status, stats}`` (the turn's totals) — and ``error`` events;
* its chat record, ``~/.gemini/tmp/<project>/chats/session-<time>-<id prefix>.jsonl``, which the harness copies out
  beside the first segment (``run-<label>.chat``): a header line ``{sessionId, …}``, then message records (``type``
  ``user`` or ``gemini``; a record is written again, whole, when it gains its tool calls or tokens: the last one of
  an id is the record) and ``{"$set": {…}}`` updates. A ``gemini`` record is one model request: its ``content``
  (text), ``toolCalls[{id, name, args, result[{functionResponse}], status}]`` and ``tokens{input, output, cached,
  thoughts, tool, total}`` (``input`` the whole prompt, cached part included); a ``user`` record is the question (or
  the CLI's session context), or the calls' results as ``functionResponse`` parts: exactly what the next request
  carried.

A ``gemini`` record's ``thoughts`` (the thought summaries the CLI asked for, ``includeThoughts``) are no block of its
message: the CLI sends no thought back to the model, so they never occupy the context (the ``thoughtSignature`` it
sends back on a call part is not recorded). Their cost, ``tokens.thoughts``, is output, counted in the message's; both
are kept apart (:attr:`GeminiSession.thinking`), for a replay.

A subagent (``invoke_agent``) keeps a chat record of its own, ``chats/<session id>/<agent id>.jsonl`` (the harness's
copy ``run-<label>.sub-<agent id>.chat``), named by the call's ``agentId``: it is read into the thread named by the
call's id, its responses numbered where they were streamed (:meth:`_Chat._subagent`; several at once, in the order
their records started).

So the chat record gives each request's usage, calls and results; the event stream gives the turns' ends (the
``result`` event) and errors. Tools are named in the house's common vocabulary: ``mcp_NAME_tool`` is
``mcp__NAME__tool``; ``run_shell_command{command}`` is ``Bash{command}``, so the file-access classifier decides, as for
Claude Code's Bash, whether it read or searched. A call's id is the model's (the CLI records ``<tool>__<id>``).

What the records do not give is said, never guessed (:attr:`GeminiSession.unread`): the chat record names each
response by an id of its own, not the API's ``responseId``; a message is named by its place,
``gemini-response-N`` (the N-th streamed response of the session), which the model server's record is matched by.
"""

from __future__ import annotations

import json
import re
from collections import Counter
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

SHELL_TOOL = "run_shell_command"
SHELL_NAME = "Bash"
MCP_PREFIX = "mcp_"
# Gemini CLI 0.61.0's own tools in the common vocabulary (its bundle's *_TOOL_NAME), and their inputs' keys that
# differ (PARAM_*): a real model reads and searches with them as much as with the shell, and so does the built-in
# codebase_investigator, which has no shell; the metrics count them as file access only under the common names.
NATIVE_NAMES = {
    "read_file": "Read", "grep_search": "Grep", "glob": "Glob", "list_directory": "LS", "write_file": "Write",
    "replace": "Edit", "web_fetch": "WebFetch", "google_web_search": "WebSearch", "write_todos": "TodoWrite",
}  # fmt: skip
_INPUT_KEYS = {"dir_path": "path", "include_pattern": "glob"}
SENT_NAMES = {common: name for name, common in NATIVE_NAMES.items()}
SENT_KEYS = {common: key for key, common in _INPUT_KEYS.items()}
# The tool that hands a task to a subagent (experimental.enableAgents, on by default), and the tool a subagent
# ends its run with, its report as the call's args.
DELEGATE_TOOL = "invoke_agent"
COMPLETE_TOOL = "complete_task"
_UNTRUSTED_RE = re.compile(r"<untrusted_context>\n?(.*?)\n?</untrusted_context>\s*", re.S)
# What the CLI puts after a command's output: its error, exit code, signal, background processes, process group.
_TRAILER_RE = re.compile(r"(?:\n(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): [^\n]*)+\Z")
FIRST_EVENT = "init"
# The harness's copy of a run's chat record, beside its first segment: ``run-<label>.chat`` (no ``*.jsonl``).
CHAT_SUFFIX = ".chat"
# A message's name: its place among the session's streamed responses (see the module docstring).
RESPONSE_PREFIX = "gemini-response-"
# A subagent's kept chat record: run-<label>.sub-<agent id>.chat (kept_subagent_chat).
SUBAGENT_INFIX = "sub-"
_AGENT_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
# A later ``$set`` of the chat record's ``messages``: the history the CLI loaded on ``--resume`` (see _Chat).
RESUMED = "$resumed"
# An init event is about 150 bytes: a first line longer than this is some other file's.
FIRST_EVENT_MAX_BYTES = 4096

UNREAD = {
    "response_ids": "Gemini CLI's chat record names each response by an id of its own, not the API's responseId: "
    "a message is named by its place (gemini-response-N)",
    "offered_tools": "Gemini CLI records no list of the tools it offered the model: the tool's MCP names an arm "
    "exposed are seen only when called",
    "answering_model": "Gemini CLI's chat record names the model it asked for, not the one that answered",
}


@dataclass
class GeminiSession(Session):
    """A Session read from Gemini CLI's records. ``unread``: figure → why the records do not give it; ``notices``:
    the CLI's errors (``error`` events), in order."""

    session_id: str = ""
    events_file: Path | None = None
    chat_file: Path | None = None
    unread: dict[str, str] = field(default_factory=lambda: dict(UNREAD))
    notices: list[str] = field(default_factory=list)
    # message id → the thinking its record keeps: the thought summaries' text, and tokens.thoughts (what a replay sends)
    thinking: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Its messages are named by their place among the streamed responses (no record names the model's response):
    # the evidence pairs them with the responses by their calls or text, in each thread's own order, since
    # subagents run side by side interleave their requests in an order no record of theirs keeps.
    own_message_ids: ClassVar[bool] = True


def common_name(name: str) -> str:
    """A Gemini CLI tool name in the common vocabulary: ``mcp_NAME_tool`` is ``mcp__NAME__tool``."""
    if name.startswith(MCP_PREFIX) and "_" in name[len(MCP_PREFIX) :]:
        server, tool = name[len(MCP_PREFIX) :].split("_", 1)
        return f"mcp__{server}__{tool}"
    return name


def response_output(response: Any) -> tuple[str, bool]:
    """A ``functionResponse.response``'s text and whether it is an error (``{"error": …}``)."""
    if not isinstance(response, dict):
        return ("" if response is None else str(response)), False
    if "error" in response:
        error = response["error"]
        return (error if isinstance(error, str) else json.dumps(error)), True
    output = response.get("output", response)
    return (output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)), False


def shown_response(response: Any, name: str) -> tuple[str, bool]:
    """A ``functionResponse.response`` (of the chat record, or of a Gemini API request) as the session shows it, for
    a call named ``name`` in the common vocabulary, and whether it failed: without the CLI's ``<untrusted_context>``
    wrapper, a shell's own output without its ``Output:`` and trailer (:func:`shell_output`). The one transformation
    between what the model received and what the session shows (the evidence applies it to the request's side)."""
    text, is_error = response_output(response)
    if name == SHELL_NAME and not is_error:
        return shell_output(text)
    return unwrapped(text), is_error


def unwrapped(output: str) -> str:
    """A tool's output without the ``<untrusted_context>`` wrapper the CLI puts around it for the model."""
    inner = _UNTRUSTED_RE.fullmatch(output)
    return inner.group(1) if inner else output


def shell_output(output: str) -> tuple[str, bool]:
    """A ``run_shell_command`` result's own output and whether it failed. The CLI gives the model
    ``<untrusted_context>\nOutput: …\n[Error: …\n][Exit Code: N\n]Process Group PGID: N\n</untrusted_context>``."""
    body = unwrapped(output)
    trailer = _TRAILER_RE.search(body)
    head, tail = (body[: trailer.start()], trailer.group(0)) if trailer else (body, "")
    text = head[len("Output: ") :] if head.startswith("Output: ") else head.removeprefix("Output:")
    failed = bool(re.search(r"^(?:Exit Code: [1-9]\d*|Error: (?!\(none\)).*|Signal: .*)$", tail, re.M))
    return text, failed or not head.startswith("Output:")


def response_name(number: int) -> str:
    """The name of the session's ``number``-th streamed response (from 1)."""
    return f"{RESPONSE_PREFIX}{number}"


def model_call_id(recorded: str, tool: str) -> str:
    """The id the model gave a call, from the CLI's ``<tool>__<id>``."""
    return recorded.removeprefix(f"{tool}__")


def is_gemini_events(path: str | Path) -> bool:
    """Whether ``path`` is a ``gemini --output-format stream-json`` stream: its first JSON line is an ``init`` event
    naming a session. Only a regular file is looked into."""
    if not Path(path).is_file():
        return False
    try:
        with Path(path).open("rb") as handle:
            while line := handle.readline(FIRST_EVENT_MAX_BYTES):
                if line.strip():
                    event = json.loads(line)
                    return isinstance(event, dict) and event.get("type") == FIRST_EVENT and "session_id" in event
    except (OSError, ValueError):
        return False
    return False


def kept_chat(events_file: str | Path) -> Path:
    """Where the harness keeps the chat record of the run whose first segment is ``events_file``."""
    events_file = Path(events_file)
    return events_file.with_name(events_file.name.removesuffix(".jsonl") + CHAT_SUFFIX)


def kept_subagent_chat(chat: Path, agent_id: str) -> Path:
    """Where the harness keeps a subagent's chat record beside the session's kept chat record ``chat``
    (``run-<label>.chat``): ``run-<label>.sub-<agent id>.chat``."""
    return chat.with_name(f"{chat.name.removesuffix(CHAT_SUFFIX)}.{SUBAGENT_INFIX}{agent_id}{CHAT_SUFFIX}")


def subagent_chat(chat: Path, session_id: str, agent_id: str) -> Path | None:
    """The chat record of the subagent ``agent_id`` (a delegating call's ``agentId``) of the session whose chat record
    is ``chat``: the harness's copy beside a kept one, else where Gemini CLI writes it,
    ``chats/<session id>/<agent id>.jsonl``; None for an id that is no plain name (the record is the agent's)."""
    if not _AGENT_ID_RE.fullmatch(agent_id):
        return None
    if chat.name.endswith(CHAT_SUFFIX):
        return kept_subagent_chat(chat, agent_id)
    return chat.parent / session_id / f"{agent_id}.jsonl"


def find_chat(events_file: str | Path) -> Path:
    """The chat record beside an events file: the harness's copy, else the first ``session-*-<id prefix>.jsonl`` in
    its folder (as Gemini CLI names it; a resumed turn may leave a later one holding only the session's context)."""
    events_file = Path(events_file)
    kept = kept_chat(events_file)
    if kept.is_file():
        return kept
    session_id = _session_id(read_records(events_file, Session(), "a Gemini CLI record"), events_file)
    # the JSON-lines record, or the one-object record an older CLI wrote (session-….json)
    found = sorted(events_file.parent.glob(f"session-*{session_id[:8]}.json*"))
    found = [p for p in found if p.suffix in (".jsonl", ".json")]
    if not found:
        raise TranscriptError(
            f"{events_file}: no session-*{session_id[:8]}.jsonl beside it: give Gemini CLI's chat record "
            "(~/.gemini/tmp/<project>/chats/session-….jsonl) with --chat"
        )
    return found[0]


def read_gemini(events_files: str | Path | Sequence[str | Path], chat_file: str | Path | None = None) -> GeminiSession:
    """A Gemini CLI session from its event stream(s) and its chat record (found beside the first when not given).
    A resumed session has one events file per turn, all of one session, and one chat record: give them in order."""
    paths = [Path(events_files)] if isinstance(events_files, (str, Path)) else [Path(p) for p in events_files]
    if not paths:
        raise TranscriptError("no Gemini CLI events file given")
    chat = Path(chat_file) if chat_file is not None else find_chat(paths[0])
    session = GeminiSession(events_file=paths[0], chat_file=chat)
    turns = [read_records(path, session, "a Gemini CLI record") for path in paths]
    session.session_id = _session_id(turns[0], paths[0])
    for path, events in zip(paths[1:], turns[1:], strict=True):
        if _session_id(events, path) != session.session_id:
            raise TranscriptError(f"{path}: session {_session_id(events, path)}, not {paths[0]}'s {session.session_id}")
    records = _chat_records(chat, session)
    header = records[0]
    if "sessionId" not in header:
        raise TranscriptError(f"{chat}: not a Gemini CLI chat record (its first line names no sessionId)")
    if header["sessionId"] != session.session_id:
        raise TranscriptError(
            f"{chat}: the chat record of session {header['sessionId']}, not of {paths[0]}'s {session.session_id}"
        )
    _Chat(session, MAIN, chat).read(_messages(records))
    for path, events in zip(paths, turns, strict=True):
        _read_events(session, events, path)
    session.files = paths  # the chat record is chat_file: a segment count would call it one more turn
    return session


EVENTS_KIND, CHAT_KIND, CHAT_JSON_KIND = "stream-json", "chat record", "chat record (one JSON object)"
_CHAT_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})


def recognise(sample: Sample) -> str | None:
    """Whether the file ``sample`` begins is Gemini CLI's: its ``stream-json`` (an ``init`` event naming a session,
    ``tool_use``/``tool_result`` events), its ``chat record`` in JSON lines (a header naming ``sessionId`` and
    ``projectHash``, then message records), or the one-object chat record it wrote until late 2025
    (``{sessionId, messages: […]}``); None for any other."""
    whole = sample.whole
    if whole is not None and isinstance(whole.get("sessionId"), str) and isinstance(whole.get("messages"), list):
        return CHAT_KIND if len(sample.records) > 1 else CHAT_JSON_KIND
    for record in sample.records:
        kind = record.get("type")
        if kind == FIRST_EVENT and isinstance(record.get("session_id"), str):
            return EVENTS_KIND
        if kind in ("tool_use", "tool_result") and isinstance(record.get("tool_id"), str):
            return EVENTS_KIND
        if isinstance(record.get("sessionId"), str) and "projectHash" in record:
            return CHAT_KIND
    messages = [r for r in sample.records if r.get("type") in _CHAT_TYPES and isinstance(r.get("id"), str)
                and "timestamp" in r and "message" not in r]  # fmt: skip
    return CHAT_KIND if any(r.get("type") == "gemini" for r in messages) else None


def read_gemini_record(paths: Sequence[Path], kind: str, chat: Path | None = None) -> GeminiSession:
    """A Gemini CLI session as a user has it: its chat record alone (either format), or the turns' stream-json
    events with their chat record (given, or found beside the first), or, without it, the events alone."""
    if kind in (CHAT_KIND, CHAT_JSON_KIND):
        return read_chat(whole_record(paths, chat, "a Gemini CLI chat record"), kind)
    paths, chat = given_companion(paths, chat, lambda path: recognise(sample_of(path)) in (CHAT_KIND, CHAT_JSON_KIND))
    return with_companion(paths, chat, find_chat, read_gemini, read_events_alone)


def read_chat(path: Path, kind: str = CHAT_KIND) -> GeminiSession:
    """A Gemini CLI session from its chat record alone: every request with its calls, results and tokens; the turns'
    ends are the stream's, and so unread (the answer is the last response's text)."""
    session = GeminiSession(chat_file=path)
    records = _chat_records(path, session, kind)
    if not isinstance(records[0].get("sessionId"), str):
        raise TranscriptError(f"{path}: not a Gemini CLI chat record (it names no sessionId)")
    session.session_id = records[0]["sessionId"]
    _Chat(session, MAIN, path).read(_messages(records))
    session.files = [path]
    session.missing["turn_ends"] = (
        "a chat record given alone: the stream-json events (gemini -p … --output-format stream-json) would add how "
        "each turn ended and the CLI's errors; the answer is taken from the last response"
    )
    return session


def _chat_records(path: Path, session: GeminiSession, kind: str | None = None) -> list[dict[str, Any]]:
    """A chat record's header and records, of either format (``kind``; None: the file's own says which)."""
    if kind is None:
        kind = recognise(sample_of(path))
    if kind != CHAT_JSON_KIND:
        return read_records(path, session, "a Gemini CLI record")
    from pytest_agent_eval.transcript.sample import whole_object

    record = whole_object(path, "a Gemini CLI chat record")
    raw = record.get("messages")
    messages = _answered([m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else [])
    session.parse.events += 1 + len(messages)
    return [{k: v for k, v in record.items() if k != "messages"}, *messages]


def _answered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one-object record's messages, with the results its calls hold (``toolCalls[].result``) sent as the
    JSON-lines record sends them: a ``user`` record of ``functionResponse`` parts after the response (the older
    record writes none of its own)."""
    if any(m.get("type") == "user" and _answers(m.get("content")) for m in messages):
        return messages
    out: list[dict[str, Any]] = []
    for message in messages:
        out.append(message)
        calls = [call for call in message.get("toolCalls") or [] if isinstance(call, dict)]
        parts = [p for c in calls for p in c.get("result") or [] if isinstance(p, dict) and "functionResponse" in p]
        if message.get("type") == "gemini" and parts:
            out.append({"id": f"{message.get('id')}-results", "type": "user", "content": parts})
    return out


def read_events_alone(paths: Sequence[Path], why: str = "") -> GeminiSession:
    """Gemini CLI's stream-json events without their chat record, read as far as they go: each turn's calls and
    results as the stream shows them, and its answer, as one request carrying the turn's usage (``result.stats``)."""
    session = GeminiSession(events_file=paths[0])
    turns = [read_records(path, session, "a Gemini CLI record") for path in paths]
    session.session_id = _session_id(turns[0], paths[0])
    for segment, (path, events) in enumerate(zip(paths, turns, strict=True)):
        message = Message(response_name(segment + 1), MAIN, None, segment)
        session.timeline.append(message)
        calls: dict[str, ToolCall] = {}
        for event in events:
            kind = event.get("type")
            if kind == "tool_use":
                name, arguments = common_call({"name": event.get("tool_name"), "args": event.get("parameters")})
                call = ToolCall(model_call_id(str(event.get("tool_id") or ""), str(event.get("tool_name") or "")),
                                name, arguments, MAIN, message.id)  # fmt: skip
                calls[str(event.get("tool_id"))] = call
                message.calls.append(call)
                session.calls.append(call)
            elif kind == "tool_result" and (call := calls.get(str(event.get("tool_id")))) is not None:
                failed = event.get("status") != "success"
                error = event.get("error") if isinstance(event.get("error"), dict) else {}
                text = str(error.get("message") or "") if failed else str(event.get("output") or "")
                call.result = ToolResult(call.id, text, failed, MAIN)
                session.timeline.append(call.result)
            elif kind == "message" and event.get("role") == "assistant":
                message.blocks.append({"type": "text", "text": str(event.get("content") or "")})
            elif kind == "result" and isinstance(event.get("stats"), dict):
                stats = event["stats"]
                raw = {"input": stats.get("input_tokens"), "cached": stats.get("cached"),
                       "output": stats.get("output_tokens")}  # fmt: skip
                message.usage = _usage(raw) if isinstance(stats.get("input_tokens"), int) else None
        _read_events(session, events, path)
    session.files = list(paths)
    chat = f"chat record (session-…-{session.session_id[:8]}.json[l])"
    say_read_alone(session, why, "Gemini CLI's stream-json events", chat, "and the results as the model saw them")
    return session


# -- reading ------------------------------------------------------------------------------------
def _session_id(events: list[dict[str, Any]], path: Path) -> str:
    first = events[0]
    if first.get("type") != FIRST_EVENT or not isinstance(first.get("session_id"), str):
        raise TranscriptError(f'{path}: not a gemini stream-json stream (its first event is not "{FIRST_EVENT}")')
    return first["session_id"]


def _messages(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat record's messages in the order they were written: each id's last version, at its first place; the
    session's opening context from the first ``$set`` of ``messages``; each later one (the history a ``--resume``
    loaded, which the turn's requests carry) as a ``{"type": RESUMED, "messages": […]}`` at its place."""
    by_id: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(records[1:], start=2):
        replaced = record.get("$set", {}).get("messages") if isinstance(record.get("$set"), dict) else None
        if isinstance(replaced, list) and not by_id:
            by_id = {str(m.get("id")): m for m in replaced if isinstance(m, dict)}
        elif isinstance(replaced, list):
            by_id[f"{RESUMED}-{number}"] = {"type": RESUMED, "messages": replaced}
        elif isinstance(record.get("id"), str) and isinstance(record.get("type"), str):
            by_id[record["id"]] = record  # dict order: the first appearance's place
    return list(by_id.values())


class _Chat:
    """The chat record's messages into the timeline.

    On ``--resume`` Gemini CLI 0.61.0 loads the history from the chat record, and rebuilds each answered call's result
    twice: from the ``gemini`` record's ``toolCalls[].result`` and from the ``user`` record that sent it. Every request
    of the resumed turn carries each earlier result twice (the later ``$set`` of ``messages`` shows that history); so
    does the Session: the results that history holds more often than the context read so far are appended where it
    was loaded (:meth:`_resumed`).

    The CLI may also write the whole history again under new ids in a later turn, with older tool outputs shortened:
    what the next requests carry in place of the history. Such a rewrite is a compaction (the context before it
    leaves; the rewritten history is what stays): its records are a ``gemini`` one whose content is a list of parts
    (a live response's is its text), a ``user`` one holding a text an earlier one had, or results of calls already
    answered (each twice, as the resumed history held them).

    (A question asked again word for word in a later turn would read as such a rewrite.)"""

    def __init__(self, session: GeminiSession, thread: str, chat: Path, responses: int = 0,
                 started: dict[str, str] | None = None) -> None:  # fmt: skip
        self.session, self.thread, self.chat = session, thread, chat
        self.started = {} if started is None else started  # message id → its record's timestamp, every thread's
        self.calls: dict[str, ToolCall] = {}
        self.answered: set[str] = set()
        self.held: Counter[str] = Counter()  # call id → its results in the context since the last compaction
        self.texts: set[str] = set()
        self.responses = responses  # the session's responses so far, every thread's: a message is named by its place
        self.rewriting = False

    def read(self, messages: list[dict[str, Any]]) -> None:
        for record in messages:
            kind, content = record.get("type"), record.get("content")
            if kind == RESUMED:
                self._resumed(record["messages"])
            elif kind == "gemini" and isinstance(content, list):
                self._rewritten()
            elif kind == "gemini":
                self.rewriting = False
                self._response(record)
            elif kind == "user":
                answers = _answers(content)
                for answer in answers:
                    self._result(answer)
                if not answers:
                    self._text(content if isinstance(content, list) else [{"text": str(content or "")}])

    def _rewritten(self) -> None:
        if not self.rewriting:
            self.session.timeline.append(Compaction(self.thread))
            self.held.clear()
            self.rewriting = True

    def _resumed(self, history: list[Any]) -> None:
        """The results a resumed history holds beyond what the context holds: the requests from here on carry them."""
        loaded: Counter[str] = Counter()
        for message in history:
            if isinstance(message, dict) and message.get("type") == "user":
                for answer in _answers(message.get("content")):
                    result = self._tool_result(answer)
                    loaded[result.call_id] += 1
                    if result.call_id in self.answered and loaded[result.call_id] > self.held[result.call_id]:
                        self.held[result.call_id] += 1
                        self.session.timeline.append(result)

    def _response(self, record: dict[str, Any]) -> None:
        self.responses += 1
        message = Message(response_name(self.responses), self.thread, _usage(record.get("tokens")), 0,
                          model=str(record.get("model") or ""))  # fmt: skip
        self.started[message.id] = str(record.get("timestamp") or "")
        content = record.get("content")
        text = content if isinstance(content, str) else _text(content)
        if text:
            message.blocks.append({"type": "text", "text": text})
        thoughts = "".join(_thought_text(t) for t in record.get("thoughts") or [] if isinstance(t, dict))
        spent = _count((record.get("tokens") or {}).get("thoughts")) if isinstance(record.get("tokens"), dict) else 0
        if thoughts or spent:
            self.session.thinking[message.id] = (thoughts, spent)
        for raw in record.get("toolCalls") or []:
            if isinstance(raw, dict):
                call = _call(raw, message)
                self.calls[call.id] = call
                message.calls.append(call)
                self.session.calls.append(call)
        self.session.timeline.append(message)
        delegated = [raw for raw in record.get("toolCalls") or [] if isinstance(raw, dict)
                     and raw.get("name") == DELEGATE_TOOL and isinstance(raw.get("agentId"), str)]  # fmt: skip
        before = self.responses
        for raw in delegated:
            self._subagent(_call(raw, message).id, raw["agentId"])
        if len(delegated) > 1:
            self._in_stream_order(before)

    def _subagent(self, call_id: str, agent_id: str) -> None:
        """The run of the subagent a call delegated to, read from its own chat record into the call's thread, its
        responses numbered where they were streamed: after the delegating response, before the next request of this
        thread (of subagents run side by side, in the order they started: :meth:`_in_stream_order`)."""
        path = subagent_chat(self.chat, self.session.session_id, agent_id)
        records = read_records(path, self.session, "a Gemini CLI record") if path and path.is_file() else []
        if not records or records[0].get("sessionId") != agent_id:
            found = f"{path} is not it" if records else f"looked for {path}" if path else "no plain name"
            self.session.unread["subagents"] = (
                f"the chat record of subagent {agent_id!r} (call {call_id}) is missing ({found}): its requests are "
                "not in the Session"
            )
            return
        subagent = _Chat(self.session, call_id, self.chat, self.responses, self.started)
        subagent.read(_messages(records))
        self.responses = subagent.responses

    def _in_stream_order(self, before: int) -> None:
        """Subagents run side by side (one response delegating several times) stream their responses interleaved:
        read one after another, theirs (those numbered past ``before``) are numbered again in the order their
        records started (``timestamp``): near the order the model server received them, not sure to be it (under
        load two may swap), which is why the evidence pairs messages by their calls and text, not their names."""
        read = [m for m in self.session.messages(thread=None) if _place(m.id) > before]
        ordered = sorted(read, key=lambda m: (self.started.get(m.id, ""), _place(m.id)))
        renamed = {m.id: response_name(before + n) for n, m in enumerate(ordered, start=1)}
        for by_id in (self.session.thinking, self.started):
            moved = {renamed.get(key, key): value for key, value in by_id.items()}
            by_id.clear()
            by_id.update(moved)
        for message in read:
            message.id = renamed[message.id]
            for call in message.calls:
                call.message_id = message.id

    def _text(self, parts: list[Any]) -> None:
        keys = {json.dumps(part, sort_keys=True) for part in parts}
        if keys & self.texts:  # a text sent before (the session's context, a question): the history again
            self._rewritten()
        else:
            self.rewriting = False
            self.texts |= keys
        self.session.timeline.append(UserText(_text(parts), self.thread, content_chars(parts)))

    def _tool_result(self, answer: dict[str, Any]) -> ToolResult:
        name = str(answer.get("name") or "")
        call_id = model_call_id(str(answer.get("id") or ""), name)
        raw = answer.get("response")
        call = self.calls.get(call_id)
        text, is_error = shown_response(raw, call.name if call is not None else "")
        return ToolResult(call_id, text, is_error, self.thread, content_chars(raw))

    def _result(self, answer: dict[str, Any]) -> None:
        result = self._tool_result(answer)
        if result.call_id in self.answered:
            self._rewritten()  # the call's result again, as the rewritten history holds it
        else:
            self.rewriting = False
            self.answered.add(result.call_id)
            if (call := self.calls.get(result.call_id)) is not None:
                call.result = result
        self.held[result.call_id] += 1
        self.session.timeline.append(result)


def _place(message_id: str) -> int:
    """A message's place among the session's responses, from its name (:func:`response_name`)."""
    return int(message_id.removeprefix(RESPONSE_PREFIX))


def _answers(content: Any) -> list[dict[str, Any]]:
    """A ``user`` record's results: its ``functionResponse`` parts."""
    parts = content if isinstance(content, list) else []
    answers = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
    return [a if isinstance(a, dict) else {} for a in answers]


def _call(raw: dict[str, Any], message: Message) -> ToolCall:
    name, arguments = common_call(raw)
    return ToolCall(model_call_id(str(raw.get("id") or ""), str(raw.get("name") or "?")), name, arguments,
                    message.thread, message.id)  # fmt: skip


def common_call(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A call (a chat record's ``toolCalls`` entry, or a Gemini API ``functionCall``: ``{name, args}``) as the call
    it is in the common vocabulary: (name, input)."""
    name = str(call.get("name") or "?")
    arguments = dict(call["args"]) if isinstance(call.get("args"), dict) else {}
    if name == SHELL_TOOL:
        return SHELL_NAME, arguments
    if name in NATIVE_NAMES:
        return NATIVE_NAMES[name], {_INPUT_KEYS.get(key, key): value for key, value in arguments.items()}
    return common_name(name), arguments


def _read_events(session: GeminiSession, events: list[dict[str, Any]], path: Path) -> None:
    """Turn ends and errors from the event stream; the answer is the turn's assistant text."""
    answer, ended = "", False
    for event in events:
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            answer += str(event.get("content") or "")
        elif kind == "error":
            session.notices.append(str(event.get("message") or event.get("error") or "error"))
        elif kind == "result":
            failed = event.get("status") != "success"
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            text = str(error.get("message") or event.get("status") or "error") if failed else answer
            session.results.append(Result(text, str(event.get("status") or "result"), failed, None, 0))
            ended, answer = True, ""
    if not ended:
        session.parse.unfinished.append(str(path))


def _thought_text(thought: dict[str, Any]) -> str:
    """A recorded thought as the model streamed it: the CLI splits ``**Subject** description`` apart."""
    subject, description = str(thought.get("subject") or ""), str(thought.get("description") or "")
    return f"**{subject}**\n\n{description}" if subject else description


def _usage(raw: Any) -> Usage | None:
    """A ``gemini`` record's ``tokens`` as the common usage: its output is the answer's (``output``, the API's
    ``candidatesTokenCount``) and the thinking's (``thoughts``, ``thoughtsTokenCount``), as a Messages API's
    ``output_tokens`` counts its thinking."""
    if not isinstance(raw, dict):
        return None
    whole, cached = _count(raw.get("input")), _count(raw.get("cached"))
    return Usage(max(0, whole - cached), cached, 0, _count(raw.get("output")) + _count(raw.get("thoughts")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    texts = [p.get("text") for p in parts or [] if isinstance(p, dict) and not p.get("thought")]
    return "\n".join(t for t in texts if isinstance(t, str))


class GeminiReading:
    """How this reader reads the Gemini API's parts (:attr:`~pytest_agent_eval.transcript.Session.api_reading`): a
    streamed response's name (its place), a call in the common vocabulary, a response's text, and that text as the
    session shows it."""

    response_name = staticmethod(response_name)
    common_call = staticmethod(common_call)
    response_output = staticmethod(response_output)
    shown_response = staticmethod(shown_response)


GeminiSession.api_reading = GeminiReading
