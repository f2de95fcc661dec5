"""The verdict's 95% intervals hold about 95% of the time (docs/report.md, "How sure"): on runs drawn from known
distributions — normal, skewed, heavy-tailed — the interval the report states holds the true mean about as often
as it claims, at every number of pairs it states one for; below three pairs it states none. The full table is
``python bench/interval_coverage.py``; this is the same simulation, smaller."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from support.paths import REPO

from pytest_agent_eval.report.stats import BOOTSTRAP, MIN_PAIRS_FOR_INTERVAL, TOO_FEW, T


def _bench():
    spec = importlib.util.spec_from_file_location("interval_coverage", REPO / "bench" / "interval_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("interval_coverage", module)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


@pytest.mark.parametrize("dist", BENCH.DISTRIBUTIONS, ids=lambda d: d.name.split()[0])
def test_stated_intervals_hold_the_truth_about_95_percent_of_the_time(dist):
    assert BENCH.coverage(dist, 2, 50).stated == 0  # n=2: too few pairs, no interval stated
    assert BENCH.coverage(dist, 2, 50).methods == (TOO_FEW,)
    for n in (MIN_PAIRS_FOR_INTERVAL, 5, 10):
        cell = BENCH.coverage(dist, n, 1500, seed=n)
        assert cell.methods == (T,) and cell.stated == 1500
        assert 0.91 <= cell.coverage <= 0.985, (dist.name, n, cell.coverage)
    cell = BENCH.coverage(dist, 30, 200, seed=30, resamples=400)
    assert cell.methods == (BOOTSTRAP,)
    assert 0.89 <= cell.coverage <= 0.995, (dist.name, 30, cell.coverage)


def test_the_bootstrap_at_few_pairs_claimed_far_more_than_it_held():
    """What the report stated before: a percentile bootstrap from two or three pairs holds the mean about half to
    three quarters of the time, not 95%."""
    normal = BENCH.DISTRIBUTIONS[0]
    assert BENCH.coverage(normal, 2, 300, resamples=200, old=True).coverage < 0.7
    assert BENCH.coverage(normal, 3, 300, resamples=200, old=True).coverage < 0.85
