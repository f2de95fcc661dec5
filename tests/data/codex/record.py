"""Record one real Codex CLI session against the scripted stand-in (how this folder's session was made).

    python tests/data/codex/record.py CODEX REPO OUT [--without] [QUESTION [QUESTION …]]

CODEX: the ``codex`` executable (``npm install --prefix P @openai/codex@0.171.0`` → P/node_modules/.bin/codex);
REPO: a repository codegraph has indexed (``codegraph init -y REPO``); OUT: where ``events.jsonl`` (the ``--json``
stream), ``rollout-…-<thread id>.jsonl`` (Codex's own session file, named as Codex names it), ``truth.jsonl`` (the
stand-in's counts) and ``last-request.json`` (the last request Codex sent: it holds the whole history) are written.
codegraph is taken from the shared cache (``~/.cache/pytest-agent-eval/codegraph/1.6.1``), as the harness provisions
it; Codex is configured as the harness configures it (``CODEX.configure``), outside any sandbox. ``--without``: the
without-arm, no MCP server (the deny rule of ``$CODEX_HOME/rules/`` is in both arms). A second question (and any
later one) resumes the session (``codex exec resume <thread id>``): its events go to ``events.t2.jsonl`` (…), the
rollout is the one Codex appends to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_agent_eval.agents.base import AgentSetup, McpServer
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.config import exec_command
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.tool import CODEGRAPH

CODEGRAPH_BIN = Path.home() / ".cache/pytest-agent-eval/codegraph" / CODEGRAPH.version / "node_modules/.bin/codegraph"
QUESTION = "How does res.send decide the Content-Type and ETag?"


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--without"]
    with_tool = len(args) == len(sys.argv) - 1
    codex, repo, out = Path(args[0]), Path(args[1]).resolve(), Path(args[2])
    questions = args[3:] or [QUESTION]
    out.mkdir(parents=True, exist_ok=True)
    truth = out / "truth.jsonl"
    truth.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="codex-home-") as home, serve(ScriptedBackend(), truth_log=truth) as server:
        # Codex configured as the harness configures it (CODEX.configure): the stand-in as its model provider, no
        # retries, codegraph as an MCP server in the with-arm, the deny rule in both
        mcp = (McpServer(CODEGRAPH.name, tuple(CODEGRAPH.mcp_command(CODEGRAPH_BIN, repo)), dict(CODEGRAPH.env)),)
        setup = AgentSetup(Path(home), Path(home), server.url, mcp if with_tool else (), CODEGRAPH.cli,
                           CODEGRAPH.deny_reason)  # fmt: skip
        config = CODEX.configure(setup)
        env = {**os.environ, **CODEX.environment(server.url), **config.env}
        thread: str | None = None  # a later question resumes the first one's thread
        for turn, question in enumerate(questions, start=1):
            name = "events.jsonl" if turn == 1 else f"events.t{turn}.jsonl"
            with (out / name).open("w", encoding="utf-8") as events:
                done = subprocess.run(exec_command(codex, question, thread), cwd=repo, env=env,
                                      stdin=subprocess.DEVNULL, stdout=events, timeout=300)  # fmt: skip
            thread = thread or json.loads((out / name).read_text(encoding="utf-8").splitlines()[0])["thread_id"]
        rollouts = sorted(Path(config.files["codex_home"], "sessions").rglob("rollout-*.jsonl"))
        if len(rollouts) != 1:
            print(f"expected one rollout file, found {rollouts}", file=sys.stderr)
            return 1
        shutil.copyfile(rollouts[0], out / rollouts[0].name)
        (out / "last-request.json").write_text(json.dumps(server.requests[-1], indent=1) + "\n", encoding="utf-8")
        print(f"codex exited {done.returncode}; {len(server.requests)} request(s); {server.errors or 'no errors'}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
