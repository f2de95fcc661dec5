"""Record one real Gemini CLI session against the scripted stand-in (how this folder's sessions were made).

    python tests/data/gemini/record.py OUT [--without] [--no-requests] [--delegate] [QUESTION [QUESTION …]]

Gemini CLI (``@google/gemini-cli@0.61.0``) and codegraph are provisioned into the harness's cache
(``~/.cache/pytest-agent-eval``, or ``$AGENT_EVAL_CACHE``) as the harness provisions them, express is taken from the
cache's corpus and indexed there; the arm is run as the harness runs it (tests/support/agent_cli.py:
``GEMINI.configure``, the sandbox, ``GEMINI.drive``). OUT gets ``events.jsonl`` (``events.t2.jsonl``, … for later
questions: each resumes the session), the chat record under Gemini CLI's own name (``session-<time>-<id
prefix>.jsonl``), ``truth.jsonl`` (the stand-in's counts per request, in arrival order) and, unless ``--no-requests``,
``requests.jsonl`` (the model server's record of every request and its answer). ``--without``: the without-arm (no MCP
server, no index). ``--delegate``: the stand-in hands each question to Gemini CLI's ``codebase_investigator``
first (``ScriptedBackend(delegate=True)``); the subagent's chat record is copied as Gemini CLI keeps it,
``<session id>/<agent id>.jsonl``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: support.agent_cli

from support.agent_cli import QUESTION, run_arm
from support.paths import REPO

from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.corpus.load import load_corpus
from pytest_agent_eval.corpus.repos import fetch_repo
from pytest_agent_eval.harness.index import indexed_copy
from pytest_agent_eval.harness.provision import provision_tool
from pytest_agent_eval.model import ScriptedBackend
from pytest_agent_eval.settings.config import AgentEvalConfig, cache_root
from pytest_agent_eval.tool import CODEGRAPH


def main() -> int:
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out, questions = Path(args[0]), tuple(args[1:]) or (QUESTION,)
    cache = cache_root()
    gemini = GEMINI.provision(cache, GEMINI.version)
    codegraph = provision_tool(CODEGRAPH, CODEGRAPH.version, cache)
    entry = next(e for e in load_corpus(REPO / "corpus.json") if e.name == "express")
    express = indexed_copy(fetch_repo(entry, AgentEvalConfig().corpus_dir, offline=True), CODEGRAPH, codegraph, cache)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gemini-record-") as folder:
        arm = run_arm(GEMINI, Path(folder), express, gemini, cache, questions,
                      codegraph=None if "--without" in flags else codegraph,
                      model=ScriptedBackend(delegate="--delegate" in flags))  # fmt: skip
        for turn, segment in enumerate(arm.run.segments, start=1):
            shutil.copyfile(segment, out / ("events.jsonl" if turn == 1 else f"events.t{turn}.jsonl"))
        chats = sorted((arm.workspace.home / ".gemini" / "tmp").glob("*/chats/*"))
        print("chat records:", [(c.name, c.stat().st_size) for c in chats])
        [chat] = [c for c in chats if c.name.endswith(f"{arm.session.session_id[:8]}.jsonl")]
        shutil.copyfile(chat, out / chat.name)
        if (subagents := chat.parent / arm.session.session_id).is_dir():
            shutil.copytree(subagents, out / subagents.name)
        shutil.copyfile(arm.truth, out / "truth.jsonl")
        if "--no-requests" not in flags:
            shutil.copyfile(arm.record, out / "requests.jsonl")
    print(f"gemini exited {arm.run.exit_codes}; {len(arm.requests)} request(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
