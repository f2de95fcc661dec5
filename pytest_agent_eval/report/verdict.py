"""Which arm did better: per entry and over the whole campaign, each verdict figure's change with its interval,
and its direction in words (better, worse, no clear difference).

A change is relative and paired by run: run k of the arm against run k of its reference (``with / without − 1``),
the mean over the pairs with the 95% interval their number allows
(:func:`~pytest_agent_eval.report.stats.mean_interval`: none below three pairs, a t interval, a bootstrap from
thirty), the method named. "Better" and "worse" are said only when the interval lies wholly on one side of no
change, in the direction the catalogue calls better for the figure, or when every pair gave the same change (said
as such); an interval that holds no change is "no clear difference"; too few pairs have no interval, and say so.
Each figure also says how many pairs would tell a change of a tenth (and a quarter) from its observed spread
(:func:`~pytest_agent_eval.report.stats.pairs_needed`). The terminal's verdict lines, ``summary.json`` and
report.html's banner all read :func:`verdicts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.format import signed
from pytest_agent_eval.report.aggregate import Aggregate, ArmRuns, Row, unavailable
from pytest_agent_eval.report.grades import grade_medians, grade_text
from pytest_agent_eval.report.stats import (
    MIN_PAIRS_FOR_INTERVAL,
    PLAN_CHANGES,
    SAME,
    TOO_FEW,
    Interval,
    mean_interval,
    paired_ratios,
    pairs_needed,
)

# What a build decision reads first: what the arm left in the context, what it processed, its time and its cost.
VERDICT_FIGURES = ("residual_tokens", "tokens_processed", "duration_s", "cost_usd")
# Read beside them: what else the tool moves, that a reader would weigh against the four (the context it leaves).
COUNTER_FIGURES = ("ctx_final",)
BETTER, WORSE, UNCLEAR, NO_INTERVAL = "better", "worse", "no clear difference", "no interval"
NO_CHANGE = "no change"
OVERALL = "overall"
NO_PAIRS = "no run of one arm pairs with a run of the other"


@dataclass(frozen=True)
class Change:
    """One figure's relative change, arm against reference, over ``pairs`` paired runs: their mean and what can
    be said of it (``interval``: the method, the bounds, the spread)."""

    figure: str
    pairs: int
    interval: Interval | None = None
    missing: str | None = None  # no pair: ``not available (why)`` when the agent's records do not give the figure

    @property
    def mean(self) -> float | None:
        return self.interval.mean if self.interval else None

    @property
    def low(self) -> float | None:
        return self.interval.low if self.interval else None

    @property
    def high(self) -> float | None:
        return self.interval.high if self.interval else None

    @property
    def method(self) -> str | None:
        return self.interval.method if self.interval else None

    @property
    def word(self) -> str:
        """better / worse (the interval wholly on one side of no change, or every pair the same change), no clear
        difference, no change (every pair exactly none), or no interval (too few pairs)."""
        if self.interval is None or self.interval.method == TOO_FEW:
            return NO_INTERVAL
        if self.interval.method == SAME:
            if self.interval.mean == 0:
                return NO_CHANGE
        elif self.low <= 0 <= self.high:  # type: ignore[operator]
            return UNCLEAR
        better = FIGURES[self.figure].better or 0
        return BETTER if (self.interval.mean > 0) == (better > 0) else WORSE

    def text(self, tool: str) -> str:
        """``retrieval residual −73% [−80%, −66%] better (t, 5 pairs)``; two pairs: ``… −73% (n=2: too few pairs
        for an interval)``."""
        return f"{FIGURES[self.figure].title(tool)} {self.value_text()}"

    def value_text(self) -> str:
        """``−73% [−80%, −66%] better (t, 5 pairs)``; ``−73% better (every run gave the same value, 2 pairs)``;
        ``−73% (n=2: too few pairs for an interval)``; no pair: ``n/a``."""
        found = self.interval
        if found is None:
            return self.missing or "n/a"
        if found.method == TOO_FEW:
            return f"{_pct(found.mean)} ({found.note})"
        if found.method == SAME:
            return f"{_pct(found.mean)} {self.word} ({found.note})"
        return f"{_pct(found.mean)} [{_pct(found.low)}, {_pct(found.high)}] {self.word} ({found.note})"

    def needed(self) -> dict[str, int | None]:
        """Per change size (``10%``, ``25%``): how many pairs would tell it from noise at this spread."""
        sd = self.interval.sd if self.interval else None
        return {f"{size:.0%}": pairs_needed(sd, size) for size in PLAN_CHANGES}

    def to_dict(self) -> dict[str, Any]:
        found = self.interval
        return {
            "figure": self.figure,
            "pairs": self.pairs,
            "change": self.mean,
            "interval": [found.low, found.high] if found is not None and found.has_interval else None,
            "method": self.method,
            "note": found.note if found is not None else None,
            "sd": found.sd if found is not None else None,
            "verdict": self.word,
            "pairs_to_decide": self.needed(),
        }


@dataclass(frozen=True)
class Verdict:
    """``arm`` against ``reference`` on one entry (its row's label) or over every entry (``overall``)."""

    label: str
    arm: str
    reference: str
    entries: int
    pairs: int
    changes: list[Change]
    row: Row  # the row it reads (the entry, or OVERALL; its agent when rows tell agents apart)
    grades: tuple[tuple[str, ArmRuns], ...] = ()  # each arm's runs, for its answers' grade (report/grades.py)

    @property
    def overall(self) -> bool:
        return self.row.entry == OVERALL

    def change(self, figure: str) -> Change | None:
        return next((change for change in self.changes if change.figure == figure), None)

    @property
    def scope(self) -> str:
        """What was compared over what: ``with vs without, 2 entries, 5 paired runs``."""
        over = f"{self.entries} entr{'y' if self.entries == 1 else 'ies'}, " if self.overall else ""
        return f"{self.arm} vs {self.reference}, {over}{self.pairs} paired run{'' if self.pairs == 1 else 's'}"

    def line(self, tool: str) -> str:
        """``verdict express (with vs without, 5 paired runs): retrieval residual −73% [−80%, −66%] better (t, 5
        pairs) · … — with better on: retrieval residual; the other way: final context, duration``"""
        head = f"verdict {self.label} ({self.scope})"
        if not self.pairs:
            return f"{head}: {NO_PAIRS}"
        grade = grade_text(self.grades)
        parts = [*(change.text(tool) for change in self.changes), *([grade] if grade else [])]
        return f"{head}: " + " · ".join(parts) + f" — {self.reading(tool)}"

    def power_line(self, tool: str, size: float = PLAN_CHANGES[0]) -> str:
        """``pairs to tell a 10% change from noise, express: retrieval residual 3 · duration 118 · cost unknown
        (n=1)``: per figure, from its observed spread (80% power, 95% interval)."""
        parts = []
        for change in self.changes:
            if not change.pairs or change.interval is None:
                continue
            needed = pairs_needed(change.interval.sd, size)
            shown = f"unknown (n={change.pairs})" if needed is None else str(needed)
            parts.append(f"{FIGURES[change.figure].title(tool)} {shown}")
        few = self.pairs < MIN_PAIRS_FOR_INTERVAL
        rough = f" (a spread from {self.pairs} pairs is itself a rough guess)" if few else ""
        return f"pairs to tell a {size:.0%} change from noise, {self.label}: " + " · ".join(parts) + rough

    def rests_on(self) -> list[Change]:
        """The figures a "better" rests on: those the arm is better on (an interval wholly on the good side, or
        the same change every pair)."""
        return [change for change in self.changes if change.word == BETTER]

    def against(self) -> list[Change]:
        """The figures that point the other way: whose mean change is in the worse direction, clear or not (a
        larger final context, a longer duration), to be read beside what the arm is better on."""
        out = []
        for change in self.changes:
            better = FIGURES[change.figure].better
            if change.mean is not None and better and change.mean * better < 0:
                out.append(change)
        return out

    def reading(self, tool: str) -> str:
        """``with better on: retrieval residual, tokens processed; the other way: final context, duration``."""
        on = ", ".join(FIGURES[c.figure].title(tool) for c in self.rests_on()) or "no figure"
        text = f"{self.arm} better on: {on}"
        other = self.against()
        if other:
            text += "; the other way: " + ", ".join(FIGURES[c.figure].title(tool) for c in other)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.label,
            **({"agent": self.row.agent} if self.row.agent is not None else {}),
            "arm": self.arm,
            "reference": self.reference,
            "entries": self.entries,
            "pairs": self.pairs,
            "figures": {change.figure: change.to_dict() for change in self.changes},
            **({"key_recall": grade_medians(self.grades)} if grade_text(self.grades) else {}),
            "better_on": [change.figure for change in self.rests_on()],
            "the_other_way": [change.figure for change in self.against()],
        }


def verdicts(found: Aggregate, include_contaminated: bool = False) -> list[Verdict]:
    """Per pair of arms the tables compare (each arm against the reference, builds against each other): a
    verdict per entry that ran both, then the ``overall`` one over all their pairs. A contaminated run of an arm
    without the tool is left out, as the campaign tables leave it out (unless ``include_contaminated``)."""
    out = []
    agents = list(dict.fromkeys(row.agent for row in found.rows))  # [None] unless rows tell agents apart
    for arm, reference in found.pairs():
        for agent in agents:  # an agent's runs pair with its own only, and pool into its own overall
            ratios: dict[str, list[float]] = {figure: [] for figure in (*VERDICT_FIGURES, *COUNTER_FIGURES)}
            entries = []
            pooled: dict[str, ArmRuns] = {}
            for row in (row for row in found.rows if row.agent == agent):
                mine, theirs = found.group(row, arm), found.group(row, reference)
                if mine is None or theirs is None:
                    continue
                mine, theirs = _kept(mine, include_contaminated), _kept(theirs, include_contaminated)
                by_figure = {f: paired_ratios(mine.by_run(f), theirs.by_run(f)) for f in ratios}
                for figure, found_ratios in by_figure.items():
                    ratios[figure] += found_ratios
                grades = ((arm, mine), (reference, theirs))
                entries.append(_verdict(row.label, arm, reference, 1, by_figure, row, grades))
                for name, group in grades:
                    pooled.setdefault(name, ArmRuns(Row(OVERALL, agent=agent), name, group.has_tool)).runs += group.runs
            if entries:
                out += entries
                label = OVERALL if agent is None else f"{OVERALL} · {agent}"
                overall = tuple(pooled.items())
                out.append(_verdict(label, arm, reference, len(entries), ratios, Row(OVERALL, agent=agent), overall))
    return out


def _kept(group: ArmRuns, include_contaminated: bool) -> ArmRuns:
    return group if include_contaminated else group.without_contaminated()


def _verdict(
    label: str,
    arm: str,
    reference: str,
    entries: int,
    ratios: dict[str, list[float]],
    row: Row,
    grades: tuple[tuple[str, ArmRuns], ...] = (),
) -> Verdict:
    groups = [group for _, group in grades]  # the arms' runs: what a figure not available is read off
    changes = [_change(figure, values, unavailable(groups, figure)) for figure, values in ratios.items()]
    changes = [c for c in changes if c.pairs or c.figure not in COUNTER_FIGURES]  # read beside, when there
    pairs = max((change.pairs for change in changes), default=0)
    return Verdict(label, arm, reference, entries, pairs, changes, row, grades)


def _change(figure: str, ratios: list[float], missing: str | None = None) -> Change:
    if not ratios:
        return Change(figure, 0, missing=missing)
    return Change(figure, len(ratios), mean_interval(ratios))


def shown(found: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a reader is shown: an ``overall`` one only when it pools more than one entry (over one it
    repeats that entry's line)."""
    return [v for v in found if not v.overall or v.entries > 1]


def _pct(value: float) -> str:
    return signed(value, lambda v: f"{v:.0%}")
