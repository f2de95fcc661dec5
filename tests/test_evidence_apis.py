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

from pytest_agent_eval.agents.codex.transcript import CodexSession, read_codex
from pytest_agent_eval.agents.gemini.transcript import GeminiSession, read_gemini
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model import gemini as gemini_api
from pytest_agent_eval.model import responses as responses_api
from pytest_agent_eval.model.sse import Reply, tool_use
from pytest_agent_eval.report.blocks import render_scorecard

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
        items = responses_api.output_items(request, turn.reply)
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


def test_a_codex_session_agrees_with_the_responses_call_by_call(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    session = _read_codex(tmp_path, rollout)
    assert [(c.name, c.input) for c in session.calls] == [
        (EXPLORE, {"query": QUESTION}),
        ("Bash", {"command": "cat -n lib/response.js"}),
    ]  # the Read went out as a shell command, and is read back as one
    report = evidence(session, entries)
    assert (report.problems, report.unchecked, report.requests) == ([], [], 3)


def test_a_codex_call_whose_name_or_input_was_rewritten_is_named(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    _codex_call(rollout, "call_explore")["name"] = "codegraph_search"
    _codex_call(rollout, "call_read")["arguments"] = json.dumps({"cmd": "cat -n lib/utils.js"})
    assert evidence(_read_codex(tmp_path, rollout), entries).problems == [
        f'tool call call_explore (mcp__codegraph__codegraph_search) differs from what the model sent: {{"query": '
        f'"{QUESTION}"}}',
        'tool call call_read (Bash) differs from what the model sent: {"command": "cat -n lib/utils.js"}',
    ]


def test_a_codex_shell_call_renamed_out_of_the_shell_is_named(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    _codex_call(rollout, "call_read")["name"] = "read_file"  # same arguments, no longer the shell
    assert evidence(_read_codex(tmp_path, rollout), entries).problems == [
        'tool call call_read (read_file) differs from what the model sent: {"cmd": "cat -n lib/response.js"}'
    ]


def test_a_codex_message_whose_prompt_size_was_rewritten_is_named(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    usage = next(r["payload"]["usage"] for r in rollout if r["payload"].get("response_id") == "resp_2")
    usage["cached_input_tokens"] = usage["input_tokens"] = 600  # a smaller prompt, all of it cached
    assert evidence(_read_codex(tmp_path, rollout), entries).problems == [
        "assistant message resp_2 (thread main): its usage differs from what the model sent (a prompt of 600 tokens "
        "in the transcript, 1500 sent)"
    ]


def test_codex_events_no_request_carried_and_requests_the_rollout_lacks_are_named(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    at = rollout.index(next(r for r in rollout if r["payload"].get("response_id") == "resp_2"))
    extra = {"type": "function_call", "call_id": "call_extra", "name": "exec_command", "arguments": '{"cmd": "ls"}'}
    rollout[at:at] = [{"type": "response_item", "payload": extra}]
    output = {
        "type": "function_call_output",
        "call_id": "call_extra",
        "output": "Process exited with code 0\nOutput:\nlib",
    }
    rollout.append({"type": "response_item", "payload": output})
    rollout = [r for r in rollout if r["payload"].get("call_id") != "call_explore"]  # the explore, call and result
    problems = evidence(_read_codex(tmp_path, rollout), entries).problems
    assert problems == [
        "tool call call_extra (Bash) is in the transcript, but the model's message resp_2 holds no such call",
        "tool result for call_extra (Bash, thread main) is in the transcript, but no request carried it to the model",
        f"tool call call_explore ({EXPLORE}) reached the model in request #2, but is not in the transcript",
        "tool result for call_explore reached the model in request #2, but is not in the transcript",
    ]


def test_a_codex_response_without_usage_is_said_unchecked_not_guessed(tmp_path: Path) -> None:
    rollout, entries = _codex_record()
    entries[-1]["response"]["usage"] = None  # a relayed stream cut off before response.completed
    report = evidence(_read_codex(tmp_path, rollout), entries)
    assert report.problems == []
    assert report.unchecked == ["assistant message resp_3 (thread main): the model's response records no usage"]
    assert report.to_dict()["unchecked"] == report.unchecked
    block = render_scorecard(score(_read_codex(tmp_path, rollout), requests=entries))
    assert re.search(r"prompt sizes not checked +1\n", block) and "resp_3 (thread main): the model's response" in block


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
        parts = gemini_api.reply_parts(request, turn.reply)
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


def test_a_gemini_session_agrees_with_the_responses_call_by_call(tmp_path: Path) -> None:
    chat, entries = _gemini_record()
    session = _read_gemini(tmp_path, chat)
    assert [(c.name, c.input) for c in session.calls] == [
        (EXPLORE, {"query": QUESTION}),
        ("Bash", {"command": "cat -n lib/response.js"}),
    ]
    report = evidence(session, entries)
    assert (report.problems, report.unchecked, report.requests) == ([], [], 3)


def test_a_gemini_call_whose_name_or_input_was_rewritten_is_named(tmp_path: Path) -> None:
    chat, entries = _gemini_record()
    renamed = "mcp_codegraph_codegraph_search"  # the CLI records a call's id as <tool>__<id>: both rewritten
    _gemini_call(chat, "call_explore").update(name=renamed, id=f"{renamed}__call_explore")
    _gemini_call(chat, "call_read")["args"] = {"command": "cat -n lib/utils.js"}
    assert evidence(_read_gemini(tmp_path, chat), entries).problems == [
        f'tool call call_explore (mcp__codegraph__codegraph_search) differs from what the model sent: {{"query": '
        f'"{QUESTION}"}}',
        'tool call call_read (Bash) differs from what the model sent: {"command": "cat -n lib/utils.js"}',
    ]


def test_a_gemini_message_whose_prompt_size_was_rewritten_is_named(tmp_path: Path) -> None:
    chat, entries = _gemini_record()
    next(r for r in chat if r.get("id") == "g1")["tokens"]["input"] = 1200
    assert evidence(_read_gemini(tmp_path, chat), entries).problems == [
        "assistant message gemini-response-2 (thread main): its usage differs from what the model sent (a prompt of "
        "1200 tokens in the transcript, 1500 sent)"
    ]


def test_gemini_events_no_request_carried_and_requests_the_chat_record_lacks_are_named(tmp_path: Path) -> None:
    chat, entries = _gemini_record()
    response = next(r for r in chat if r.get("id") == "g1")
    response["toolCalls"].append({"id": "run_shell_command__call_extra", "name": "run_shell_command",
                                  "args": {"command": "ls"}})  # fmt: skip
    answer = {"functionResponse": {"id": "call_extra", "name": "run_shell_command", "response": {"output": "lib"}}}
    next(r for r in chat if r.get("id") == "u2")["content"].append(answer)
    next(r for r in chat if r.get("id") == "g0")["toolCalls"] = []  # the explore: its call and its result
    chat = [r for r in chat if r.get("id") != "u1"]
    problems = evidence(_read_gemini(tmp_path, chat), entries).problems
    assert problems == [
        "tool call call_extra (Bash) is in the transcript, but the model's message gemini-response-2 holds no such "
        "call",
        "tool result for call_extra (Bash, thread main) is in the transcript, but no request carried it to the model",
        f"tool call call_explore ({EXPLORE}) reached the model in request #2, but is not in the transcript",
        "tool result for call_explore reached the model in request #2, but is not in the transcript",
    ]


def test_a_gemini_response_without_usage_is_said_unchecked_not_guessed(tmp_path: Path) -> None:
    chat, entries = _gemini_record()
    del next(r for r in chat if r.get("id") == "g2")["tokens"]
    report = evidence(_read_gemini(tmp_path, chat), entries)
    assert report.problems == []
    assert report.unchecked == ["assistant message gemini-response-3 (thread main): the transcript records no usage"]
