"""Two campaigns side by side, and a regression gate over them (pytest-benchmark's compare-fail UX).

    agent-eval compare BASELINE CURRENT --compare-fail "allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%"

The rules (:class:`pytest_agent_eval.settings.config.Rule`) name figures of the catalogue. Every figure is the median
over the runs of one (entry, arm) (:mod:`pytest_agent_eval.report.aggregate`); errored runs have no figures
and are left out. Without a rule, the catalogue's headline figures are shown and never fail. When the two
campaigns ran several test functions, an entry is compared per test function (its row), never pooled across
them.

Every row's change also has its interval, the verdict's own (:func:`~pytest_agent_eval.report.stats.mean_interval`,
docs/report.md "How sure"): run k after against run k before, the mean of those paired changes, and the interval
their number allows — none below three pairs, a t interval, a bootstrap from thirty, "every run gave the same
value" — so a figure has one interval in the verdict, in compare and in the gate.

As a gate (:func:`gate`), a comparison that matched no (entry, arm) fails, and so does one that matched
fewer than asked (by default, with rules: every pair the baseline scored). A noise-aware rule
(``allocation:-5pt@95``) fails only when that interval lies wholly beyond its threshold (or every pair changed
by the same amount beyond it); with too few pairs for an interval it is *undecided*, and says so, and an
undecided gate fails too: a gate that cannot decide must not pass silently.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.campaign.record import ItemRecord, as_records
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.format import show
from pytest_agent_eval.report.aggregate import ArmRuns, Row, aggregate, arm_namer, tells_agents_apart, tells_tests_apart
from pytest_agent_eval.report.stats import (
    MIN_PAIRS_FOR_INTERVAL,
    SAME,
    TOO_FEW,
    Interval,
    mean_interval,
    paired_differences,
    paired_ratios,
    small_n_warning,
)
from pytest_agent_eval.settings.parsers import Rule

HEADLINE = [figure.name for figure in FIGURES.values() if figure.headline]
NO_PAIR = "no run pairs: no run number was run on both sides"


@dataclass(frozen=True)
class Regression:
    """One figure of one (entry, arm), before and after; ``failed`` when a rule's threshold was reached.
    ``test``: the test function, when the comparison tells tests apart.

    ``interval`` is the mean of the paired changes (run k after against run k before, in the rule's unit) and
    what can be said of it, as the verdict says it (:func:`~pytest_agent_eval.report.stats.mean_interval`); None
    when no run pairs. ``undecided``: a noise-aware rule (``@95``) had too few pairs for an interval, or a rule's
    figure has a value on one side only (that side's median is None).
    """

    entry: str
    arm: str
    metric: str
    before: float | None
    after: float | None
    change: float | None
    failed: bool
    unit: str = "%"
    rule: str | None = None
    n_before: int = 0
    n_after: int = 0
    interval: Interval | None = None
    undecided: bool = False
    test: str | None = None
    agent: str | None = None  # the agent, when the comparison tells agents apart

    @property
    def label(self) -> str:
        """The entry as the tables name it (with its test function when the comparison tells tests apart, its
        agent when it tells agents apart)."""
        return Row(self.entry, self.test, self.agent).label

    @property
    def mean_change(self) -> float | None:
        """The mean of the paired changes, in the row's unit; None when no run pairs."""
        return self.interval.mean if self.interval is not None else None

    @property
    def verdict(self) -> str:
        if self.rule is None:
            return ""
        if self.undecided and self.change is None:
            return f"UNDECIDED {self.rule} (no value {'before' if self.before is None else 'after'})"
        if self.undecided:
            why = self.interval.note if self.interval is not None else NO_PAIR
            return f"UNDECIDED {self.rule} ({why}: {MIN_PAIRS_FOR_INTERVAL} paired runs needed)"
        return f"FAILED {self.rule}" if self.failed else f"ok {self.rule}"


@dataclass(frozen=True)
class GateResult:
    """A comparison as a gate: its rows, which (entry, arm) pairs it matched, and why it fails (if it does)."""

    rows: list[Regression]
    matched: list[tuple[Row, str]]
    baseline_pairs: list[tuple[Row, str]]  # every (row, arm) the baseline scored
    rules: list[Rule]
    min_pairs: int | None = None  # None: every baseline pair when there are rules

    @property
    def unmatched(self) -> list[tuple[Row, str]]:
        return [key for key in self.baseline_pairs if key not in self.matched]

    @property
    def regressions(self) -> list[Regression]:
        return [row for row in self.rows if row.failed]

    @property
    def undecided(self) -> list[Regression]:
        return [row for row in self.rows if row.undecided]

    @property
    def problems(self) -> list[str]:
        """Why the gate cannot pass whatever the figures say: it compared nothing, a rule checked nothing, or it
        compared fewer pairs than asked."""
        found = self._problem()
        return [found[1]] if found else []

    @property
    def reason(self) -> str | None:
        """The first problem in a few words, as the verdict line gives it."""
        found = self._problem()
        return found[0] if found else None

    def _problem(self) -> tuple[str, str] | None:
        """The first problem, in a few words and in full."""
        if not self.matched:
            scored = f"{len(self.baseline_pairs)} scored"
            return "compared nothing", (
                f"compared nothing: no (entry, arm) was scored in both the baseline ({scored}) and this run"
            )
        checked = {row.rule for row in self.rows}
        unchecked = [str(rule) for rule in self.rules if str(rule) not in checked]
        if unchecked:
            short = f"checked nothing for {', '.join(unchecked)}"
            return short, f"{short}: no compared (entry, arm) has the figure on either side"
        wanted = self.min_pairs if self.min_pairs is not None else (len(self.baseline_pairs) if self.rules else 0)
        if len(self.matched) >= wanted:
            return None
        missing = ", ".join(f"{row.label}/{arm}" for row, arm in self.unmatched[:6])
        more = f" (+{len(self.unmatched) - 6} more)" if len(self.unmatched) > 6 else ""
        asked = "every pair the baseline scored" if self.min_pairs is None else f"min pairs {self.min_pairs}"
        short = f"compared {len(self.matched)} (entry, arm) pair(s), fewer than asked ({asked}: {wanted})"
        return short, f"{short}; not matched: {missing}{more}"

    @property
    def failed(self) -> bool:
        """A gate that compared too little, found a regression, or could not decide, does not pass."""
        return bool(self.problems or self.regressions or self.undecided)


def medians(
    records: Iterable[ItemRecord | Mapping[str, Any]], figures: Sequence[str] = ()
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (row label, arm) — the entry, unless the records came from several test functions: the number of
    scored runs and each figure's median over them."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (row, arm), group in _scored(as_records(records)).items():
        out[row.label, arm] = {"n": len(group.runs), **{name: group.median(name) for name in figures or HEADLINE}}
    return out


def _scored(
    records: list[ItemRecord], by_test: bool | None = None, by_agent: bool | None = None
) -> dict[tuple[Row, str], ArmRuns]:
    found = aggregate(records, arm_namer(records), by_test=by_test, by_agent=by_agent)
    return {key: group for key, group in found.groups.items() if group.runs}


def _values(group: ArmRuns, figure: str) -> dict[int, float]:
    """A figure's value per run number (a run without one numbered by its position)."""
    out = {}
    for position, run in enumerate(group.runs, start=1):
        value = run.figures.get(figure)
        if value is not None:
            out[run.run if run.run is not None else position] = float(value)
    return out


def compare(
    baseline_records: Iterable[ItemRecord | Mapping[str, Any]],
    current_records: Iterable[ItemRecord | Mapping[str, Any]],
    rules: Sequence[Rule] = (),
) -> list[Regression]:
    """The headline figures (and every figure a rule names) of each (entry, arm) both sides scored."""
    return gate(baseline_records, current_records, rules).rows


def gate(
    baseline_records: Iterable[ItemRecord | Mapping[str, Any]],
    current_records: Iterable[ItemRecord | Mapping[str, Any]],
    rules: Sequence[Rule] = (),
    min_pairs: int | None = None,
) -> GateResult:
    """Compare, and say whether the comparison may pass as a gate.

    A figure with rules gets one row per rule (its change in the rule's unit); the others get one row in
    their natural unit (points for shares, percent otherwise) and never fail. A point rule compares the
    medians; a noise-aware rule (``@95``) fails only when the whole interval of the change lies beyond its
    threshold (or every pair changed alike, beyond it), and is undecided with fewer than
    :data:`~pytest_agent_eval.report.stats.MIN_PAIRS_FOR_INTERVAL` pairs. A rule's figure with a value on one side
    only is undecided too.
    """
    names = list(dict.fromkeys([*HEADLINE, *(rule.metric for rule in rules)]))
    before_records, after_records = as_records(baseline_records), as_records(current_records)
    # Both sides tell tests apart, or neither: a row must mean the same thing before and after. One test function a
    # side is one test, whatever its path (``pytest evals`` and ``--pyargs`` name the same file differently).
    named = all(record.test for record in [*before_records, *after_records])
    by_test = named and (tells_tests_apart(before_records) or tells_tests_apart(after_records))
    # Agents likewise: a run pairs with the same agent's run only, so two sides that ran different agents (or either
    # side several) key their rows by agent.
    by_agent = tells_agents_apart([*before_records, *after_records])
    before_all = _scored(before_records, by_test, by_agent)
    after_all = _scored(after_records, by_test, by_agent)
    matched = [key for key in before_all if key in after_all]
    rows = []
    for key in matched:
        for name in names:
            before, after = _values(before_all[key], name), _values(after_all[key], name)
            ruled = [r for r in rules if r.metric == name]
            if not before and not after:
                continue  # the figure does not apply to this pair (allocation without the tool)
            if not before or not after:
                # Under a rule, a figure gone from one side (or new on it) is a change the gate cannot judge.
                rows += [_one_sided_row(key, name, rule, before, after) for rule in ruled]
                continue
            for rule in ruled or [Rule(name, math.inf, "pt" if FIGURES[name].is_share else "%", 1)]:
                rows.append(_row(key, name, rule if ruled else None, rule, before, after))
    return GateResult(rows, matched, list(before_all), list(rules), min_pairs)


def _row(
    key: tuple[Row, str],
    name: str,
    rule: Rule | None,
    unit_rule: Rule,
    before: dict[int, float],
    after: dict[int, float],
) -> Regression:
    before_median, after_median = statistics.median(before.values()), statistics.median(after.values())
    change = unit_rule.change(before_median, after_median)
    level = (rule.confidence if rule is not None and rule.confidence is not None else 95) / 100
    interval = paired_interval(before, after, unit_rule.unit, level)
    undecided = failed = False
    if rule is not None and rule.confidence is not None:
        undecided = interval is None or interval.method == TOO_FEW
        if interval is not None and interval.method == SAME:
            failed = rule.fails(interval.mean)  # every pair changed alike: no spread, the change itself decides
        elif not undecided and interval is not None:
            # Beyond the threshold means both ends are: the interval's least-bad end regressed too.
            failed = rule.fails(interval.low) and rule.fails(interval.high)  # type: ignore[arg-type]
    elif rule is not None:
        failed = rule.fails(change)
    return Regression(
        entry=key[0].entry,
        arm=key[1],
        metric=name,
        before=before_median,
        after=after_median,
        change=change,
        failed=failed,
        unit=unit_rule.unit,
        rule=str(rule) if rule is not None else None,
        n_before=len(before),
        n_after=len(after),
        interval=interval,
        undecided=undecided,
        test=key[0].test,
        agent=key[0].agent,
    )


def paired_interval(before: dict[int, float], after: dict[int, float], unit: str, confidence: float) -> Interval | None:
    """The verdict's interval of the change, in ``unit``: per run both sides ran, ``after − before`` (points of a
    share) or ``after / before − 1`` (percent; a pair whose baseline is 0 has no relative change, as in the
    verdict), then :func:`~pytest_agent_eval.report.stats.mean_interval`. None when no run pairs."""
    changes = paired_differences(after, before) if unit == "pt" else paired_ratios(after, before)
    return mean_interval(changes, confidence).scaled(100) if changes else None


def _one_sided_row(
    key: tuple[Row, str], name: str, rule: Rule, before: dict[int, float], after: dict[int, float]
) -> Regression:
    return Regression(
        entry=key[0].entry,
        arm=key[1],
        metric=name,
        before=statistics.median(before.values()) if before else None,
        after=statistics.median(after.values()) if after else None,
        change=None,
        failed=False,
        unit=rule.unit,
        rule=str(rule),
        n_before=len(before),
        n_after=len(after),
        undecided=True,
        test=key[0].test,
        agent=key[0].agent,
    )


def comparison_cells(row: Regression, note: str | None = None) -> list[str]:
    """One row of the comparison as the terminal and the HTML report print it: entry, arm, figure, before,
    after, change, mean change [interval], n, verdict (with ``note``, a caveat on the figure)."""
    return [
        row.label,
        row.arm,
        row.metric,
        show(row.metric, row.before),
        show(row.metric, row.after),
        "n/a" if row.change is None else _change(row.change, row.unit),
        interval_text(row),
        f"{row.n_before}→{row.n_after}",
        " ".join(part for part in (row.verdict, f"({note})" if note else "") if part),
    ]


def render_comparison(
    rows: Sequence[Regression], flag: str = "--compare-fail", caveat: Callable[[str], str | None] | None = None
) -> str:
    """A table naming entry, arm, figure, before, after, change (median), the mean change with its interval,
    and each rule's verdict; ``caveat`` notes a figure that does not measure what the comparison is about
    (under replay: one the recording fixed)."""
    if not rows:
        return "nothing to compare: no (entry, arm) was scored in both"
    table = [comparison_cells(row, caveat(row.metric) if caveat is not None else None) for row in rows]
    text = tabulate(
        table,
        headers=["entry", "arm", "metric", "before", "after", "change", "mean [95% interval]", "n", "rule"],
        tablefmt="simple",
        disable_numparse=True,
    )
    notes = sorted({w for row in rows for w in (small_n_warning(row.n_before), small_n_warning(row.n_after)) if w})
    failed = [row for row in rows if row.failed]
    undecided = [row for row in rows if row.undecided]
    lines = [text, *(f"warning: {note}" for note in notes)]
    if failed:
        lines.append(f"{len(failed)} regression(s) beyond {flag} thresholds")
    if any(row.change is not None for row in undecided):
        lines.append(
            f"{len(undecided)} verdict(s) undecided: a noise-aware rule needs {MIN_PAIRS_FOR_INTERVAL} paired runs "
            "(run k on both sides) for an interval (more --agent-eval-runs, or a point rule without '@')"
        )
    if any(row.change is None for row in undecided):
        lines.append("a ruled figure has a value on one side only: the gate cannot judge that change")
    return "\n".join(lines)


def render_gate(result: GateResult, flag: str = "--compare-fail") -> str:
    """The comparison, then why the gate fails (if it does) and what made it pass or not, in one line."""
    lines = [render_comparison(result.rows, flag)] if result.rows else []
    lines += [f"GATE FAILED: {problem}" for problem in result.problems]
    lines.append(gate_line(result))
    return "\n".join(lines)


def gate_line(result: GateResult) -> str:
    """The gate's verdict in one line: what it compared and what decided it."""
    pairs = f"{len(result.matched)} of {len(result.baseline_pairs)} baseline (entry, arm) pair(s) compared"
    if result.reason is not None:
        return f"gate: FAILED — {pairs}; {result.reason}"
    if result.regressions:
        return f"gate: FAILED — {pairs}; {len(result.regressions)} regression(s)"
    if result.undecided:
        return f"gate: UNDECIDED (fails) — {pairs}; {len(result.undecided)} verdict(s) could not be decided"
    checked = sum(1 for row in result.rows if row.rule)
    return f"gate: passed — {pairs}; {checked} rule check(s), none regressed"


def gate_summary(result: GateResult) -> dict[str, Any]:
    """The gate as plain data (``summary.json``): what it compared, its verdict, and each failing or undecided row."""
    return {
        "passed": not result.failed,
        "verdict": gate_line(result),
        "rules": [str(rule) for rule in result.rules],
        "pairs": len(result.matched),
        "baseline_pairs": len(result.baseline_pairs),
        "problems": result.problems,
        "regressions": [_row_summary(row) for row in result.regressions],
        "undecided": [_row_summary(row) for row in result.undecided],
    }


def _row_summary(row: Regression) -> dict[str, Any]:
    return {
        **({"test": row.test} if row.test is not None else {}),
        **({"agent": row.agent} if row.agent is not None else {}),
        "entry": row.entry,
        "arm": row.arm,
        "metric": row.metric,
        "rule": row.rule,
        "before": row.before,
        "after": row.after,
        "change": row.change,
        "mean_change": row.mean_change,
        "interval": [row.interval.low, row.interval.high] if row.interval and row.interval.has_interval else None,
        "method": row.interval.method if row.interval is not None else None,
        "note": row.interval.note if row.interval is not None else NO_PAIR,
        "n": [row.n_before, row.n_after],
    }


def interval_text(row: Regression) -> str:
    """The mean change and its interval as the verdict writes them, in the row's unit: ``-20.0pt [-25.1pt,
    -14.9pt] (t, 3 pairs)``, ``-20.0pt (every run gave the same value, 3 pairs)``, ``-20.0pt (n=2: too few pairs
    for an interval)``; no run pairs: says so."""
    found = row.interval
    if found is None:
        return NO_PAIR
    mean = _change(found.mean, row.unit)
    if not found.has_interval:
        return f"{mean} ({found.note})"
    return f"{mean} [{_change(found.low, row.unit)}, {_change(found.high, row.unit)}] ({found.note})"  # type: ignore[arg-type]


def _change(value: float, unit: str) -> str:
    if math.isinf(value):
        return f"{'+' if value > 0 else '-'}∞{unit}"
    return f"{value:+.1f}{unit}"
