"""Every turn sealed as the first, through the REAL CLIs (Codex CLI, Gemini CLI, OpenCode) in the harness's sandbox:
a hostile stand-in model prepares something in turn 1 from the agent's shell and exploits it in turn 2
(docs/sandbox.md, "Every turn sealed as the first").

- The harness's files bound by a path inside HOME: turn 1 renames their parent folder and leaves a relative link in
  its place, to a folder of its own whose config is loosened and whose rules folder is a relative link to the
  provisioning cache. Turn 2 must not start: the item fails naming the link.
- The agent's own global configuration folders: turn 1 writes instructions (and, for OpenCode, an MCP server)
  there. They are read-only, so the write is refused, and turn 2's requests carry none of it.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.agent_cli import run_arm
from support.e2e import RealTools

from pytest_agent_eval.agents.base import CodingAgent
from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.drivers import AgentInfraError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.model import ScriptedBackend
from pytest_agent_eval.model.scripted import Turn
from pytest_agent_eval.model.sse import Reply, tool_use

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PREPARE, EXPLOIT = "Turn one: prepare.", "Turn two: go on."
AGENTS = {"claude-code": CLAUDE_CODE, "codex": CODEX, "gemini": GEMINI, "opencode": OPENCODE}
# What turn 1 leaves in a file; the command writes it in two pieces, so that only the file holds it whole (the
# history every later request carries holds the command).
MARK = "SEALEDMARK"
WRITE_MARK = "printf 'SEALED%sMARK\\n' ''"
# The folder each CLI's harness files are bound into (point 1), and the global configuration each reads (point 2).
CONFIG_PARENT = {"codex": ".codex", "gemini": ".gemini"}
PLANT = {
    "claude-code": (
        f"mkdir -p ~/.claude/agents ~/.claude/commands ~/.claude/output-styles && {WRITE_MARK} > ~/.claude/CLAUDE.md && "
        f"printf -- '---\\nname: planted\\ndescription: %s\\n---\\nHi\\n' \"$(cat ~/.claude/CLAUDE.md)\" "
        "> ~/.claude/agents/planted.md && cp ~/.claude/agents/planted.md ~/.claude/commands/planted.md && "
        "cp ~/.claude/agents/planted.md ~/.claude/output-styles/planted.md"
    ),
    "codex": f"{WRITE_MARK} > ~/.codex/AGENTS.md",
    "gemini": f"{WRITE_MARK} > ~/.gemini/GEMINI.md",
    # OpenCode asks before a command names a folder outside the project (external_directory, refused when run
    # headless): the command travels base64-encoded, as an agent would hide it
    "opencode": "echo {} | base64 -d | sh".format(
        base64.b64encode(
            (
                f"{WRITE_MARK} > ~/.config/opencode/AGENTS.md; "
                # an MCP server OpenCode would start itself, outside the shell's jail: it leaves a file when it runs
                """printf '{"mcp": {"planted": {"type": "local", "command": ["sh", "-c", "touch ~/planted-ran"]}}}' """
                "> ~/.config/opencode/opencode.json; "
                "mkdir -p ~/.opencode && cp ~/.config/opencode/opencode.json ~/.opencode/opencode.json"
            ).encode()
        ).decode()
    ),
}


# What turn 1 makes of its own copy of the folder: Codex's rules folder a relative link to the provisioning cache
# (turn 2 would list it), Gemini CLI's admin policy (the deny, where the harness named it before) empty.
LOOSEN = {
    "codex": "mv rules rules.x && ln -s {cache} rules",
    "gemini": "mkdir -p agent-eval && : > agent-eval/deny.toml",
}
EXPLOIT_COMMAND = {"codex": "ls ~/.codex/rules/", "gemini": "codegraph --version; ls ~/.gemini/"}


@dataclass
class TwoTurns(ScriptedBackend):
    """A hostile model: one shell call per question (``prepare`` for the first, ``exploit`` for the second), then
    an answer quoting what the call returned."""

    prepare: str = ""
    exploit: str = ""

    def decide(self, turn: Turn) -> Reply:
        if not turn.tools or not turn.question:
            return Reply.text("OK.")
        if not turn.steps:
            command = self.prepare if PREPARE in turn.question else self.exploit
            return Reply([tool_use("Bash", {"command": command})])
        return Reply.text(f"Done: {turn.steps[-1].result}")


@pytest.fixture(scope="module")
def builds(real_tools: RealTools) -> dict[str, Provisioned]:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    return {name: agent.provision(real_tools.cache) for name, agent in AGENTS.items()}


def _two_turns(agent: CodingAgent, build: Provisioned, tools: RealTools, folder: Path, model: TwoTurns):
    return run_arm(agent, folder, tools.express, build, tools.cache, (PREPARE, EXPLOIT), model=model)


@pytest.mark.parametrize("name", sorted(CONFIG_PARENT))
def test_a_turn_that_rewires_the_folder_of_the_harnesss_files_fails_the_next_naming_it(
    name: str, builds: dict[str, Provisioned], real_tools: RealTools, tmp_path: Path
) -> None:
    """Turn 1 renames the folder the harness's files are bound in and leaves a relative link in its place, to a
    folder of its own beside HOME (in TMPDIR, at the same path inside the sandbox and out) holding its own copies of
    the files and, where a folder is bound, a relative link to the provisioning cache. Today's bubblewrap would
    resolve the next turn's binds through that link: the agent's own config, and the cache at the rules' place.
    Turn 2 must not start; the run fails naming the link, and nothing of the cache reaches the model."""
    parent = CONFIG_PARENT[name]
    cache = os.path.relpath(real_tools.cache, tmp_path / "out" / "without" / "tmp" / "own")
    prepare = (
        f"mkdir -p $TMPDIR/own && cp -r ~/{parent}/. $TMPDIR/own/ && cd $TMPDIR/own && "
        f"{LOOSEN[name].format(cache=cache)} && "
        f"cd ~ && mv {parent} {parent}-moved && ln -s ../tmp/own {parent} && ls -la ~"
    )
    exploit = EXPLOIT_COMMAND[name]
    model = TwoTurns(prepare=prepare, exploit=exploit)
    with pytest.raises(AgentInfraError) as failed:
        _two_turns(AGENTS[name], builds[name], real_tools, tmp_path / "out", model)
    said = str(failed.value)
    assert "the sandbox cannot be built as the harness made it" in said, said
    assert f"{tmp_path / 'out' / 'without' / 'home' / parent}: a link on the way" in said, said
    # turn 1 ran (its listing shows the link it left); turn 2 never did
    home = tmp_path / "out" / "without" / "home"
    assert (home / parent).is_symlink() and (home / f"{parent}-moved").is_dir()
    segments = sorted((tmp_path / "out" / "run-without").glob("run-without-1*.jsonl"))
    assert [s.name for s in segments] == ["run-without-1.jsonl"], segments
    # today's code ran it: Codex's listed the cache (builds.log, codegraph, indexed…) at ~/.codex/rules, Gemini
    # CLI's ran the tool's CLI with no deny left (command not found, where the policy refuses it)
    received = (tmp_path / "out" / "requests-without.jsonl").read_text(encoding="utf-8")
    assert "builds.log" not in received and "command not found" not in received


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_what_a_turn_writes_into_the_agents_global_config_does_not_reach_the_next(
    name: str, builds: dict[str, Provisioned], real_tools: RealTools, tmp_path: Path
) -> None:
    """Turn 1 writes instructions into the agent's own global configuration (Codex's ``~/.codex/AGENTS.md``,
    Gemini CLI's ``~/.gemini/GEMINI.md``, OpenCode's ``~/.config/opencode/AGENTS.md``, and for OpenCode an MCP
    server in its global config files). Each is a read-only empty file or folder of the harness's: the write is
    refused, turn 2 runs as the first did, and none of its requests carries the instructions; OpenCode started no
    planted MCP server."""
    exploit = "echo second"
    model = TwoTurns(prepare=PLANT[name], exploit=exploit)
    arm = _two_turns(AGENTS[name], builds[name], real_tools, tmp_path / "out", model)
    assert len(arm.run.segments) == 2
    planted, second = [c for c in arm.session.calls if c.name == "Bash"]
    assert planted.result is not None and "Read-only file system" in planted.result.text, planted.result
    requests = json.dumps(arm.requests)
    assert MARK not in requests
    assert not (arm.workspace.home / "planted-ran").exists()
    assert second.result is not None and "second" in second.result.text  # turn 2 ran
