"""What each CLI reads at start-up from its working folder and its HOME, written by one turn for the next, through
the REAL CLIs in the harness's sandbox (docs/sandbox.md, "What a turn leaves for the next").

Turn 1 (a hostile stand-in model, from the agent's shell) plants every such file that could start a process or
change the environment of the processes the CLI starts (tests/support/turn_attacks.py, :data:`NEIGHBOURS`): project
settings with hooks, MCP servers, environment files; turn 2 is an ordinary shell call. None may take effect: no hook
and no MCP server runs, and no environment file reaches the jail, whose Perl would otherwise load a module of the
agent's before it enters its Landlock domain, outside it (measured before the change: Codex loaded
``$CODEX_HOME/.env`` and Gemini CLI a repository's ``.gemini/.env``, and the module opened the CLI's
``/proc/<pid>/environ``). Run as an ordinary user too by tests/test_agent_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_cli import two_turns
from support.e2e import RealTools
from support.turn_attacks import NEIGHBOURS, PERL_RAN, RAN, neighbours

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.harness import sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

AGENTS = {"claude-code": CLAUDE_CODE, "codex": CODEX, "gemini": GEMINI, "opencode": OPENCODE}


def left_behind(home: Path) -> dict[str, str]:
    """What the planted hooks, servers and Perl module left in ``home``: each ``ran-*`` file and its text."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(home.glob(f"{RAN}*"))}


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_what_a_turn_plants_for_the_cli_to_read_at_start_up_takes_no_effect_in_the_next(
    name: str, real_tools: RealTools, tmp_path: Path
) -> None:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    agent = AGENTS[name]
    build = agent.provision(real_tools.cache)
    out = tmp_path / "out"
    ran = two_turns(agent, out, real_tools.express, build, real_tools.cache, neighbours(name), "echo second")
    assert ran.error is None and ran.arm is not None, ran.error
    planted, second = [c.result for c in ran.arm.session.calls if c.name == "Bash"]
    assert planted is not None and "planted" in planted.text, planted  # turn 1 wrote them all
    assert second is not None and "second" in second.text  # turn 2 ran its shell call
    # no hook, no MCP server ran; the Perl module ran only inside the domain, if at all (the agent's own Perl would)
    left = left_behind(ran.arm.workspace.home)
    assert set(left) <= {PERL_RAN} and "OPENED" not in left.get(PERL_RAN, ""), left
