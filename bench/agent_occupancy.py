"""Occupancy of the Codex, Gemini and OpenCode sessions against the stand-in's truth, under each counting model, beside
the simple calibrated estimate: the same measure as ``bench/occupancy_accuracy.py``, per agent and per family.

    python bench/agent_occupancy.py [--sessions] [ROOT]     # default: bench/data/agents

``ROOT/<model>/<agent>/<case>/`` holds what ``bench/make_agent_sessions.py`` made: the agent's records (read with its
own reader from the first segment, ``run-*.jsonl``) and ``truth.jsonl`` keyed by the session's message ids.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))  # occupancy_accuracy, beside this file

from occupancy_accuracy import GOAL, ClassScore, first_segments, score_session

from pytest_agent_eval.agents import agent_named
from pytest_agent_eval.metrics.truth import read_truth_log
from pytest_agent_eval.transcript import segment_files

DATA = Path(__file__).resolve().parent / "data" / "agents"


def score_agents(
    root: Path = DATA, rows: list[list[str]] | None = None
) -> dict[tuple[str, str], tuple[ClassScore, dict[str, ClassScore]]]:
    """(model, agent) → its sessions' figures, and each family's."""
    scores: dict[tuple[str, str], tuple[ClassScore, dict[str, ClassScore]]] = {}
    for model in sorted(p for p in root.iterdir() if p.is_dir()):
        for agent_dir in sorted(p for p in model.iterdir() if p.is_dir()):
            agent = agent_named(agent_dir.name)
            total, families = scores.setdefault((model.name, agent_dir.name), (ClassScore(), {}))
            for case in sorted(p for p in agent_dir.iterdir() if p.is_dir()):
                [first] = first_segments(case)
                session = agent.read_transcript(segment_files(first))
                counts = read_truth_log(case / "truth.jsonl")
                label = [model.name, agent_dir.name, case.name]
                if not score_session(session, counts, total, rows, label, families):
                    print(f"{case}: no truth for its last request, skipped")
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", action="store_true", help="one row per session and family first")
    parser.add_argument("root", nargs="?", type=Path, default=DATA)
    args = parser.parse_args()
    rows: list[list[str]] | None = [] if args.sessions else None
    scores = score_agents(args.root, rows)
    if rows:
        print(tabulate(rows, headers=["model", "agent", "case", "family", "truth", "estimate", "error", "rel",
                                      "simple", ""]))  # fmt: skip
        print()
    table = []
    for (model, agent), (s, families) in scores.items():
        flag = "" if s.mean <= GOAL and not s.false_evictions else " ✗"
        per_family = " · ".join(f"{fam} {f.mean:.2%}" for fam, f in sorted(families.items()))
        table.append([model, agent, s.sessions, f"{s.mean:.2%} ({s.simple_mean:.2%}){flag}", f"{s.misses}/{s.families}",
                      s.false_evictions, per_family])  # fmt: skip
    print("mean error: occupancy (simple estimate); ✗ over the 1% goal or a false eviction")
    print(tabulate(table, headers=["model", "agent", "sessions", "mean", "misses", "false", "per family"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
