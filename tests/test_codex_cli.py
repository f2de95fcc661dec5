"""The REAL Codex CLI (``@openai/codex``, pinned, provisioned into the cache), offline, in the harness's sandbox,
against the scripted stand-in speaking the Responses API on loopback, with the real codegraph on express.

Both arms of the A/B are run as the harness runs them — a fresh workspace, Codex configured by ``CODEX.configure``
(its own ``CODEX_HOME`` in the attempt's HOME), the process tree sealed by bubblewrap, ``CODEX.drive`` for the turns,
``CODEX.read_transcript`` for the Session — and the Session is held to what the stand-in itself saw and counted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import RealTools

from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, DriveOptions, McpServer
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.config import codex_home
from pytest_agent_eval.agents.codex.transcript import CodexSession, kept_rollout
from pytest_agent_eval.harness import runtimes, sandbox
from pytest_agent_eval.harness.drivers import agent_environment
from pytest_agent_eval.harness.drivers.headless import RunRecord
from pytest_agent_eval.harness.provision import Provisioned, read_builds
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.workspace import Workspace, make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.occupancy import FAMILIES, occupancy
from pytest_agent_eval.model import RunningServer, ScriptedBackend, serve
from pytest_agent_eval.model.truth import read_truth_log, resident_truth
from pytest_agent_eval.tool import CODEGRAPH

QUESTIONS = (
    "How does res.send decide the Content-Type and ETag?",
    "Where is the ETag function configured, and how does the app setting reach res.send?",
)
TURN_TIMEOUT = 120.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def codex(real_tools: RealTools) -> Provisioned:
    return CODEX.provision(real_tools.cache)


@dataclass
class Arm:
    """One arm's run: its workspace, config, driver record, Session, and the stand-in that served it."""

    workspace: Workspace
    config: AgentConfig
    run: RunRecord
    session: CodexSession
    server: RunningServer
    truth: Path

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests


def _run_arm(tmp_path: Path, tools: RealTools, codex: Provisioned, has_tool: bool, questions: tuple[str, ...]) -> Arm:
    name = "with" if has_tool else "without"
    workspace = make_workspace(tools.express, tmp_path / name, () if has_tool else CODEGRAPH.state_dirs)
    truth = tmp_path / f"truth-{name}.jsonl"
    with ExitStack() as stack:
        server = stack.enter_context(serve(ScriptedBackend(), truth_log=truth))
        relay = stack.enter_context(carried(server.url))
        mcp = (McpServer(CODEGRAPH.name, tuple(CODEGRAPH.mcp_command(tools.codegraph.bin, workspace.repo)),
                         dict(CODEGRAPH.env)),) if has_tool else ()  # fmt: skip
        setup = AgentSetup(config_dir=tmp_path / f"config-{name}", home=workspace.home, model_url=server.url,
                           mcp_servers=mcp, denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
        config = CODEX.configure(setup)
        node = runtimes.node()
        sealed = sandbox.sandbox_for(
            cache=tools.cache,
            writable=[workspace.repo, workspace.home, workspace.tmp],
            readable=[*sandbox.install_paths(codex.bin), *config.readable, *(node.reads if node else ())],
            hidden=list(CODEX.managed_paths),
            relay=relay,
            tool=CODEGRAPH,
            tool_install=sandbox.install_paths(tools.codegraph.bin) if has_tool else [],
        )
        env = agent_environment(workspace.env(os.environ), server.url)
        env.update(CODEX.environment(server.url), **config.env, **CODEGRAPH.env)
        env["PATH"] = os.pathsep.join([str(codex.bin.parent), runtimes.with_node(os.environ.get("PATH", ""))])
        assert CODEX.check_deny(config, CODEGRAPH.cli, env, set()) == []
        options = DriveOptions(timeout_s=TURN_TIMEOUT, stall_s=30.0, sandbox=sealed)
        run = CODEX.drive(codex, questions, mode="headless", config=config, options=options, label=f"{name}-1",
                          out_dir=tmp_path / f"run-{name}", cwd=workspace.repo, env=env)  # fmt: skip
    session = CODEX.read_transcript(run.segments)
    return Arm(workspace, config, run, session, server, truth)


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory, real_tools: RealTools, codex: Provisioned) -> Iterator[dict]:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    folder = tmp_path_factory.mktemp("codex-ab")
    yield {has: _run_arm(folder, real_tools, codex, has, QUESTIONS[:1]) for has in (True, False)}


def _offered_mcp(request: dict[str, Any]) -> list[str]:
    """The MCP servers a request offers tools of (Codex's own namespaces, e.g. ``multi_agent_v1``, aside)."""
    return [
        t["name"] for t in request.get("tools") or [] if t.get("type") == "namespace" and t["name"].startswith("mcp__")
    ]


def test_codex_is_provisioned_pinned_into_the_cache_once(real_tools: RealTools, codex: Provisioned) -> None:
    assert codex.version == CODEX.version and codex.bin.is_relative_to(real_tools.cache / "codex" / CODEX.version)
    assert codex.origin["spec"] == f"@openai/codex@{CODEX.version}"
    # the native binary came in its platform package, beside the launcher
    native = list((real_tools.cache / "codex" / CODEX.version / "node_modules" / "@openai").glob("codex-linux-*"))
    assert native, "no platform package of Codex was installed"
    installs = [b for b in read_builds(real_tools.cache) if b.get("what") == f"@openai/codex@{CODEX.version}"]
    assert len(installs) >= 1
    assert CODEX.provision(real_tools.cache) == codex  # a second ask reuses the install
    assert len([b for b in read_builds(real_tools.cache) if b.get("what") == codex.origin["spec"]]) == len(installs)


def test_the_with_arm_explores_through_codegraphs_mcp_server(arms: dict) -> None:
    arm = arms[True]
    assert all(_offered_mcp(r) == ["mcp__codegraph"] for r in arm.requests)  # offered up front, every request
    explores = [c for c in arm.session.calls if c.name == "mcp__codegraph__codegraph_explore"]
    assert explores and explores[0].result is not None and "**Exploration:" in explores[0].result.text
    report = contamination(arm.session)
    assert report.mcp_calls and not report.contaminated
    assert arm.session.answer_texts() and arm.session.answer_texts()[0].startswith("Answer to: How does res.send")


def test_the_without_arm_has_no_mcp_server_and_its_cli_call_is_denied(arms: dict) -> None:
    arm = arms[False]
    assert arm.requests and not any(_offered_mcp(r) for r in arm.requests)
    assert not any(CODEGRAPH.owns(c.name) for c in arm.session.calls)
    [cli] = [c for c in arm.session.calls if c.input.get("command", "").startswith(f"{CODEGRAPH.cli} ")]
    assert cli.result is not None and cli.result.is_error and CODEGRAPH.deny_marker in cli.result.text
    report = contamination(arm.session)
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)
    assert not (arm.workspace.repo / ".codegraph").exists()


@pytest.mark.parametrize("has_tool", [True, False], ids=["with", "without"])
def test_occupancy_of_the_codex_session_matches_the_stand_ins_own_counts(arms: dict, has_tool: bool) -> None:
    """bench/occupancy_accuracy.py's measure: Σ|estimate − truth| / Σ truth over the families, ≤ 1%."""
    arm = arms[has_tool]
    counts = read_truth_log(arm.truth)
    assert [m.id for m in arm.session.messages()] == list(counts)  # every request the stand-in answered, read
    truth = resident_truth(arm.session, counts)
    assert truth is not None
    estimate = occupancy(arm.session).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


def test_the_rollout_is_copied_out_and_the_config_stays_the_harnesss(arms: dict) -> None:
    for arm in arms.values():
        kept = kept_rollout(arm.run.segments[0])
        assert kept.is_file() and arm.session.rollout_file == kept
        assert arm.session.thread_id == arm.run.session_id and arm.run.exit_codes == [0]
        home = codex_home(arm.workspace.home)
        assert arm.config.files["config"] == home / "config.toml" and arm.config.readable == (
            home / "config.toml",
            home / "rules" / "deny.rules",
        )


def test_a_second_turn_resumes_the_thread_and_the_policy_answers_the_new_question(
    tmp_path: Path, real_tools: RealTools, codex: Provisioned
) -> None:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    arm = _run_arm(tmp_path, real_tools, codex, True, QUESTIONS)
    assert [p.name for p in arm.run.segments] == ["run-with-1.jsonl", "run-with-1.t2.jsonl"]
    assert [r.subtype for r in arm.session.results] == ["turn.completed", "turn.completed"]
    first, second = arm.session.answer_texts()
    assert first.startswith("Answer to: How does res.send") and second.startswith("Answer to: Where is the ETag")
    assert [m.id for m in arm.session.messages()] == list(read_truth_log(arm.truth))


def test_a_config_the_agent_rewrote_is_not_what_the_next_turn_reads(
    tmp_path: Path, real_tools: RealTools, codex: Provisioned
) -> None:
    """The config and rules are bound read-only: a shell of the agent cannot drop the deny for a later turn."""
    workspace = make_workspace(real_tools.express, tmp_path / "ws", CODEGRAPH.state_dirs)
    setup = AgentSetup(config_dir=tmp_path, home=workspace.home, model_url="http://127.0.0.1:9", mcp_servers=(),
                       denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
    config = CODEX.configure(setup)
    sealed = sandbox.sandbox_for(cache=real_tools.cache, writable=[workspace.home], readable=list(config.readable))
    rules = config.files["rules"]
    script = f"echo 'x' > {rules}; rm -f {rules}; rm -rf {rules.parent}; cat {rules}"
    done = subprocess.run(sealed.wrap(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60)
    assert "prefix_rule(" in done.stdout and CODEGRAPH.deny_reason in rules.read_text(), done.stderr
    shutil.rmtree(tmp_path / "ws")
