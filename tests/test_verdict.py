"""Which arm did better is said: per entry and overall, each figure's paired change, its interval, in words."""

from __future__ import annotations

import pytest

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.metrics.gates import evaluate, failure_message, parse_thresholds
from pytest_agent_eval.report.aggregate import aggregate
from pytest_agent_eval.report.stats import paired_ratios
from pytest_agent_eval.report.terminal import summary
from pytest_agent_eval.report.verdict import BETTER, NO_INTERVAL, OVERALL, UNCLEAR, WORSE, _change, shown, verdicts
from pytest_agent_eval.tool import CODEGRAPH


def run(entry: str, arm: str, n: int, contaminated: bool = False, **figures: float) -> ItemRecord:
    return ItemRecord.from_dict(
        {
            "id": f"{entry}-{arm}-{n}",
            "entry": entry,
            "arm": arm,
            "arm_label": arm,
            "run": n,
            "figures": figures,
            "contaminated": contaminated,
        }
    )


def campaign() -> list[ItemRecord]:
    """express, three runs a side: the residual clearly lower with the tool, the time as often up as down, the
    cost clearly higher; gin: one run a side."""
    records = []
    for n, (res_w, res_wo, t_w, t_wo, c_w, c_wo) in enumerate(
        [(10, 40, 10, 20, 1.2, 1.0), (12, 44, 20, 10, 1.3, 1.0), (11, 42, 30, 30, 1.25, 1.0)], start=1
    ):
        records.append(run("express", "with", n, residual_tokens=res_w, duration_s=t_w, cost_usd=c_w))
        records.append(run("express", "without", n, residual_tokens=res_wo, duration_s=t_wo, cost_usd=c_wo))
    records.append(run("gin", "with", 1, residual_tokens=30, duration_s=5, cost_usd=1.0))
    records.append(run("gin", "without", 1, residual_tokens=60, duration_s=10, cost_usd=2.0))
    return records


def by_label(records: list[ItemRecord], **kwargs):
    return {v.label: v for v in verdicts(aggregate(records), **kwargs)}


def test_each_figure_is_better_worse_or_no_clear_difference_by_its_interval():
    express = by_label(campaign())["express"]
    changes = {c.figure: c for c in express.changes}
    assert (express.arm, express.reference, express.pairs) == ("with", "without", 3)
    residual = changes["residual_tokens"]
    assert residual.mean == pytest.approx((10 / 40 + 12 / 44 + 11 / 42) / 3 - 1)
    assert residual.low <= residual.mean <= residual.high < 0 and residual.word == BETTER
    assert changes["cost_usd"].word == WORSE  # higher cost: worse, whatever the sign
    assert changes["duration_s"].low < 0 < changes["duration_s"].high and changes["duration_s"].word == UNCLEAR
    assert changes["tokens_processed"].pairs == 0
    assert changes["tokens_processed"].text("codegraph") == "tokens processed n/a"
    line = express.line("codegraph")
    assert line.startswith(
        "verdict express (with vs without, 3 paired runs): retrieval residual −74% [−77%, −71%] better (t, 3 pairs)"
    )
    assert line.endswith(
        " · tokens processed n/a · duration +17% [−173%, +206%] no clear difference (t, 3 pairs) · "
        "cost +25% [+13%, +37%] worse (t, 3 pairs) — with better on: retrieval residual; the other way: duration, cost"
    )


def test_one_pair_says_it_has_no_interval():
    gin = by_label(campaign())["gin"]
    residual = next(c for c in gin.changes if c.figure == "residual_tokens")
    assert residual.word == NO_INTERVAL and residual.to_dict()["interval"] is None
    assert "retrieval residual −50% (n=1: too few pairs for an interval)" in gin.line("codegraph")


def test_two_pairs_are_too_few_for_an_interval_never_a_tight_one():
    """Two pairs of a real model's durations (+28% and +29%) once read ``+28% [+26%, +29%] worse``, and the next
    run's +69% lay far outside: a bootstrap of two values holds the mean about half the time."""
    change = _change("duration_s", [0.26, 0.29])
    assert change.word == NO_INTERVAL and change.low is None and change.method == "too few"
    assert change.text("codegraph") == "duration +28% (n=2: too few pairs for an interval)"
    assert change.to_dict()["interval"] is None and change.to_dict()["note"] == "n=2: too few pairs for an interval"


def test_every_pair_the_same_change_says_so_not_a_point_interval():
    change = _change("residual_tokens", [-0.73, -0.73, -0.73])
    assert change.text("codegraph") == "retrieval residual −73% better (every run gave the same value, 3 pairs)"
    assert change.to_dict()["interval"] is None and change.method == "same" and change.to_dict()["sd"] == 0
    assert _change("residual_tokens", [0.0, 0.0]).word == "no change"


def test_the_method_is_chosen_from_the_number_of_pairs_and_named():
    few = _change("cost_usd", [0.1, 0.2, 0.15, 0.12])
    assert few.method == "t" and few.text("codegraph").endswith("(t, 4 pairs)")
    many = _change("cost_usd", [0.1 + (i % 7) / 100 for i in range(30)])
    assert many.method == "bootstrap" and many.text("codegraph").endswith("(bootstrap, 30 pairs)")


def test_each_figure_says_how_many_pairs_would_decide_a_change_of_a_tenth_and_a_quarter():
    noisy = _change("duration_s", [0.1, 0.5, -0.2, 0.3])  # sd ≈ 0.29
    needed = noisy.to_dict()["pairs_to_decide"]
    assert needed["10%"] > needed["25%"] > 3
    assert 60 <= needed["10%"] <= 75  # ((1.96 + 0.84) · 0.29 / 0.1)² ≈ 66, a little more for t
    assert _change("duration_s", [0.1]).to_dict()["pairs_to_decide"] == {"10%": None, "25%": None}
    assert _change("residual_tokens", [-0.7, -0.7]).to_dict()["pairs_to_decide"] == {"10%": 3, "25%": 3}


def test_a_verdict_names_what_it_rests_on_and_what_points_the_other_way():
    records = []
    for n, (res, ctx, t) in enumerate([(0.3, 1.20, 1.5), (0.25, 1.25, 1.6), (0.28, 1.22, 1.4)], start=1):
        records.append(run("e", "with", n, residual_tokens=res * 100, ctx_final=ctx * 100, duration_s=t * 10))
        records.append(run("e", "without", n, residual_tokens=100, ctx_final=100, duration_s=10))
    verdict = by_label(records)["e"]
    assert [c.figure for c in verdict.rests_on()] == ["residual_tokens"]
    assert [c.figure for c in verdict.against()] == ["duration_s", "ctx_final"]
    reading = "— with better on: retrieval residual; the other way: duration, final context"
    assert verdict.line("codegraph").endswith(reading)
    data = verdict.to_dict()
    assert data["better_on"] == ["residual_tokens"] and data["the_other_way"] == ["duration_s", "ctx_final"]
    assert data["figures"]["ctx_final"]["verdict"] == WORSE


def test_overall_pools_every_entry_pairs():
    found = by_label(campaign())
    overall = found[OVERALL]
    assert (overall.entries, overall.pairs) == (2, 4)
    residual = next(c for c in overall.changes if c.figure == "residual_tokens")
    assert residual.mean == pytest.approx((10 / 40 + 12 / 44 + 11 / 42 + 30 / 60) / 4 - 1)
    assert overall.line("codegraph").startswith("verdict overall (with vs without, 2 entries, 4 paired runs): ")
    # over one entry the overall line would repeat it: not shown, still in summary.json
    one = [r for r in campaign() if r.entry == "express"]
    assert [v.label for v in shown(verdicts(aggregate(one)))] == ["express"]
    assert [v["entry"] for v in summary(one, {})["verdicts"]] == ["express", OVERALL]


def test_a_contaminated_without_run_is_left_out_unless_kept():
    records = campaign()
    records[1] = run("express", "without", 1, contaminated=True, residual_tokens=10, duration_s=20, cost_usd=1.0)
    assert by_label(records)["express"].pairs == 2
    assert by_label(records, include_contaminated=True)["express"].pairs == 3


def test_summary_json_carries_the_verdicts():
    found = summary(campaign(), {})["verdicts"]
    express = next(v for v in found if v["entry"] == "express")
    residual = express["figures"]["residual_tokens"]
    assert residual["verdict"] == BETTER and residual["pairs"] == 3 and len(residual["interval"]) == 2
    assert express["figures"]["duration_s"]["verdict"] == UNCLEAR


def test_the_worked_example_of_the_gates_page():
    """docs/metrics/gates.md, "A worked example": the item's gates, then a verdict."""
    thresholds = parse_thresholds(
        {
            "residual_tokens": {"max": 60000},
            "arms": {"without": {"residual_tokens": {"max": 80000}}},
            "entries": {"express": {"residual_tokens": {"max": 40000}, "arms": {"with": {"allocation": {"min": 0.8}}}}},
        }
    )
    score = {"contamination": {}, "evidence": {"problems": [], "requests": 3}}
    figures = {"residual_tokens": 45000, "allocation": 0.62, "sufficient_share": None}
    found = evaluate(
        score, figures, entry="express", arm_name="with", arm_label="with@1.6.1", thresholds=thresholds, tool=CODEGRAPH
    )
    assert [(v.gate, v.passed, v.message) for v in found] == [
        ("contamination", True, "with-arm: the tool is the variable under test"),
        ("integrity", True, "the transcript agrees with the model's 3 request(s)"),
        ("allocation", False, "allocation 62.0% is below the minimum 80.0%"),
        ("residual_tokens", False, "residual_tokens 45.0k is above the maximum 40.0k"),
    ]
    assert failure_message(found, "express", "with@1.6.1").splitlines()[0] == (
        "agent-eval gate failed for express / with@1.6.1:"
    )
    change = _change("residual_tokens", paired_ratios({1: 10000, 2: 12000}, {1: 40000, 2: 40000}))
    assert change.text("codegraph") == "retrieval residual −72% (n=2: too few pairs for an interval)"
    three = _change("residual_tokens", paired_ratios({1: 10000, 2: 12000, 3: 11000}, {1: 40000, 2: 40000, 3: 40000}))
    assert three.text("codegraph") == "retrieval residual −72% [−79%, −66%] better (t, 3 pairs)"
    single = _change("residual_tokens", paired_ratios({1: 10000}, {1: 40000}))
    assert single.text("codegraph") == "retrieval residual −75% (n=1: too few pairs for an interval)"


def test_the_tables_averages_and_verdict_state_one_estimate_of_each_change():
    """The campaign table once said (−63%) from medians beside a verdict of −62% from paired means, and AVERAGE
    said time 45% more beside a verdict of +58%: now every change is the verdict's mean of the paired changes,
    and the tables say so."""
    from pytest_agent_eval.report.terminal import campaign_table, throughput_table

    records = []
    for n, (res_w, res_wo, t_w, t_wo, c_w, c_wo) in enumerate(
        [(10, 40, 30, 10, 1.0, 2.0), (30, 40, 10, 10, 1.0, 1.0), (20, 30, 20, 10, 1.0, 1.0)], start=1
    ):
        records.append(run("e", "with", n, residual_tokens=res_w, duration_s=t_w, cost_usd=c_w, ctx_final=120,
                           tokens_processed=100))  # fmt: skip
        records.append(run("e", "without", n, residual_tokens=res_wo, duration_s=t_wo, cost_usd=c_wo, ctx_final=100,
                           tokens_processed=100))  # fmt: skip
    found = aggregate(records)
    verdict = by_label(records)["e"]
    residual, duration = verdict.change("residual_tokens").mean, verdict.change("duration_s").mean
    assert residual == pytest.approx((10 / 40 + 30 / 40 + 20 / 30) / 3 - 1)  # −44%; the medians' 20/40: −50%
    table = campaign_table(records, found=found)
    assert f"20→40  ({residual:+.0%})" in table and "(−50%)" not in table
    assert f"AVERAGE: retrieval residual {abs(residual):.0%} LOWER with the tool · final context 20% HIGHER" in table
    assert "the mean of the paired changes, the verdict's own figure" in table
    throughput = throughput_table(records, found=found)
    assert f"time none ({duration:.0%} more with the tool)" in throughput  # +100%; the medians' 20/10: the same
    assert f"cost {-verdict.change('cost_usd').mean:.0%}" in throughput  # 17%, where the medians said 0%


def test_the_verdict_says_how_many_pairs_would_decide_each_figure():
    express = by_label(campaign())["express"]
    line = express.power_line("codegraph")
    assert line.startswith("pairs to tell a 10% change from noise, express: retrieval residual 3 · duration ")
    duration = express.change("duration_s").to_dict()["pairs_to_decide"]["10%"]
    assert f"duration {duration} · cost " in line and duration > 100  # the time went up and down by half
    gin = by_label(campaign())["gin"]
    assert "retrieval residual unknown (n=1) · duration unknown (n=1)" in gin.power_line("codegraph")


def test_a_figure_the_agent_does_not_give_is_said_so_in_the_verdict_and_a_rough_spread_too():
    records = []
    for n in (1, 2):
        for arm, res in (("with", 10), ("without", 40 + n)):
            record = run("e", arm, n, residual_tokens=res, duration_s=10 + n)
            records.append(ItemRecord.from_dict({**record.to_dict(), "agent": "codex", "id": f"e-codex-{arm}-{n}"}))
    verdict = by_label(records)["e"]
    assert verdict.change("cost_usd").value_text() == "not available (Codex CLI's records give no cost)"
    assert verdict.power_line("codegraph").endswith("(a spread from 2 pairs is itself a rough guess)")
