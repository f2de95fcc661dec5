"""The numbers behind every per-arm figure: ``median [min–max]``, paired differences, a bootstrap CI.

Runs make 1–5 explore calls, so one run's figures are coarse: every figure is shown as a median with its
range, arms are compared run against run, and n=1 carries a warning (seed 001: "never n=1").
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence

Formatter = Callable[[float], str]


# -- formatters ------------------------------------------------------------------------------------------------
def percent(value: float) -> str:
    """A share: ``0.549`` → ``54.9%``."""
    return f"{value:.1%}"


def tokens(value: float) -> str:
    """A token count as the seeds print it: ``54950`` → ``54.9k``, ``1_250_000`` → ``1.2M``."""
    if abs(value) >= 1_000_000:
        return f"{_floor1(value / 1_000_000)}M"
    if abs(value) >= 1000:
        return f"{_floor1(value / 1000)}k"
    return f"{value:.0f}"


def seconds(value: float) -> str:
    """``12.34`` → ``12.3s``; a minute or more → ``3m 05s``."""
    if round(value, 1) < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m {rest:02d}s"


def dollars(value: float) -> str:
    return f"${value:.2f}"


def number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


FORMATTERS: dict[str, Formatter] = {
    "percent": percent,
    "tokens": tokens,
    "seconds": seconds,
    "dollars": dollars,
    "number": number,
}


def _floor1(value: float) -> str:
    # Truncate rather than round, so 54,950 reads 54.9k as in the seeds and never rounds up past what was measured.
    return f"{math.floor(value * 10 + 1e-9) / 10:.1f}"


# -- summaries -------------------------------------------------------------------------------------------------
def median_range(values: Sequence[float | None], fmt: Formatter | str = number) -> str:
    """``median [min–max]`` over the values present; one value shows alone, none shows ``n/a``."""
    show = FORMATTERS[fmt] if isinstance(fmt, str) else fmt
    present = [v for v in values if v is not None]
    if not present:
        return "n/a"
    middle = show(statistics.median(present))
    if len(present) == 1:
        return middle
    return f"{middle} [{show(min(present))}–{show(max(present))}]"


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
