"""Gemini CLI's side of the stand-in: its Gemini API requests read for the policy, the policy's reply spoken in its
tools (the API's own side, its thinking, usage and stream: :mod:`pytest_agent_eval.model.gemini`).

Gemini CLI sends the whole history each time: ``contents`` holds ``user`` and ``model`` turns whose ``parts`` are
text, the model's ``functionCall{name, args, id}`` and each call's ``functionResponse{id, name, response{output |
error}}``; ``systemInstruction`` the CLI's prompt; ``tools[].functionDeclarations`` the tools (the shell is
``run_shell_command{command}``, an MCP server's tool ``mcp_NAME_tool``).

The scripted policy decides in the house's common tool vocabulary (``Read``, ``Grep``, ``Bash``,
``mcp__NAME__tool``): a request is read into that vocabulary — the shell offers Read, Grep and Bash, an earlier
``run_shell_command`` is the step its command is (:func:`~pytest_agent_eval.model.speech.shell_step`),
``mcp_NAME_tool`` is ``mcp__NAME__tool`` (NAME up to the first ``_``: the harness's server names have none) — and the
reply is rendered back: a Read is ``cat -n FILE``, a Grep a ``grep -rliE``, an explore its ``mcp_`` function.

Gemini CLI's subagents: with ``delegate`` the policy hands a question to :data:`SUBAGENT` through ``invoke_agent``
(``agent_name`` added here); a request offering ``complete_task`` is that subagent's, whose own tools (``grep_search``,
``read_file``, no shell) serve Grep and Read, and whose answer goes out as a ``complete_task`` call, its text
filling the tool's report schema (:func:`filled`).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pytest_agent_eval.agents.gemini.transcript import (
    COMPLETE_TOOL,
    DELEGATE_TOOL,
    MCP_PREFIX,
    NATIVE_NAMES,
    SHELL_TOOL,
    common_call,
    common_name,
    response_output,
    shell_output,
    unwrapped,
)
from pytest_agent_eval.model.gemini import with_thinking
from pytest_agent_eval.model.scripted import Step, Turn
from pytest_agent_eval.model.speech import ApiSpeech, grep_command, shell_step
from pytest_agent_eval.model.sse import Reply, new_id
from pytest_agent_eval.model.usage import declared_hidden
from pytest_agent_eval.transcript import DELEGATION_TOOLS

# Where the CLI's session context names the working directory (the first of the workspace's directories).
_CWD_RE = re.compile(r"Workspace Directories:\**\n\s*- (/[^\n]+)")
# The subagent the policy hands a question to (Gemini CLI 0.61.0's built-in investigator, read-only tools).
SUBAGENT = "codebase_investigator"
# A subagent's own tools, offered where the shell is not: the search and the read in the common vocabulary.
NATIVE_TOOLS = {name: common for name, common in NATIVE_NAMES.items() if common in ("Grep", "Read")}
# A grep_search result names each file it matched in as "File: PATH".
_GREP_FILE_RE = re.compile(r"^File: (.+)$", re.M)
# The CLI's own context, sent as a user part before the question: not the question.
_CONTEXT_RE = re.compile(r"^\s*(?:<session_context>|This is the Gemini CLI\.|<loaded_context>)", re.S)


def gemini_name(common: str) -> str:
    """The inverse of :func:`common_name`."""
    if common.startswith("mcp__") and "__" in common[5:]:
        server, tool = common[5:].split("__", 1)
        return f"{MCP_PREFIX}{server}_{tool}"
    return common


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts or [] if isinstance(p, dict)]


def workspace_directory(text: str) -> str:
    """The working directory the CLI's session context names ('' when ``text`` names none)."""
    found = _CWD_RE.search(text)
    return found.group(1).strip() if found else ""


def _offered(request: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Common name → (name as offered, the tool in Messages form: name and input_schema)."""
    offered: dict[str, tuple[str, dict[str, Any]]] = {}
    tools = [tool for group in request.get("tools") or []
             for tool in (group.get("functionDeclarations") if isinstance(group, dict) else None) or []
             if isinstance(tool, dict) and isinstance(tool.get("name"), str)]  # fmt: skip
    shell = any(tool["name"] == SHELL_TOOL for tool in tools)
    for tool in tools:
        if tool["name"] == SHELL_TOOL:
            for common in ("Read", "Grep", "Bash"):
                offered[common] = (SHELL_TOOL, {"name": common})
            continue
        if tool["name"] in NATIVE_TOOLS and not shell:  # a subagent's: searches and reads without a shell
            offered[NATIVE_TOOLS[tool["name"]]] = (tool["name"], {"name": NATIVE_TOOLS[tool["name"]]})
            continue
        common = common_name(tool["name"])
        schema = tool.get("parametersJsonSchema") or tool.get("parameters") or {}
        offered[common] = (tool["name"], {"name": common, "input_schema": schema})
    return offered


def _step(call: dict[str, Any]) -> Step:
    """A functionCall as the step it is in the common vocabulary."""
    if call.get("name") == SHELL_TOOL:
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        return shell_step(str(args.get("command") or ""))
    return Step(*common_call(call))


def _result(name: str, text: str) -> str:
    """What a call's output says to the policy: a shell's output inside its wrapping, a native search's files one
    a line (as a shell's ``grep -l`` lists them)."""
    if name == "grep_search":
        return "\n".join(_GREP_FILE_RE.findall(unwrapped(text)))
    return shell_output(text)[0] if name == SHELL_TOOL else unwrapped(text)


def read_turn(request: dict[str, Any]) -> Turn:
    """The conversation of a Gemini request as the policy sees it (see the module docstring)."""
    contents = [c for c in request.get("contents") or [] if isinstance(c, dict)]
    start, question, cwd = 0, "", ""
    for index, content in enumerate(contents):
        if content.get("role") != "user":
            continue
        for part in _parts(content):
            text = part.get("text")
            if not isinstance(text, str):
                continue
            cwd = workspace_directory(text) or cwd
            if text.strip() and not _CONTEXT_RE.match(text):
                start, question = index, text.strip()
    steps: dict[str, Step] = {}
    for content in contents[start:]:
        for part in _parts(content):
            call, response = part.get("functionCall"), part.get("functionResponse")
            if isinstance(call, dict):
                steps[str(call.get("id") or call.get("name"))] = _step(call)
            elif isinstance(response, dict) and str(response.get("id") or response.get("name")) in steps:
                step = steps[str(response.get("id") or response.get("name"))]
                text, step.is_error = response_output(response.get("response"))
                step.result = _result(str(response.get("name") or ""), text)
    offered = _offered(request)
    tools = {common: schema for common, (_, schema) in offered.items()}
    own = [step for step in steps.values() if step.name not in DELEGATION_TOOLS]
    delegated = [step for step in steps.values() if step.name in DELEGATION_TOOLS]
    return Turn(question, own, cwd, tools, subagent=COMPLETE_TOOL in offered, delegated=delegated)


def _function_call(request: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    name, tool_input = block["name"], block.get("input") or {}
    offered_name = _offered(request).get(name, (gemini_name(name), {}))[0]
    if offered_name == DELEGATE_TOOL:
        tool_input = {"agent_name": SUBAGENT, **tool_input}
    elif offered_name == "grep_search":
        tool_input = {"pattern": str(tool_input.get("pattern") or "")}
    elif offered_name == "read_file":
        tool_input = {"file_path": str(tool_input.get("file_path") or "")}
    elif offered_name == SHELL_TOOL:
        if name == "Read":
            tool_input = {"command": f"cat -n {shlex.quote(str(tool_input.get('file_path')))}"}
        elif name == "Grep":
            tool_input = {"command": grep_command(str(tool_input.get("pattern") or ""))}
        else:
            tool_input = {"command": str(tool_input.get("command") or "")}
    return {"functionCall": {"id": block.get("id") or new_id("call"), "name": offered_name, "args": tool_input}}


def reply_parts(request: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The reply's blocks as Gemini parts: text as text, a call as a functionCall, and its thinking as the API renders
    it (:func:`with_thinking`)."""
    parts: list[dict[str, Any]] = []
    thoughts, hidden = [], 0
    complete = _offered(request).get(COMPLETE_TOOL)
    if complete and not any(block.get("type") == "tool_use" for block in reply.blocks):
        # a subagent ends its run by calling complete_task, its report (the text) filling the args' schema
        text = "\n".join(str(b.get("text") or "") for b in reply.blocks if b.get("type") == "text")
        reply = Reply([block for block in reply.blocks if block.get("type") == "thinking"]
                      + [{"type": "tool_use", "id": new_id("call"), "name": COMPLETE_TOOL,
                          "input": filled(complete[1].get("input_schema") or {}, text)}])  # fmt: skip
    for block in reply.blocks:
        if block.get("type") == "tool_use":
            parts.append(_function_call(request, block))
        elif block.get("type") == "text":
            parts.append({"text": block.get("text") or ""})
        elif block.get("type") == "thinking":
            thoughts.append(str(block.get("thinking") or ""))
            hidden += declared_hidden(block)
    return with_thinking(request, parts, "\n".join(t for t in thoughts if t), hidden) if thoughts else parts


def filled(schema: dict[str, Any], text: str) -> Any:
    """A value of the JSON schema ``schema`` saying ``text``: its strings ``text``, its arrays empty, its objects
    their required properties filled."""
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: filled(properties.get(name) or {}, text) for name in schema.get("required") or properties}
    if kind == "array":
        return []
    return {"boolean": True, "number": 0, "integer": 0}.get(str(kind), text)


# The stand-in's decisions in Gemini CLI's tools: every Gemini API request is Gemini CLI's.
SPEECH = ApiSpeech("gemini", read_turn, reply_parts)
