"""The PreToolUse hook that denies Bash commands running the retrieval tool's CLI (the second layer, docs/sandbox.md).

Claude Code runs it as ``<python> -m pytest_agent_eval.agents.claude_code.hook --cli <the tool's CLI>`` with the hook
input on stdin (``{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": …}}``).
A command that runs the CLI gets ``hookSpecificOutput.permissionDecision: "deny"`` on stdout;
anything else, including input it cannot read, is allowed silently: a broken hook must not wedge
every tool call of the run, and the PATH shim plus the contamination counter still stand behind it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from pytest_agent_eval.tool import HOOK_DENY_REASON
from pytest_agent_eval.tool.cli_matcher import invokes_cli

SHELL_TOOLS = frozenset({"Bash"})


def decide(event: Any, cli: str) -> dict[str, Any] | None:
    """The deny output for a hook input that runs ``cli`` through Bash, else None (allow)."""
    if not isinstance(event, dict) or event.get("tool_name") not in SHELL_TOOLS:
        return None
    tool_input = event.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str) or not invokes_cli(command, cli):
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": HOOK_DENY_REASON.format(cli=cli),
        }
    }


def main(argv: list[str] | None = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_agent_eval.agents.claude_code.hook")
    parser.add_argument("--cli", required=True, help="the executable Bash must not run (the retrieval tool's CLI)")
    args = parser.parse_args(argv)
    try:
        event = json.loads(stdin.read())
    except (ValueError, UnicodeDecodeError):
        return 0
    output = decide(event, args.cli)
    if output is not None:
        stdout.write(json.dumps(output) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
