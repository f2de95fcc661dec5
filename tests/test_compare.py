import json
import math

import pytest
from support.records import with_run, without_run

from pytest_agent_eval.campaign.record import as_records
from pytest_agent_eval.cli import main
from pytest_agent_eval.report.aggregate import Row, aggregate
from pytest_agent_eval.report.compare import (
    compare,
    gate,
    gate_line,
    gate_summary,
    medians,
    render_comparison,
    render_gate,
)
from pytest_agent_eval.report.verdict import verdicts
from pytest_agent_eval.settings.config import OptionError
from pytest_agent_eval.settings.parsers import Rule
from pytest_agent_eval.settings.parsers import parse_rules as parse_compare_fail

RULES = "allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%"
OLD_RULES = "allocation:-5pt,sufficient:-10pt,residual:+20%"  # the spellings before the figure catalogue


def baseline() -> list[dict]:
    return [with_run(1), with_run(2), without_run(1), without_run(2)]


def failed(rows):
    return sorted((r.entry, r.arm, r.metric) for r in rows if r.failed)


def test_parse_compare_fail_reads_points_percent_and_direction():
    rules = parse_compare_fail("allocation:-5pt, sufficient:-10pt,residual:+20%,tokens:15%,allocation:2.5pt")
    assert rules == [
        Rule("allocation", 5.0, "pt", -1),
        Rule("sufficient_share", 10.0, "pt", -1),
        Rule("residual_tokens", 20.0, "%", 1),
        Rule("tokens_processed", 15.0, "%", 1),  # no sign: the metric's bad direction (more tokens)
        Rule("allocation", 2.5, "pt", -1),  # no sign: less allocation is worse
    ]
    assert str(rules[2]) == "residual_tokens:+20%"
    assert parse_compare_fail(OLD_RULES) == parse_compare_fail(RULES)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("allocation:-5", "cannot read 'allocation:-5'"),
        ("allocation:-5pt,bogus:+5%", "unknown metric in 'bogus:+5%'"),
        ("residual:+20pt", "'residual:+20pt': residual_tokens is not a share"),
        ("allocation=-5pt", "cannot read 'allocation=-5pt'"),
        ("sufficient:-ten%", "cannot read 'sufficient:-ten%'"),
        (" , ", "no rule"),
    ],
)
def test_parse_compare_fail_names_the_bad_token(text, fragment):
    with pytest.raises(OptionError) as info:
        parse_compare_fail(text)
    assert fragment in str(info.value)


def test_medians_per_entry_and_arm_skip_errored_runs():
    runs = [
        with_run(1),
        with_run(2, cite=False),
        with_run(3),
        {"id": "x", "entry": "express", "arm": "with", "outcome": "error", "scores": None},
    ]
    figures = medians(runs)
    assert list(figures) == [("express", "with")]
    cited = runs[0]["scores"]["allocation"]["efficiency"]
    assert figures["express", "with"]["n"] == 3
    assert figures["express", "with"]["allocation"] == pytest.approx(cited)  # median of (e, 0, e)
    assert figures["express", "with"]["sufficient_share"] == 1.0
    assert figures["express", "with"]["residual_tokens"] == runs[0]["scores"]["occupancy"]["residual"]["tool"]


def test_compare_flags_exactly_the_allocation_drop():
    current = [with_run(1, cite=False), with_run(2, cite=False), without_run(1), without_run(2)]
    rows = compare(baseline(), current, parse_compare_fail(RULES))
    assert failed(rows) == [("express", "with", "allocation")]
    allocation = next(r for r in rows if r.metric == "allocation")
    assert allocation.after == 0
    assert allocation.change == pytest.approx(-100 * allocation.before)
    assert allocation.unit == "pt"
    assert allocation.rule == "allocation:-5pt"


def test_compare_flags_exactly_the_residual_rise():
    current = [with_run(1, scale=3), with_run(2, scale=3), without_run(1), without_run(2)]
    rows = compare(baseline(), current, parse_compare_fail(RULES))
    assert failed(rows) == [("express", "with", "residual_tokens")]
    residual = next(r for r in rows if r.metric == "residual_tokens" and r.arm == "with")
    assert residual.change == pytest.approx((residual.after / residual.before - 1) * 100)
    assert residual.change > 100


def test_without_arm_residual_is_file_access():
    current = [with_run(1), with_run(2), without_run(1, lines=300), without_run(2, lines=300)]
    rows = compare(baseline(), current, parse_compare_fail("residual_tokens:+20%"))
    assert failed(rows) == [("express", "without", "residual_tokens")]
    row = next(r for r in rows if r.arm == "without" and r.metric == "residual_tokens")
    assert row.before == baseline()[2]["scores"]["occupancy"]["file_access"]


def test_compare_flags_a_sufficiency_drop_and_respects_thresholds():
    current = [with_run(1, again=True), with_run(2, again=True), without_run(1), without_run(2)]
    rows = compare(baseline(), current, parse_compare_fail("sufficient_share:-10pt,explore_again_share:+60pt"))
    # 100% → 50% sufficient is -50pt (fails); explore again 0% → 50% is +50pt, under its 60pt threshold.
    assert failed(rows) == [("express", "with", "sufficient_share")]
    again = next(r for r in rows if r.metric == "explore_again_share")
    assert (again.before, again.after, again.change) == (0.0, 0.5, 50.0)
    assert not again.failed


def test_no_change_and_no_rules_never_fail():
    rows = compare(baseline(), baseline(), parse_compare_fail(RULES))
    assert failed(rows) == []
    assert {r.change for r in rows if r.rule} == {0.0}
    plain = compare(baseline(), baseline())
    assert {r.metric for r in plain} == {
        "allocation",
        "sufficient_share",
        "explore_again_share",
        "residual_tokens",
        "tokens_processed",
        "cost_usd",
    }
    assert not any(r.failed for r in plain)


def test_relative_change_from_zero():
    rule = Rule("cost_usd", 10, "%", 1)
    assert rule.change(0, 0) == 0
    assert rule.change(0, 0.5) == math.inf
    assert rule.fails(rule.change(0, 0.5))
    assert rule.fails(10.0) and not rule.fails(9.9)


def test_only_entries_scored_on_both_sides_are_compared():
    current = [with_run(1, entry="gin"), without_run(1, entry="gin")]
    assert compare(baseline(), current) == []
    assert render_comparison([]) == "nothing to compare: no (entry, arm) was scored in both"


def test_render_comparison_names_entry_metric_before_after_change():
    current = [with_run(1, cite=False), without_run(1)]
    text = render_comparison(compare(baseline(), current, parse_compare_fail(RULES)))
    line = next(line for line in text.splitlines() if " allocation " in line)
    before = baseline()[0]["scores"]["allocation"]["efficiency"]
    assert line.split()[:5] == ["express", "with", "allocation", f"{before:.1%}", "0.0%"]
    assert f"{-before * 100:+.1f}pt" in line
    assert "2→1" in line and "FAILED allocation:-5pt" in line
    assert "warning: n=1: one run is no measurement (give --agent-eval-runs 2 or more)" in text
    head = ["entry", "arm", "metric", "before", "after", "change", "mean", "[95%", "interval]", "n", "rule"]
    assert text.splitlines()[0].split() == head
    assert "(n=1: too few pairs for an interval)" in line  # the current side has one run: one pair
    assert text.rstrip().endswith("1 regression(s) beyond --compare-fail thresholds")


def write(path, records):
    path.write_text(json.dumps({"items": records}))
    return str(path)


def test_cli_compare_exit_codes(tmp_path, capsys):
    base = write(tmp_path / "base.json", baseline())
    same = write(tmp_path / "same.json", baseline())
    worse = write(tmp_path / "worse.json", [with_run(1, cite=False), with_run(2, cite=False)])
    assert main(["compare", base, same, "--compare-fail", RULES]) == 0
    assert "allocation" in capsys.readouterr().out
    assert main(["compare", base, worse]) == 0  # no rules: a report, never a failure
    capsys.readouterr()
    assert main(["compare", base, worse, "--compare-fail", RULES]) == 1
    assert "FAILED allocation:-5pt" in capsys.readouterr().out
    assert main(["compare", base, worse, "--compare-fail", OLD_RULES]) == 1  # old spellings still read
    assert "FAILED allocation:-5pt" in capsys.readouterr().out


def test_cli_compare_bad_input_exits_2_naming_it(tmp_path, capsys):
    base = write(tmp_path / "base.json", baseline())
    assert main(["compare", base, base, "--compare-fail", "allocation:5"]) == 2
    assert "--compare-fail: cannot read 'allocation:5'" in capsys.readouterr().err
    missing = str(tmp_path / "missing.json")
    assert main(["compare", base, missing]) == 2
    assert f"{missing}: no such file or folder" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["compare", str(broken), base]) == 2
    assert f"{broken}: not a JSON file" in capsys.readouterr().err
    assert main(["compare", base, "/dev/null"]) == 2
    assert "/dev/null: not a regular file, nor a campaign folder" in capsys.readouterr().err
    assert main(["compare", base, base, "--compare-fail", "turns:+5%"]) == 2
    assert "'turns:+5%': turns has no better direction, so it cannot regress; gated: " in capsys.readouterr().err


def labelled(run: dict, label: str) -> dict:
    return {**run, "arm_label": label}


def test_campaigns_of_two_versions_line_up_by_arm():
    before = [labelled(with_run(1), "with@1.6.1"), labelled(with_run(2), "with@1.6.1")]
    after = [labelled(with_run(1, cite=False), "with@1.7.0"), labelled(with_run(2, cite=False), "with@1.7.0")]
    assert failed(compare(before, after, parse_compare_fail("allocation:-5pt"))) == [("express", "with", "allocation")]
    # One campaign running the with-arm at two versions keeps them apart instead of pooling them.
    both = [labelled(with_run(1), "with@1.6.1"), labelled(with_run(1, cite=False), "with@local")]
    assert sorted(medians(both)) == [("express", "with@1.6.1"), ("express", "with@local")]
    assert medians(both)["express", "with@local"]["allocation"] == 0


# -- the gate: a comparison of nothing, or of too little, fails -------------------------------------------------
def test_a_gate_over_nothing_fails_and_says_why():
    current = [with_run(1, entry="gin"), without_run(1, entry="gin")]
    result = gate(baseline(), current, parse_compare_fail("allocation:-5pt"))
    assert result.matched == [] and result.failed
    assert result.problems == [
        "compared nothing: no (entry, arm) was scored in both the baseline (2 scored) and this run"
    ]
    assert gate(baseline(), current).failed  # without rules too: a comparison of nothing is no comparison
    text = render_gate(result)
    assert "GATE FAILED: compared nothing" in text and text.endswith(
        "gate: FAILED — 0 of 2 baseline (entry, arm) pair(s) compared; compared nothing"
    )


def test_a_gate_over_fewer_pairs_than_the_baseline_scored_fails_unless_min_pairs_allows_it():
    only_with = [with_run(1), with_run(2)]
    rules = parse_compare_fail("allocation:-5pt")
    result = gate(baseline(), only_with, rules)
    assert result.matched == [(Row("express"), "with")] and result.unmatched == [(Row("express"), "without")]
    assert result.regressions == [] and result.failed
    assert result.problems == [
        "compared 1 (entry, arm) pair(s), fewer than asked (every pair the baseline scored: 2); "
        "not matched: express/without"
    ]
    assert gate_line(result) == (  # the verdict line in a few words; the GATE FAILED line has the list
        "gate: FAILED — 1 of 2 baseline (entry, arm) pair(s) compared; "
        "compared 1 (entry, arm) pair(s), fewer than asked (every pair the baseline scored: 2)"
    )
    assert not gate(baseline(), only_with, rules, min_pairs=1).failed
    assert "min pairs 3: 3" in gate(baseline(), baseline(), rules, min_pairs=3).problems[0]
    assert not gate(baseline(), only_with).failed  # no rule: a report of what did match


def test_cli_compare_of_nothing_in_common_exits_1_naming_why(tmp_path, capsys):
    base = write(tmp_path / "base.json", baseline())
    other = write(tmp_path / "other.json", [with_run(1, entry="gin")])
    assert main(["compare", base, other, "--compare-fail", "allocation:-5pt"]) == 1
    out = capsys.readouterr().out
    assert "GATE FAILED: compared nothing" in out and "nothing to compare" not in out
    partial = write(tmp_path / "partial.json", [with_run(1), with_run(2)])
    assert main(["compare", base, partial, "--compare-fail", "allocation:-5pt"]) == 1
    assert "not matched: express/without" in capsys.readouterr().out
    assert main(["compare", base, partial, "--compare-fail", "allocation:-5pt", "--min-pairs", "1"]) == 0
    assert "gate: passed — 1 of 2 baseline (entry, arm) pair(s) compared" in capsys.readouterr().out


# -- noise-aware rules -----------------------------------------------------------------------------------------
def with_allocation(run: int, value: float, entry: str = "express") -> dict:
    """A scored with-arm run whose allocation figure is ``value`` (the rest of its figures left out)."""
    return {"id": f"{entry}-with-{run}", "entry": entry, "arm": "with", "run": run, "outcome": "passed",
            "figures": {"allocation": value}}  # fmt: skip


def runs_of(values: list[float]) -> list[dict]:
    return [with_allocation(run, value) for run, value in enumerate(values, start=1)]


def allocation_row(before, after, rules="allocation:-5pt@95"):
    result = gate(runs_of(before), runs_of(after), parse_compare_fail(rules))
    return next(r for r in result.rows if r.metric == "allocation"), result


def test_parse_reads_a_confidence_and_refuses_a_silly_one():
    (rule,) = parse_compare_fail("allocation:-5pt@95")
    assert rule == Rule("allocation", 5.0, "pt", -1, 95) and str(rule) == "allocation:-5pt@95"
    with pytest.raises(OptionError, match="between 50 and 99"):
        parse_compare_fail("allocation:-5pt@100")
    with pytest.raises(OptionError, match="cannot read 'allocation:-5pt@'"):
        parse_compare_fail("allocation:-5pt@")


def test_a_noise_aware_rule_fails_only_when_the_whole_interval_is_beyond_the_threshold():
    # a clear drop of ~30pt with little noise: the whole t interval is beyond -5pt
    row, result = allocation_row([0.80, 0.82, 0.78, 0.81], [0.50, 0.52, 0.49, 0.51])
    assert row.failed and not row.undecided and result.failed
    assert row.interval.method == "t" and row.interval.low <= row.mean_change <= row.interval.high < -5
    # a median drop of 10pt, but one noisy run: the interval reaches past -5pt, so the rule does not fail
    row, result = allocation_row([0.80, 0.80, 0.80], [0.70, 0.70, 0.95])
    assert row.change == pytest.approx(-10.0) and parse_compare_fail("allocation:-5pt")[0].fails(row.change)
    assert not row.failed and row.interval.high > -5 and not result.failed
    assert row.verdict == "ok allocation:-5pt@95"


def test_a_noise_aware_rule_over_too_few_runs_is_undecided_and_the_gate_does_not_pass():
    row, result = allocation_row([0.80, 0.82], [0.20, 0.21])
    assert row.undecided and not row.failed and result.failed
    assert row.verdict == "UNDECIDED allocation:-5pt@95 (n=2: too few pairs for an interval: 3 paired runs needed)"
    text = render_gate(result)
    assert "1 verdict(s) undecided" in text and "gate: UNDECIDED (fails)" in text
    # two pairs state no interval, never a tight one (the bootstrap of two pairs gave [-61.0pt, -60.0pt])
    line = next(line for line in render_comparison(result.rows).splitlines() if " allocation " in line)
    assert "-60.5pt (n=2: too few pairs for an interval)" in line and "[" not in line
    assert row.interval.low is None and gate_summary(result)["undecided"][0]["interval"] is None
    # the same drop under a point rule decides: the medians moved 60pt
    row, result = allocation_row([0.80, 0.80], [0.20, 0.20], "allocation:-5pt")
    assert row.failed and not row.undecided


def test_every_row_carries_the_interval_of_its_paired_change_and_runs_that_do_not_pair_decide_nothing():
    before = runs_of([0.80, 0.82, 0.78])
    after = runs_of([0.60, 0.63, 0.58])
    result = gate(before, after, parse_compare_fail("allocation:-5pt@95"))
    row = next(r for r in result.rows if r.metric == "allocation")
    assert row.failed and row.mean_change == pytest.approx(-19.667, abs=1e-3)
    text = render_comparison(result.rows)
    line = next(line for line in text.splitlines() if " allocation " in line)
    low, high = row.interval.low, row.interval.high
    assert f"-19.7pt [{low:+.1f}pt, {high:+.1f}pt] (t, 3 pairs)" in line and "FAILED allocation:-5pt@95" in line
    # runs 4-6 after against runs 1-3 before: no run k on both sides, so no change to take an interval of
    moved = [with_allocation(run, value) for run, value in ((4, 0.6), (5, 0.62), (6, 0.58))]
    row = next(
        r for r in gate(before, moved, parse_compare_fail("allocation:-5pt@95")).rows if r.metric == "allocation"
    )
    assert row.interval is None and row.undecided and not row.failed
    assert "no run pairs" in row.verdict


def test_a_zero_threshold_passes_no_change_and_fails_any_regression():
    row, result = allocation_row([0.80, 0.80], [0.80, 0.80], "allocation:-0pt")
    assert not row.failed and not result.failed and row.verdict == "ok allocation:-0pt"
    row, result = allocation_row([0.80, 0.80], [0.79, 0.79], "allocation:-0pt")
    assert row.failed and result.failed
    row, _ = allocation_row([0.80, 0.80], [0.81, 0.81], "allocation:-0pt")
    assert not row.failed  # a rise is an improvement


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("allocation:+5pt", "'allocation:+5pt': + is an improvement of allocation (higher is better); "
         "a regression is allocation:-5pt"),
        ("residual_tokens:-20%", "a regression is residual_tokens:+20%"),
    ],
)  # fmt: skip
def test_a_rule_whose_sign_names_an_improvement_is_refused(text, fragment):
    with pytest.raises(OptionError) as info:
        parse_compare_fail(text)
    assert fragment in str(info.value)


def test_a_ruled_figure_with_a_value_on_one_side_only_is_undecided_and_fails_the_gate(capsys):
    gone = [{**run, "figures": {"allocation": None}} for run in runs_of([0.80, 0.80])]
    result = gate(runs_of([0.80, 0.80]), gone, parse_compare_fail("allocation:-5pt"))
    (row,) = [r for r in result.rows if r.metric == "allocation"]
    assert row.undecided and row.change is None and result.failed
    assert row.verdict == "UNDECIDED allocation:-5pt (no value after)"
    text = render_gate(result)
    assert "a ruled figure has a value on one side only" in text and "gate: UNDECIDED (fails)" in text
    # A NaN figure in a stored record has no defined value, like null: it can no longer pass as "ok".
    nan = [{**run, "figures": {"allocation": math.nan}} for run in runs_of([0.80, 0.80])]
    assert gate(runs_of([0.80, 0.80]), nan, parse_compare_fail("allocation:-5pt")).undecided
    # Without a rule the figure is only shown where both sides have it: nothing to decide.
    assert not gate(runs_of([0.80, 0.80]), gone).failed


def test_a_rule_that_checked_nothing_fails_the_gate():
    without = [{**run, "arm": "without", "figures": {"allocation": None}} for run in runs_of([0.8, 0.8])]
    result = gate(without, without, parse_compare_fail("allocation:-5pt"))
    assert result.failed and not result.rows
    assert result.problems == [
        "checked nothing for allocation:-5pt: no compared (entry, arm) has the figure on either side"
    ]


def test_cli_compare_skips_a_record_whose_figure_is_not_a_number_naming_it(tmp_path, capsys):
    base = write(tmp_path / "base.json", baseline())
    broken = baseline()
    broken[0] = {**broken[0], "schema": 2, "figures": {"allocation": "high"}}  # schema 1 recomputes figures
    current = write(tmp_path / "current.json", broken)
    assert main(["compare", base, current, "--compare-fail", "allocation:-5pt"]) == 0  # judged on the other run
    captured = capsys.readouterr()
    assert f"{current}: record 1: figures.allocation: expected a number or null, got 'high': skipped" in captured.err
    assert "express  with     allocation           75.2%     75.2%" in captured.out
    assert "2→1" in captured.out


def test_every_pair_changing_alike_decides_a_noise_aware_rule_as_the_verdict_does():
    """A scripted stand-in repeats itself: every pair the same change has no spread, which the verdict reads as a
    decided change ("every run gave the same value"), not as a point interval nor as undecided."""
    row, result = allocation_row([0.80, 0.80, 0.80], [0.50, 0.50, 0.50])
    assert row.interval.method == "same" and row.failed and not row.undecided
    assert "-30.0pt (every run gave the same value, 3 pairs)" in render_comparison(result.rows)
    row, _ = allocation_row([0.80, 0.80, 0.80], [0.78, 0.78, 0.78])
    assert row.interval.method == "same" and not row.failed and row.verdict == "ok allocation:-5pt@95"


def residual_runs(arm: str, values: list[float]) -> list[dict]:
    return [
        {
            "id": f"express-{arm}-{run}",
            "entry": "express",
            "arm": arm,
            "run": run,
            "outcome": "passed",
            "figures": {"residual_tokens": value},
        }
        for run, value in enumerate(values, start=1)
    ]


@pytest.mark.parametrize(
    "without, with_",
    [
        ([40000, 41000, 39000, 42000], [11000, 12500, 10000, 13000]),  # a t interval
        ([40000, 40000], [10000, 12000]),  # too few pairs: none
        ([40000, 40000, 40000], [10000, 10000, 10000]),  # every run the same
        ([40000 + 100 * k for k in range(30)], [12000 + 37 * (k % 7) * (-1) ** k for k in range(30)]),  # bootstrap
    ],
)
def test_compare_and_the_gate_state_the_interval_the_verdict_states(without, with_):
    """One figure, one interval: a campaign's verdict on with vs without, and compare / the gate of a baseline
    whose runs are the without-arm's against a current whose runs are the with-arm's, give the same mean change,
    the same interval and the same method (the gate in percent)."""
    records = as_records([*residual_runs("with", with_), *residual_runs("without", without)])
    verdict = next(v for v in verdicts(aggregate(records)) if v.label == "express")
    expected = verdict.change("residual_tokens").interval
    rules = parse_compare_fail("residual_tokens:+20%@95")
    result = gate(residual_runs("with", without), residual_runs("with", with_), rules)
    row = next(r for r in result.rows if r.metric == "residual_tokens" and r.rule)
    (shown,) = [
        r
        for r in compare(residual_runs("with", without), residual_runs("with", with_))
        if r.metric == "residual_tokens"
    ]
    for found in (row.interval, shown.interval):
        assert found.method == expected.method and found.n == expected.n
        assert found.mean == pytest.approx(expected.mean * 100)
        if expected.has_interval:
            assert (found.low, found.high) == pytest.approx((expected.low * 100, expected.high * 100))
        else:
            assert not found.has_interval
    undecided = "UNDECIDED residual_tokens:+20%@95 (n=2: too few pairs for an interval: 3 paired runs needed)"
    assert row.verdict == (undecided if expected.method == "too few" else "ok residual_tokens:+20%@95")
