"""Occupancy's estimate of each family's resident tokens against the truth the stand-in server counted, under every
counting model the truth was made with, side by side with the simple calibrated estimate.

    python bench/occupancy_accuracy.py [--sessions] [SESSIONS_DIR TRUTH_LOG]

Default: every corpus under bench/data: ``transcripts/`` with ``truth.jsonl`` (the stand-in's own counting model),
and ``tokenizers/<NAME>/transcripts/`` with its ``truth.jsonl`` (``uniform``, ``o200k_base``, ``cl100k_base``:
``bench/make_occupancy_sessions.py --tokenizer NAME`` made them). Each session folder (its ``run-*.jsonl`` segments
stitched) is scored and held against the server's count of its last main-thread request
(:func:`~pytest_agent_eval.metrics.truth.resident_truth`). ``--sessions`` prints one row per session and family first.
Then per class (the top folder: ``calibration``, ``held-out``, ``ordinary``, ``multi-turn``, ``growth``,
``hidden-thinking``, ``long-thinking``, ``compaction``) and counting model:

* mean error: Σ |estimate − truth| over Σ truth, every family of every session (token-weighted), of occupancy and of
  the simple estimate (:func:`~pytest_agent_eval.metrics.occupancy.simple_estimate`), side by side;
* misses: families off by more than max(2.5%, 40 tokens). Goal: mean ≤ 1%, no misses;
* false evictions: sessions where occupancy evicts more than EVICTION_FLOOR_TOKENS the server never dropped;
* unexplained: occupancy's growth no visible content explains, against what the server hid in the last request
  (thinking it did not stream, context beside results; reminders the CLI adds are in the first, not the second);
* disagree: sessions whose occupancy the cross-check flags (it differs from the simple estimate by more than its
  error bar);
* beyond bar: of the families whose gaps read denser than the run's others (growth that is theirs or beside them,
  :attr:`~pytest_agent_eval.metrics.occupancy.Occupancy.denser`), those off by more than that bar and the tolerance.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.occupancy import EVICTION_FLOOR_TOKENS, FAMILIES, occupancy, simple_estimate
from pytest_agent_eval.metrics.truth import evicted_truth, read_truth_log, resident_truth
from pytest_agent_eval.model.usage import PromptCount
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN, Session, segment_files

DATA = Path(__file__).resolve().parent / "data"
SIZABLE_TOKENS = 1_000
TOLERANCE_SHARE, TOLERANCE_TOKENS = 0.025, 40
GOAL = 0.01
CLASS_ORDER = ("calibration", "held-out", "ordinary", "multi-turn", "growth", "hidden-thinking", "long-thinking",
               "compaction")  # fmt: skip


def first_segments(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("run-*.jsonl") if ".t" not in p.name[len("run-") :])


def within(estimate: int, truth: int) -> bool:
    return abs(estimate - truth) <= max(TOLERANCE_SHARE * truth, TOLERANCE_TOKENS)


def last_count(session: Session, counts: dict[str, PromptCount]) -> PromptCount:
    """The server's count of the main thread's last request (resident_truth found it)."""
    measured = [m for m in session.messages(MAIN) if m.usage is not None and m.usage.ctx > 0]
    return counts[measured[-1].id]


def corpora(root: Path = DATA) -> list[tuple[str, Path, Path]]:
    """(counting model, sessions dir, truth log) of every corpus under ``root``."""
    found = [("stand-in", root / "transcripts", root / "truth.jsonl")]
    for folder in sorted((root / "tokenizers").glob("*")) if (root / "tokenizers").is_dir() else []:
        found.append((folder.name, folder / "transcripts", folder / "truth.jsonl"))
    return [c for c in found if c[1].is_dir() and c[2].is_file()]


@dataclass
class ClassScore:
    """One class under one counting model: Σ|error| of occupancy and of the simple estimate, Σ truth, …"""

    errors: float = 0.0
    simple_errors: float = 0.0
    truths: float = 0.0
    worst: float = 0.0
    worst_tokens: int = 0  # the largest |estimate − truth| of one family of one session
    misses: int = 0
    families: int = 0
    sessions: int = 0
    evicted: int = 0
    truly_evicted: int = 0
    false_evictions: int = 0
    unexplained: int = 0
    hidden: int = 0
    disagree: int = 0
    bars: int = 0  # families occupancy gives a bar for growth that may be theirs or beside them (Occupancy.denser)
    beyond_bar: int = 0  # of them, those off by more than their bar and the tolerance

    @property
    def mean(self) -> float:
        return self.errors / self.truths if self.truths else 0.0

    @property
    def simple_mean(self) -> float:
        return self.simple_errors / self.truths if self.truths else 0.0


def score(
    sessions: Path, truth_log: Path, rows: list[list[str]] | None = None, model: str = ""
) -> dict[str, ClassScore]:
    """Every session under ``sessions`` held against ``truth_log``, per class; ``rows`` gets one per family."""
    counts = read_truth_log(truth_log)
    scores: dict[str, ClassScore] = {}
    for first in first_segments(sessions):
        session = read_segments(segment_files(first))
        split = first.relative_to(sessions).parts[0]
        label = [model, split, first.parent.name]
        if not score_session(session, counts, scores.setdefault(split, ClassScore()), rows, label):
            print(f"{first}: no truth for its last request, skipped")
    return {split: s for split, s in scores.items() if s.sessions}


def score_session(
    session: Session,
    counts: dict[str, PromptCount],
    s: ClassScore,
    rows: list[list[str]] | None = None,
    label: list[str] = (),
    families: dict[str, ClassScore] | None = None,
) -> bool:
    """One session held against the server's ``counts`` (keyed by its messages), added to ``s`` (and each family's
    figures to ``families``); ``rows`` gets one per family, led by ``label``. False where no count is its last
    request's."""
    truth = resident_truth(session, counts, tool=CODEGRAPH)
    if truth is None:
        return False
    occ = occupancy(session, tool=CODEGRAPH)
    simple = simple_estimate(session, CODEGRAPH)
    truly = evicted_truth(session, counts) or 0
    s.sessions += 1
    s.evicted += occ.evicted
    s.truly_evicted += truly
    s.false_evictions += not truly and occ.evicted > EVICTION_FLOOR_TOKENS
    s.unexplained += occ.unexplained
    s.hidden += last_count(session, counts).hidden
    s.disagree += bool(occ.cross_check)
    for fam in FAMILIES:
        estimate, actual = occ.residual[fam], truth[fam]
        if not (estimate or actual):
            continue
        for target in (s, *([families.setdefault(fam, ClassScore())] if families is not None else [])):
            target.errors += abs(estimate - actual)
            target.simple_errors += abs(simple.residual[fam] - actual)
            target.truths += actual
            target.worst_tokens = max(target.worst_tokens, abs(estimate - actual))
            if actual >= SIZABLE_TOKENS:
                target.worst = max(target.worst, abs(estimate - actual) / actual)
            target.misses += not within(estimate, actual)
            target.families += 1
            if fam in occ.denser:
                target.bars += 1
                target.beyond_bar += abs(estimate - actual) > max(occ.denser[fam], TOLERANCE_SHARE * actual,
                                                                  TOLERANCE_TOKENS)  # fmt: skip
        if rows is not None:
            error = estimate - actual
            relative = f"{error / actual:+.1%}" if actual else "n/a"
            ok = "" if within(estimate, actual) else "MISS"
            rows.append([*label, fam, f"{actual:,}", f"{estimate:,}", f"{error:+,}", relative,
                         f"{simple.residual[fam]:,}", ok])  # fmt: skip
    return True


def _ordered(classes: set[str]) -> list[str]:
    return [c for c in CLASS_ORDER if c in classes] + sorted(classes - set(CLASS_ORDER))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", action="store_true", help="one row per session and family first")
    parser.add_argument("corpus", nargs="*", type=Path, help="SESSIONS_DIR TRUTH_LOG (default: every bench corpus)")
    args = parser.parse_args()
    if args.corpus and len(args.corpus) != 2:
        parser.error("give both SESSIONS_DIR and TRUTH_LOG, or neither")
    found = [("given", *args.corpus)] if args.corpus else corpora()
    rows: list[list[str]] | None = [] if args.sessions else None
    by_model: dict[str, dict[str, ClassScore]] = {}
    for model, sessions, truth_log in found:
        print(f"scoring {model}: {sessions}", flush=True)
        by_model[model] = score(sessions, truth_log, rows, model)
    if rows:
        headers = ["model", "class", "session", "family", "truth", "estimate", "error", "rel", "simple", ""]
        print(tabulate(rows, headers=headers))
        print()
    classes = _ordered({c for scores in by_model.values() for c in scores})
    table = []
    for cls in classes:
        line = [cls]
        for model in by_model:
            s = by_model[model].get(cls)
            if s is None:
                line.append("—")
                continue
            flag = "" if s.mean <= GOAL and not s.false_evictions else " ✗"
            line.append(f"{s.mean:.2%} ({s.simple_mean:.2%}){flag}")
        table.append(line)
    overall = ["overall"]
    for scores in by_model.values():
        errors = sum(s.errors for s in scores.values())
        simple = sum(s.simple_errors for s in scores.values())
        truths = sum(s.truths for s in scores.values()) or 1
        overall.append(f"{errors / truths:.2%} ({simple / truths:.2%})")
    table.append(overall)
    print("mean error per class: occupancy (simple estimate); ✗ over the 1% goal or a false eviction")
    print(tabulate(table, headers=["class", *by_model]))
    print()
    detail = []
    for model, scores in by_model.items():
        for cls in _ordered(set(scores)):
            s = scores[cls]
            detail.append([model, cls, s.sessions, f"{s.mean:.3%}", f"{s.simple_mean:.3%}", f"{s.worst:.1%}",
                           f"{s.misses}/{s.families}", f"{s.evicted:,} ({s.truly_evicted:,})", s.false_evictions,
                           f"{s.unexplained:,} ({s.hidden:,})", s.disagree, f"{s.beyond_bar}/{s.bars}"])  # fmt: skip
    headers = ["model", "class", "sessions", "mean", "simple", "worst ≥1k", "misses", "evicted (truth)", "false",
               "unexplained (hidden)", "disagree", "beyond bar"]  # fmt: skip
    print(tabulate(detail, headers=headers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
