"""The contamination gate: did an arm reach the retrieval tool through Bash? (seed 002, seed 004)

The without-arm has no MCP server but still has Bash, and the repo still carries the index
the with-arm needs. An agent that runs the CLI turns the A/B into CLI-versus-MCP. A *blocked*
attempt is benign (no output entered the window); a call that *returned output* invalidates
the arm. Prevention (PATH shim + PreToolUse hook) can fail silently when the binary moves, so
this check reads every Bash command on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.shell import invokes_cli
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import Session, ToolCall, ToolResult

# The MCP server was still starting when the agent called it: Claude Code answers with this.
COLD_START_MARKER = "No such tool available"
# Claude Code's own wording for a PreToolUse denial, in case a transcript lacks is_error.
_HOOK_DENIAL_RE = re.compile(r"\bPreToolUse:\w+ (?:hook error|denied this tool)|Hook PreToolUse:\w+ denied")


@dataclass(frozen=True)
class CliCommand:
    command: str
    blocked: bool
    thread: str

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "blocked": self.blocked, "thread": self.thread}


@dataclass
class Contamination:
    cli: str
    commands: list[CliCommand] = field(default_factory=list)
    cli_blocked: int = 0
    cli_returned_output: int = 0
    cold_start_race: bool = False
    exposed_tools: list[str] = field(default_factory=list)

    @property
    def cli_calls(self) -> int:
        return len(self.commands)

    @property
    def contaminated(self) -> bool:
        """Only output that reached the window counts; a blocked attempt leaves the arm clean."""
        return self.cli_returned_output > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cli": self.cli,
            "cli_calls": self.cli_calls,
            "cli_blocked": self.cli_blocked,
            "cli_returned_output": self.cli_returned_output,
            "commands": [c.to_dict() for c in self.commands],
            "cold_start_race": self.cold_start_race,
            "exposed_tools": list(self.exposed_tools),
            "contaminated": self.contaminated,
        }


def contamination(session: Session, tool: RetrievalTool = CODEGRAPH) -> Contamination:
    """Every Bash call that ran ``tool.cli``, split into blocked and output-returning; what the arm exposed."""
    report = Contamination(cli=tool.cli, exposed_tools=exposed_tools(session, tool))
    for call in session.calls:
        command = call.input.get("command")
        if call.name != "Bash" or not isinstance(command, str) or not invokes_cli(command, tool.cli):
            continue
        blocked = _blocked(call, tool.cli)
        report.commands.append(CliCommand(command, blocked, call.thread))
        if blocked:
            report.cli_blocked += 1
        elif call.result is not None and call.result.text.strip():
            report.cli_returned_output += 1
    report.cold_start_race = any(isinstance(i, ToolResult) and COLD_START_MARKER in i.text for i in session.timeline)
    return report


def exposed_tools(session: Session, tool: RetrievalTool = CODEGRAPH) -> list[str]:
    """The tool's names offered in ``system/init`` events, then its MCP servers as ``server:<name> (<status>)``."""
    names: list[str] = []
    for init in session.inits:
        tools = init.get("tools")
        names += [t for t in tools if isinstance(t, str) and tool.owns(t)] if isinstance(tools, list) else []
    for init in session.inits:
        servers = init.get("mcp_servers")
        for server in servers if isinstance(servers, list) else []:
            if not isinstance(server, dict) or not isinstance(server.get("name"), str):
                continue
            name = server["name"]
            # A server counts when it is the tool's by name, or serves one of the tool's names.
            if tool.owns(name) or any(n.startswith(f"mcp__{name}__") for n in names):
                names.append(f"server:{name} ({server.get('status') or 'unknown'})")
    return list(dict.fromkeys(names))


def _blocked(call: ToolCall, cli: str) -> bool:
    """The attempt produced no CLI output: an error result, a hook denial, or the shell not finding it."""
    result = call.result
    if result is None:
        return False
    if result.is_error or _HOOK_DENIAL_RE.search(result.text):
        return True
    # `codegraph x; echo done` exits 0 on a shimmed PATH, yet codegraph itself never ran.
    return re.search(rf"(?:^|[\s:]){re.escape(cli)}: (?:command )?not found", result.text) is not None
