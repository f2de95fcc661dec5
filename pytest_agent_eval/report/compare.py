"""Two campaigns side by side, and a regression gate over them (pytest-benchmark's compare-fail UX).

    agent-eval compare BASELINE CURRENT --compare-fail "allocation:-5pt,sufficient:-10pt,residual:+20%"

A rule is ``metric:<sign><number><unit>``: the sign is the direction that fails (``-`` a drop, ``+`` a rise;
without one, the metric's bad direction), ``pt`` is percentage points of a share, ``%`` a change relative to
the baseline. A rule fails when the change reaches its threshold. Every figure is the median over the runs
of one (entry, arm); errored runs have no figures and are left out.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.report.stats import dollars, percent, small_n_warning, tokens

Record = dict[str, Any]


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    share: bool  # a 0–1 share: percentage points make sense
    higher_is_better: bool
    value: Callable[[Record], float | None]
    show: Callable[[float], str]


def _scores(record: Record) -> dict[str, Any]:
    # The plugin's summary.json calls it "score"; item records call it "scores".
    return record.get("scores") or record.get("score") or {}


def _allocation(record: Record) -> float | None:
    return _scores(record).get("allocation", {}).get("efficiency")


def _bucket_share(bucket: str) -> Callable[[Record], float | None]:
    def share(record: Record) -> float | None:
        counts = _scores(record).get("sufficiency", {}).get("counts") or {}
        answered = sum(counts.values())
        return counts.get(bucket, 0) / answered if answered else None

    return share


def residual(record: Record) -> float | None:
    """What the arm's retrieval still occupies: the tool's residual, or file-access for a without-arm."""
    occupancy = _scores(record).get("occupancy") or {}
    if record.get("arm") == "without":
        return occupancy.get("file_access")
    return (occupancy.get("residual") or {}).get("codegraph")


def _tokens(record: Record) -> float | None:
    return (_scores(record).get("occupancy") or {}).get("tokens_processed")


def _cost(record: Record) -> float | None:
    return _scores(record).get("cost_usd")


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("allocation", "pooled allocation efficiency", True, True, _allocation, percent),
        Metric(
            "sufficient", "share of answered explores that moved on", True, True, _bucket_share("sufficient"), percent
        ),
        Metric(
            "explore_again",
            "share of answered explores followed by another",
            True,
            False,
            _bucket_share("explore_again"),
            percent,
        ),
        Metric("residual", "tool residual (with) / file-access residual (without)", False, False, residual, tokens),
        Metric("tokens", "tokens processed", False, False, _tokens, tokens),
        Metric("cost", "cost in USD", False, False, _cost, dollars),
    )
}

_RULE_RE = re.compile(r"^(?P<metric>[a-z_]+):(?P<sign>[+-]?)(?P<number>\d+(?:\.\d+)?)(?P<unit>pt|%)$")


@dataclass(frozen=True)
class Rule:
    metric: str
    threshold: float  # in the unit's terms: 5 means 5pt or 5%
    unit: str  # "pt" | "%"
    direction: int  # -1 a drop fails, +1 a rise fails

    def __str__(self) -> str:
        return f"{self.metric}:{'+' if self.direction > 0 else '-'}{self.threshold:g}{self.unit}"

    def change(self, before: float, after: float) -> float:
        """The change in the rule's unit: points of a share, or percent of the baseline."""
        if self.unit == "pt":
            return (after - before) * 100
        if before == 0:
            return 0.0 if after == 0 else math.copysign(math.inf, after)
        return (after / before - 1) * 100

    def fails(self, change: float) -> bool:
        # A hair of tolerance so a change of exactly the threshold fails despite float rounding.
        return change * self.direction >= self.threshold - 1e-9


def parse_compare_fail(text: str) -> list[Rule]:
    """``"allocation:-5pt,residual:+20%"`` → rules; a ValueError names the first token it cannot read."""
    rules = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        match = _RULE_RE.match(token)
        if match is None:
            raise ValueError(
                f"--compare-fail: cannot read {token!r}: expected METRIC:[+|-]NUMBER(pt|%), "
                f"e.g. allocation:-5pt or residual:+20%"
            )
        metric = METRICS.get(match["metric"])
        if metric is None:
            raise ValueError(f"--compare-fail: unknown metric in {token!r}; known: {', '.join(METRICS)}")
        if match["unit"] == "pt" and not metric.share:
            raise ValueError(
                f"--compare-fail: {token!r}: {metric.name} is not a share, so points mean nothing; "
                f"use a relative threshold like {metric.name}:+20%"
            )
        sign = match["sign"]
        direction = (1 if sign == "+" else -1) if sign else (-1 if metric.higher_is_better else 1)
        rules.append(Rule(metric.name, float(match["number"]), match["unit"], direction))
    if not rules:
        raise ValueError(f"--compare-fail: no rule in {text!r}")
    return rules


@dataclass(frozen=True)
class Regression:
    """One metric of one (entry, arm), before and after; ``failed`` when a rule's threshold was reached."""

    entry: str
    arm: str
    metric: str
    before: float
    after: float
    change: float
    failed: bool
    unit: str = "%"
    rule: str | None = None
    n_before: int = 0
    n_after: int = 0


def arm_namer(records: Iterable[Record]) -> Callable[[Record], str]:
    """How records are grouped into arms: ``with``/``without``, so campaigns of two versions line up.

    Only a campaign that ran one arm at several versions (``with@1.6.1`` and ``with@local``) keeps the
    versioned labels apart, or their runs would be pooled into one arm.
    """
    labels: dict[str, set[str]] = {}
    for record in records:
        labels.setdefault(str(record.get("arm") or "?"), set()).add(str(record.get("arm_label") or record.get("arm")))

    def name(record: Record) -> str:
        arm = str(record.get("arm") or "?")
        return str(record.get("arm_label") or arm) if len(labels.get(arm, ())) > 1 else arm

    return name


def entry_of(record: Record) -> str:
    return str(record.get("entry") or record.get("id"))


def medians(records: Iterable[Record]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (entry, arm): the number of scored runs and each metric's median over them."""
    records = list(records)
    arm_of = arm_namer(records)
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        if record.get("outcome") == "error" or not _scores(record):
            continue
        groups.setdefault((entry_of(record), arm_of(record)), []).append(record)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, runs in groups.items():
        figures: dict[str, Any] = {"n": len(runs)}
        for name, metric in METRICS.items():
            values = [v for v in (metric.value(r) for r in runs) if v is not None]
            figures[name] = statistics.median(values) if values else None
        out[key] = figures
    return out


def compare(
    baseline_records: Iterable[Record], current_records: Iterable[Record], rules: Sequence[Rule] = ()
) -> list[Regression]:
    """Every metric of every (entry, arm) both sides scored, with the rules applied.

    A metric with rules gets one row per rule (its change in the rule's unit); the others get one row
    in their natural unit (points for shares, percent otherwise) and never fail.
    """
    before_all, after_all = medians(baseline_records), medians(current_records)
    rows = []
    for key in [k for k in before_all if k in after_all]:
        before, after = before_all[key], after_all[key]
        for name, metric in METRICS.items():
            if before[name] is None or after[name] is None:
                continue
            ruled = [r for r in rules if r.metric == name]
            for rule in ruled or [Rule(name, math.inf, "pt" if metric.share else "%", 1)]:
                change = rule.change(before[name], after[name])
                rows.append(
                    Regression(
                        entry=key[0],
                        arm=key[1],
                        metric=name,
                        before=before[name],
                        after=after[name],
                        change=change,
                        failed=bool(ruled) and rule.fails(change),
                        unit=rule.unit,
                        rule=str(rule) if ruled else None,
                        n_before=before["n"],
                        n_after=after["n"],
                    )
                )
    return rows


def render_comparison(rows: Sequence[Regression]) -> str:
    """A table naming entry, arm, metric, before, after, change, and which rule failed."""
    if not rows:
        return "nothing to compare: no (entry, arm) was scored in both"
    table = []
    for row in rows:
        show = METRICS[row.metric].show
        table.append(
            [
                row.entry,
                row.arm,
                row.metric,
                show(row.before),
                show(row.after),
                _change(row.change, row.unit),
                f"{row.n_before}→{row.n_after}",
                f"FAILED {row.rule}" if row.failed else (row.rule or ""),
            ]
        )
    text = tabulate(
        table,
        headers=["entry", "arm", "metric", "before", "after", "change", "n", "rule"],
        tablefmt="simple",
        disable_numparse=True,
    )
    notes = sorted({w for row in rows for w in (small_n_warning(row.n_before), small_n_warning(row.n_after)) if w})
    failed = [row for row in rows if row.failed]
    lines = [text, *(f"warning: {note}" for note in notes)]
    if failed:
        lines.append(f"{len(failed)} regression(s) beyond --compare-fail thresholds")
    return "\n".join(lines)


def _change(value: float, unit: str) -> str:
    if math.isinf(value):
        return f"{'+' if value > 0 else '-'}∞{unit}"
    return f"{value:+.1f}{unit}"
