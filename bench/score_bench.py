"""Scoring throughput against bare JSON decoding of the same lines.

    python bench/score_bench.py [FILE_OR_DIR …]      # default: bench/data/transcripts

Prints MB/s for scoring (read + every metric) and for bare ``json.loads`` of the same lines, and their
ratio. Goal: scoring costs at most 1.5× bare decoding. Times are this process's CPU time, the best of
several rounds that run both in turn: on a machine shared with other work, wall time measures the neighbours.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pytest_agent_eval.score import score
from pytest_agent_eval.transcript import Session

# Sessions of the real Claude Code CLI with real codegraph responses, made through this project's harness
# (bench/data/README.md): the explore-heavy traffic scoring has to keep up with.
DEFAULT = Path(__file__).resolve().parent / "data" / "transcripts"
SUFFIXES = (".jsonl", ".txt", ".ndjson")
REPEATS = 15


def transcripts(args: list[str]) -> list[Path]:
    roots = [Path(a) for a in args] or [DEFAULT]
    files = []
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES) if root.is_dir() else [root]
    return files


def best_of(repeats: int, *works: Callable[[], None]) -> list[float]:
    """The best time of each ``work`` over ``repeats`` rounds, run in turn within each round, so load from
    other processes on the machine weighs on all of them alike."""
    best = [float("inf")] * len(works)
    for _ in range(repeats):
        for i, work in enumerate(works):
            start = time.process_time()
            work()
            best[i] = min(best[i], time.process_time() - start)
    return best


def main() -> int:
    files = transcripts(sys.argv[1:])
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6

    def decode() -> None:
        for text in texts:
            for line in text.splitlines():
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError:
                        pass

    def scoring() -> None:
        for text in texts:
            score(Session.from_lines(text.splitlines()))

    bare, scored = best_of(REPEATS, decode, scoring)
    print(f"{len(files)} transcripts, {megabytes:.2f} MB")
    print(f"bare json.loads   {megabytes / bare:8.1f} MB/s")
    print(f"scoring           {megabytes / scored:8.1f} MB/s")
    print(f"ratio             {scored / bare:8.2f}x   (goal <= 1.50x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
