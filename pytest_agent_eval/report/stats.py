"""The statistics behind every per-arm figure: paired differences, a bootstrap CI, the small-n warning.

Runs make 1–5 explore calls, so one run's figures are coarse: every figure is shown as a median with its
range, arms are compared run against run, and n=1 carries a warning (seed 001: "never n=1").
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence


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
        return "n=1: never read a single run (seeds: never n=1)"
    return None
