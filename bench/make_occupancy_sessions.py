"""Sessions of the real Claude Code CLI, served by the stand-in, that do to the context what real models do, with
the server's truth: the corpus of ``bench/occupancy_accuracy.py``'s classes beyond ``calibration``/``held-out``.

    python bench/make_occupancy_sessions.py [--tokenizer NAME] [--classes A,B] [OUT_DIR]

OUT_DIR (default: bench/data for the ``stand-in`` counting model, bench/data/tokenizers/NAME for another) gets
``transcripts/<class>/`` and ``truth.jsonl``. ``--tokenizer`` is the stand-in's counting model
(:mod:`pytest_agent_eval.model.tokenizers`: ``stand-in``, ``uniform``, ``o200k_base``, ``cl100k_base``; the BPE ones
read js-tiktoken's ranks, ``npm install``-ed into the provisioning cache on first use).

Classes (each a folder under ``transcripts/``, each session a with-arm and a without-arm on this package's own
source, codegraph indexing it):

* ``ordinary``: one question, no thinking (what ``calibration``/``held-out`` are on the corpus entries);
* ``multi-turn``: three questions, each later one ``--resume``-d;
* ``growth``: context the server counts beside a tool result that no transcript shows, and no thinking
  (``server_context``: 1,500 to 6,000 tokens);

* ``hidden-thinking``: thinking the model counts but streams empty, or only summarised (300 to 12,000 tokens);
* ``long-thinking``: 5,000 to 20,000 characters of visible thinking in the turns that call tools;
* ``compaction``: Claude Code compacts mid tool-loop (``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``), once or twice, keeping
  the last call and its result (``compact_metadata.preserved_messages``), or after a turn, keeping nothing.

Needs the provisioned CLI and codegraph (``~/.cache/pytest-agent-eval``); talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.tokenizers import TOKENIZER_NAMES, count_with
from pytest_agent_eval.settings.config import cache_root

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
SOURCE = REPO / "pytest_agent_eval"
CODEGRAPH_VERSION = "1.6.1"
RUN_TIMEOUT_S = 300
# Claude Code's compaction threshold under CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: that share of the window less its 20k
# output reserve. The window is set too (the CLI takes this model's as 1M): 200k, so 1,800 tokens a percent.
COMPACT_WINDOW = 200_000
TOKENS_PER_PERCENT = 1_800


@dataclass
class Case:
    """One session: the questions (later ones ``--resume``), the policy's options, the CLI's environment."""

    split: str
    name: str
    questions: list[str]
    policy: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def _compact_at(tokens: int) -> dict[str, str]:
    return {
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(COMPACT_WINDOW),
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": f"{tokens / TOKENS_PER_PERCENT:.2f}",
    }


ROUTE = "How does occupancy price a tool result from the transcript gaps?"
LEAVE = "Where does the transcript reader handle a compact_boundary event?"
SERVE = "How does the stand-in server count the usage of a request?"
CASES = [
    Case("ordinary", "route", [ROUTE]),
    Case("ordinary", "serve", [SERVE]),
    Case("multi-turn", "three", [ROUTE, LEAVE, SERVE]),
    Case("growth", "one", [ROUTE], {"server_context": (0, 3_000)}),
    Case("growth", "every-step", [SERVE, LEAVE], {"server_context": (1_500, 0, 6_000)}),
    Case("hidden-thinking", "empty", [ROUTE], {"hidden_thinking": (0, 3_000, 0, 12_000)}),
    Case("hidden-thinking", "summarised", [LEAVE], {"hidden_thinking": (0, 300, 2_000), "summarised": True}),
    Case("hidden-thinking", "every-turn", [SERVE, ROUTE], {"hidden_thinking": (6_000, 0, 800)}),
    Case("long-thinking", "single", [ROUTE], {"visible_thinking": (5_000, 20_000, 8_000)}),
    Case("long-thinking", "resumed", [LEAVE, SERVE], {"visible_thinking": (12_000, 6_000)}),
    Case("compaction", "preserved", [ROUTE], {}, _compact_at(38_500)),
    Case("compaction", "twice", [SERVE, LEAVE], {}, _compact_at(44_000)),
    Case("compaction", "thinking", [LEAVE], {"hidden_thinking": (2_000, 0, 4_000)}, _compact_at(46_000)),
]


def tools() -> tuple[Path, Path]:
    cache = cache_root()
    claude = cache / "claude" / CLAUDE_CODE.version / "node_modules" / ".bin" / "claude"
    codegraph = cache / "codegraph" / CODEGRAPH_VERSION / "node_modules" / ".bin" / "codegraph"
    for binary in (claude, codegraph):
        if not binary.exists():
            sys.exit(f"{binary}: not provisioned (run the harness once, or provision_claude / provision_tool)")
    return claude, codegraph


def prepare_repo(work: Path, codegraph: Path) -> Path:
    repo = work / "repo"
    shutil.copytree(SOURCE, repo / "pytest_agent_eval", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([str(codegraph), "init", "-y", str(repo)], cwd=repo, check=True, capture_output=True, timeout=300)
    return repo


def run_case(case: Case, arm: str, claude: Path, codegraph: Path, repo: Path, out: Path, truth: Path) -> None:
    folder = out / "transcripts" / case.split / f"{case.name}-{arm}"
    folder.mkdir(parents=True, exist_ok=True)
    servers = {"codegraph": {"command": str(codegraph), "args": ["serve", "--mcp", "--path", str(repo)]}}
    mcp = json.dumps({"mcpServers": servers if arm == "with" else {}})
    allowed = "Read,Grep,Glob,Bash" + (",mcp__codegraph__codegraph_explore" if arm == "with" else "")
    with serve(ScriptedBackend(**case.policy), truth_log=truth) as server:
        env = CLAUDE_CODE.process_environment(os.environ, server.url)
        env.update(case.env, HOME=str(folder.parent / f".home-{case.name}-{arm}"))
        session_id = None
        for turn, question in enumerate(case.questions, start=1):
            command = [str(claude), "-p", question, "--output-format", "stream-json", "--verbose",
                       "--permission-mode", "bypassPermissions", "--model", "claude-sonnet-4-5",
                       "--setting-sources", "", "--strict-mcp-config", "--mcp-config", mcp,
                       "--allowedTools", allowed]  # fmt: skip
            if session_id:
                command += ["--resume", session_id]
            done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
            segment = folder / f"run-{arm}-1{'' if turn == 1 else f'.t{turn}'}.jsonl"
            segment.write_text(done.stdout, encoding="utf-8")
            if done.returncode:
                sys.exit(f"{segment}: the CLI failed ({done.returncode}): {done.stderr[-2000:]}")
            init = next(json.loads(line) for line in done.stdout.splitlines() if '"init"' in line)
            session_id = init["session_id"]
    shutil.rmtree(folder.parent / f".home-{case.name}-{arm}", ignore_errors=True)
    print(f"{folder}: {len(case.questions)} segment(s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", default="stand-in", choices=TOKENIZER_NAMES, help="counting model")
    parser.add_argument("--classes", default="", help="only these classes (comma-separated; default: every one)")
    parser.add_argument("out", nargs="?", type=Path, help="default: bench/data[/tokenizers/NAME]")
    args = parser.parse_args()
    out = args.out or (DATA if args.tokenizer == "stand-in" else DATA / "tokenizers" / args.tokenizer)
    count_with(args.tokenizer)  # the in-process server counts with it
    wanted = set(filter(None, args.classes.split(",")))
    claude, codegraph = tools()
    with tempfile.TemporaryDirectory(prefix="agent-eval-occupancy-") as work:
        repo = prepare_repo(Path(work), codegraph)
        for case in CASES:
            if wanted and case.split not in wanted:
                continue
            for arm in ("with", "without"):
                run_case(case, arm, claude, codegraph, repo, out, out / "truth.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
