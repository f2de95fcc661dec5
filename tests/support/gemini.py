"""One arm of the A/B through the real Gemini CLI, as the harness runs it: shared by tests/test_gemini_cli.py and
tests/data/gemini/record.py.

    python tests/support/gemini.py GEMINI EXPRESS CACHE OUT [--with CODEGRAPH]   # one arm; prints a JSON summary

GEMINI: the ``gemini`` launcher of an install; EXPRESS: a copy of express (indexed, for the with-arm); CACHE: the
harness's cache folder (hidden from the agent); OUT: a fresh folder for the run.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, DriveOptions, McpServer
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.transcript import GeminiSession
from pytest_agent_eval.harness import runtimes, sandbox
from pytest_agent_eval.harness.drivers import RunRecord
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.workspace import Workspace, make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.tool import CODEGRAPH

QUESTION = "How does res.send decide the Content-Type and ETag?"
TURN_TIMEOUT = 120.0


@dataclass
class Arm:
    """One arm's run: its workspace, config, driver record and Session, and what the stand-in received."""

    workspace: Workspace
    config: AgentConfig
    run: RunRecord
    session: GeminiSession
    requests: list[dict[str, Any]]
    truth: Path
    record: Path  # the model server's request record (pytest_agent_eval.model.record)


def run_arm(
    folder: Path,
    express: Path,
    gemini: Provisioned,
    cache: Path,
    questions: tuple[str, ...] = (QUESTION,),
    codegraph: Provisioned | None = None,
    model: Any = None,
    faults: Any = None,
) -> Arm:
    """Run Gemini CLI on ``express`` with codegraph as its MCP server when ``codegraph`` is given (the with-arm), else
    without (the without-arm: no index in its copy), sealed in the harness's sandbox; ``model``: the backend the
    stand-in serves (the scripted policy by default), ``faults`` its misbehaviour (:class:`~.model.server.Faults`)."""
    has_tool = codegraph is not None
    name = "with" if has_tool else "without"
    workspace = make_workspace(express, folder / name, () if has_tool else CODEGRAPH.state_dirs)
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
        config = GEMINI.configure(setup)
        node = runtimes.node()
        box = sandbox.sandbox_for(
            cache=cache,
            writable=[workspace.repo, workspace.home, workspace.tmp],
            readable=[*sandbox.install_paths(gemini.bin), *config.readable, *(node.reads if node else ())],
            hidden=list(GEMINI.managed_paths),
            relay=relay,
            tool=CODEGRAPH,
            tool_install=sandbox.install_paths(codegraph.bin) if codegraph is not None else [],
            shell_from=GEMINI.shell_from,
        )
        env = GEMINI.process_environment(workspace.env(os.environ), server.url)
        env.update(**config.env, **CODEGRAPH.env)
        env["PATH"] = os.pathsep.join([str(gemini.bin.parent), runtimes.with_node(os.environ.get("PATH", ""))])
        problems = GEMINI.check_deny(config, CODEGRAPH.cli, env, set())
        assert problems == [], problems
        options = DriveOptions(timeout_s=TURN_TIMEOUT, stall_s=30.0, sandbox=box)
        run = GEMINI.drive(gemini, questions, mode="headless", config=config, options=options, label=f"{name}-1",
                           out_dir=folder / f"run-{name}", cwd=workspace.repo, env=env)  # fmt: skip
        requests = server.requests
    return Arm(workspace, config, run, GEMINI.read_transcript(run.segments), requests, truth, record)


def main() -> int:
    args = sys.argv[1:]
    codegraph = None
    if "--with" in args:
        at = args.index("--with")
        codegraph = Provisioned("codegraph", Path(args[at + 1]), CODEGRAPH.version, CODEGRAPH.version)
        del args[at : at + 2]
    gemini, express, cache, out = (Path(a) for a in args[:4])
    build = Provisioned("gemini", gemini, GEMINI.version, GEMINI.version)
    arm = run_arm(out, express, build, cache, codegraph=codegraph)
    report = contamination(arm.session)
    summary = {
        "uid": os.geteuid(),
        "exit_codes": arm.run.exit_codes,
        "requests": len(arm.requests),
        "messages": len(arm.session.messages()),
        "answers": arm.session.answer_texts(),
        "cli_blocked": report.cli_blocked,
        "contaminated": report.contaminated,
        "mcp_calls": len(report.mcp_calls),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
