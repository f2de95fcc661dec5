"""How many runs to decide (docs/report.md): from an earlier campaign's spread, ``agent-eval plan`` says how many
paired runs tell a change of a given size from noise, per figure, and the verdict carries the same per figure."""

from __future__ import annotations

import json
import statistics

import pytest

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.cli import main as agent_eval
from pytest_agent_eval.report.stats import pairs_needed, t_quantile


def records() -> list[ItemRecord]:
    """Five pairs: the residual always about a quarter of the without-arm's (little spread), the time all over."""
    out = []
    for n, (res, t) in enumerate([(0.25, 1.6), (0.26, 0.7), (0.24, 1.2), (0.25, 0.9), (0.26, 1.5)], start=1):
        for arm, res_v, t_v in (("with", res * 1000, t * 10), ("without", 1000, 10)):
            out.append(ItemRecord(f"express-{arm}-{n}", "express", arm, arm, run=n,
                                  figures={"residual_tokens": res_v, "duration_s": t_v}))  # fmt: skip
    return out


def test_pairs_needed_is_the_smallest_n_whose_interval_clears_the_change():
    for sd, change in [(0.3, 0.1), (0.05, 0.1), (1.0, 0.25)]:
        n = pairs_needed(sd, change)
        z = 0.8416212335729143
        assert (t_quantile(0.95, n - 1) + z) * sd / n**0.5 <= change
        assert n == 3 or (t_quantile(0.95, n - 2) + z) * sd / (n - 1) ** 0.5 > change
    assert pairs_needed(None, 0.1) is None and pairs_needed(0.0, 0.1) == 3


def test_plan_sizes_a_campaign_from_an_earlier_one(tmp_path, capsys):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records()))
    assert agent_eval(["plan", str(items), "--change", "10%"]) == 0
    out = capsys.readouterr().out
    assert "paired runs that tell a change of 10% from noise (95% interval, 80% power)" in out
    residual = pairs_needed(statistics.stdev([-0.75, -0.74, -0.76, -0.75, -0.74]), 0.1)  # tiny: three pairs do
    spread = statistics.stdev([0.6, -0.3, 0.2, -0.1, 0.5])  # the time's changes
    duration = pairs_needed(spread, 0.1)
    assert residual == 3 and duration > 100
    assert f"plan: --agent-eval-runs {duration} (duration on express needs the most)" in out
    assert agent_eval(["plan", str(items), "--change", "0.25", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["change"] == 0.25 and data["runs"] == pairs_needed(spread, 0.25)
    assert {n["figure"] for n in data["needs"]} == {"residual_tokens", "duration_s"}


def test_plan_refuses_a_change_that_is_no_share(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        agent_eval(["plan", str(tmp_path), "--change", "150%"])
    assert stop.value.code == 2 and "must lie between 0 and 100%: '150%'" in capsys.readouterr().err
