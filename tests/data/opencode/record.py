"""Record a real OpenCode run against the scripted stand-in, for the unit tests (see README.md in this folder).

    python tests/data/opencode/record.py EXPRESS OUT [--without] [--delegate] [QUESTION...]

EXPRESS: an indexed copy of express (the with-arm's MCP server reads its index; the without-arm's copy leaves it
out); OUT: the folder to write; --delegate: the stand-in hands each question to OpenCode's `explore` subagent first
(`ScriptedBackend(delegate=True)`). OpenCode and codegraph are provisioned into the harness's cache, the run is
configured, sealed and driven as the harness does it (tests/support/agent_cli.py).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for support.agent_cli

from support.agent_cli import QUESTION, run_arm

from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.agents.opencode.transcript import kept_config, kept_cwd, kept_subagents
from pytest_agent_eval.harness.provision import provision_tool
from pytest_agent_eval.model import ScriptedBackend
from pytest_agent_eval.settings.config import cache_root
from pytest_agent_eval.tool import CODEGRAPH


def main() -> int:
    args = sys.argv[1:]
    without, delegate = "--without" in args, "--delegate" in args
    express, out, *questions = [Path(args[0]), Path(args[1]), *[a for a in args[2:] if not a.startswith("--")]]
    cache = cache_root()
    opencode = OPENCODE.provision(cache)
    codegraph = None if without else provision_tool(CODEGRAPH, CODEGRAPH.version, cache)
    with tempfile.TemporaryDirectory(prefix="opencode-record-") as folder:
        arm = run_arm(OPENCODE, Path(folder), express, opencode, cache, tuple(questions) or (QUESTION,),
                      codegraph=codegraph, model=ScriptedBackend(delegate=delegate))  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        for turn, segment in enumerate(arm.run.segments, start=1):
            shutil.copyfile(segment, out / ("events.jsonl" if turn == 1 else f"events.t{turn}.jsonl"))
        for kept in (kept_config, kept_cwd, kept_subagents):
            if kept(arm.run.segments[0]).is_file():
                shutil.copyfile(kept(arm.run.segments[0]), kept(out / "events.jsonl"))
        shutil.copyfile(arm.truth, out / "truth.jsonl")
        shutil.copyfile(arm.record, out / "requests.jsonl")
    print(json.dumps({"out": str(out), "requests": len(arm.requests), "messages": len(arm.session.messages())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
