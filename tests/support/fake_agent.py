"""An agent's CLI played by a script (the events the real CLI would write), driven through the agent's own
``CodingAgent.drive``: shared by the unit tests of the agents (tests/test_<agent>_agent.py)."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_agent_eval.agents.base import AgentSetup, CodingAgent, Drive, DriveOptions, McpServer
from pytest_agent_eval.harness.drivers import RunRecord, TurnError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.tool import CODEGRAPH

MODEL_URL = "http://127.0.0.1:4321"  # nothing listens: the configs are read, not used


def agent_setup(folder: Path, mcp: tuple[McpServer, ...] = (), config_dir: Path | None = None) -> AgentSetup:
    """What an agent is configured from for a test in ``folder``: a fresh ``folder/home``, codegraph's CLI denied,
    ``mcp`` served; the config written to ``config_dir`` (``folder`` by default)."""
    home = folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    return AgentSetup(config_dir=config_dir or folder, home=home, model_url=MODEL_URL, mcp_servers=mcp,
                      denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip


def fake_cli(agent: CodingAgent, script: str, folder: Path) -> Path:
    """``script`` as the agent's executable in ``folder``."""
    fake = folder / agent.executable
    fake.write_text(script, encoding="utf-8")
    fake.chmod(0o755)
    return fake


def drive_fake(
    agent: CodingAgent,
    script: str,
    setup: AgentSetup,
    folder: Path,
    env: dict[str, str],
    questions: tuple[str, ...] = ("Q1?",),
    timeout_s: float = 3.0,
) -> tuple[RunRecord | TurnError, Path]:
    """Drive the agent, played by ``script`` (its executable in ``folder``), configured from ``setup``, over
    ``questions`` headless, unsealed, with this process's environment, the attempt's HOME, the config's variables
    and ``env``: the run's record (or the :class:`TurnError` it ended in) and the folder of its segments."""
    build = Provisioned(agent.executable, fake_cli(agent, script, folder), agent.version, agent.version)
    config = agent.configure(setup)
    run_env = {**os.environ, "HOME": str(setup.home), **config.env, **env}
    options = DriveOptions(timeout_s=timeout_s, stall_s=30.0, sandbox=None)
    out = folder / "out"
    try:
        return agent.drive(Drive(build, questions, mode="headless", config=config, options=options, label="with-1",
                                 out_dir=out, cwd=folder, env=run_env)), out  # fmt: skip
    except TurnError as error:
        return error, out
