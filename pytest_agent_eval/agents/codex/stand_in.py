"""Codex CLI's side of the stand-in: its Responses requests read for the policy, the policy's reply spoken in its tools.

Codex CLI speaks only ``POST /v1/responses`` (the API's side, its usage and stream: :mod:`pytest_agent_eval.model.
responses`) and sends the whole history each time (``store: false``): ``input`` holds developer and user messages,
the model's earlier ``function_call`` and ``message`` items, and each call's ``function_call_output``. Tools are
offered as functions (the shell is ``exec_command{cmd}``) and, for an MCP server, as ``{"type": "namespace", "name":
"mcp__NAME", "tools": [...]}``, whose tools are called as ``function_call{name: "<tool>", namespace: "mcp__NAME"}``.

The scripted policy decides in the house's common tool vocabulary (the names the transcript metrics read:
``Read``, ``Grep``, ``Bash``, ``mcp__NAME__tool``). Here a request is read into that vocabulary — the shell
offers Read, Grep and Bash, an earlier ``exec_command`` is the step its command is
(:func:`~pytest_agent_eval.model.speech.shell_step`) — and the policy's reply is rendered back: a Read is ``cat -n
FILE``, a Grep a ``grep -rli``, an explore a call in its namespace, thinking a reasoning item. So one corpus entry
yields comparable sessions through either API.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pytest_agent_eval.agents.codex.transcript import SHELL_TOOL, command_output, spawned_agent, text_of
from pytest_agent_eval.model.responses import reasoning_item
from pytest_agent_eval.model.scripted import Step, Turn, working_directory
from pytest_agent_eval.model.speech import ApiSpeech, grep_command, shell_step
from pytest_agent_eval.model.sse import Reply, new_id, tool_use

# The CLI's own context, sent as user messages: not the question (nor is a subagent's end, which Codex tells so).
_CONTEXT_RE = re.compile(
    r"^\s*(?:<environment_context>|<user_instructions>|# AGENTS\.md instructions|<subagent_notification>)", re.S
)
_CWD_TAG_RE = re.compile(r"<cwd>([^<]+)</cwd>")
# Codex's own subagents (the ``multi_agent_v1`` namespace): ``spawn_agent`` is the policy's ``Task`` (its prompt the
# child's ``message``); a child's requests say so in their ``client_metadata``. The child runs on its own: the
# stand-in waits for it (``wait_agent``) before its next step, as a model that wants the child's answer does.
SUBAGENTS = "multi_agent_v1"
_SPAWN, _WAIT = "spawn_agent", "wait_agent"
_SUBAGENT_MARK = "x-openai-subagent"
_WAIT_MS = 600_000


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


def output_items(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The reply's blocks as Responses output items: thinking as a reasoning item, text as an assistant message, a
    call as a function_call. Each reasoning item carries its ``encrypted_content``: :func:`as_requested` leaves it
    out where the request did not include it, once the usage is counted."""
    items: list[dict[str, Any]] = []
    for block in _awaited(request, reply).blocks:
        if block.get("type") == "tool_use":
            items.append(_function_call(request, block))
        elif block.get("type") == "thinking":
            items.append(reasoning_item(request, block))
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


# The stand-in's decisions in Codex CLI's tools: every Responses request is Codex's.
SPEECH = ApiSpeech("responses", read_turn, output_items)
