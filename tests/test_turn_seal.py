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

import json
import os
from pathlib import Path

import pytest
from support.agent_cli import two_turns
from support.e2e import RealTools
from support.turn_attacks import CONFIG_PARENT, MARK, NEEDLES, PLANT, PLANTED_SERVER_RAN, rewire

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.provision import Provisioned

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

AGENTS = {"claude-code": CLAUDE_CODE, "codex": CODEX, "gemini": GEMINI, "opencode": OPENCODE}


@pytest.fixture(scope="module")
def builds(real_tools: RealTools) -> dict[str, Provisioned]:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    return {name: agent.provision(real_tools.cache) for name, agent in AGENTS.items()}


@pytest.mark.parametrize("name", sorted(CONFIG_PARENT))
def test_a_turn_that_rewires_the_folder_of_the_harnesss_files_fails_the_next_naming_it(
    name: str, builds: dict[str, Provisioned], real_tools: RealTools, tmp_path: Path
) -> None:
    """Turn 1 renames the folder the harness's files are bound in and leaves a relative link in its place, to a
    folder of its own beside HOME (in TMPDIR, at the same path inside the sandbox and out) holding its own copies of
    the files, loosened: Codex's rules folder a relative link to the provisioning cache, Gemini CLI's admin policy
    empty. Today's bubblewrap would resolve the next turn's binds through that link (measured before the change:
    Codex's turn 2 listed the cache at ``~/.codex/rules``, Gemini CLI's ran the tool's CLI undenied). Turn 2 must not
    start; the run fails naming the link, and nothing of it reaches the model."""
    parent, out = CONFIG_PARENT[name], tmp_path / "out"
    prepare, exploit = rewire(name, os.path.relpath(real_tools.cache, out / "without" / "tmp" / "own"))
    ran = two_turns(AGENTS[name], out, real_tools.express, builds[name], real_tools.cache, prepare, exploit)
    assert ran.error is not None and "the sandbox cannot be built as the harness made it" in ran.error, ran.error
    home = out / "without" / "home"
    assert f"{home / parent}: a link on the way" in ran.error, ran.error
    # turn 1 ran (it left the link); turn 2 never did, and nothing of it reached the model
    assert (home / parent).is_symlink() and (home / f"{parent}-moved").is_dir()
    assert [s.name for s in sorted((out / "run-without").glob("run-without-1*.jsonl"))] == ["run-without-1.jsonl"]
    assert [n for n in NEEDLES if n in ran.received] == []


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_what_a_turn_writes_into_the_agents_global_config_does_not_reach_the_next(
    name: str, builds: dict[str, Provisioned], real_tools: RealTools, tmp_path: Path
) -> None:
    """Turn 1 writes instructions into the agent's own global configuration (Claude Code's ``~/.claude/CLAUDE.md``
    and agents, Codex's ``~/.codex/AGENTS.md``, Gemini CLI's ``~/.gemini/GEMINI.md``, OpenCode's
    ``~/.config/opencode/AGENTS.md``, and for OpenCode an MCP server in its global config files). Each is a read-only
    empty file or folder of the harness's: the write is refused, turn 2 runs as the first did, and none of its
    requests carries the instructions; OpenCode started no planted MCP server. (Before the change Codex's, Gemini
    CLI's and OpenCode's writes went through; Claude Code's too, though 2.1.332 read none of them.)"""
    out = tmp_path / "out"
    ran = two_turns(AGENTS[name], out, real_tools.express, builds[name], real_tools.cache, PLANT[name], "echo second")
    assert ran.error is None and ran.arm is not None, ran.error
    assert len(ran.arm.run.segments) == 2
    planted, second = [c.result for c in ran.arm.session.calls if c.name == "Bash"]
    assert planted is not None and "Read-only file system" in planted.text, planted
    assert second is not None and "second" in second.text  # turn 2 ran
    assert MARK not in json.dumps(ran.arm.requests) and MARK not in ran.received
    assert not (ran.arm.workspace.home / PLANTED_SERVER_RAN).exists()
