"""Record one real Codex CLI session whose model asks for one shell command, then ends (the block probe's model).

    python tests/data/codex/record_probe.py CODEX REPO OUT COMMAND

CODEX: the ``codex`` executable; REPO: the repository it runs in (indexed by codegraph when COMMAND explores); OUT:
where ``events.jsonl`` and ``rollout-…-<thread id>.jsonl`` are written. Codex is configured as the harness configures
a without-arm (``CODEX.configure``: no MCP server, the deny rule), outside any sandbox, so a command the rule does not
refuse runs the codegraph it names (``leak/``) and one it refuses shows Codex's rejection (``path-denied/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_agent_eval.agents.base import AgentSetup
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.config import exec_command
from pytest_agent_eval.model import serve
from pytest_agent_eval.tool import CODEGRAPH

QUESTION = "How does res.send decide the Content-Type and ETag?"


def main() -> int:
    codex, repo, out, command = Path(sys.argv[1]), Path(sys.argv[2]).resolve(), Path(sys.argv[3]), sys.argv[4]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codex-home-") as home, serve(CODEX.block_probe(command)) as server:
        setup = AgentSetup(Path(home), Path(home), server.url, (), CODEGRAPH.cli, CODEGRAPH.deny_reason)
        config = CODEX.configure(setup)
        env = {**os.environ, **CODEX.environment(server.url), **config.env}
        with (out / "events.jsonl").open("w", encoding="utf-8") as events:
            done = subprocess.run(exec_command(codex, QUESTION), cwd=repo, env=env, stdin=subprocess.DEVNULL,
                                  stdout=events, timeout=300)  # fmt: skip
        (rollout,) = Path(config.files["codex_home"], "sessions").rglob("rollout-*.jsonl")
        shutil.copyfile(rollout, out / rollout.name)
        print(f"codex exited {done.returncode}; {len(server.requests)} request(s)")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
