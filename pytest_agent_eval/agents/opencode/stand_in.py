"""OpenCode's side of the Messages stand-in: reading its requests for the policy, rendering the policy's reply.

OpenCode speaks the Messages API, but in its own tools: the shell is ``bash{command, description}`` (besides its
``read``, ``grep``, ``glob``…), and an MCP server ``NAME``'s tools are ``NAME_tool``. The scripted policy decides in
the house's common vocabulary (``Read``, ``Grep``, ``Bash``, ``mcp__NAME__tool``), so, as for Codex
(``agents/codex/stand_in.py``), a request is read into that vocabulary — the shell offers Read, Grep and Bash, an
earlier ``bash`` call is the step its command is (model/speech.py, shell_step), the explore tool ``NAME_<explore>`` is
``mcp__NAME__<explore>``, the question is read without the quotes OpenCode put it in — and the reply is rendered
back: a Read is ``cat -n FILE``, a Grep a ``grep -rli``, both through ``bash``. OpenCode's request for a session
title offers no tools: the policy answers it with text.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from pytest_agent_eval.agents.opencode.transcript import TASK_TOOL
from pytest_agent_eval.model.scripted import Turn
from pytest_agent_eval.model.speech import grep_command, shell_step
from pytest_agent_eval.model.sse import Reply

SHELL_TOOL = "bash"  # OpenCode's shell: bash{command, description}
_COMMON_SHELL = ("Read", "Grep", "Bash")


def is_opencode_request(request: dict[str, Any]) -> bool:
    """OpenCode's request: its shell tool (``bash``, taking a ``command``) is offered."""
    for tool in request.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") == SHELL_TOOL:
            return "command" in ((tool.get("input_schema") or {}).get("properties") or {})
    return False


def _mcp_names(request: dict[str, Any], explore: str) -> dict[str, str]:
    """Common name → OpenCode's, for the explore tool an MCP server offers (``NAME_<explore>``)."""
    names = {}
    for tool in request.get("tools") or []:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name.endswith("_" + explore) and len(name) > len(explore) + 1:
            names[f"mcp__{name[: -len(explore) - 1]}__{explore}"] = name
    return names


def read_turn(request: dict[str, Any], explore: str) -> Turn:
    """The conversation of an OpenCode request as the policy sees it (see the module docstring)."""
    turn = Turn.from_request(request)
    common = {offered: name for name, offered in _mcp_names(request, explore).items()}
    steps, delegated = [], list(turn.delegated)
    for step in turn.steps:
        if step.name == TASK_TOOL:
            delegated.append(replace(step, name="Task"))
        elif step.name == SHELL_TOOL:
            shell = shell_step(str(step.input.get("command") or ""))
            steps.append(replace(shell, result=step.result, is_error=step.is_error))
        else:
            steps.append(replace(step, name=common.get(step.name, step.name)))
    common[TASK_TOOL] = "Task"
    tools = {common.get(name, name): {**tool, "name": common.get(name, name)} for name, tool in turn.tools.items()}
    if SHELL_TOOL in turn.tools:
        tools.update({name: {"name": name} for name in _COMMON_SHELL})
    return replace(turn, question=unquoted(turn.question), steps=steps, tools=tools, delegated=delegated)


def unquoted(question: str) -> str:
    """The question OpenCode sent in double quotes (a command-line word holding a space, its quotes escaped), as
    it was asked."""
    if len(question) > 1 and question[0] == question[-1] == '"':
        return question[1:-1].replace('\\"', '"')
    return question


def render(request: dict[str, Any], reply: Reply, explore: str) -> Reply:
    """The policy's reply in OpenCode's tools."""
    names = _mcp_names(request, explore)
    blocks = []
    for block in reply.blocks:
        if block.get("type") != "tool_use":
            blocks.append(block)
            continue
        name, tool_input = block["name"], block.get("input") or {}
        if name == "Read":
            tool_input = {"command": f"cat -n {shlex.quote(str(tool_input.get('file_path')))}",
                          "description": "Read the file"}  # fmt: skip
        elif name == "Grep":
            tool_input = {"command": grep_command(str(tool_input.get("pattern") or "")),
                          "description": "Find the files that mention it"}  # fmt: skip
        elif name == "Bash":
            tool_input = {"command": str(tool_input.get("command") or ""),
                          "description": str(tool_input.get("description") or "Run a command")}  # fmt: skip
        elif name == "Task":  # OpenCode's agent types are lower case: its search subagent is ``explore``
            tool_input = {**tool_input, "subagent_type": str(tool_input.get("subagent_type") or "general").lower()}
        offered = SHELL_TOOL if name in _COMMON_SHELL else TASK_TOOL if name == "Task" else names.get(name, name)
        blocks.append({**block, "name": offered, "input": tool_input})
    return replace(reply, blocks=blocks)


class OpenCodeSpeech:
    """The stand-in's decisions in OpenCode's tools (:class:`~pytest_agent_eval.model.speech.Speech`): a Messages
    request offering its shell (:func:`is_opencode_request`); its MCP names are read with the tool's explore tool."""

    api = "messages"

    def speaks(self, request: dict[str, Any]) -> bool:
        return is_opencode_request(request)

    def read_turn(self, request: dict[str, Any], explore: str | None) -> Turn:
        return read_turn(request, str(explore))

    def render(self, request: dict[str, Any], reply: Reply, explore: str | None) -> Reply:
        return render(request, reply, str(explore))


SPEECH = OpenCodeSpeech()
