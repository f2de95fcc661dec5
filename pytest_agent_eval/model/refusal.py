"""What the model boundary refuses: a request that would have the API run tools on its own servers (the Messages API
here, the Responses API in :func:`responses_refusal`, the Gemini API in :func:`gemini_refusal`).

Claude Code defines its tools itself (a custom tool has no ``type``, or ``"custom"``) and runs them on the
agent's machine, where the arm's seal and the hook apply. A server tool (``web_search_20250305``, ``web_fetch_*``,
``code_execution_*``, ``computer_*``, ``bash_*``, ``text_editor_*``…), an ``mcp_servers`` list or a ``container``
would run on the API's side, around ``--disallowedTools`` and the sandbox: an agent crafting its own request to the
forwarder could fetch the web or reach the tool's site that way.
"""

from __future__ import annotations

from typing import Any

CUSTOM_TOOL_TYPES = (None, "custom")
_SERVER_SIDE_FIELDS = ("mcp_servers", "container")


def refusal(body: Any) -> str | None:
    """Why a Messages request (or a count of one) is refused, or None when it carries only custom tools."""
    if not isinstance(body, dict):
        return None
    server_tools = [
        f"{tool.get('name') or '?'} ({tool.get('type')})"
        for tool in _listed(body.get("tools"))
        if tool.get("type") not in CUSTOM_TOOL_TYPES
    ]
    fields = [name for name in _SERVER_SIDE_FIELDS if body.get(name)]
    return _why(server_tools, "tools", fields, "run them on its side")


def _listed(tools: Any) -> list[dict[str, Any]]:
    """A request's tools that are objects (anything else offers nothing)."""
    return [tool for tool in (tools if isinstance(tools, list) else []) if isinstance(tool, dict)]


def _why(server_tools: list[str], offered: str, fields: list[str], done_there: str) -> str | None:
    """The refusal of a request offering ``server_tools`` or naming ``fields`` of the API's side; None without."""
    if server_tools:
        return f"server-side tool(s) {', '.join(server_tools)}: only {offered} the agent runs itself may be offered"
    if fields:
        return f"{', '.join(fields)} in the request: the API would {done_there}"
    return None


# Responses API tools the agent runs itself: functions, Codex's MCP namespaces, free-form (custom) tools, the local
# shell, and a tool search Codex runs on its side (``execution: "client"``). Any other type is hosted: web or file
# search, code interpreter, computer use, a remote MCP server, image generation run on the API's servers.
CLIENT_TOOL_TYPES = frozenset({"function", "namespace", "custom", "local_shell"})
_CLIENT_EXECUTED = ("tool_search",)


def responses_refusal(body: Any) -> str | None:
    """Why a Responses request is refused (a hosted tool: the API would run it), or None when its tools are all
    ones the agent runs itself."""
    if not isinstance(body, dict):
        return None
    hosted = [
        f"{tool.get('name') or tool.get('server_label') or '?'} ({tool.get('type')})"
        for tool in _listed(body.get("tools"))
        if tool.get("type") not in CLIENT_TOOL_TYPES
        and not (tool.get("type") in _CLIENT_EXECUTED and tool.get("execution") == "client")
    ]
    if hosted:
        return f"hosted tool(s) {', '.join(hosted)}: only tools the agent runs itself may be offered"
    return None


# Gemini API tools the agent runs itself: function declarations. Any other kind of tool is run by the API: Google
# Search (``googleSearch``, ``googleSearchRetrieval``), URL context (``urlContext``: Gemini CLI's ``web_fetch``),
# code execution, file search, retrieval, maps, computer use, an enterprise web search, remote MCP servers.
GEMINI_CLIENT_TOOL_KEYS = frozenset({"functionDeclarations"})
# Request fields that would have the API bring in content of its own side: a cached content (another prompt, kept
# upstream by name).
_GEMINI_SERVER_SIDE_FIELDS = ("cachedContent",)


def gemini_refusal(body: Any) -> str | None:
    """Why a Gemini API request (``generateContent``, ``streamGenerateContent``, or a ``countTokens`` of one) is
    refused: a tool the API would run, or a cached content of its side; None when it offers only functions."""
    if not isinstance(body, dict):
        return None
    inner = body.get("generateContentRequest")  # countTokens may wrap the whole request
    for request in (body, inner) if isinstance(inner, dict) else (body,):
        hosted = sorted({key for tool in _listed(request.get("tools")) for key in tool} - GEMINI_CLIENT_TOOL_KEYS)
        fields = [name for name in _GEMINI_SERVER_SIDE_FIELDS if request.get(name)]
        reason = _why(hosted, "functions", fields, "bring in content of its own side")
        if reason is not None:
            return reason
    return None
