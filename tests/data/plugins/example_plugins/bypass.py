"""A plug-in agent whose driver bypasses the shared turn runner, as ``agent-eval check-agent`` must catch: Claude
Code's CLI run in the run's sandbox, but its stdout straight into the segment, a file the agent's shell can reopen
through ``/proc/<cli>/fd/1`` to forge what is recorded (docs/extending.md, "Checking a new agent")."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from pytest_agent_eval.agents.base import Drive
from pytest_agent_eval.agents.claude_code.agent import ClaudeCode
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, build_command
from pytest_agent_eval.harness.drivers import RunRecord, segment_name
from pytest_agent_eval.harness.drivers.turns import launched


@dataclass(frozen=True)
class BypassingAgent(ClaudeCode):
    name: str = "bypassing-agent"
    title: str = "Bypassing Agent"

    def run_session(self, run: Drive) -> RunRecord:
        files = run.config.files
        options = HeadlessOptions(claude=str(run.build.bin), mcp_config=files["mcp"], settings=files["settings"])
        record = RunRecord(label=run.label)
        run.out_dir.mkdir(parents=True, exist_ok=True)
        for turn, question in enumerate(run.questions, start=1):
            segment = run.out_dir / segment_name(run.label, turn)
            with segment.open("wb") as out:
                command = launched(build_command(question, options), run.options.sandbox)
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL,
                                      cwd=run.cwd, env=run.env, timeout=run.options.timeout_s)  # fmt: skip
            record.segments.append(segment)
            record.exit_codes.append(done.returncode)
        return record


BYPASSING_AGENT = BypassingAgent()
