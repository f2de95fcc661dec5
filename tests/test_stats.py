import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agent_eval.metrics.format import median_range, percent, seconds, signed, tokens
from pytest_agent_eval.report.stats import bootstrap_ci, paired_differences, small_n_warning


def test_median_range_formats_median_and_extremes():
    assert median_range([0.5, 0.2, 0.9], "percent") == "50.0% [20.0%–90.0%]"
    assert median_range([54_950, 13_941, 60_000], "tokens") == "54.9k [13.9k–60.0k]"
    assert median_range([12.34, 80.0], "seconds") == "46.2s [12.3s–1m 20s]"
    assert median_range([3, 1, 2, 10]) == "2.5 [1–10]"


def test_median_range_drops_missing_values_and_shows_one_value_alone():
    assert median_range([None, 0.25, None], percent) == "25.0%"
    assert median_range([None, None], percent) == "n/a"
    assert median_range([], tokens) == "n/a"


def test_formatters():
    assert tokens(54_950) == "54.9k"
    assert tokens(999) == "999"
    assert tokens(1_250_000) == "1.2M"
    assert seconds(59.94) == "59.9s"
    assert seconds(59.96) == "1m 00s"
    assert seconds(185) == "3m 05s"
    assert percent(0.2749) == "27.5%"


def test_a_signed_change_too_small_to_show_has_no_minus():
    assert [signed(v, seconds) for v in (-0.016, 0.0, -1.5, 2.04)] == ["+0.0s", "+0.0s", "−1.5s", "+2.0s"]
    assert signed(-42_300, tokens) == "−42.3k"


def test_paired_differences_pairs_by_run_index():
    assert paired_differences([10, 20, 30], [1, 2, 3]) == [9, 18, 27]
    # Run 2 is missing on the without side: it has no pair and is not paired with run 3.
    assert paired_differences({1: 10, 2: 20, 3: 30}, {1: 1, 3: 3}) == [9, 27]
    assert paired_differences({2: 5.0, 1: None}, {1: 1.0, 2: 1.5}) == [3.5]
    assert paired_differences([], [1]) == []


def test_bootstrap_ci_contains_true_mean_and_is_deterministic():
    rng = random.Random(7)
    true_mean = 5.0
    diffs = [rng.gauss(true_mean, 2.0) for _ in range(40)]
    low, high = bootstrap_ci(diffs)
    assert low < true_mean < high
    assert low < statistics.fmean(diffs) < high
    # Standard error is 2/sqrt(40) ≈ 0.32: a 95% interval is about ±0.62 wide.
    assert 0.4 < high - low < 1.8
    assert bootstrap_ci(diffs) == (low, high)
    assert bootstrap_ci(diffs, seed=1) != (low, high)


def test_bootstrap_ci_narrower_at_lower_confidence_and_degenerate_cases():
    diffs = [1.0, 4.0, 2.0, 8.0, 5.0, 7.0]
    low95, high95 = bootstrap_ci(diffs, 0.95)
    low50, high50 = bootstrap_ci(diffs, 0.50)
    assert low95 <= low50 < high50 <= high95
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert bootstrap_ci([-2.5]) == (-2.5, -2.5)
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0], confidence=1.5)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=12), st.integers(0, 5))
def test_bootstrap_ci_stays_within_the_data(diffs, seed):
    low, high = bootstrap_ci(diffs, resamples=200, seed=seed)
    assert min(diffs) - 1e-6 <= low <= high <= max(diffs) + 1e-6


def test_small_n_warning():
    assert small_n_warning(1) == "n=1: one run is no measurement (give --agent-eval-runs 2 or more)"
    assert small_n_warning(0) == "n=0: no scored run"
    assert small_n_warning(2) is None
    assert small_n_warning(7) is None
