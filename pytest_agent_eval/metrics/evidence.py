"""Evidence from the model's side: the transcript held against the requests the model server received.

The transcript is written by the CLI to a pipe (or a file) the agent's own processes could write to as well (Codex
CLI's rollout lies in the agent's HOME); the request record (:mod:`pytest_agent_eval.model.record`) is written by
the model server, outside the sandbox. So what the model saw is exactly what its requests carried, and the
transcript must agree with them:

* every assistant message of the transcript is a message the model sent (its id among the responses), with that
  response's prompt size (``usage``: input, cache-read and cache-creation tokens; output tokens are left out, the
  transcript may hold a count taken mid-stream), and each of its tool calls is one of that response's, with its
  name and input; a transcript that names its messages by the agent's own ids (OpenCode records none of the
  model's; Gemini CLI's messages are named by their guessed place among the streamed responses) is paired with the
  responses in order, by their calls or text (:func:`paired_responses`). The same for every API: a
  Responses ``function_call`` or a Gemini ``functionCall`` is compared in the common vocabulary, mapped by the
  agent's own reader, as the session offers it (:attr:`~pytest_agent_eval.transcript.Session.api_reading`:
  Codex's ``exec_command{cmd}`` is ``Bash{command}``), and the prompt size is
  the whole prompt (``input_tokens``, ``promptTokenCount``); a prompt size one side does not record is listed as
  unchecked, never guessed;
* every tool result of the transcript reached the model: a request carried a result for that call whose text, as
  the agent's own reader shows it (Codex's shell header, Gemini CLI's ``<untrusted_context>`` wrapping taken off by
  the reader's own function), is the transcript's (blanks and ``<system-reminder>`` blocks aside: the CLI adds
  reminders and reshapes content), never a part of it (:func:`_agrees`);
  a result no request carried is allowed only where the run was cut off after it (no request followed its call);
* every tool call and result a request carried is in the transcript.

Matching is by tool-use ids and result text, never whole messages: the CLI trims and reshapes what it sends
(cache markers, a result's content as a string or a list, images), the last answer appears in no later request,
thinking may be streamed summarised or not at all, and after a compaction the requests carry a summary in place of
older messages. An event that fails any of these is an integrity problem, named; a without-arm with one is not
cleared by the contamination gate, and the item fails.

The tool's fingerprints are also searched in every tool result the model received (:func:`~.contamination.scan`):
a result the transcript lacks, or shows otherwise, still counts as a leak.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pytest_agent_eval.metrics.contamination import Leak, scan
from pytest_agent_eval.model.gemini import COUNT, STREAM, model_method
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import Session, ToolResult, Usage, blocks_of, count_of, result_text

MESSAGES_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"  # Codex CLI's: the same evidence, in the Responses API's items
_CALL_ITEMS, _OUTPUT_ITEMS = ("function_call", "custom_tool_call"), ("function_call_output", "custom_tool_call_output")
SHOWN_CHARS = 80
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_BLANKS = re.compile(r"\s+")
_TRUNCATED = re.compile(r"\u2026\d+ (?:tokens|chars) truncated\u2026")  # Codex CLI's mark of a cut-out middle


@dataclass
class Evidence:
    """What the request record says: how many model requests, what was refused, what disagrees, what leaked, and
    what could not be checked (a figure one side does not record), named."""

    requests: int
    refused: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    # in results the model received, not already found in the transcript
    leaks: list[Leak] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "refused": list(self.refused),
            "problems": list(self.problems),
            "unchecked": list(self.unchecked),
            "leaks": [leak.to_dict() for leak in self.leaks],
            "intact": self.intact,
        }


@dataclass
class _Received:
    """What the requests carried and the responses sent, by tool-use id."""

    sent: dict[str, set[str]] = field(default_factory=dict)  # message id → ids of its tool calls
    usage: dict[str, Usage] = field(default_factory=dict)  # message id → its usage as sent
    sent_calls: dict[str, tuple[str, Any]] = field(default_factory=dict)  # call id → (tool name, input) as sent
    calls: dict[str, tuple[str, int]] = field(default_factory=dict)  # call id → (tool name, first request carrying it)
    results: dict[str, dict[str, int]] = field(default_factory=dict)  # call id → {result text: first request}
    # call id → its results as the agent's reader shows them (the API's documented transformation applied)
    shown: dict[str, set[str]] = field(default_factory=dict)
    streamed_gemini: int = 0  # Gemini API responses streamed so far (a Gemini CLI message is named by its place)
    # (id, call ids, text) of the responses to requests offering tools, in order: what an agent's own message ids
    # are paired with
    answers: list[tuple[str, frozenset[str], str]] = field(default_factory=list)
    # the agent's reader of the API's items (Session.api_reading); None: exchanges of a non-Messages API are not read
    reading: Any = None
    unread: set[str] = field(default_factory=set)  # the APIs whose exchanges could not be read, for want of it

    def read(self, number: int, entry: dict[str, Any]) -> None:
        response, request = entry.get("response"), entry.get("request")
        request = request if isinstance(request, dict) else {}
        method = model_method(_path(entry))
        if (_path(entry) == RESPONSES_PATH or method is not None) and self.reading is None:
            self.unread.add("Responses" if method is None else "Gemini")
            return
        if _path(entry) == RESPONSES_PATH:
            self._read_responses(number, request, response)
            return
        if method is not None:
            self._read_gemini(number, request, response, method[1] == STREAM)
            return
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.sent.setdefault(response["id"], set()).update(_call_ids(response.get("content")))
            self._keep_usage(response["id"], Usage.from_json(response.get("usage")))
            for block in _tool_uses(response.get("content")):
                self.sent_calls.setdefault(str(block["id"]), (str(block.get("name")), block.get("input")))
            if request.get("tools"):  # not a CLI's side request (OpenCode's session title)
                text = "\n".join(
                    b.get("text") or "" for b in blocks_of(response.get("content")) if b.get("type") == "text"
                )
                self.answers.append((response["id"], frozenset(_call_ids(response.get("content"))), _comparable(text)))
        for message in request.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    self.calls.setdefault(block["id"], (str(block.get("name") or "?"), number))
                elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    text = result_text(block.get("content"))  # the Messages API's: shown as it was carried
                    self._carried(block["tool_use_id"], text, text, number)

    def _carried(self, call_id: str, text: str, shown: str, number: int) -> None:
        self.results.setdefault(call_id, {}).setdefault(text, number)
        self.shown.setdefault(call_id, set()).add(_comparable(shown))

    def _name(self, call_id: str) -> str:
        """The call's name in the common vocabulary, as a request or a response carried it ('' if none did)."""
        return (self.calls.get(call_id) or self.sent_calls.get(call_id) or ("",))[0]

    def _keep_usage(self, response_id: str, usage: Usage | None) -> None:
        if usage is not None:
            self.usage.setdefault(response_id, usage)

    def _read_responses(self, number: int, request: dict[str, Any], response: Any) -> None:
        """A Responses API exchange (Codex CLI): calls are ``function_call`` items (keyed by ``call_id``), results
        ``function_call_output`` items, in the request's ``input`` and the response's ``output``."""
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            output = response.get("output") if isinstance(response.get("output"), list) else []
            calls = [i for i in output if isinstance(i, dict) and i.get("type") in _CALL_ITEMS and "call_id" in i]
            self.sent.setdefault(response["id"], set()).update(str(i["call_id"]) for i in calls)
            for item in calls:  # in the common vocabulary, as Codex's rollout is read
                self.sent_calls.setdefault(str(item["call_id"]), self.reading.common_call(item))
            self._keep_usage(response["id"], _responses_usage(response.get("usage")))
        for item in request.get("input") or []:
            if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
                continue
            if item.get("type") in _CALL_ITEMS:
                self.calls.setdefault(item["call_id"], (self.reading.common_call(item)[0], number))
            elif item.get("type") in _OUTPUT_ITEMS:
                output = item.get("output")
                text = output if isinstance(output, str) else self.reading.text_of(output)
                shown = self.reading.shown_output(output, self._name(item["call_id"]))[0]
                self._carried(item["call_id"], text, shown, number)

    def _read_gemini(self, number: int, request: dict[str, Any], response: Any, streamed: bool) -> None:
        """A Gemini API exchange (Gemini CLI): calls are ``functionCall`` parts (keyed by ``id``), results
        ``functionResponse`` parts, in the request's ``contents`` and the response's candidate; a streamed response
        is named by its place (the reading's ``response_name``)."""
        candidates = response.get("candidates") if isinstance(response, dict) else None
        if streamed and isinstance(candidates, list) and candidates:
            self.streamed_gemini += 1
            name = self.reading.response_name(self.streamed_gemini)
            content = candidates[0].get("content") if isinstance(candidates[0], dict) else None
            parts = [p for p in (content or {}).get("parts") or [] if isinstance(p, dict)]
            calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            self.sent.setdefault(name, set()).update(str(call.get("id")) for call in calls)
            for call in calls:  # in the common vocabulary, as Gemini CLI's chat record is read
                self.sent_calls.setdefault(str(call.get("id")), self.reading.common_call(call))
            self._keep_usage(name, _gemini_usage(response.get("usageMetadata")))
            text = "\n".join(str(p["text"]) for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
            self.answers.append((name, frozenset(str(call.get("id")) for call in calls), _comparable(text)))
        for content in request.get("contents") or []:
            for part in (content.get("parts") if isinstance(content, dict) else None) or []:
                call = part.get("functionCall") if isinstance(part, dict) else None
                answer = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    self.calls.setdefault(call["id"], (self.reading.common_call(call)[0], number))
                elif isinstance(answer, dict) and isinstance(answer.get("id"), str):
                    text = self.reading.response_output(answer.get("response"))[0]
                    shown = self.reading.shown_response(answer.get("response"), self._name(answer["id"]))[0]
                    self._carried(answer["id"], text, shown, number)


def reached_the_model(entries: Sequence[dict[str, Any]]) -> bool:
    """Whether the record holds a model request (Messages, Responses or Gemini API): a record without one says
    nothing of the run (a CLI that never spoke to this server, as the plugin's tests' scripted stand-in
    ``claude``); the real CLI asks before any tool runs."""
    return any(_is_model_request(entry) for entry in entries)


def _path(entry: dict[str, Any]) -> str:
    return urlsplit(str(entry.get("path"))).path.rstrip("/")


def _is_model_request(entry: dict[str, Any]) -> bool:
    method = model_method(_path(entry))
    return _path(entry) in (MESSAGES_PATH, RESPONSES_PATH) or (method is not None and method[1] != COUNT)


def _received(entries: Sequence[dict[str, Any]], reading: Any) -> _Received:
    received = _Received(reading=reading)
    for number, entry in enumerate([e for e in entries if _is_model_request(e)], start=1):
        if not entry.get("refused"):
            received.read(number, entry)
    return received


def paired_responses(session: Session, entries: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The id of the model's response each assistant message of ``session`` is: its own id, or, for a transcript
    that names its messages by the agent's own ids (:attr:`~pytest_agent_eval.transcript.Session.own_message_ids`,
    OpenCode's), the next response, in order, to a request offering tools (the CLI's side requests, such as a
    session title, offer none) with the same tool calls (the model's own ids) or, without calls, the same text.
    "In order" is each thread's own: subagents run side by side (OpenCode's parallel ``task`` calls) interleave their
    requests, so a subagent's thread goes on from the response that made its call, and a response is paired once. A
    response the CLI never kept (a stream cut off, retried) is passed over; a message no response fits is unpaired."""
    return _pairing(session, _received(entries, session.api_reading))


def _pairing(session: Session, received: _Received) -> dict[str, str]:
    messages = [m for m in session.messages(thread=None) if not m.error and m.model != "<synthetic>"]
    if not session.own_message_ids:
        return {m.id: m.id for m in messages}
    pairs: dict[str, str] = {}
    at: dict[str, int] = {}  # thread → where its next response is looked for (a subagent's: after its call's)
    taken: set[int] = set()
    for message in messages:
        calls, text = frozenset(call.id for call in message.calls), _comparable(message.text)
        for index in range(at.get(message.thread, 0), len(received.answers)):
            response, sent_calls, sent_text = received.answers[index]
            if index not in taken and sent_calls == calls and (calls or sent_text == text):
                pairs[message.id], at[message.thread] = response, index + 1
                at.update(dict.fromkeys(calls, index + 1))
                taken.add(index)
                break
    return pairs


def evidence(
    session: Session, entries: Sequence[dict[str, Any]], tool: RetrievalTool, seen: Sequence[Leak] = ()
) -> Evidence:
    """The transcript ``session`` held against the request record ``entries``; ``seen``: the leaks the transcript
    already showed (a received result holding one of those is not counted twice)."""
    report = Evidence(
        requests=sum(1 for e in entries if _is_model_request(e)),
        refused=[f"{e.get('method')} {e.get('path')}: {e['refused']}" for e in entries if e.get("refused")],
    )
    received = _received(entries, session.api_reading)
    report.problems, report.unchecked = _disagreements(session, received)
    report.unchecked += [
        f"the {api} API's exchanges: {type(session).__name__} offers no reading of their items (Session.api_reading)"
        for api in sorted(received.unread)
    ]
    report.leaks = _received_leaks(session, received, tool, {leak.call_id for leak in seen})
    return report


def _disagreements(session: Session, received: _Received) -> tuple[list[str], list[str]]:
    """What disagrees, and what could not be checked."""
    problems, unchecked = [], []
    names = {call.id: call.name for call in session.calls}
    pairing = _pairing(session, received)
    for message in session.messages(thread=None):
        if message.error or message.model == "<synthetic>":  # the CLI's own note of an API error, never the model's
            continue
        response = pairing.get(message.id, message.id)
        calls = received.sent.get(response)
        if calls is None:
            problems.append(
                f"assistant message {message.id} (thread {message.thread}) is in the transcript, but the model sent "
                "no such message"
            )
            continue
        sent_usage = received.usage.get(response)
        if message.usage is None or sent_usage is None:
            side = "the transcript" if message.usage is None else "the model's response"
            unchecked.append(f"assistant message {message.id} (thread {message.thread}): {side} records no usage")
        elif message.usage.ctx != sent_usage.ctx:
            problems.append(
                f"assistant message {message.id} (thread {message.thread}): its usage differs from what the model sent "
                f"(a prompt of {message.usage.ctx} tokens in the transcript, {sent_usage.ctx} sent)"
            )
        for call in message.calls:
            if call.id not in calls:
                problems.append(
                    f"tool call {call.id} ({call.name}) is in the transcript, but the model's message {message.id} "
                    "holds no such call"
                )
            elif received.sent_calls.get(call.id, as_sent := call.sent_as or (call.name, call.input)) != as_sent:
                shown = json.dumps(call.input, ensure_ascii=False)[:SHOWN_CHARS]
                problems.append(f"tool call {call.id} ({call.name}) differs from what the model sent: {shown}")
    answered = set()
    for item in session.timeline:
        if not isinstance(item, ToolResult):
            continue
        answered.add(item.call_id)
        what = f"tool result for {item.call_id} ({names.get(item.call_id, '?')}, thread {item.thread})"
        carried = received.shown.get(item.call_id)
        if carried is None:
            if item.call_id not in received.calls and any(item.call_id in ids for ids in received.sent.values()):
                continue  # the run stopped after the call ran: no request followed it
            problems.append(f"{what} is in the transcript, but no request carried it to the model")
        elif not any(_agrees(text, _comparable(item.text)) for text in carried):
            shown = _comparable(item.text)[:SHOWN_CHARS]
            problems.append(f'{what} differs from what the model received: "{shown}"')
    transcript_calls = set(names)
    problems += [
        f"tool call {call_id} ({name}) reached the model in request #{number}, but is not in the transcript"
        for call_id, (name, number) in received.calls.items()
        if call_id not in transcript_calls
    ]
    problems += [
        f"tool result for {call_id} reached the model in request #{min(texts.values())}, but is not in the transcript"
        for call_id, texts in received.results.items()
        if call_id not in answered
    ]
    return problems, unchecked


def _received_leaks(session: Session, received: _Received, tool: RetrievalTool, seen: set[str | None]) -> list[Leak]:
    threads = {call.id: call.thread for call in session.calls}
    found = []
    for call_id, texts in received.results.items():
        name = received.calls.get(call_id, ("?", 0))[0]
        if call_id in seen or tool.owns(name):  # the tool's own MCP results are mcp_calls, not leaks
            continue
        for text in texts:
            hit = scan(text, tool)
            if hit is not None:
                found.append(Leak(threads.get(call_id, "?"), call_id, name, hit[0].name, hit[1]))
                break
    return found


def _responses_usage(raw: Any) -> Usage | None:
    """A Responses API ``usage``: ``input_tokens`` is the whole prompt, ``input_tokens_details.cached_tokens`` its
    cached part."""
    if not isinstance(raw, dict):
        return None
    details = raw.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return _whole_prompt(raw.get("input_tokens"), cached, raw.get("output_tokens"))


def _gemini_usage(raw: Any) -> Usage | None:
    """A Gemini API ``usageMetadata``: ``promptTokenCount`` is the whole prompt, ``cachedContentTokenCount`` its
    cached part."""
    if not isinstance(raw, dict):
        return None
    counts = raw.get("promptTokenCount"), raw.get("cachedContentTokenCount"), raw.get("candidatesTokenCount")
    return _whole_prompt(*counts)


def _whole_prompt(whole: Any, cached: Any, output: Any) -> Usage | None:
    """The usage of a prompt of ``whole`` tokens, ``cached`` of them read from the cache; None without a prompt
    size."""
    if not isinstance(whole, int) or isinstance(whole, bool):
        return None
    return Usage(max(0, whole - count_of(cached)), count_of(cached), 0, count_of(output))


def _tool_uses(content: Any) -> list[dict[str, Any]]:
    blocks = content if isinstance(content, list) else []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use" and "id" in b]


def _call_ids(content: Any) -> set[str]:
    return {str(b["id"]) for b in _tool_uses(content)}


def _agrees(carried: str, shown: str) -> bool:
    """Whether the transcript shows exactly what the model received (both as the agent's reader shows them, blanks
    and reminders aside): equal, never a part of it — a record that shows less than it carried is a forgery. The one
    exception is Codex CLI's, which cuts a long result's middle out twice, to different budgets: for the model in
    tokens, for its rollout in characters (``…N tokens truncated…``, ``…N chars truncated…``); then both must begin
    and end exactly alike, the transcript's head agreeing with the received head as far as both go, and its tail
    likewise with the received tail."""
    if shown == carried:
        return True
    cut_shown, cut_carried = _TRUNCATED.split(shown, maxsplit=1), _TRUNCATED.split(carried, maxsplit=1)
    if len(cut_shown) != 2 or len(cut_carried) != 2:
        return False
    (head, tail), (carried_head, carried_tail) = cut_shown, cut_carried
    if not (head and tail and carried_head and carried_tail):  # an honest cut keeps both ends
        return False
    both = min(len(head), len(carried_head)), min(len(tail), len(carried_tail))
    return (
        head[: both[0]] == carried_head[: both[0]]
        and tail[len(tail) - both[1] :] == carried_tail[len(carried_tail) - both[1] :]
    )


def _comparable(text: str) -> str:
    """A result's text as both sides can be compared: reminders out, every run of blanks one space."""
    if "<system-reminder>" in text:
        text = _REMINDER.sub(" ", text)
    return _BLANKS.sub(" ", text).strip()
