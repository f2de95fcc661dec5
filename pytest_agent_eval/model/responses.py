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

The SSE stream is the one Codex parses: ``response.created``, per output item ``response.output_item.added``
(``response.output_text.delta``…) ``response.output_item.done``, then ``response.completed`` with
``usage{input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens,
total_tokens}``. ``input_tokens`` is the whole prompt, cached part included, as the real API reports it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

from ..agents.codex.transcript import SHELL_TOOL, command_output, text_of
from ..metrics.file_access import bash_access
from .scripted import Step, Turn, working_directory
from .sse import CHUNK_CHARS, Reply, data_events, event, new_id
from .usage import count_tokens

# The CLI's own context, sent as user messages: not the question.
_CONTEXT_RE = re.compile(r"^\s*(?:<environment_context>|<user_instructions>|# AGENTS\.md instructions)", re.S)
_CWD_TAG_RE = re.compile(r"<cwd>([^<]+)</cwd>")
# Directories a file search skips: version control, the retrieval tool's index, dependencies.
_SKIPPED_DIRS = (".git", ".codegraph", "node_modules")


# -- reading a request --------------------------------------------------------------------------
def _offered(request: dict[str, Any]) -> dict[str, tuple[str | None, str, dict[str, Any]]]:
    """Common name → (namespace, name as offered, the tool in Messages form: name and input_schema)."""
    offered: dict[str, tuple[str | None, str, dict[str, Any]]] = {}
    for tool in request.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
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
    return Turn(question, list(steps.values()), cwd or working_directory(request), tools)


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
    call = {
        "type": "function_call",
        "id": new_id("fc"),
        "status": "completed",
        "call_id": block.get("id") or new_id("call"),
        "name": offered_name,
        "arguments": json.dumps(tool_input, ensure_ascii=False),
    }
    return {**call, "namespace": namespace} if namespace else call


def output_items(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The reply's blocks as Responses output items: text as an assistant message, a call as a function_call.
    Thinking has no place here (Codex would need a reasoning item's encrypted content): it is left out."""
    items: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.get("type") == "tool_use":
            items.append(_function_call(request, block))
        elif block.get("type") == "text":
            text = {"type": "output_text", "text": block.get("text") or "", "annotations": []}
            items.append({"type": "message", "id": new_id("msg"), "status": "completed", "role": "assistant",
                          "content": [text]})  # fmt: skip
    return items


def usage_json(prompt_tokens: int, cached_tokens: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage a caching Responses API reports: ``input_tokens`` is the whole prompt, cached part included."""
    output = max(1, count_tokens(items))
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
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
        else:
            yield _event("response.output_item.added", {"output_index": index, "item": item}, sequence)
        yield _event("response.output_item.done", {"output_index": index, "item": item}, sequence)
    done = response_json(items, model, usage, response_id, "completed")
    yield _event("response.completed", {"response": done}, sequence)


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
