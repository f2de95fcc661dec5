"""metrics.evidence over the Responses API (Codex CLI) and the Gemini API (Gemini CLI): the session read by the
agent's own reader from records written here, held against the request record a server would have kept for them.
The model's side is rendered by the stand-ins themselves (model/responses.py, model/gemini.py), so a Read sent as
a shell command and an MCP call in its namespace are what the real runs carry."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.codex import stand_in as codex_stand_in
from pytest_agent_eval.agents.codex.transcript import CodexSession, read_codex
from pytest_agent_eval.agents.gemini import stand_in as gemini_stand_in
from pytest_agent_eval.agents.gemini.transcript import GeminiSession, read_gemini
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model import gemini as gemini_api
from pytest_agent_eval.model import responses as responses_api
from pytest_agent_eval.model.sse import Reply, tool_use
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Session

QUESTION = "Where does res.send set the ETag?"
EXPLORE = "mcp__codegraph__codegraph_explore"
EXPLORED = "**Exploration: res.send**\n\nlib/response.js:170 etag"
READ_OUTPUT = "   170\tvar etag = generateETag(body)"
ANSWER = "lib/response.js:170 sets it."
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}}


@dataclass
class Turn:
    """One model request of a scripted session: the reply, the prompt size it is answered with, the calls' outputs
    as the CLI sends them back."""

    reply: Reply
    prompt: int
    cached: int
    outputs: dict[str, str] = field(default_factory=dict)


def _turns(shell_output: str) -> list[Turn]:
    explore = tool_use(EXPLORE, {"query": QUESTION}, "call_explore")
    read = tool_use("Read", {"file_path": "lib/response.js"}, "call_read")
    return [
        Turn(Reply([explore]), 1000, 0, {"call_explore": EXPLORED}),
        Turn(Reply([{"type": "thinking", "thinking": "the ETag"}, read]), 1500, 1000, {"call_read": shell_output}),
        Turn(Reply.text(ANSWER), 1900, 1500),
    ]


def _entry(path: str, request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    return {"method": "POST", "path": path, "status": 200, "request": request, "response": response,
            "refused": None, "fault": None}  # fmt: skip


# -- Codex CLI: the rollout against the Responses API ------------------------------------------------------------
CODEX_TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "namespace", "name": "mcp__codegraph", "tools": [{"type": "function", "name": "codegraph_explore",
                                                               "parameters": QUERY}]},
]  # fmt: skip
THREAD = "01a23956-0000-7000-8000-000000000001"


def _codex_record() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the rollout's records, the request record) of a scripted Codex session: explore, read, answer; the
    second response also carries a reasoning item (hidden: encrypted)."""
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}
    rollout = [{"type": "session_meta", "payload": {"id": THREAD, "cwd": "/work/repo"}},
               {"type": "turn_context", "payload": {"model": "stand-in-scripted"}},
               {"type": "response_item", "payload": user}]  # fmt: skip
    history, entries = [user], []
    for number, turn in enumerate(
        _turns("Wall time: 0.01 seconds\nProcess exited with code 0\nOutput:\n" + READ_OUTPUT)
    ):
        request = {"model": "stand-in-scripted", "stream": True, "tools": CODEX_TOOLS, "input": copy.deepcopy(history)}
        items = codex_stand_in.output_items(request, turn.reply)
        if number == 1:
            items.insert(0, {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"})
        response_id = f"resp_{number + 1}"
        usage = responses_api.usage_json(turn.prompt, turn.cached, items)
        entries.append(_entry("/v1/responses", request, responses_api.response_json(items, "m", usage, response_id,
                                                                                    "completed")))  # fmt: skip
        rollout += [{"type": "response_item", "payload": copy.deepcopy(item)} for item in items]
        recorded = {"input_tokens": turn.prompt, "cached_input_tokens": turn.cached, "output_tokens": 9}
        rollout.append({"type": "token_usage_record", "payload": {"response_id": response_id, "usage": recorded}})
        outputs = [{"type": "function_call_output", "call_id": c, "output": o} for c, o in turn.outputs.items()]
        rollout += [{"type": "response_item", "payload": output} for output in outputs]
        history += [*items, *outputs]
    return rollout, entries


def _read_codex(tmp_path: Path, rollout: list[dict[str, Any]]) -> CodexSession:
    events = [{"type": "thread.started", "thread_id": THREAD}, {"type": "turn.started"},
              {"type": "turn.completed", "usage": {}}]  # fmt: skip
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    rollout_file = tmp_path / f"rollout-2026-12-03T00-00-00-{THREAD}.jsonl"
    rollout_file.write_text("".join(json.dumps(r) + "\n" for r in rollout), encoding="utf-8")
    return read_codex(tmp_path / "events.jsonl")


def _codex_call(rollout: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(r["payload"] for r in rollout if r["payload"].get("call_id") == call_id and "name" in r["payload"])


# -- Gemini CLI: the chat record against the Gemini API -----------------------------------------------------------
GEMINI_FUNCTIONS = [
    {"name": "run_shell_command", "parametersJsonSchema": {"type": "object"}},
    {"name": "mcp_codegraph_codegraph_explore", "parametersJsonSchema": QUERY},
]
GEMINI_TOOLS = [{"functionDeclarations": GEMINI_FUNCTIONS}]
SESSION = "be1b9b3f-0000-4000-8000-000000000001"
STREAM = "/v1beta/models/stand-in-scripted:streamGenerateContent?alt=sse"


def _gemini_record() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the chat record's lines, the request record) of a scripted Gemini CLI session: explore, read, answer; the
    second response also streams a thought part first."""
    question = {"role": "user", "parts": [{"text": QUESTION}]}
    chat = [{"sessionId": SESSION}, {"id": "u0", "type": "user", "content": [{"text": QUESTION}]}]
    contents, entries = [question], []
    for number, turn in enumerate(
        _turns(f"<untrusted_context>\nOutput: {READ_OUTPUT}\nExit Code: 0\n</untrusted_context>")
    ):
        request = {"contents": copy.deepcopy(contents), "tools": GEMINI_TOOLS}
        parts = gemini_stand_in.reply_parts(request, turn.reply)
        if number == 1:
            parts.insert(0, {"text": "**Reading** the response", "thought": True})
        usage = gemini_api.usage_metadata(turn.prompt, turn.cached, parts)
        entries.append(_entry(STREAM, request, gemini_api.response_json(parts, "m", usage, f"gemini_{number}")))
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        recorded = [
            {"id": f"{c['name']}__{c['id']}", "name": c["name"], "args": copy.deepcopy(c["args"])} for c in calls
        ]
        text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
        tokens = {"input": turn.prompt, "cached": turn.cached, "output": 9}
        chat.append({"id": f"g{number}", "type": "gemini", "content": text, "toolCalls": recorded, "tokens": tokens})
        answers = [
            {"functionResponse": {"id": c["id"], "name": c["name"], "response": {"output": turn.outputs[c["id"]]}}}
            for c in calls
        ]
        if answers:
            chat.append({"id": f"u{number + 1}", "type": "user", "content": copy.deepcopy(answers)})
        contents += [{"role": "model", "parts": parts}, *([{"role": "user", "parts": answers}] if answers else [])]
    return chat, entries


def _read_gemini(tmp_path: Path, chat: list[dict[str, Any]]) -> GeminiSession:
    events = [{"type": "init", "session_id": SESSION, "model": "m"}, {"type": "result", "status": "success"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    chat_file = tmp_path / f"session-2026-12-03T00-00-{SESSION[:8]}.jsonl"
    chat_file.write_text("".join(json.dumps(r) + "\n" for r in chat), encoding="utf-8")
    return read_gemini(tmp_path / "events.jsonl")


def _gemini_call(chat: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(c for r in chat for c in r.get("toolCalls") or [] if c["id"].endswith(f"__{call_id}"))


# -- the same checks through either API ------------------------------------------------------------------------
class CodexRecords:
    """Codex CLI's side: the rollout's records, the model's responses."""

    def __init__(self) -> None:
        self.records, self.entries = _codex_record()

    def read(self, tmp_path: Path) -> Session:
        return _read_codex(tmp_path, self.records)

    @staticmethod
    def message(number: int) -> str:
        return f"resp_{number}"

    def rename_explore(self, tool: str) -> None:
        _codex_call(self.records, "call_explore")["name"] = tool

    def rewrite_read(self, command: str) -> None:
        _codex_call(self.records, "call_read")["arguments"] = json.dumps({"cmd": command})

    def rewrite_prompt(self, number: int, tokens: int) -> None:
        usage = next(r["payload"]["usage"] for r in self.records if r["payload"].get("response_id") == f"resp_{number}")
        usage["input_tokens"] = tokens

    def add_call(self, number: int, call_id: str, command: str, output: str) -> None:
        at = self.records.index(next(r for r in self.records if r["payload"].get("response_id") == f"resp_{number}"))
        call = {
            "type": "function_call",
            "call_id": call_id,
            "name": "exec_command",
            "arguments": json.dumps({"cmd": command}),
        }
        self.records.insert(at, {"type": "response_item", "payload": call})
        result = {
            "type": "function_call_output",
            "call_id": call_id,
            "output": f"Process exited with code 0\nOutput:\n{output}",
        }
        self.records.append({"type": "response_item", "payload": result})

    def drop_call(self, call_id: str) -> None:
        self.records = [r for r in self.records if r["payload"].get("call_id") != call_id]

    def drop_response_usage(self, number: int) -> None:
        self.entries[number - 1]["response"]["usage"] = None  # a relayed stream cut off before response.completed


class GeminiRecords:
    """Gemini CLI's side: the chat record's lines, the model's responses."""

    def __init__(self) -> None:
        self.records, self.entries = _gemini_record()

    def read(self, tmp_path: Path) -> Session:
        return _read_gemini(tmp_path, self.records)

    @staticmethod
    def message(number: int) -> str:
        return f"gemini-response-{number}"

    def line(self, line_id: str) -> dict[str, Any]:
        return next(r for r in self.records if r.get("id") == line_id)

    def rename_explore(self, tool: str) -> None:
        renamed = f"mcp_codegraph_{tool}"  # the CLI records a call's id as <tool>__<id>: both rewritten
        _gemini_call(self.records, "call_explore").update(name=renamed, id=f"{renamed}__call_explore")

    def rewrite_read(self, command: str) -> None:
        _gemini_call(self.records, "call_read")["args"] = {"command": command}

    def rewrite_prompt(self, number: int, tokens: int) -> None:
        self.line(f"g{number - 1}")["tokens"]["input"] = tokens

    def add_call(self, number: int, call_id: str, command: str, output: str) -> None:
        call = {"id": f"run_shell_command__{call_id}", "name": "run_shell_command", "args": {"command": command}}
        self.line(f"g{number - 1}")["toolCalls"].append(call)
        answer = {"id": call_id, "name": "run_shell_command", "response": {"output": f"Output: {output}"}}
        self.line(f"u{number}")["content"].append({"functionResponse": answer})

    def drop_call(self, call_id: str) -> None:
        for line in (r for r in self.records if "toolCalls" in r):
            line["toolCalls"] = [c for c in line["toolCalls"] if not c["id"].endswith(f"__{call_id}")]
        self.records = [r for r in self.records if f'"id": "{call_id}"' not in json.dumps(r)]  # its result

    def drop_response_usage(self, number: int) -> None:
        del self.entries[number - 1]["response"]["usageMetadata"]


Records = CodexRecords | GeminiRecords


@pytest.fixture(params=[CodexRecords, GeminiRecords], ids=["codex", "gemini"])
def records(request: pytest.FixtureRequest) -> Records:
    return request.param()


def test_a_session_agrees_with_the_responses_call_by_call(records: Records, tmp_path: Path) -> None:
    session = records.read(tmp_path)
    assert [(c.name, c.input) for c in session.calls] == [
        (EXPLORE, {"query": QUESTION}),
        ("Bash", {"command": "cat -n lib/response.js"}),
    ]  # the Read went out as a shell command, and is read back as one
    report = evidence(session, records.entries, tool=CODEGRAPH)
    assert (report.problems, report.unchecked, report.requests) == ([], [], 3)


def test_a_call_whose_name_or_input_was_rewritten_is_named(records: Records, tmp_path: Path) -> None:
    records.rename_explore("codegraph_search")
    records.rewrite_read("cat -n lib/utils.js")
    assert evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH).problems == [
        f'tool call call_explore (mcp__codegraph__codegraph_search) differs from what the model sent: {{"query": '
        f'"{QUESTION}"}}',
        'tool call call_read (Bash) differs from what the model sent: {"command": "cat -n lib/utils.js"}',
    ]


def test_a_message_whose_prompt_size_was_rewritten_is_named(records: Records, tmp_path: Path) -> None:
    records.rewrite_prompt(2, 1200)
    assert evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH).problems == [
        f"assistant message {records.message(2)} (thread main): its usage differs from what the model sent (a prompt "
        "of 1200 tokens in the transcript, 1500 sent)"
    ]


def test_events_no_request_carried_and_requests_the_transcript_lacks_are_named(
    records: Records, tmp_path: Path
) -> None:
    records.add_call(2, "call_extra", "ls", "lib")
    records.drop_call("call_explore")  # its call and its result; its message stays
    assert evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH).problems == [
        f"tool call call_extra (Bash) is in the transcript, but the model's message {records.message(2)} holds no "
        "such call",
        "tool result for call_extra (Bash, thread main) is in the transcript, but no request carried it to the model",
        f"tool call call_explore ({EXPLORE}) reached the model in request #2, but is not in the transcript",
        "tool result for call_explore reached the model in request #2, but is not in the transcript",
    ]


def test_a_response_without_usage_is_said_unchecked_not_guessed(records: Records, tmp_path: Path) -> None:
    records.drop_response_usage(3)
    report = evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH)
    assert report.problems == []
    assert report.unchecked == [
        f"assistant message {records.message(3)} (thread main): the model's response records no usage"
    ]
    assert report.to_dict()["unchecked"] == report.unchecked
    block = render_scorecard(score(records.read(tmp_path), requests=records.entries, tool=CODEGRAPH))
    assert re.search(r"prompt sizes not checked +1\n", block) and "(thread main): the model's response" in block


def test_a_codex_shell_call_renamed_out_of_the_shell_is_named(tmp_path: Path) -> None:
    records = CodexRecords()
    _codex_call(records.records, "call_read")["name"] = "read_file"  # same arguments, no longer the shell
    problems = evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH).problems
    assert problems[0] == (
        'tool call call_read (read_file) differs from what the model sent: {"cmd": "cat -n lib/response.js"}'
    )  # and its result, read as no shell's, shows Codex's header the model's shell result is read without
    assert problems[1:] == [
        'tool result for call_read (read_file, thread main) differs from what the model received: "Wall time: 0.01 '
        'seconds Process exited with code 0 Output: 170 var etag = genera"'
    ]


def test_a_gemini_message_the_chat_record_keeps_no_tokens_for_is_said_unchecked(tmp_path: Path) -> None:
    records = GeminiRecords()
    del records.line("g2")["tokens"]
    report = evidence(records.read(tmp_path), records.entries, tool=CODEGRAPH)
    assert report.problems == []
    assert report.unchecked == ["assistant message gemini-response-3 (thread main): the transcript records no usage"]


def test_a_tool_result_cut_down_in_the_agents_record_is_named(records: Records, tmp_path: Path) -> None:
    """A result the record shows less of than the model received is a forgery, not a match: the figures it moves
    (the retrieval's residual) would stand on evidence that holds only a part of the truth."""
    cut = EXPLORED.split("\n")[0]  # the answer's heading kept, what it found dropped
    whole, part = json.dumps(EXPLORED)[1:-1], json.dumps(cut)[1:-1]
    records.records = [json.loads(json.dumps(r).replace(whole, part)) for r in records.records]
    session = records.read(tmp_path)
    assert next(i.text for i in session.timeline if getattr(i, "call_id", "") == "call_explore") == cut
    assert evidence(session, records.entries, tool=CODEGRAPH).problems == [
        f'tool result for call_explore ({EXPLORE}, thread main) differs from what the model received: "{cut}"'
    ]
