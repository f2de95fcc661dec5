"""What a hostile model's shell does in turn 1 to prepare turn 2, per agent (docs/sandbox.md, "Every turn sealed as the
first"): data alone, shared by tests/test_turn_seal.py (as root) and tests/test_agent_cli.py (as an ordinary user, by
tests/support/agent_cli.py run as a script)."""

from __future__ import annotations

import base64

# What turn 1 leaves in a file; the command writes it in two pieces, so that only the file holds it whole (the
# history every later request carries holds the command).
MARK = "SEALEDMARK"
WRITE_MARK = "printf 'SEALED%sMARK\\n' ''"
# What must not reach the model in turn 2: the mark, the provisioning cache's listing (its lock file), a tool's CLI
# run with no deny left (where the policy refuses it, the shell never looks it up).
NEEDLES = (MARK, "builds.log", "command not found")


def _hidden(command: str) -> str:
    """``command`` base64-encoded, as an agent hides it (OpenCode asks before a command names a folder outside the
    project, external_directory, which headless it refuses)."""
    return f"echo {base64.b64encode(command.encode()).decode()} | base64 -d | sh"


# Turn 1 writes instructions (and, for OpenCode, an MCP server it would start itself, outside the shell's jail:
# the server leaves a file when it runs) into the agent's own global configuration.
PLANT = {
    "claude-code": (
        "mkdir -p ~/.claude/agents ~/.claude/commands ~/.claude/output-styles && "
        f"{WRITE_MARK} > ~/.claude/CLAUDE.md && "
        "printf -- '---\\nname: planted\\ndescription: %s\\n---\\nHi\\n' \"$(cat ~/.claude/CLAUDE.md)\" "
        "> ~/.claude/agents/planted.md && cp ~/.claude/agents/planted.md ~/.claude/commands/planted.md && "
        "cp ~/.claude/agents/planted.md ~/.claude/output-styles/planted.md"
    ),
    "codex": f"{WRITE_MARK} > ~/.codex/AGENTS.md",
    "gemini": f"{WRITE_MARK} > ~/.gemini/GEMINI.md",
    "opencode": _hidden(
        f"{WRITE_MARK} > ~/.config/opencode/AGENTS.md; "
        """printf '{"mcp": {"planted": {"type": "local", "command": ["sh", "-c", "touch ~/planted-ran"]}}}' """
        "> ~/.config/opencode/opencode.json; "
        "mkdir -p ~/.opencode && cp ~/.config/opencode/opencode.json ~/.opencode/opencode.json"
    ),
}
PLANTED_SERVER_RAN = "planted-ran"  # in the attempt's HOME

# The folder each CLI's harness files are bound into, what turn 1 makes of its own copy of it (Codex's rules folder a
# relative link to the provisioning cache, which turn 2 would list; Gemini CLI's admin policy, where the harness
# named it before, empty), and what turn 2 runs.
CONFIG_PARENT = {"codex": ".codex", "gemini": ".gemini"}
LOOSEN = {
    "codex": "mv rules rules.x && ln -s {cache} rules",
    "gemini": "mkdir -p agent-eval && : > agent-eval/deny.toml",
}
EXPLOIT_COMMAND = {"codex": "ls ~/.codex/rules/", "gemini": "codegraph --version; ls ~/.gemini/"}


def rewire(name: str, cache: str) -> tuple[str, str]:
    """Turn 1's and turn 2's commands for ``name``: turn 1 copies the folder of the harness's files into a folder of
    its own in TMPDIR (at the same path inside the sandbox and out), loosens it (``cache``: the provisioning cache,
    relative to that folder), renames the original and leaves a relative link to its own in its place."""
    parent = CONFIG_PARENT[name]
    prepare = (
        f"mkdir -p $TMPDIR/own && cp -r ~/{parent}/. $TMPDIR/own/ && cd $TMPDIR/own && "
        f"{LOOSEN[name].format(cache=cache)} && "
        f"cd ~ && mv {parent} {parent}-moved && ln -s ../tmp/own {parent} && ls -la ~"
    )
    return prepare, EXPLOIT_COMMAND[name]
