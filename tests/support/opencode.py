"""One arm of the A/B through the real OpenCode CLI, as the harness runs it: shared by tests/test_opencode_cli.py, by
tests/data/opencode/record.py (which recorded the streams the unit tests read) and, run as a script by an ordinary
user, by the test of the sandbox without root.

    python tests/support/opencode.py OPENCODE EXPRESS CACHE OUT    # the without-arm; prints a JSON summary

OPENCODE: the ``opencode`` binary of an install; EXPRESS: a copy of express (no index needed); CACHE: the harness's
cache folder (hidden from the agent); OUT: a fresh folder for the run.
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
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.agents.opencode.transcript import OpenCodeSession
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.drivers import RunRecord
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.workspace import Workspace, make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import paired_responses
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.model.truth import read_truth_log
from pytest_agent_eval.model.usage import PromptCount
from pytest_agent_eval.tool import CODEGRAPH

QUESTION = "How does res.send decide the Content-Type and ETag?"
TURN_TIMEOUT = 120.0


@dataclass
class Arm:
    """One arm's run: its workspace, config, driver record and Session, and what the stand-in received."""

    workspace: Workspace
    config: AgentConfig
    run: RunRecord
    session: OpenCodeSession
    requests: list[dict[str, Any]]
    truth: Path
    record: Path  # the model server's request record (pytest_agent_eval.model.record)

    def truth_by_message(self) -> dict[str, PromptCount]:
        """The stand-in's counts keyed by the session's messages: OpenCode names them by its own ids, paired with
        the model's responses in order (metrics.evidence.paired_responses)."""
        counts = read_truth_log(self.truth)
        paired = paired_responses(self.session, read_requests(self.record))
        return {message: counts[response] for message, response in paired.items() if response in counts}


def run_arm(
    folder: Path,
    repo: Path,
    opencode: Provisioned,
    cache: Path,
    questions: tuple[str, ...] = (QUESTION,),
    codegraph: Provisioned | None = None,
    model: Any = None,
    sealed: bool = True,
) -> Arm:
    """Run OpenCode on ``repo`` (indexed, for the with-arm) with codegraph as its MCP server when ``codegraph`` is
    given (the with-arm), else without (the without-arm: no index in its copy), sealed in the harness's sandbox
    unless ``sealed`` is False; ``model``: the backend the stand-in serves (the scripted policy by default)."""
    has_tool = codegraph is not None
    name = "with" if has_tool else "without"
    workspace = make_workspace(repo, folder / name, () if has_tool else CODEGRAPH.state_dirs)
    truth, record = folder / f"truth-{name}.jsonl", folder / f"requests-{name}.jsonl"
    with ExitStack() as stack:
        server = stack.enter_context(serve(model or ScriptedBackend(), truth_log=truth))
        stack.enter_context(server.log.into(record))
        relay = stack.enter_context(carried(server.url))
        mcp = ()
        if codegraph is not None:
            mcp = (McpServer(CODEGRAPH.name, tuple(CODEGRAPH.mcp_command(codegraph.bin, workspace.repo)),
                             dict(CODEGRAPH.env)),)  # fmt: skip
        setup = AgentSetup(config_dir=folder / f"config-{name}", home=workspace.home, model_url=server.url,
                           mcp_servers=mcp, denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
        config = OPENCODE.configure(setup)
        box = None
        if sealed:
            box = sandbox.sandbox_for(
                cache=cache,
                writable=[workspace.repo, workspace.home, workspace.tmp],
                readable=[*sandbox.install_paths(opencode.bin), *config.readable],
                hidden=list(OPENCODE.managed_paths),
                relay=relay,
                tool=CODEGRAPH,
                tool_install=sandbox.install_paths(codegraph.bin) if codegraph is not None else [],
                shell_from=OPENCODE.shell_from,
            )
        env = OPENCODE.process_environment(workspace.env(os.environ), server.url)
        env.update(**config.env, **CODEGRAPH.env)
        env["PATH"] = os.pathsep.join([str(opencode.bin.parent), os.environ.get("PATH", "")])
        problems = OPENCODE.check_deny(config, CODEGRAPH.cli, env, set())
        assert problems == [], problems
        options = DriveOptions(timeout_s=TURN_TIMEOUT, stall_s=30.0, sandbox=box)
        run = OPENCODE.drive(opencode, questions, mode="headless", config=config, options=options, label=f"{name}-1",
                             out_dir=folder / f"run-{name}", cwd=workspace.repo, env=env)  # fmt: skip
        requests = server.requests
    return Arm(workspace, config, run, OPENCODE.read_transcript(run.segments), requests, truth, record)


def main() -> int:
    opencode, express, cache, out = (Path(a) for a in sys.argv[1:5])
    build = Provisioned("opencode", opencode, OPENCODE.version, OPENCODE.version)
    arm = run_arm(out, express, build, cache)
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
