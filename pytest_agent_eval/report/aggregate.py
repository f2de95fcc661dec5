"""THE reduction across runs: item records → per entry × arm figures, pooled readings, paired differences.

The terminal tables, ``summary.json``, ``report.html`` and the compare gate all read an :class:`Aggregate`, so
they cannot disagree. Small n is the rule (runs make 1–5 explore calls): every figure is a median with its
range, and arms are compared run against run (run k of one arm minus run k of the reference arm).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.campaign.record import ItemRecord, as_records
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS
from pytest_agent_eval.metrics.sufficiency import BUCKET_KEYS
from pytest_agent_eval.report.stats import bootstrap_ci, paired_differences

ArmOf = Callable[[ItemRecord], str]


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float
    n: int


def spread(values: Iterable[float | None]) -> Spread | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Spread(statistics.median(present), min(present), max(present), len(present))


@dataclass
class ArmRuns:
    """One entry × arm: its scored runs (in the order they ran) and how many ended in an error."""

    entry: str
    arm: str
    has_tool: bool
    runs: list[ItemRecord] = field(default_factory=list)
    errors: int = 0

    def values(self, figure: str) -> list[float | None]:
        return [run.figures.get(figure) for run in self.runs]

    def spread(self, figure: str) -> Spread | None:
        return spread(self.values(figure))

    def median(self, figure: str) -> float | None:
        found = self.spread(figure)
        return found.median if found is not None else None

    def by_run(self, figure: str) -> dict[int, float | None]:
        return {run.run: run.figures.get(figure) for run in self.runs if run.run is not None}

    def without_contaminated(self) -> ArmRuns:
        """The runs the campaign tables read: a contaminated arm without the tool measured the tool after all."""
        if self.has_tool:
            return self
        clean = [run for run in self.runs if not run.contaminated]
        return ArmRuns(self.entry, self.arm, self.has_tool, clean, self.errors)

    @property
    def contaminated(self) -> int:
        return 0 if self.has_tool else sum(1 for run in self.runs if run.contaminated)

    def pooled_allocation(self) -> tuple[int, int, int]:
        """Used chars, envelope chars and answered calls summed over the runs (allocation pooled, not a median)."""
        used = envelope = calls = 0
        for run in self.runs:
            alloc = (run.scores or {}).get("allocation") or {}
            used += alloc.get("used_chars") or 0
            envelope += alloc.get("envelope_chars") or 0
            calls += sum(1 for c in alloc.get("calls") or [] if c.get("efficiency") is not None)
        return used, envelope, calls

    def bucket_counts(self) -> dict[str, int]:
        """What followed each answered explore call, summed over the runs."""
        counts = dict.fromkeys(BUCKET_KEYS, 0)
        for run in self.runs:
            for key, value in (((run.scores or {}).get("sufficiency") or {}).get("counts") or {}).items():
                counts[key] = counts.get(key, 0) + value
        return counts

    @property
    def window(self) -> int:
        for run in self.runs:
            window = ((run.scores or {}).get("occupancy") or {}).get("window")
            if window:
                return int(window)
        return WINDOW_TOKENS


@dataclass(frozen=True)
class Paired:
    """``arm − reference`` run against run: the differences, their mean and 95% bootstrap interval."""

    diffs: list[float]
    mean: float
    low: float
    high: float


@dataclass
class Aggregate:
    records: list[ItemRecord]
    entries: list[str]
    arms: list[str]
    groups: dict[tuple[str, str], ArmRuns]

    def group(self, entry: str, arm: str) -> ArmRuns | None:
        return self.groups.get((entry, arm))

    def arms_of(self, entry: str) -> list[str]:
        return [arm for arm in self.arms if (entry, arm) in self.groups]

    def reference(self, entry: str | None = None) -> str | None:
        """What the other arms are compared against: the first arm without the tool, else the last arm (the
        baseline build of a ``with@new`` vs ``with@old`` campaign); None with fewer than two arms."""
        arms = self.arms_of(entry) if entry is not None else self.arms
        if len(arms) < 2:
            return None
        groups = [g for g in self.groups.values() if g.arm in arms]
        return next((g.arm for g in groups if not g.has_tool), arms[-1])

    def pair(self) -> tuple[str, str] | None:
        """The campaign tables' W and WO: the first arm with the tool and the first without, if both ran."""
        with_arm = next((g.arm for g in self.groups.values() if g.has_tool), None)
        without_arm = next((g.arm for g in self.groups.values() if not g.has_tool), None)
        return (with_arm, without_arm) if with_arm and without_arm else None

    def paired(self, entry: str, arm: str, reference: str, figure: str) -> Paired | None:
        mine, theirs = self.group(entry, arm), self.group(entry, reference)
        if mine is None or theirs is None:
            return None
        diffs = paired_differences(mine.by_run(figure), theirs.by_run(figure))
        if not diffs:
            return None
        low, high = bootstrap_ci(diffs)
        return Paired(diffs, statistics.fmean(diffs), low, high)

    def contaminated(self) -> int:
        return sum(group.contaminated for group in self.groups.values())

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per entry and arm: runs, errors, and the median/min/max of every figure (``summary.json``)."""
        out: dict[str, dict[str, Any]] = {}
        for (entry, arm), group in self.groups.items():
            names = [name for name in FIGURES if any(name in run.figures for run in group.runs)]
            spreads = {name: group.spread(name) for name in names}
            out.setdefault(entry, {})[arm] = {
                "runs": len(group.runs),
                "errors": group.errors,
                "median": {k: s.median if s else None for k, s in spreads.items()},
                "min": {k: s.min if s else None for k, s in spreads.items()},
                "max": {k: s.max if s else None for k, s in spreads.items()},
            }
        return out


def by_label(record: ItemRecord) -> str:
    return record.arm_label


def arm_namer(records: Sequence[ItemRecord]) -> ArmOf:
    """How two campaigns' arms line up: by name (``with``/``without``), so campaigns of two versions compare;
    only a campaign that ran one arm at several versions keeps its labels apart."""
    labels: dict[str, set[str]] = {}
    for record in records:
        labels.setdefault(record.arm, set()).add(record.arm_label)
    return lambda record: record.arm_label if len(labels.get(record.arm, ())) > 1 else record.arm


def aggregate(
    records: Iterable[ItemRecord | Mapping[str, Any]], arm_of: ArmOf | None = None, entry_order: Sequence[str] = ()
) -> Aggregate:
    """Group the records by entry × arm (by label unless ``arm_of`` says otherwise), scored runs apart from
    errors; entries and arms in the order they first appear."""
    typed = as_records(records)
    arm_of = arm_of or by_label
    groups: dict[tuple[str, str], ArmRuns] = {}
    for record in typed:
        key = (record.entry, arm_of(record))
        group = groups.setdefault(key, ArmRuns(key[0], key[1], record.has_tool))
        if record.scored:
            group.runs.append(record)
        elif record.outcome == "error":
            group.errors += 1
    entries = list(
        dict.fromkeys([*(e for e in entry_order if any(k[0] == e for k in groups)), *(k[0] for k in groups)])
    )
    arms = list(dict.fromkeys(k[1] for k in groups))
    return Aggregate(typed, entries, arms, groups)
