"""The statistics behind every per-arm figure: paired differences, the interval of their mean (its method chosen
from how many pairs there are), how many pairs would decide, the small-n warning.

Runs make 1–5 explore calls, so one run's figures are coarse: every figure is shown as a median with its
range, arms are compared run against run, and n=1 carries a warning (docs/metrics/sufficiency.md, "Small n").
An interval is stated only where it holds (docs/report.md, "How sure"): below :data:`MIN_PAIRS_FOR_INTERVAL`
pairs none is; up to :data:`BOOTSTRAP_MIN_PAIRS` a Student t interval (exact for normal differences, and it
widens as few pairs demand); from there a percentile bootstrap, which needs that many to see the tails.
``bench/interval_coverage.py`` checks by simulation that the stated 95% holds.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


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


# -- the interval of a mean, its method chosen from the data -----------------------------------------------------
MIN_PAIRS_FOR_INTERVAL = 3  # two pairs give a t interval 12.7 standard errors wide either way: nothing to read
BOOTSTRAP_MIN_PAIRS = 30  # below this a bootstrap sees too few values to know the tails, and claims too much
T, BOOTSTRAP, SAME, TOO_FEW = "t", "bootstrap", "same", "too few"


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` values and what can be said of it: ``method`` is ``t`` or ``bootstrap`` (an interval
    ``[low, high]``), ``same`` (every value equal: no spread to make an interval of), or ``too few`` (no interval);
    ``sd`` is the values' standard deviation (None below two)."""

    n: int
    mean: float
    low: float | None
    high: float | None
    method: str
    sd: float | None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def scaled(self, factor: float) -> Interval:
        """The same interval in another unit (a ratio as percent: ``scaled(100)``); its method and note unchanged."""
        low = self.low * factor if self.low is not None else None
        high = self.high * factor if self.high is not None else None
        sd = abs(self.sd * factor) if self.sd is not None else None
        return Interval(self.n, self.mean * factor, low, high, self.method, sd)

    @property
    def note(self) -> str:
        """Why there is no interval, or which one it is: ``n=2: too few pairs for an interval``, ``every run
        gave the same value``, ``t, 5 pairs``, ``bootstrap, 40 pairs``."""
        if self.method == TOO_FEW:
            return f"n={self.n}: too few pairs for an interval"
        if self.method == SAME:
            return f"every run gave the same value, {_pairs(self.n)}"
        return f"{self.method}, {_pairs(self.n)}"


def _pairs(n: int) -> str:
    return f"{n} pair{'' if n == 1 else 's'}"


def mean_interval(values: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Interval:
    """The mean of ``values`` with the interval their number allows (see the module's docstring); every value the
    same is said as such, never as a point interval. Deterministic: the same values give the same interval."""
    if not values:
        raise ValueError("mean_interval needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    n, mean = len(values), statistics.fmean(values)
    sd = statistics.stdev(values) if n > 1 else None
    if n > 1 and max(values) - min(values) <= 1e-12 * max(1.0, abs(mean)):
        return Interval(n, mean, None, None, SAME, 0.0)
    if n < MIN_PAIRS_FOR_INTERVAL or sd is None:
        return Interval(n, mean, None, None, TOO_FEW, sd)
    if n < BOOTSTRAP_MIN_PAIRS:
        half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
        return Interval(n, mean, mean - half, mean + half, T, sd)
    low, high = bootstrap_ci(values, confidence, resamples, seed)
    return Interval(n, mean, low, high, BOOTSTRAP, sd)


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student t quantile: ``P(|T| < q) = confidence`` with ``df`` degrees of freedom (bisection
    on the exact distribution function; no SciPy needed)."""
    if df < 1:
        raise ValueError(f"a t quantile needs at least one degree of freedom, not {df}")
    low, high = 0.0, 1.0
    while _t_within(high, df) < confidence:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_within(middle, df) < confidence else (low, middle)
    return (low + high) / 2


def _t_within(q: float, df: int) -> float:
    """``P(|T| < q)`` for integer ``df``: the closed form of Abramowitz & Stegun 26.7.3/26.7.4."""
    theta = math.atan(q / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:  # odd: 2/π (θ + sinθ cosθ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …))
        if df == 1:
            return 2 * theta / math.pi
        term = total = 1.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term = total = 1.0  # even: sinθ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …)
    for k in range(1, (df - 2) // 2 + 1):
        term *= cos2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


# -- how many pairs would decide --------------------------------------------------------------------------------
POWER = 0.8  # the usual chance of seeing a change that is there
PLAN_CHANGES = (0.1, 0.25)  # the changes the verdict sizes a campaign for: a tenth, a quarter


def pairs_needed(sd: float | None, change: float, confidence: float = 0.95, power: float = POWER) -> int | None:
    """How many paired runs make a ``confidence`` t interval exclude no change, with probability ``power``,
    when the pairs' true mean change is ``change`` and their spread ``sd``: the smallest n with
    ``(t(n−1) + z(power)) · sd / √n ≤ |change|`` — never fewer than :data:`MIN_PAIRS_FOR_INTERVAL`. None when the
    spread is unknown (fewer than two pairs)."""
    if sd is None:
        return None
    if change == 0:
        raise ValueError("pairs_needed: a change of 0 cannot be told from noise")
    z = statistics.NormalDist().inv_cdf(power)
    normal = statistics.NormalDist().inv_cdf((1 + confidence) / 2)  # t's large-n limit: where the search starts
    n = max(MIN_PAIRS_FOR_INTERVAL, math.floor(((normal + z) * sd / abs(change)) ** 2))
    while (t_quantile(confidence, n - 1) + z) * sd / math.sqrt(n) > abs(change):
        n += 1
    return n
