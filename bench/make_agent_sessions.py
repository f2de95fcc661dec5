"""Sessions of the real Codex, Gemini and OpenCode CLIs against the stand-in, under each of its counting models, with
the server's truth keyed by each session's own messages: the corpus of ``bench/agent_occupancy.py``.

    python bench/make_agent_sessions.py [--tokenizer NAME …] [--agent NAME …] [OUT_DIR]   # default: bench/data/agents

Per counting model (``stand-in``, ``uniform``, ``o200k_base``, ``cl100k_base``; default: all) and agent (``codex``,
``gemini``, ``opencode``; default: all), on express (the corpus entry, indexed), run as the harness runs an arm (the
sandbox, the agent's own config; tests/support/agent_cli.py): ``plain-with``, ``plain-without`` (one question),
``delegated-with``, ``delegated-without`` (the stand-in first hands the question to the agent's own subagent) and
``two-turns-with`` (a second question resumes the session). Each goes to ``OUT_DIR/<model>/<agent>/<case>/``: the
files the agent's reader reads (``CodingAgent.record_files``, named as the driver named them) and ``truth.jsonl``, the
stand-in's counts keyed by the session's message ids (``Arm.truth_by_message``: paired with the responses for an
agent that names its messages by its own ids; by arrival for Gemini CLI, whose records keep no response id).

Needs the provisioned CLIs and codegraph (``~/.cache/pytest-agent-eval``), bubblewrap; talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # support.agent_cli: the harness's way of running one arm

from support.agent_cli import QUESTION, run_arm  # noqa: E402

from pytest_agent_eval.agents import agent_named  # noqa: E402
from pytest_agent_eval.corpus.load import load_corpus  # noqa: E402
from pytest_agent_eval.corpus.repos import fetch_repo  # noqa: E402
from pytest_agent_eval.harness.index import indexed_copy  # noqa: E402
from pytest_agent_eval.harness.provision import provision_tool  # noqa: E402
from pytest_agent_eval.metrics.truth import read_truth_log  # noqa: E402
from pytest_agent_eval.model import ScriptedBackend  # noqa: E402
from pytest_agent_eval.model.tokenizers import TOKENIZER_NAMES, count_with  # noqa: E402
from pytest_agent_eval.settings.config import AgentEvalConfig, cache_root  # noqa: E402
from pytest_agent_eval.tool import CODEGRAPH  # noqa: E402

DATA = REPO / "bench" / "data" / "agents"
AGENTS = ("codex", "gemini", "opencode")
SECOND = "Where is the ETag function configured, and how does the app setting reach res.send?"
# case → (questions, the stand-in delegates first, with the tool)
CASES = {
    "plain-with": ((QUESTION,), False, True),
    "plain-without": ((QUESTION,), False, False),
    "delegated-with": ((QUESTION,), True, True),
    "delegated-without": ((QUESTION,), True, False),
    "two-turns-with": ((QUESTION, SECOND), False, True),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", action="append", choices=TOKENIZER_NAMES, help="default: every one")
    parser.add_argument("--agent", action="append", choices=AGENTS, help="default: every one")
    parser.add_argument("out", nargs="?", type=Path, default=DATA)
    args = parser.parse_args()
    cache = cache_root()
    codegraph = provision_tool(CODEGRAPH, CODEGRAPH.version, cache)
    entry = next(e for e in load_corpus(REPO / "corpus.json") if e.name == "express")
    express = indexed_copy(fetch_repo(entry, AgentEvalConfig().corpus_dir, offline=True), CODEGRAPH, codegraph, cache)
    for name in args.tokenizer or TOKENIZER_NAMES:
        count_with(name)  # the in-process server counts with it
        for agent_name in args.agent or AGENTS:
            agent = agent_named(agent_name)
            build = agent.provision(cache)
            for case, (questions, delegate, with_tool) in CASES.items():
                out = args.out / name / agent_name / case
                with tempfile.TemporaryDirectory(prefix="agent-occupancy-") as folder:
                    arm = run_arm(agent, Path(folder), express, build, cache, questions,
                                  codegraph=codegraph if with_tool else None,
                                  model=ScriptedBackend(delegate=delegate))  # fmt: skip
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir(parents=True)
                    for path in filter(Path.exists, agent.record_files(arm.run.segments)):  # what this run kept
                        target = out / path.relative_to(arm.run.segments[0].parent)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        (shutil.copytree if path.is_dir() else shutil.copyfile)(path, target)
                    counts = arm.truth_by_message()
                    if not counts:  # Gemini CLI's records keep no response id: the N-th message is the N-th answer
                        ids = [m.id for m in arm.session.messages(thread=None)]
                        counts = dict(zip(ids, read_truth_log(arm.truth).values(), strict=True))
                    with (out / "truth.jsonl").open("w", encoding="utf-8") as log:
                        for message_id, count in counts.items():
                            log.write(json.dumps({"message_id": message_id, **count.to_dict()}) + "\n")
                print(f"{out}: exit {arm.run.exit_codes}, {len(arm.requests)} request(s), {len(counts)} paired",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
