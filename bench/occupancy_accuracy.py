"""Occupancy's estimate of each family's resident tokens against the truth the stand-in server counted.

    python bench/occupancy_accuracy.py [SESSIONS_DIR TRUTH_LOG]     # default: bench/data

Every session folder under SESSIONS_DIR (its ``run-*.jsonl`` segments stitched) is scored and held against
the server's count of its last main-thread request (:func:`~pytest_agent_eval.model.truth.resident_truth`).
Prints one row per session and family, then per split (the top folder: ``calibration``, ``held-out``, and the
classes ``bench/make_occupancy_sessions.py`` makes: ``hidden-thinking``, ``long-thinking``, ``compaction``):

* mean error: Σ |estimate − truth| over Σ truth, every family of every session (token-weighted);
* worst: the largest relative error of a family holding ≥ 1,000 tokens;
* misses: families off by more than max(2.5%, 40 tokens). Goal: mean ≤ 1%, no misses;
* evicted: occupancy's against the results the server counted that the last request no longer holds
  (:func:`~pytest_agent_eval.model.truth.evicted_truth`), summed; false: sessions where occupancy evicts more than
  EVICTION_FLOOR_TOKENS the server never dropped;
* unexplained: occupancy's growth no visible content explains, against the hidden thinking the server counted in the
  last request (reminders the CLI adds are in the first, not the second).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tabulate import tabulate

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.occupancy import EVICTION_FLOOR_TOKENS, FAMILIES, occupancy
from pytest_agent_eval.model.truth import evicted_truth, read_truth_log, resident_truth
from pytest_agent_eval.model.usage import PromptCount
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN, Session, segment_files

DATA = Path(__file__).resolve().parent / "data"
SIZABLE_TOKENS = 1_000
TOLERANCE_SHARE, TOLERANCE_TOKENS = 0.025, 40


def first_segments(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("run-*.jsonl") if ".t" not in p.name[len("run-") :])


def within(estimate: int, truth: int) -> bool:
    return abs(estimate - truth) <= max(TOLERANCE_SHARE * truth, TOLERANCE_TOKENS)


def last_count(session: Session, counts: dict[str, PromptCount]) -> PromptCount:
    """The server's count of the main thread's last request (resident_truth found it)."""
    measured = [m for m in session.messages(MAIN) if m.usage is not None and m.usage.ctx > 0]
    return counts[measured[-1].id]


def main() -> int:
    sessions = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA / "transcripts"
    counts = read_truth_log(sys.argv[2] if len(sys.argv) > 2 else DATA / "truth.jsonl")
    rows = []
    totals: dict[str, list[float]] = {}  # split → [Σ|error|, Σ truth, worst, misses, families]
    leaving: dict[str, list[int]] = {}  # split → [evicted, its truth, false evictions, unexplained, hidden]
    for first in first_segments(sessions):
        session = read_segments(segment_files(first))
        truth = resident_truth(session, counts, tool=CODEGRAPH)
        if truth is None:
            print(f"{first}: no truth for its last request, skipped")
            continue
        occ = occupancy(session, tool=CODEGRAPH)
        split = first.relative_to(sessions).parts[0]
        total = totals.setdefault(split, [0.0, 0.0, 0.0, 0, 0])
        left, last = leaving.setdefault(split, [0, 0, 0, 0, 0]), last_count(session, counts)
        truly_evicted = evicted_truth(session, counts) or 0
        for index, figure in enumerate((occ.evicted, truly_evicted, not truly_evicted and occ.evicted >
                                        EVICTION_FLOOR_TOKENS, occ.unexplained, last.hidden)):  # fmt: skip
            left[index] += figure
        for fam in FAMILIES:
            estimate, actual = occ.residual[fam], truth[fam]
            if not (estimate or actual):
                continue
            error = estimate - actual
            total[0] += abs(error)
            total[1] += actual
            if actual >= SIZABLE_TOKENS:
                total[2] = max(total[2], abs(error) / actual)
            total[3] += not within(estimate, actual)
            total[4] += 1
            relative = f"{error / actual:+.1%}" if actual else "n/a"
            ok = "" if within(estimate, actual) else "MISS"
            rows.append([split, first.parent.name, fam, f"{actual:,}", f"{estimate:,}", f"{error:+,}", relative, ok])
    print(tabulate(rows, headers=["split", "session", "family", "truth", "estimate", "error", "rel", ""]))
    print()
    for split, (errors, truths, worst, misses, families) in totals.items():
        evicted, truly, false, unexplained, hidden = leaving[split]
        print(
            f"{split:15} mean error {errors / truths:.3%} · worst {worst:.1%} (families ≥ {SIZABLE_TOKENS:,} tok) · "
            f"{misses} of {families} families off by more than max({TOLERANCE_SHARE:.1%}, {TOLERANCE_TOKENS} tok) · "
            f"evicted {evicted:,} (truth {truly:,}, {false} false) · unexplained {unexplained:,} (hidden {hidden:,})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
