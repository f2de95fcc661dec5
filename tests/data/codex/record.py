"""Record one real Codex CLI session against the scripted stand-in (how this folder's session was made).

    python tests/data/codex/record.py CODEX REPO OUT [QUESTION]

CODEX: the ``codex`` executable (``npm install --prefix P @openai/codex@0.171.0`` → P/node_modules/.bin/codex);
REPO: a repository codegraph has indexed (``codegraph init -y REPO``); OUT: where ``events.jsonl`` (the ``--json``
stream), ``rollout.jsonl`` (Codex's own session file), ``truth.jsonl`` (the stand-in's counts) and
``requests.json`` (every request Codex sent) are written. codegraph is taken from the shared cache
(``~/.cache/pytest-agent-eval/codegraph/1.6.1``), as the harness provisions it.
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


def config_toml(url: str, repo: Path) -> str:
    """Codex's config: the stand-in as its model provider, no retries, codegraph as an MCP server. The model is
    one Codex has no metadata for: every model it knows offers MCP tools only behind ``tool_search`` (deferred),
    an unknown one gets them offered up front as a namespace (and a warning item in the event stream)."""
    args = json.dumps([a.replace("{repo}", str(repo)) for a in CODEGRAPH.serve_args])
    env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in CODEGRAPH.env.items())
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

[mcp_servers.codegraph]
command = "{CODEGRAPH_BIN}"
args = {args}
env = {{ {env} }}
"""


def main() -> int:
    codex, repo, out = Path(sys.argv[1]), Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    question = sys.argv[4] if len(sys.argv) > 4 else QUESTION
    out.mkdir(parents=True, exist_ok=True)
    truth = out / "truth.jsonl"
    truth.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="codex-home-") as home, serve(ScriptedBackend(), truth_log=truth) as server:
        Path(home, "config.toml").write_text(config_toml(server.url, repo), encoding="utf-8")
        command = [str(codex), "exec", "--json", "--skip-git-repo-check", "--disable", "plugins", "--disable",
                   "remote_plugin", "-c", "analytics.enabled=false", question]  # fmt: skip
        env = {**os.environ, "CODEX_HOME": home, KEY_VAR: "stand-in"}
        with (out / "events.jsonl").open("w", encoding="utf-8") as events:
            done = subprocess.run(command, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=events, timeout=300)
        rollouts = sorted(Path(home, "sessions").rglob("rollout-*.jsonl"))
        if len(rollouts) != 1:
            print(f"expected one rollout file, found {rollouts}", file=sys.stderr)
            return 1
        shutil.copyfile(rollouts[0], out / "rollout.jsonl")
        (out / "requests.json").write_text(json.dumps(server.requests, indent=1) + "\n", encoding="utf-8")
        print(f"codex exited {done.returncode}; {len(server.requests)} request(s); {server.errors or 'no errors'}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
