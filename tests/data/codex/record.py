"""Record one real Codex CLI session against the scripted stand-in (how this folder's session was made).

    python tests/data/codex/record.py CODEX REPO OUT [--without] [QUESTION [QUESTION …]]

CODEX: the ``codex`` executable (``npm install --prefix P @openai/codex@0.171.0`` → P/node_modules/.bin/codex);
REPO: a repository codegraph has indexed (``codegraph init -y REPO``); OUT: where ``events.jsonl`` (the ``--json``
stream), ``rollout-…-<thread id>.jsonl`` (Codex's own session file, named as Codex names it), ``truth.jsonl``
(the stand-in's counts) and ``last-request.json`` (the last request Codex sent: it holds the whole history) are
written. codegraph is taken from the shared cache (``~/.cache/pytest-agent-eval/codegraph/1.6.1``), as the
harness provisions it. ``--without``: the without-arm, no MCP server, and a deny rule (``$CODEX_HOME/rules/``)
forbidding the codegraph CLI. A second question (and any later one) resumes the session (``codex exec resume
<thread id>``): its events go to ``events.t2.jsonl`` (…), the rollout is the one Codex appends to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.tool import CODEGRAPH

CODEGRAPH_BIN = Path.home() / ".cache/pytest-agent-eval/codegraph" / CODEGRAPH.version / "node_modules/.bin/codegraph"
QUESTION = "How does res.send decide the Content-Type and ETag?"
KEY_VAR = "STANDIN_API_KEY"


DENY_RULE = f"""prefix_rule(
    pattern = ["{CODEGRAPH.cli}"],
    decision = "forbidden",
    justification = "{CODEGRAPH.deny_reason}",
)
"""


def config_toml(url: str, repo: Path, with_tool: bool) -> str:
    """Codex's config: the stand-in as its model provider, no retries, codegraph as an MCP server. The model is
    one Codex has no metadata for: every model it knows offers MCP tools only behind ``tool_search`` (deferred),
    an unknown one gets them offered up front as a namespace (and a warning item in the event stream)."""
    args = json.dumps([a.replace("{repo}", str(repo)) for a in CODEGRAPH.serve_args])
    env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in CODEGRAPH.env.items())
    mcp = f"""
[mcp_servers.codegraph]
command = "{CODEGRAPH_BIN}"
args = {args}
env = {{ {env} }}
required = true
"""
    return f"""model = "{ScriptedBackend.stand_in_model}"
model_provider = "standin"
approval_policy = "never"
sandbox_mode = "danger-full-access"
web_search = "disabled"

[model_providers.standin]
name = "standin"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "{KEY_VAR}"
request_max_retries = 0
stream_max_retries = 0
""" + (mcp if with_tool else "")


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--without"]
    with_tool = len(args) == len(sys.argv) - 1
    codex, repo, out = Path(args[0]), Path(args[1]).resolve(), Path(args[2])
    questions = args[3:] or [QUESTION]
    out.mkdir(parents=True, exist_ok=True)
    truth = out / "truth.jsonl"
    truth.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="codex-home-") as home, serve(ScriptedBackend(), truth_log=truth) as server:
        Path(home, "config.toml").write_text(config_toml(server.url, repo, with_tool), encoding="utf-8")
        if not with_tool:
            Path(home, "rules").mkdir()
            Path(home, "rules", "deny.rules").write_text(DENY_RULE, encoding="utf-8")
        env = {**os.environ, "CODEX_HOME": home, KEY_VAR: "stand-in"}
        thread: list[str] = []  # a later question resumes the first one's thread
        for turn, question in enumerate(questions, start=1):
            flags = ["--json", "--skip-git-repo-check", "--disable", "plugins", "--disable", "remote_plugin",
                     "-c", "analytics.enabled=false"]  # fmt: skip
            command = [str(codex), "exec", *(["resume", *thread] if thread else []), *flags, question]
            name = "events.jsonl" if turn == 1 else f"events.t{turn}.jsonl"
            with (out / name).open("w", encoding="utf-8") as events:
                done = subprocess.run(command, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=events, timeout=300)
            thread = thread or [json.loads((out / name).read_text(encoding="utf-8").splitlines()[0])["thread_id"]]
        rollouts = sorted(Path(home, "sessions").rglob("rollout-*.jsonl"))
        if len(rollouts) != 1:
            print(f"expected one rollout file, found {rollouts}", file=sys.stderr)
            return 1
        shutil.copyfile(rollouts[0], out / rollouts[0].name)
        (out / "last-request.json").write_text(json.dumps(server.requests[-1], indent=1) + "\n", encoding="utf-8")
        print(f"codex exited {done.returncode}; {len(server.requests)} request(s); {server.errors or 'no errors'}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
