"""Two campaigns side by side, and a regression gate over them (pytest-benchmark's compare-fail UX).

    agent-eval compare BASELINE CURRENT --compare-fail "allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%"

The rules (:class:`pytest_agent_eval.config.Rule`) name figures of the catalogue. Every figure is the median
over the runs of one (entry, arm) (:mod:`pytest_agent_eval.report.aggregate`); errored runs have no figures
and are left out. Without a rule, the catalogue's headline figures are shown and never fail.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.campaign.record import ItemRecord, as_records
from pytest_agent_eval.config import Rule
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.aggregate import aggregate, arm_namer
from pytest_agent_eval.report.format import formatter
from pytest_agent_eval.report.stats import small_n_warning

HEADLINE = [figure.name for figure in FIGURES.values() if figure.headline]


@dataclass(frozen=True)
class Regression:
    """One figure of one (entry, arm), before and after; ``failed`` when a rule's threshold was reached."""

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


def medians(
    records: Iterable[ItemRecord | Mapping[str, Any]], figures: Sequence[str] = ()
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (entry, arm): the number of scored runs and each figure's median over them."""
    typed = as_records(records)
    found = aggregate(typed, arm_namer(typed))
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, group in found.groups.items():
        if group.runs:
            out[key] = {"n": len(group.runs), **{name: group.median(name) for name in figures or HEADLINE}}
    return out


def compare(
    baseline_records: Iterable[ItemRecord | Mapping[str, Any]],
    current_records: Iterable[ItemRecord | Mapping[str, Any]],
    rules: Sequence[Rule] = (),
) -> list[Regression]:
    """The headline figures (and every figure a rule names) of each (entry, arm) both sides scored.

    A figure with rules gets one row per rule (its change in the rule's unit); the others get one row in
    their natural unit (points for shares, percent otherwise) and never fail.
    """
    names = list(dict.fromkeys([*HEADLINE, *(rule.metric for rule in rules)]))
    before_all, after_all = medians(baseline_records, names), medians(current_records, names)
    rows = []
    for key in [k for k in before_all if k in after_all]:
        before, after = before_all[key], after_all[key]
        for name in names:
            if before[name] is None or after[name] is None:
                continue
            ruled = [r for r in rules if r.metric == name]
            for rule in ruled or [Rule(name, math.inf, "pt" if FIGURES[name].is_share else "%", 1)]:
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


def render_comparison(rows: Sequence[Regression], flag: str = "--compare-fail") -> str:
    """A table naming entry, arm, figure, before, after, change, and which rule failed."""
    if not rows:
        return "nothing to compare: no (entry, arm) was scored in both"
    table = []
    for row in rows:
        show = formatter(row.metric)
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
        lines.append(f"{len(failed)} regression(s) beyond {flag} thresholds")
    return "\n".join(lines)


def _change(value: float, unit: str) -> str:
    if math.isinf(value):
        return f"{'+' if value > 0 else '-'}∞{unit}"
    return f"{value:+.1f}{unit}"
