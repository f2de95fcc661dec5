"""The statistics behind every per-arm figure: paired differences, a bootstrap CI, the small-n warning.

Runs make 1–5 explore calls, so one run's figures are coarse: every figure is shown as a median with its
range, arms are compared run against run, and n=1 carries a warning (docs/metrics/sufficiency.md, "Small n").
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence


# -- summaries -------------------------------------------------------------------------------------------------
def paired_differences(
    with_values: Mapping[int, float | None] | Sequence[float | None],
    without_values: Mapping[int, float | None] | Sequence[float | None],
) -> list[float]:
    """``with − without`` for every run index both arms have a value for, in run order.

    Sequences are indexed by position; mappings by their run number. A run missing (or None) on
    either side has no pair and is left out rather than paired with a neighbour.
    """
    left = _by_run(with_values)
    right = _by_run(without_values)
    return [left[run] - right[run] for run in sorted(left.keys() & right.keys())]


def paired_ratios(
    with_values: Mapping[int, float | None] | Sequence[float | None],
    without_values: Mapping[int, float | None] | Sequence[float | None],
) -> list[float]:
    """``with / without − 1`` for every run index both arms have a value for, in run order: the relative change
    of each pair. A pair whose ``without`` is zero has no relative change and is left out."""
    left = _by_run(with_values)
    right = _by_run(without_values)
    return [left[run] / right[run] - 1 for run in sorted(left.keys() & right.keys()) if right[run]]


def _by_run(values: Mapping[int, float | None] | Sequence[float | None]) -> dict[int, float]:
    pairs = values.items() if isinstance(values, Mapping) else enumerate(values, start=1)
    return {run: value for run, value in pairs if value is not None}


def bootstrap_ci(
    diffs: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diffs``; the same inputs give the same interval."""
    if not diffs:
        raise ValueError("bootstrap_ci needs at least one difference")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, not {resamples}")
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return low, high


def small_n_warning(n: int) -> str | None:
    """The warning every figure over fewer than two runs carries; None when n is large enough to read."""
    if n <= 0:
        return "n=0: no scored run"
    if n == 1:
        return "n=1: one run is no measurement (give --agent-eval-runs 2 or more)"
    return None


MIN_RUNS_TO_DECIDE = 3  # a noise-aware rule needs this many runs a side: fewer make no interval worth trusting


def change_interval(
    before: Mapping[int, float],
    after: Mapping[int, float],
    change: Callable[[float, float], float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float, bool]:
    """``change(mean before, mean after)`` and its percentile bootstrap interval: ``(value, low, high, paired)``.

    Runs pair (run k before with run k after: a replay of run k is run k) when both sides hold the same run
    numbers; then the pairs are resampled together. Otherwise each side is resampled on its own.
    """
    if not before or not after:
        raise ValueError("change_interval needs at least one value a side")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    rng = random.Random(seed)
    paired = before.keys() == after.keys() and len(before) > 1
    runs = sorted(before)
    values = []
    for _ in range(resamples):
        if paired:
            picked = rng.choices(runs, k=len(runs))
            left, right = [before[r] for r in picked], [after[r] for r in picked]
        else:
            left = rng.choices(list(before.values()), k=len(before))
            right = rng.choices(list(after.values()), k=len(after))
        values.append(change(statistics.fmean(left), statistics.fmean(right)))
    values.sort()
    tail = (1 - confidence) / 2
    low = values[max(0, math.floor(tail * resamples))]
    high = values[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return change(statistics.fmean(before.values()), statistics.fmean(after.values())), low, high, paired
