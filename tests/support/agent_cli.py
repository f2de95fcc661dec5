"""One arm of the A/B through a real agent CLI (any :class:`CodingAgent`), as the harness runs it: shared by
tests/test_{codex,gemini,opencode}_cli.py, by tests/data/{gemini,opencode}/record.py and, run as a script by an
ordinary user, by the tests of the sandbox without root.

    python tests/support/agent_cli.py AGENT LAUNCHER EXPRESS CACHE OUT [--with CODEGRAPH]  # one arm; prints JSON
    python tests/support/agent_cli.py AGENT LAUNCHER EXPRESS CACHE OUT --two-turns PREPARE EXPLOIT  # a hostile one

AGENT: ``MODULE:ATTR`` of the agent (``pytest_agent_eval.agents.codex:CODEX``); LAUNCHER: the agent's executable of
an install; EXPRESS: a copy of express (indexed, for the with-arm); CACHE: the harness's cache folder (hidden from
the agent); OUT: a fresh folder for the run; CODEGRAPH: codegraph's executable, for the with-arm; PREPARE, EXPLOIT:
the shell commands of a hostile model's two turns (:class:`TwoTurns`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.base import (
    AgentConfig,
    AgentSetup,
    CodingAgent,
    Drive,
    DriveOptions,
    McpServer,
    load_agent,
)
from pytest_agent_eval.harness import runtimes, sandbox
from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.workspace import Workspace, make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import paired_responses
from pytest_agent_eval.metrics.occupancy import FAMILIES, occupancy
from pytest_agent_eval.metrics.truth import read_truth_log, resident_truth
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.model.scripted import Turn
from pytest_agent_eval.model.sse import Reply, tool_use
from pytest_agent_eval.model.usage import PromptCount
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Session, ToolResult

if TYPE_CHECKING:  # run as a script by an ordinary user, this module has no support package on its path
    from support.e2e import RealTools

QUESTION = "How does res.send decide the Content-Type and ETag?"
TURN_TIMEOUT = 120.0
# A real model's thinking, for the sessions held to the stand-in's counts: 1,200 characters shown before the first call,
# 2,000 tokens counted but only summarised before the second (ScriptedBackend's hidden_thinking, visible_thinking).
THINKING = {"hidden_thinking": (0, 2_000), "summarised": True, "visible_thinking": (1_200,)}


@dataclass
class Arm:
    """One arm's run: its workspace, config, driver record and Session, and what the stand-in received."""

    workspace: Workspace
    config: AgentConfig
    run: RunRecord
    session: Session  # the agent's own Session (CodexSession, GeminiSession, OpenCodeSession)
    requests: list[dict[str, Any]]
    truth: Path
    record: Path  # the model server's request record (pytest_agent_eval.model.record)

    def truth_by_message(self) -> dict[str, PromptCount]:
        """The stand-in's counts keyed by the session's messages, for an agent that names them by its own ids
        (OpenCode): paired with the model's responses in order (metrics.evidence.paired_responses)."""
        counts = read_truth_log(self.truth)
        paired = paired_responses(self.session, read_requests(self.record))
        return {message: counts[response] for message, response in paired.items() if response in counts}


def run_arm(
    agent: CodingAgent,
    folder: Path,
    repo: Path,
    build: Provisioned,
    cache: Path,
    questions: tuple[str, ...] = (QUESTION,),
    codegraph: Provisioned | None = None,
    model: Any = None,
    faults: Any = None,
) -> Arm:
    """Run ``agent`` (its install ``build``) on ``repo`` (indexed, for the with-arm) with codegraph as its MCP server
    when ``codegraph`` is given (the with-arm), else without (the without-arm: no index in its copy), sealed in the
    harness's sandbox; ``model``: the backend the stand-in serves (the scripted policy by default), ``faults`` its
    misbehaviour (:class:`~.model.server.Faults`)."""
    has_tool = codegraph is not None
    name = "with" if has_tool else "without"
    workspace = make_workspace(repo, folder / name, () if has_tool else CODEGRAPH.state_dirs)
    truth, record = folder / f"truth-{name}.jsonl", folder / f"requests-{name}.jsonl"
    with ExitStack() as stack:
        server = stack.enter_context(serve(model or ScriptedBackend(), faults=faults, truth_log=truth))
        stack.enter_context(server.log.into(record))
        relay = stack.enter_context(carried(server.url))
        mcp = ()
        if codegraph is not None:
            mcp = (McpServer(CODEGRAPH.name, tuple(CODEGRAPH.mcp_command(codegraph.bin, workspace.repo)),
                             dict(CODEGRAPH.env)),)  # fmt: skip
        setup = AgentSetup(config_dir=folder / f"config-{name}", home=workspace.home, model_url=server.url,
                           mcp_servers=mcp, denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
        config = agent.configure(setup)
        # node (the machine's or the bundled) for an agent that runs on it, as the harness gives it
        node = runtimes.node() if "node" in agent.runtimes else None
        box = sandbox.sandbox_for(
            cache=cache,
            writable=[workspace.repo, workspace.home, workspace.tmp],
            readable=[*sandbox.install_paths(build.bin), *config.readable, *(node.reads if node else ())],
            hidden=list(agent.managed_paths),
            relay=relay,
            tool=CODEGRAPH,
            tool_install=sandbox.install_paths(codegraph.bin) if codegraph is not None else [],
            shell_from=agent.shell_from,
            binds=config.binds,
        )
        env = agent.process_environment(workspace.env(os.environ), server.url)
        env.update(**config.env, **CODEGRAPH.env)
        path = os.environ.get("PATH", "")
        env["PATH"] = os.pathsep.join([str(build.bin.parent), runtimes.with_node(path) if node else path])
        problems = agent.check_deny(config, CODEGRAPH.cli, env, set())
        assert problems == [], problems
        options = DriveOptions(timeout_s=TURN_TIMEOUT, stall_s=30.0, sandbox=box)
        run = agent.drive(Drive(build, questions, mode="headless", config=config, options=options,
                                label=f"{name}-1", out_dir=folder / f"run-{name}", cwd=workspace.repo, env=env))
        requests = server.requests
    return Arm(workspace, config, run, agent.read_transcript(run.segments), requests, truth, record)


PREPARE, EXPLOIT = "Turn one: prepare.", "Turn two: go on."


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


@dataclass
class Hostile:
    """A two-turn without-arm of :class:`TwoTurns`: the error that ended it (None when it ran through), the model
    server's request record (what the model received), the arm when it ran through."""

    error: str | None
    received: str
    arm: Arm | None = None


def two_turns(agent: CodingAgent, folder: Path, repo: Path, build: Provisioned, cache: Path, prepare: str,
              exploit: str) -> Hostile:  # fmt: skip
    """Run the without-arm of ``agent`` over two turns whose model runs ``prepare``, then ``exploit``."""
    model = TwoTurns(prepare=prepare, exploit=exploit)
    error, arm = None, None
    try:
        arm = run_arm(agent, folder, repo, build, cache, (PREPARE, EXPLOIT), model=model)
    except AgentInfraError as exc:
        error = str(exc)
    return Hostile(error, (folder / "requests-without.jsonl").read_text(encoding="utf-8"), arm)


def both_arms(
    agent: CodingAgent, folder: Path, tools: RealTools, build: Provisioned, model: Callable[[], Any] | None = None
) -> dict[bool, Arm]:
    """Both arms of the A/B on express in ``folder``, keyed by whether the arm has the tool, each against a backend
    ``model()`` makes (the scripted policy by default); skips the test when the sandbox is switched off, and fails it
    when bubblewrap cannot seal."""
    import pytest

    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    backend = model or ScriptedBackend
    return {
        True: run_arm(agent, folder, tools.express, build, tools.cache, codegraph=tools.codegraph, model=backend()),
        False: run_arm(agent, folder, tools.express, build, tools.cache, model=backend()),
    }


def explored(arm: Arm) -> ToolResult:
    """What the with-arm's session holds alike for every agent: a codegraph explore answered, MCP calls and no
    contamination, the policy's answer; the first explore's result (the offer of the tools is the agent's own)."""
    explores = [c for c in arm.session.calls if c.name == f"mcp__{CODEGRAPH.name}__{CODEGRAPH.explore}"]
    assert explores and explores[0].result is not None and "**Exploration:" in explores[0].result.text
    report = contamination(arm.session, tool=CODEGRAPH)
    assert report.mcp_calls and not report.contaminated
    assert arm.session.answer_texts() and arm.session.answer_texts()[0].startswith("Answer to: How does res.send")
    return explores[0].result


def denied(arm: Arm, offered: Callable[[dict[str, Any]], list[str]]) -> ToolResult:
    """What the without-arm's session holds alike for every agent: no codegraph tool ``offered`` in any request or
    called, its one CLI call refused with the deny's mark, no index in its copy; that call's result (the wording of
    the refusal is the agent's own)."""
    assert arm.requests and not any(offered(r) for r in arm.requests)
    assert not any(CODEGRAPH.owns(c.name) for c in arm.session.calls)
    [cli] = [c for c in arm.session.calls if c.input.get("command", "").startswith(f"{CODEGRAPH.cli} ")]
    assert cli.result is not None and cli.result.is_error and CODEGRAPH.deny_marker in cli.result.text
    report = contamination(arm.session, tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)
    assert not (arm.workspace.repo / ".codegraph").exists()
    return cli.result


def assert_occupancy_matches(session: Session, counts: dict[str, PromptCount]) -> None:
    """bench/occupancy_accuracy.py's measure, Σ|estimate − truth| / Σ truth over the families, is ≤ 1%: ``counts``
    the stand-in's, keyed by the session's messages."""
    truth = resident_truth(session, counts, tool=CODEGRAPH)
    assert truth is not None
    estimate = occupancy(session, tool=CODEGRAPH).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


def main(args: list[str]) -> int:
    codegraph = None
    if "--with" in args:
        at = args.index("--with")
        codegraph = Provisioned("codegraph", Path(args[at + 1]), CODEGRAPH.version, CODEGRAPH.version)
        del args[at : at + 2]
    hostile = None
    if "--two-turns" in args:
        at = args.index("--two-turns")
        hostile = args[at + 1 : at + 3]
        del args[at : at + 3]
    agent = load_agent(args[0])
    launcher, express, cache, out = (Path(a) for a in args[1:5])
    build = Provisioned(agent.executable, launcher, agent.version, agent.version)
    if hostile is not None:
        from turn_attacks import NEEDLES, PLANTED_SERVER_RAN, RAN  # beside this script, run without the package

        ran = two_turns(agent, out, express, build, cache, *hostile)
        results = [c.result.text for c in ran.arm.session.calls if c.result is not None] if ran.arm else []
        home = out / "without" / "home"
        print(json.dumps({"uid": os.geteuid(), "error": ran.error, "seen": [n for n in NEEDLES if n in ran.received],
                          "results": results, "server_ran": (home / PLANTED_SERVER_RAN).exists(),
                          "left": {p.name: p.read_text() for p in sorted(home.glob(f"{RAN}*"))}}))  # fmt: skip
        return 0
    arm = run_arm(agent, out, express, build, cache, codegraph=codegraph)
    report = contamination(arm.session, tool=CODEGRAPH)
    shell = [c.result for c in arm.session.calls if c.name == "Bash" and c.result is not None]
    summary = {
        "uid": os.geteuid(),
        "exit_codes": arm.run.exit_codes,
        "requests": len(arm.requests),
        "messages": len(arm.session.messages()),
        "answers": arm.session.answer_texts(),
        # shell commands that ran (not refused): through the sandbox's shell, the jail's for an agent with one
        "shell_ran": sum(not result.is_error for result in shell),
        "cli_blocked": report.cli_blocked,
        "contaminated": report.contaminated,
        "mcp_calls": len(report.mcp_calls),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
