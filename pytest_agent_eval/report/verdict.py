"""Which arm did better: per entry and over the whole campaign, each verdict figure's change with its interval,
and its direction in words (better, worse, no clear difference).

A change is relative and paired by run: run k of the arm against run k of its reference (``with / without − 1``),
the mean over the pairs with its 95% bootstrap interval (:func:`~pytest_agent_eval.report.stats.bootstrap_ci`).
"Better" and "worse" are said only when the interval lies wholly on one side of no change, in the direction the
catalogue calls better for the figure; an interval that holds no change is "no clear difference"; one pair has
no interval, and says so. The terminal's verdict lines, ``summary.json`` and report.html's banner all read
:func:`verdicts`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.aggregate import Aggregate, ArmRuns, Row
from pytest_agent_eval.report.format import signed
from pytest_agent_eval.report.grades import grade_medians, grade_text
from pytest_agent_eval.report.stats import bootstrap_ci, paired_ratios

# What a build decision reads first: what the arm left in the context, what it processed, its time and its cost.
VERDICT_FIGURES = ("residual_tokens", "tokens_processed", "duration_s", "cost_usd")
BETTER, WORSE, UNCLEAR, NO_INTERVAL = "better", "worse", "no clear difference", "no interval"
OVERALL = "overall"
NO_PAIRS = "no run of one arm pairs with a run of the other"


@dataclass(frozen=True)
class Change:
    """One figure's relative change, arm against reference, over ``pairs`` paired runs."""

    figure: str
    pairs: int
    mean: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def word(self) -> str:
        """better / worse (the interval wholly on one side of no change), no clear difference, or no interval."""
        if self.mean is None or self.low is None or self.high is None or self.pairs < 2:
            return NO_INTERVAL
        if self.low <= 0 <= self.high:
            return UNCLEAR
        better = FIGURES[self.figure].better or 0
        return BETTER if (self.mean > 0) == (better > 0) else WORSE

    def text(self, tool: str) -> str:
        """``retrieval residual −73% [−75%, −70%] better``; one pair: ``… −73% (1 pair: no interval)``."""
        return f"{FIGURES[self.figure].title(tool)} {self.value_text()}"

    def value_text(self) -> str:
        """``−73% [−75%, −70%] better``; one pair: ``−73% (1 pair: no interval)``; no pair: ``n/a``."""
        if self.mean is None:
            return "n/a"
        if self.pairs < 2 or self.low is None or self.high is None:
            return f"{_pct(self.mean)} ({self.pairs} pair: no interval)"
        return f"{_pct(self.mean)} [{_pct(self.low)}, {_pct(self.high)}] {self.word}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "pairs": self.pairs,
            "change": self.mean,
            "interval": None if self.low is None or self.pairs < 2 else [self.low, self.high],
            "verdict": self.word,
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
        """``verdict express (with vs without, 2 paired runs): retrieval residual −73% [−73%, −73%] better · …``"""
        head = f"verdict {self.label} ({self.scope})"
        if not self.pairs:
            return f"{head}: {NO_PAIRS}"
        grade = grade_text(self.grades)
        return f"{head}: " + " · ".join([*(change.text(tool) for change in self.changes), *([grade] if grade else [])])

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
        }


def verdicts(found: Aggregate, include_contaminated: bool = False) -> list[Verdict]:
    """Per pair of arms the tables compare (each arm against the reference, builds against each other): a
    verdict per entry that ran both, then the ``overall`` one over all their pairs. A contaminated run of an arm
    without the tool is left out, as the campaign tables leave it out (unless ``include_contaminated``)."""
    out = []
    agents = list(dict.fromkeys(row.agent for row in found.rows))  # [None] unless rows tell agents apart
    for arm, reference in found.pairs():
        for agent in agents:  # an agent's runs pair with its own only, and pool into its own overall
            ratios: dict[str, list[float]] = {figure: [] for figure in VERDICT_FIGURES}
            entries = []
            pooled: dict[str, ArmRuns] = {}
            for row in (row for row in found.rows if row.agent == agent):
                mine, theirs = found.group(row, arm), found.group(row, reference)
                if mine is None or theirs is None:
                    continue
                mine, theirs = _kept(mine, include_contaminated), _kept(theirs, include_contaminated)
                by_figure = {f: paired_ratios(mine.by_run(f), theirs.by_run(f)) for f in VERDICT_FIGURES}
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
    changes = [_change(figure, values) for figure, values in ratios.items()]
    pairs = max((change.pairs for change in changes), default=0)
    return Verdict(label, arm, reference, entries, pairs, changes, row, grades)


def _change(figure: str, ratios: list[float]) -> Change:
    if not ratios:
        return Change(figure, 0)
    low, high = bootstrap_ci(ratios)
    return Change(figure, len(ratios), statistics.fmean(ratios), low, high)


def shown(found: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a reader is shown: an ``overall`` one only when it pools more than one entry (over one it
    repeats that entry's line)."""
    return [v for v in found if not v.overall or v.entries > 1]


def _pct(value: float) -> str:
    return signed(value, lambda v: f"{v:.0%}")
