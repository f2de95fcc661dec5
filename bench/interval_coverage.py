"""Do the verdict's 95% intervals hold? Draw runs from known distributions, state the interval as the report does,
count how often it holds the true mean.

    python bench/interval_coverage.py                     # 1000 trials per cell, n = 2, 3, 5, 10, 30
    python bench/interval_coverage.py --trials 4000 --old # more trials; beside it, the bootstrap at every n

For each distribution (normal; skewed: lognormal σ=0.5; heavy-tailed: Student t, 3 degrees of freedom) and each
number of pairs n, it draws ``--trials`` samples of n values, asks
:func:`pytest_agent_eval.report.stats.mean_interval` for the interval the report would state, and prints the
share of stated intervals that hold the distribution's mean, and which method stated them (below three pairs
none is stated: ``no interval``). ``--old`` adds the percentile bootstrap at every n, what the report stated
before (docs/report.md, "How sure").
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_agent_eval.report.stats import bootstrap_ci, mean_interval

SIZES = (2, 3, 5, 10, 30)


@dataclass(frozen=True)
class Distribution:
    name: str
    draw: Callable[[random.Random], float]
    mean: float


def _student_t3(rng: random.Random) -> float:
    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
    return rng.gauss(0, 1) / math.sqrt(chi2 / 3)


DISTRIBUTIONS = (
    Distribution("normal", lambda rng: rng.gauss(-0.3, 0.2), -0.3),
    Distribution("skewed (lognormal σ=0.5)", lambda rng: rng.lognormvariate(0, 0.5), math.exp(0.125)),
    Distribution("heavy-tailed (t, 3 df)", _student_t3, 0.0),
)


@dataclass(frozen=True)
class Cell:
    """One distribution at one n: how many intervals were stated, how many held the mean, by which method."""

    stated: int
    held: int
    methods: tuple[str, ...]

    @property
    def coverage(self) -> float | None:
        return self.held / self.stated if self.stated else None


def coverage(dist: Distribution, n: int, trials: int, seed: int = 0, resamples: int = 2000, old: bool = False) -> Cell:
    """``trials`` samples of ``n`` draws: the stated intervals and how many held the mean (``old``: the
    percentile bootstrap at every n instead of the report's choice)."""
    rng = random.Random(seed)
    stated = held = 0
    methods: set[str] = set()
    for trial in range(trials):
        values = [dist.draw(rng) for _ in range(n)]
        if old:
            low, high = bootstrap_ci(values, resamples=resamples, seed=trial)
            methods.add("bootstrap")
        else:
            found = mean_interval(values, resamples=resamples, seed=trial)
            methods.add(found.method)
            if not found.has_interval:
                continue
            low, high = found.low, found.high
        stated += 1
        held += low <= dist.mean <= high
    return Cell(stated, held, tuple(sorted(methods)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000, help="samples per distribution and n (default 1000)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (the report's: 2000)")
    parser.add_argument("--old", action="store_true", help="also the percentile bootstrap at every n")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"share of stated 95% intervals that hold the true mean ({args.trials} trials a cell)")
    for dist in DISTRIBUTIONS:
        print(f"\n{dist.name}")
        for n in SIZES:
            cell = coverage(dist, n, args.trials, args.seed, args.resamples)
            shown = "no interval (too few pairs)" if cell.coverage is None else f"{cell.coverage:6.1%}"
            line = f"  n={n:<3} {shown:<28} method: {', '.join(cell.methods)}"
            if args.old:
                before = coverage(dist, n, args.trials, args.seed, args.resamples, old=True)
                line += f"   bootstrap at every n: {before.coverage:6.1%}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
