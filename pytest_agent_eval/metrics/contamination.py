"""The contamination gate: did the without-arm's agent SEE the retrieval tool's output? (docs/metrics/contamination.md)

The without-arm has no MCP server but still has a shell, and the workspace still carries the
index the with-arm needs. Matching commands cannot be complete (a base64 string piped to sh, a
name split across variables, a Python subprocess, a Task subagent, a Read of a file the agent
wrote the output into, sqlite3 on the index), so contamination is judged from what reached the
agent: every tool result of every thread (and every injected message, where Monitor events land)
is searched for the tool's output fingerprints (``RetrievalTool.fingerprints``), as it is and, failing that, with
what a transform can change undone (:mod:`.transforms`: ``| `` before each line, JSON escapes, colours). Any hit is a
leak, and one leak contaminates the arm. Results of the tool's own MCP tools are not leaks but
``mcp_calls``: the with-arm's variable under test, and in a without-arm a failure of their own (unless Claude
Code refused the call for want of the tool: that call reached nothing).

The command matcher stays as a fast first layer naming the calls that TRIED to run the CLI. A
call counts as blocked only when its result carries the agent's own denial (the tool's ``deny_marker``, which Claude
Code's PreToolUse hook and Codex's rules both give as their reason); a non-zero exit or ``command not found`` proves
nothing (``codegraph x; false`` fails after printing everything). The fingerprints are the tool's, whichever agent
ran the shell: a result is the command's own output as the agent's reader gives it (Codex's header cut off).
Reports word a block as the agent's records do (:attr:`Contamination.denial`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.metrics.transforms import normalised
from pytest_agent_eval.tool import Fingerprint, RetrievalTool
from pytest_agent_eval.tool.cli_matcher import invokes_cli
from pytest_agent_eval.transcript import Session, ToolCall, ToolResult, UserText

# The MCP server was still starting when the agent called it: Claude Code answers with this.
COLD_START_MARKER = "No such tool available"
# Where a leak reached the agent outside any tool result (Monitor events arrive as messages).
INJECTED = "(message)"
EXCERPT_CHARS = 160
_NOT_FOUND = re.compile(r"not found|No such file or directory", re.IGNORECASE)  # the shell's, npx's


@dataclass(frozen=True)
class CliCommand:
    """A call whose shell command the matcher reads as running the CLI."""

    call_id: str
    tool: str
    command: str
    blocked: bool  # the result carries the agent's own denial (its hook's, its rules')
    thread: str
    printed: bool = False  # not blocked, and it succeeded printing something other than "not found"

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "command": self.command,
            "blocked": self.blocked,
            "thread": self.thread,
            "printed": self.printed,
        }


@dataclass(frozen=True)
class Leak:
    """One tool result (or injected message) that carried the tool's output to the agent."""

    thread: str
    call_id: str | None  # None for an injected message, which answers no call
    tool: str  # the tool whose result it was (Bash, Read, Monitor, …), or INJECTED
    fingerprint: str  # the name of the fingerprint found
    excerpt: str  # the line it was found on, shortened

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "call_id": self.call_id,
            "tool": self.tool,
            "fingerprint": self.fingerprint,
            "excerpt": self.excerpt,
        }


@dataclass
class Contamination:
    cli: str
    commands: list[CliCommand] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    mcp_calls: list[str] = field(default_factory=list)  # ids of calls that reached the tool's own MCP tools
    cold_start_race: bool = False
    exposed_tools: list[str] = field(default_factory=list)
    denial: str = Session.denial  # how the agent's records word a proven block (a report's words, not a figure)

    @property
    def cli_calls(self) -> int:
        return len(self.commands)

    @property
    def cli_blocked(self) -> int:
        """CLI calls the agent's deny (its hook, its rules) provably refused."""
        return sum(c.blocked for c in self.commands)

    @property
    def printed(self) -> list[CliCommand]:
        """CLI calls that ran unblocked and printed output: no fingerprint may survive what a pipe made of it
        (``codegraph explore q | grep -o 'lib/[^ ]*'``), so what they showed cannot be cleared."""
        return [c for c in self.commands if c.printed]

    @property
    def contaminated(self) -> bool:
        """The tool's output reached the agent, or may have (a CLI call printed); an attempt that showed it nothing
        (denied by the agent's deny, or "command not found") leaves the arm clean."""
        return bool(self.leaks or self.printed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cli": self.cli,
            "cli_calls": self.cli_calls,
            "cli_blocked": self.cli_blocked,
            "commands": [c.to_dict() for c in self.commands],
            "leaks": [leak.to_dict() for leak in self.leaks],
            "mcp_calls": list(self.mcp_calls),
            "cold_start_race": self.cold_start_race,
            "exposed_tools": list(self.exposed_tools),
            "contaminated": self.contaminated,
        }


def contamination(session: Session, tool: RetrievalTool) -> Contamination:
    """Every shell call that ran ``tool.cli`` (blocked or not), every result carrying the tool's output."""
    report = Contamination(cli=tool.cli, exposed_tools=exposed_tools(session, tool), denial=session.denial)
    for call in session.calls:
        command = call.input.get("command")
        if isinstance(command, str) and invokes_cli(command, tool.cli):
            blocked = _denied(call, tool)
            printed = not blocked and _printed(call)
            report.commands.append(CliCommand(call.id, call.name, command, blocked, call.thread, printed))
    report.leaks = leaks(session, tool)
    report.mcp_calls = [call.id for call in session.calls if tool.owns(call.name) and not _refused(call)]
    # Claude Code's answer to a call of a tool it has not loaded yet is an error result: only those are read.
    report.cold_start_race = any(
        COLD_START_MARKER in i.text for i in session.timeline if isinstance(i, ToolResult) and i.is_error
    )
    return report


def _refused(call: ToolCall) -> bool:
    """Claude Code answered the call itself: it has no such tool (a without-arm's agent calling the tool it
    lacks, or a with-arm's before its server started). Such a call reached nothing."""
    return call.result is not None and call.result.is_error and COLD_START_MARKER in call.result.text


def leaks(session: Session, tool: RetrievalTool) -> list[Leak]:
    """Each tool result and injected message, in every thread, that carries one of the tool's fingerprints
    (results of the tool's own MCP tools aside)."""
    names = {call.id: call.name for call in session.calls}
    found: list[Leak] = []
    for item in session.timeline:
        if not isinstance(item, (ToolResult, UserText)):
            continue
        if isinstance(item, ToolResult) and tool.owns(names.get(item.call_id, "")):
            continue
        hit = scan(item.text, tool)
        if hit is None:
            continue
        fingerprint, excerpt = hit
        if isinstance(item, ToolResult):
            found.append(Leak(item.thread, item.call_id, names.get(item.call_id, "?"), fingerprint.name, excerpt))
        else:
            found.append(Leak(item.thread, None, INJECTED, fingerprint.name, excerpt))
    return found


def scan(text: str, tool: RetrievalTool) -> tuple[Fingerprint, str] | None:
    """The first of the tool's fingerprints in ``text`` and the line it is on: in the text as it is, else in the
    text with what a transform can change undone (:func:`~.transforms.normalised`)."""
    hit, hidden = tool.first_fingerprint_or_hidden(text)
    if hidden:
        text = normalised(text)
        hit = tool.first_fingerprint(text)
    if hit is None:
        return None
    fingerprint, match = hit
    return fingerprint, _excerpt(text, match.start())


def describe_leak(leak: dict[str, Any]) -> str:
    """``Bash call toolu_01 (thread main): explore heading — "**Exploration: …**"`` from a leak's dict."""
    call_id = leak.get("call_id")
    where = f"{leak.get('tool', '?')} call {call_id}" if call_id else "an injected message"
    return f'{where} (thread {leak.get("thread", "?")}): {leak.get("fingerprint", "?")} — "{leak.get("excerpt", "")}"'


def exposed_tools(session: Session, tool: RetrievalTool) -> list[str]:
    """The tool's names offered in ``system/init`` events, then its MCP servers as ``server:<name> (<status>)``."""
    names: list[str] = []
    offered: list | None = None  # the previous init's tools: every segment of a session repeats the same list
    for tools, _ in session.offers:
        if not isinstance(tools, list):
            continue
        if tools != offered:
            owned = [t for t in tools if isinstance(t, str) and tool.owns(t)]
            offered = tools
        names += owned
    for _, servers in session.offers:
        for server in servers if isinstance(servers, list) else []:
            if not isinstance(server, dict) or not isinstance(server.get("name"), str):
                continue
            name = server["name"]
            # A server counts when it is the tool's by name, or serves one of the tool's names.
            if tool.owns(name) or any(n.startswith(f"mcp__{name}__") for n in names):
                names.append(f"server:{name} ({server.get('status') or 'unknown'})")
    return list(dict.fromkeys(names))


def _denied(call: ToolCall, tool: RetrievalTool) -> bool:
    """Proof of a block is the agent's own denial in the result; an error status or a failed exit is not."""
    return call.result is not None and tool.deny_marker in call.result.text


def _printed(call: ToolCall) -> bool:
    """The call succeeded and printed something other than the shell's word that there is no such command (as
    in a sealed arm, where ``codegraph …; true`` prints that and succeeds)."""
    result = call.result
    return (
        result is not None and not result.is_error and bool(result.text.strip()) and not _NOT_FOUND.search(result.text)
    )


def _excerpt(text: str, at: int) -> str:
    """The line holding position ``at``, whitespace-trimmed and shortened."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : end if end >= 0 else len(text)].strip()
    return line if len(line) <= EXCERPT_CHARS else line[: EXCERPT_CHARS - 1] + "…"
