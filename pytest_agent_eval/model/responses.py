"""The OpenAI Responses API's side of the stand-in: reading a request for the policy, rendering its reply.

Codex CLI speaks only ``POST /v1/responses`` with ``stream: true`` and sends the whole history each time
(``store: false``): ``input`` holds developer and user messages, the model's earlier ``function_call`` and
``message`` items, and each call's ``function_call_output``. Tools are offered as functions (the shell is
``exec_command{cmd}``) and, for an MCP server, as ``{"type": "namespace", "name": "mcp__NAME", "tools": [...]}``,
whose tools are called as ``function_call{name: "<tool>", namespace: "mcp__NAME"}``.

The scripted policy decides in the house's common tool vocabulary (the names the transcript metrics read:
``Read``, ``Grep``, ``Bash``, ``mcp__NAME__tool``). Here a request is read into that vocabulary — the shell
offers Read, Grep and Bash, an earlier ``exec_command`` is the step its command is (:func:`bash_access`) — and
the policy's reply is rendered back: a Read is ``cat -n FILE``, a Grep a ``grep -rli``, an explore a call in
its namespace. So one corpus entry yields comparable sessions through either API.

The policy's thinking is rendered as the real API renders reasoning: a ``reasoning`` item ``{id, summary:
[{type: "summary_text", text}], encrypted_content}``. The thinking's text is the summary, streamed only when the
request asks for one (``reasoning.summary``, Codex 0.171.0 sends ``"auto"``), else hidden with the rest; the hidden
tokens are declared in ``encrypted_content`` (:func:`~.usage.hidden_signature`), sent only when the request includes
``reasoning.encrypted_content`` (Codex does, and sends the item back in the next requests' ``input``, where the
counting model prices it as the real API does: its summary plus what it hid). All reasoning is output:
``output_tokens`` counts it, ``output_tokens_details.reasoning_tokens`` names it.

The SSE stream is the one Codex parses: ``response.created``, per output item ``response.output_item.added``
(``response.output_text.delta``…, or a reasoning summary's ``response.reasoning_summary_part.added``,
``response.reasoning_summary_text.delta``… ``.done``, ``response.reasoning_summary_part.done``)
``response.output_item.done``, then ``response.completed`` with ``usage{input_tokens,
input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens, total_tokens}``.
``input_tokens`` is the whole prompt, cached part included, as the real API reports it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

from ..agents.codex.transcript import SHELL_TOOL, command_output, spawned_agent, text_of
from ..metrics.file_access import bash_access
from .scripted import Step, Turn, working_directory
from .sse import CHUNK_CHARS, Reply, data_events, event, new_id, tool_use
from .usage import count_tokens, declared_hidden, hidden_signature, text_tokens

# The CLI's own context, sent as user messages: not the question (nor is a subagent's end, which Codex tells so).
_CONTEXT_RE = re.compile(
    r"^\s*(?:<environment_context>|<user_instructions>|# AGENTS\.md instructions|<subagent_notification>)", re.S
)
_CWD_TAG_RE = re.compile(r"<cwd>([^<]+)</cwd>")
# Directories a file search skips: version control, the retrieval tool's index, dependencies.
_SKIPPED_DIRS = (".git", ".codegraph", "node_modules")
# Codex's own subagents (the ``multi_agent_v1`` namespace): ``spawn_agent`` is the policy's ``Task`` (its prompt the
# child's ``message``); a child's requests say so in their ``client_metadata``. The child runs on its own: the
# stand-in waits for it (``wait_agent``) before its next step, as a model that wants the child's answer does.
SUBAGENTS = "multi_agent_v1"
_SPAWN, _WAIT = "spawn_agent", "wait_agent"
_SUBAGENT_MARK = "x-openai-subagent"
_WAIT_MS = 600_000
# What a request includes to get each reasoning item's encrypted content (and send it back, with ``store: false``).
ENCRYPTED_REASONING = "reasoning.encrypted_content"


# -- reading a request --------------------------------------------------------------------------
def _offered(request: dict[str, Any]) -> dict[str, tuple[str | None, str, dict[str, Any]]]:
    """Common name → (namespace, name as offered, the tool in Messages form: name and input_schema)."""
    offered: dict[str, tuple[str | None, str, dict[str, Any]]] = {}
    for tool in request.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and tool.get("name") == SUBAGENTS:
            offered["Task"] = (SUBAGENTS, _SPAWN, {"name": "Task", "input_schema": {"properties": {"prompt": {}}}})
            offered[f"{SUBAGENTS}__{_WAIT}"] = (SUBAGENTS, _WAIT, {"name": f"{SUBAGENTS}__{_WAIT}"})
        elif tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    common = f"{tool['name']}__{inner['name']}"
                    offered[common] = (tool["name"], inner["name"], _as_messages_tool(common, inner))
        elif tool.get("type") == "function" and tool.get("name") == SHELL_TOOL:
            for common in ("Read", "Grep", "Bash"):
                offered[common] = (None, SHELL_TOOL, {"name": common})
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):
            offered[tool["name"]] = (None, tool["name"], _as_messages_tool(tool["name"], tool))
    return offered


def _as_messages_tool(name: str, tool: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "input_schema": tool.get("parameters") or {}}


def _step(call: dict[str, Any]) -> Step:
    """A function_call as the step it is in the common vocabulary."""
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    name = str(call.get("name") or "")
    if call.get("namespace") == SUBAGENTS and name == _SPAWN:
        return Step("Task", arguments)
    if call.get("namespace"):
        return Step(f"{call['namespace']}__{name}", arguments)
    if name != SHELL_TOOL:
        return Step(name, arguments)
    return shell_step(str(arguments.get("cmd") or ""))


def shell_step(command: str) -> Step:
    """A shell command as the step it is in the common vocabulary: a Read of one file, a Grep, or a Bash call."""
    access = bash_access(command)
    if access is not None and access.kind == "read" and access.path:
        return Step("Read", {"file_path": access.path})
    if access is not None and access.kind == "search":
        return Step("Grep", {"command": command})
    return Step("Bash", {"command": command})


def read_turn(request: dict[str, Any]) -> Turn:
    """The conversation of a Responses request as the policy sees it (see the module docstring)."""
    items = [i for i in request.get("input") or [] if isinstance(i, dict)]
    start, question, cwd = 0, "", ""
    for index, item in enumerate(items):
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        text = text_of(item.get("content"))
        if found := _CWD_TAG_RE.search(text):
            cwd = found.group(1).strip()
        if text.strip() and not _CONTEXT_RE.match(text):
            start, question = index, text.strip()
    steps: dict[str, Step] = {}
    for item in items[start:]:
        if item.get("type") == "function_call":
            steps[str(item.get("call_id"))] = _step(item)
        elif item.get("type") == "function_call_output" and str(item.get("call_id")) in steps:
            step = steps[str(item["call_id"])]
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output)
            step.result = command_output(text)[0] if step.name in ("Read", "Grep", "Bash") else text
    offered = _offered(request)
    tools = {common: schema for common, (_, _, schema) in offered.items()}
    own = [step for step in steps.values() if step.name != "Task" and not step.name.startswith(SUBAGENTS)]
    delegated = [step for step in steps.values() if step not in own]
    metadata = request.get("client_metadata")
    subagent = isinstance(metadata, dict) and bool(metadata.get(_SUBAGENT_MARK))
    return Turn(question, own, cwd or working_directory(request), tools, subagent, delegated)


# -- rendering a reply ----------------------------------------------------------------------------
def grep_command(pattern: str) -> str:
    """The shell command a Grep of the policy is run as: the names of the files matching ``pattern``."""
    skipped = " ".join(f"--exclude-dir={d}" for d in _SKIPPED_DIRS)
    return f"grep -rliE {shlex.quote(pattern)} {skipped} ."


def _function_call(request: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    name, tool_input = block["name"], block.get("input") or {}
    namespace, offered_name, _ = _offered(request).get(name, (None, name, {}))
    if offered_name == SHELL_TOOL:
        if name == "Read":
            tool_input = {"cmd": f"cat -n {shlex.quote(str(tool_input.get('file_path')))}"}
        elif name == "Grep":
            tool_input = {"cmd": grep_command(str(tool_input.get("pattern") or ""))}
        else:
            tool_input = {"cmd": str(tool_input.get("command") or "")}
    elif offered_name == _SPAWN:
        tool_input = {"message": str(tool_input.get("prompt") or "")}
    call = {
        "type": "function_call",
        "id": new_id("fc"),
        "status": "completed",
        "call_id": block.get("id") or new_id("call"),
        "name": offered_name,
        "arguments": json.dumps(tool_input, ensure_ascii=False),
    }
    return {**call, "namespace": namespace} if namespace else call


def _summary_asked(request: dict[str, Any]) -> bool:
    reasoning = request.get("reasoning")
    return isinstance(reasoning, dict) and reasoning.get("summary") not in (None, "none")


def _reasoning(request: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """A thinking block as a reasoning item: its text the summary when one is asked, else hidden with what the block
    hid; the hidden tokens declared in ``encrypted_content`` (see the module docstring)."""
    text = str(block.get("thinking") or "")
    shown = text if _summary_asked(request) else ""
    hidden = declared_hidden(block) + (text_tokens(text) if not shown else 0)
    summary = [{"type": "summary_text", "text": shown}] if shown else []
    return {"type": "reasoning", "id": new_id("rs"), "summary": summary,
            "encrypted_content": hidden_signature(hidden, new_id("enc"))}  # fmt: skip


def output_items(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The reply's blocks as Responses output items: thinking as a reasoning item, text as an assistant message, a
    call as a function_call. Each reasoning item carries its ``encrypted_content``: :func:`as_requested` leaves it
    out where the request did not include it, once the usage is counted."""
    items: list[dict[str, Any]] = []
    for block in _awaited(request, reply).blocks:
        if block.get("type") == "tool_use":
            items.append(_function_call(request, block))
        elif block.get("type") == "thinking":
            items.append(_reasoning(request, block))
        elif block.get("type") == "text":
            text = {"type": "output_text", "text": block.get("text") or "", "annotations": []}
            items.append({"type": "message", "id": new_id("msg"), "status": "completed", "role": "assistant",
                          "content": [text]})  # fmt: skip
    return items


def _awaited(request: dict[str, Any], reply: Reply) -> Reply:
    """``reply``, or a ``wait_agent`` for a subagent the conversation spawned and has not waited for yet."""
    spawns, waited, started = set(), set(), []
    for item in request.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and item.get("namespace") == SUBAGENTS:
            if item.get("name") == _SPAWN:
                spawns.add(item.get("call_id"))
            elif item.get("name") == _WAIT:
                waited.update(_step(item).input.get("targets") or [])
        elif item.get("type") == "function_call_output" and item.get("call_id") in spawns:
            started.append(spawned_agent(text_of(item.get("output"))))
    pending = [agent for agent in started if agent and agent not in waited]
    if not pending:
        return reply
    return Reply([tool_use(f"{SUBAGENTS}__{_WAIT}", {"targets": pending, "timeout_ms": _WAIT_MS})])


def as_requested(request: dict[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items as the API sends them: a reasoning item's ``encrypted_content`` only where the request
    includes it (``include: ["reasoning.encrypted_content"]``)."""
    if ENCRYPTED_REASONING in (request.get("include") or []):
        return items
    return [_without_encryption(item) for item in items]


def _without_encryption(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "encrypted_content"} if item.get("type") == "reasoning" else item


def generated(item: dict[str, Any]) -> dict[str, Any]:
    """What the model generated of an output item, as the counting model prices every stand-in's output: the
    Messages API's content block of it (a text, a thinking, a tool_use with its call id, name and input). The
    Responses API's own item ids, status, annotations and encryption are not the model's output."""
    if item.get("type") == "message":
        return {"type": "text", "text": text_of(item.get("content"))}
    if item.get("type") == "reasoning":
        return {"type": "thinking", "thinking": text_of(item.get("summary"))}
    try:
        arguments = json.loads(item.get("arguments") or "{}")
    except ValueError:
        arguments = item.get("arguments")
    return {"type": "tool_use", "id": item.get("call_id"), "name": item.get("name"), "input": arguments}


def usage_json(prompt_tokens: int, cached_tokens: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage a caching Responses API reports: ``input_tokens`` is the whole prompt, cached part included;
    ``output_tokens`` what the model generated (:func:`generated`) and the reasoning it hid (its ``encrypted_content``
    declares it), of which ``reasoning_tokens`` the reasoning, summary and hidden."""
    reasoning = sum(count_tokens(generated(i)) + declared_hidden(i) for i in items if i.get("type") == "reasoning")
    output = max(1, sum(count_tokens(generated(i)) + declared_hidden(i) for i in items))
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt_tokens + output,
    }


def response_json(
    items: list[dict[str, Any]], model: str, usage: dict[str, Any] | None, response_id: str, status: str
) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "status": status, "model": model, "output": items,
            "usage": usage}  # fmt: skip


def _event(name: str, data: dict[str, Any], sequence: list[int]) -> bytes:
    sequence[0] += 1
    return event(name, {"type": name, "sequence_number": sequence[0], **data})


def stream_events(items: list[dict[str, Any]], model: str, usage: dict[str, Any], response_id: str) -> Iterator[bytes]:
    """The SSE byte frames of one streamed response."""
    sequence = [-1]
    yield _event("response.created", {"response": response_json([], model, None, response_id, "in_progress")}, sequence)
    for index, item in enumerate(items):
        if item["type"] == "message":
            yield _event("response.output_item.added", {"output_index": index, "item": {**item, "content": []}},
                         sequence)  # fmt: skip
            text = item["content"][0]["text"]
            for start in range(0, len(text), CHUNK_CHARS):
                delta = {"item_id": item["id"], "output_index": index, "content_index": 0,
                         "delta": text[start : start + CHUNK_CHARS]}  # fmt: skip
                yield _event("response.output_text.delta", delta, sequence)
        elif item["type"] == "reasoning":
            yield _event("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}},
                         sequence)  # fmt: skip
            for summary_index, part in enumerate(item.get("summary") or []):
                yield from _summary_events(item["id"], index, summary_index, part, sequence)
        else:
            yield _event("response.output_item.added", {"output_index": index, "item": item}, sequence)
        yield _event("response.output_item.done", {"output_index": index, "item": item}, sequence)
    done = response_json(items, model, usage, response_id, "completed")
    yield _event("response.completed", {"response": done}, sequence)


def _summary_events(
    item_id: str, index: int, summary_index: int, part: dict[str, Any], sequence: list[int]
) -> Iterator[bytes]:
    """One summary part of a reasoning item, its text streamed in pieces as the API streams a reasoning summary."""
    where = {"item_id": item_id, "output_index": index, "summary_index": summary_index}
    text = str(part.get("text") or "")
    yield _event("response.reasoning_summary_part.added", {**where, "part": {**part, "text": ""}}, sequence)
    for start in range(0, len(text), CHUNK_CHARS):
        yield _event("response.reasoning_summary_text.delta", {**where, "delta": text[start : start + CHUNK_CHARS]},
                     sequence)  # fmt: skip
    yield _event("response.reasoning_summary_text.done", {**where, "text": text}, sequence)
    yield _event("response.reasoning_summary_part.done", {**where, "part": part}, sequence)


_ENDED = ("response.completed", "response.failed", "response.incomplete")


def assemble_response(stream: bytes) -> dict[str, Any] | None:
    """The response a Responses SSE stream carried (``id``, ``status``, ``output``, ``usage``): its final event's
    when it got that far, else ``response.created``'s with the output items done so far; None when it never
    started one. What a relayed stream showed the client, read back for the request record."""
    response: dict[str, Any] | None = None
    done: list[dict[str, Any]] = []
    for data in data_events(stream):
        kind = data.get("type")
        if kind in ("response.created", *_ENDED) and isinstance(data.get("response"), dict):
            response = dict(data["response"])
            if kind in _ENDED:
                return response
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            done.append(data["item"])
    return {**response, "output": done} if response is not None else None
