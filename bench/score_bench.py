"""Scoring throughput against bare JSON decoding of the same lines.

    python bench/score_bench.py [--runs N] [--stages] [--instructions] [FILE_OR_DIR …]   # default: bench/data

Prints MB/s for scoring as ``agent-eval score`` does it (each session's segments read from disk and stitched,
every metric, the text blocks rendered) and for bare ``json.loads`` of the same files' lines, and their
ratio. Goal: scoring costs at most 1.5× bare decoding. Times are this process's CPU time, the best of
100 rounds that run both in turn: on a machine shared with other work, wall time measures the neighbours (with
15 rounds, runs of the same code swung from 1.4× to 2.1×; with 100, single runs still swing by about ±7%). The
figure the goal is checked by is the median of ``--runs`` such runs (5 unless told).
``--stages`` also times each stage alone (reading the session, each metric, rendering), as a share of bare decoding.
``--instructions`` also counts the instructions of one round of each (valgrind's callgrind): a figure no
neighbour moves, to compare two versions by. It is not the goal's: the decoder's C code runs about twice as many
instructions a second as the interpreter does, so scoring takes 1.5× decoding's time with fewer instructions.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.allocation import allocation
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.occupancy import occupancy
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.metrics.sufficiency import sufficiency
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.explore_answer import explore_sections
from pytest_agent_eval.transcript import segment_files

# Sessions of the real Claude Code CLI with real codegraph responses, made through this project's harness
# (bench/data/README.md): the explore-heavy traffic scoring has to keep up with.
DEFAULT = Path(__file__).resolve().parent / "data" / "transcripts"
SUFFIXES = (".jsonl", ".txt", ".ndjson")
REPEATS = 100


def sessions(args: list[str]) -> list[list[Path]]:
    """Each session's segment files: a ``run-x.jsonl`` brings its ``run-x.tN.jsonl``, any other file is one."""
    roots = [Path(a) for a in args] or [DEFAULT]
    files: list[Path] = []
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES) if root.is_dir() else [root]
    later = {p for f in files if f.suffix == ".jsonl" for p in segment_files(f)[1:]}
    return [segment_files(f) if f.suffix == ".jsonl" else [f] for f in files if f not in later]


def best_of(repeats: int, *works: Callable[[], object]) -> list[float]:
    """The best time of each ``work`` over ``repeats`` rounds, run in turn within each round, so load from
    other processes on the machine weighs on all of them alike."""
    best = [float("inf")] * len(works)
    for _ in range(repeats):
        for i, work in enumerate(works):
            start = time.process_time()
            work()
            best[i] = min(best[i], time.process_time() - start)
    return best


def stage_times(grouped: list[list[Path]], decode: Callable[[], object]) -> None:
    """Each stage on its own, over sessions read beforehand, as a multiple of bare decoding (timed among them)."""
    read = [read_segments(segments) for segments in grouped]
    cards = [score(session, tool=CODEGRAPH) for session in read]
    sections = [explore_sections(session.calls, CODEGRAPH) for session in read]  # parsed once, as score() does
    stages: dict[str, Callable[[], object]] = {
        "session (read)": lambda: [read_segments(segments) for segments in grouped],
        "explore sections": lambda: [explore_sections(s.calls, CODEGRAPH) for s in read],
        "occupancy": lambda: [occupancy(s, tool=CODEGRAPH) for s in read],
        "sufficiency": lambda: [sufficiency(s, CODEGRAPH, parsed) for s, parsed in zip(read, sections, strict=True)],
        "allocation": lambda: [allocation(s, CODEGRAPH, (), parsed) for s, parsed in zip(read, sections, strict=True)],
        "contamination": lambda: [contamination(s, tool=CODEGRAPH) for s in read],
        "rendering": lambda: [render_scorecard(card) for card in cards],
    }
    bare, *times = best_of(REPEATS, decode, *stages.values())
    for name, seconds in zip(stages, times, strict=True):
        print(f"  {name:<18}{seconds / bare:6.2f}x")


def works(grouped: list[list[Path]]) -> dict[str, Callable[[], None]]:
    """Bare decoding of every file's lines, and scoring every session as ``agent-eval score`` does."""
    files = [f for segments in grouped for f in segments]

    def decode() -> None:
        for path in files:
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if line.strip():
                        try:
                            json.loads(line)
                        except ValueError:
                            pass

    def scoring() -> None:
        for segments in grouped:
            render_scorecard(score(read_segments(segments), tool=CODEGRAPH))

    return {"decode": decode, "score": scoring}


def instructions(work: str, paths: list[str]) -> float:
    """The instructions of one round of ``work``: this script run under callgrind with three rounds, less the
    same run with none (the imports, reading the corpus once to warm up)."""

    def counted(rounds: int) -> int:
        command = [sys.executable, __file__, "--rounds-of", work, str(rounds), *paths]
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
            capture_output=True,
            text=True,
            check=True,
        )
        return int(re.search(r"Collected : (\d+)", done.stderr).group(1))  # type: ignore[union-attr]

    return (counted(3) - counted(0)) / 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of 100 rounds, the median ratio the figure (5)")
    parser.add_argument("--stages", action="store_true", help="also time each stage alone")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (needs valgrind)")
    parser.add_argument("--rounds-of", nargs=2, metavar=("WORK", "N"), help=argparse.SUPPRESS)  # callgrind's run
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: at least 1")
    grouped = sessions(args.paths)
    work = works(grouped)
    if args.rounds_of:
        name, rounds = args.rounds_of
        for _ in range(int(rounds) + 1):  # one more: the warm-up both counts have
            work[name]()
        return 0
    files = [f for segments in grouped for f in segments]
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    print(f"{len(grouped)} sessions, {len(files)} transcript files, {megabytes:.2f} MB")
    ratios = []
    for run in range(1, args.runs + 1):
        bare, scored = best_of(REPEATS, work["decode"], work["score"])
        ratios.append(scored / bare)
        print(
            f"run {run}: bare json.loads {megabytes / bare:6.1f} MB/s, scoring {megabytes / scored:6.1f} MB/s, "
            f"ratio {scored / bare:.2f}x"
        )
    print(
        f"ratio, median of {args.runs} runs: {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}x; goal <= 1.50x)"
    )
    if args.stages:
        stage_times(grouped, work["decode"])
    if args.instructions:
        decoding, scoring = (instructions(name, args.paths) / 1e6 for name in ("decode", "score"))
        print(
            f"instructions      decoding {decoding:.1f} M, scoring {scoring:.1f} M a round: {scoring / decoding:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
