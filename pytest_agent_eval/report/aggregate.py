"""THE reduction across runs: item records → per row × arm figures, pooled readings, paired differences.

The terminal tables, ``summary.json``, ``report.html`` and the compare gate all read an :class:`Aggregate`, so
they cannot disagree. Small n is the rule (runs make 1–5 explore calls): every figure is a median with its
range, and arms are compared run against run (run k of one arm minus run k of the reference arm).

A row is a corpus entry — under its test function when the records came from several: two tests over the same
entry ask different things, and pooling them would count their runs as one larger n; and of one coding agent when
the records came from several (``--agent-eval-agents``): arms are compared within an agent, never one agent's
with-arm against another's without-arm.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.agents.built_in import BUILT_IN_AGENTS as BUILT_IN
from pytest_agent_eval.campaign.record import ItemRecord, as_records
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS
from pytest_agent_eval.metrics.sufficiency import BUCKET_KEYS
from pytest_agent_eval.report.stats import Interval, mean_interval, paired_differences

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


@dataclass(frozen=True)
class Row:
    """What one line of a table pools: the runs of one corpus entry, of one test function when rows tell tests
    apart (``test`` is then the nodeid without its parametrization; else None, and the row is the entry), of one
    agent when rows tell agents apart (``agent``, its name; else None)."""

    entry: str
    test: str | None = None
    agent: str | None = None

    @property
    def label(self) -> str:
        """``express`` — or ``test_ab.py::test_routing · express`` when rows tell tests apart (folders left out),
        ``express · codex`` when they tell agents apart."""
        label = self.entry if self.test is None else f"{self.test.rsplit('/', 1)[-1]} · {self.entry}"
        return label if self.agent is None else f"{label} · {self.agent}"


def tells_agents_apart(records: Iterable[ItemRecord]) -> bool:
    """Whether rows name their agent: the records came from more than one."""
    return len({record.agent_name for record in records}) > 1


def tells_tests_apart(records: Iterable[ItemRecord]) -> bool:
    """Whether rows name their test function: the records came from more than one. A record written before
    nodeids cannot say which, so records with one pool by entry, as they always did."""
    tests = {record.test for record in records}
    return len(tests) > 1 and None not in tests


@dataclass
class ArmRuns:
    """One row × arm: its scored runs (in the order they ran) and how many ended in an error."""

    row: Row
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
        return ArmRuns(self.row, self.arm, self.has_tool, clean, self.errors)

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


# Why a figure an agent's runs have no reading of is not there: not a failure of the run, a thing its records do not
# give (docs/report.md, "Not available").
NO_COST = "{agent}'s records give no cost"
SHELL_READS = "{agent} read through its shell: Read counts a Read tool only"


def unavailable(groups: Iterable[ArmRuns | None], figure: str) -> str | None:
    """``not available (why)`` for a figure these groups' runs have no reading of: a cost their agent's records do
    not give; a ``Read`` count of 0 where every run read through its shell (Codex CLI, and the stand-in's Gemini CLI
    and OpenCode). None otherwise (a real 0, an ``n/a`` a table prints itself)."""
    runs = [run for group in groups if group is not None for run in group.runs]
    if not runs:
        return None
    from pytest_agent_eval.agents import agent_title

    agent = agent_title(runs[0].agent_name)
    if figure == "cost_usd" and all(run.figures.get(figure) is None for run in runs):
        return f"not available ({NO_COST.format(agent=agent)})"
    if figure == "read_calls" and all(not run.figures.get(figure) for run in runs):
        shell = all(((run.scores or {}).get("tool_counts") or {}).get("Bash") for run in runs)
        return f"not available ({SHELL_READS.format(agent=agent)})" if shell else None
    return None


@dataclass(frozen=True)
class Paired:
    """``arm − reference`` run against run: the differences, and their mean with the 95% interval their number
    allows (:func:`~pytest_agent_eval.report.stats.mean_interval`, the verdict's own)."""

    diffs: list[float]
    interval: Interval

    @property
    def mean(self) -> float:
        return self.interval.mean


@dataclass
class Aggregate:
    records: list[ItemRecord]
    rows: list[Row]
    arms: list[str]
    groups: dict[tuple[Row, str], ArmRuns]

    def group(self, row: Row, arm: str) -> ArmRuns | None:
        return self.groups.get((row, arm))

    def arms_of(self, row: Row) -> list[str]:
        return [arm for arm in self.arms if (row, arm) in self.groups]

    def reference(self) -> str | None:
        """What the other arms are compared against: the first arm without the tool, else the last arm (the
        baseline build of a ``with@new`` vs ``with@old`` campaign); None with fewer than two arms."""
        if len(self.arms) < 2:
            return None
        return next((g.arm for g in self.groups.values() if not g.has_tool), self.arms[-1])

    def pairs(self, row: Row | None = None) -> list[tuple[str, str]]:
        """The ``(arm, reference)`` pairs every paired table shows: each arm against the reference arm, and
        every two builds of the tool against each other (``with − with@1.5.0``: a build decision); of one
        ``row``, the pairs both of whose arms ran it."""
        reference = self.reference()
        if reference is None:
            return []
        found = [(arm, reference) for arm in self.arms if arm != reference]
        builds = [arm for arm in self.arms if self._has_tool(arm)]
        for i, arm in enumerate(builds):
            found += [(arm, other) for other in builds[i + 1 :] if (arm, other) not in found]
        if row is None:
            return found
        return [(arm, other) for arm, other in found if (row, arm) in self.groups and (row, other) in self.groups]

    def _has_tool(self, arm: str) -> bool:
        return next(g.has_tool for g in self.groups.values() if g.arm == arm)

    def pair(self) -> tuple[str, str] | None:
        """The campaign tables' W and WO: the first arm with the tool and the first without, if both ran."""
        with_arm = next((g.arm for g in self.groups.values() if g.has_tool), None)
        without_arm = next((g.arm for g in self.groups.values() if not g.has_tool), None)
        return (with_arm, without_arm) if with_arm and without_arm else None

    def paired(self, row: Row, arm: str, reference: str, figure: str) -> Paired | None:
        mine, theirs = self.group(row, arm), self.group(row, reference)
        if mine is None or theirs is None:
            return None
        diffs = paired_differences(mine.by_run(figure), theirs.by_run(figure))
        if not diffs:
            return None
        return Paired(diffs, mean_interval(diffs))

    def contaminated(self) -> int:
        return sum(group.contaminated for group in self.groups.values())

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per row and arm: runs, errors, and the median/min/max of every figure (``summary.json``); a row that
        names its test function also says its entry and test."""
        out: dict[str, dict[str, Any]] = {}
        for (row, arm), group in self.groups.items():
            names = [name for name in FIGURES if any(name in run.figures for run in group.runs)]
            spreads = {name: group.spread(name) for name in names}
            named = {"entry": row.entry, "test": row.test} if row.test is not None else {}
            if row.agent is not None:
                named = {"entry": row.entry, **named, "agent": row.agent}
            out.setdefault(row.label, {})[arm] = {
                **named,
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


def reading_order(
    entry_order: Sequence[str] = (), arm_order: Sequence[str] = (), records: Sequence[ItemRecord] = ()
) -> Callable[[ItemRecord], tuple[Any, ...]]:
    """The one order every report reads records in, whatever order they finished in (docs/report.md, "One
    order"): entries as ``entry_order`` lists them (others after, by name), then test, then agent (the built-in
    agents in their own order, others after by name), then arm (as ``arm_order`` — the session's ``--arms`` —
    lists them; else the arms with the tool first, in the order ``records`` first show them: the last build is
    the baseline a ``with@new,with@old`` campaign compares against), then run."""
    entries = {name: i for i, name in enumerate(entry_order)}
    agents = {name: i for i, name in enumerate(BUILT_IN)}
    arms = {label: i for i, label in enumerate(arm_order)}
    first = {}
    for i, record in enumerate(records):
        first.setdefault(record.arm_label, i)

    def key(record: ItemRecord) -> tuple[Any, ...]:
        agent = record.agent_name or ""
        return (
            entries.get(record.entry, len(entries)),
            record.entry,
            record.test or "",
            agents.get(agent, len(agents)),
            agent,
            arms.get(record.arm_label, len(arms)),
            not record.has_tool,
            first.get(record.arm_label, 0),
            record.arm_label,
            record.run or 0,
            record.id,
        )

    return key


def aggregate(
    records: Iterable[ItemRecord | Mapping[str, Any]],
    arm_of: ArmOf | None = None,
    entry_order: Sequence[str] = (),
    by_test: bool | None = None,
    by_agent: bool | None = None,
    arm_order: Sequence[str] = (),
) -> Aggregate:
    """Group the records by row × arm (by label unless ``arm_of`` says otherwise), scored runs apart from
    errors; the records in :func:`reading_order` (so rows, arms and runs are in it too, whatever order the runs
    finished in). Rows tell test functions
    apart when ``by_test`` says so (by default: when :func:`tells_tests_apart` the records), agents when
    ``by_agent`` does (by default: when :func:`tells_agents_apart` the records)."""
    given = as_records(records)
    typed = sorted(given, key=reading_order(entry_order, arm_order, given))
    arm_of = arm_of or by_label
    if by_test is None:
        by_test = tells_tests_apart(typed)
    if by_agent is None:
        by_agent = tells_agents_apart(typed)
    groups: dict[tuple[Row, str], ArmRuns] = {}
    for record in typed:
        row = Row(record.entry, record.test if by_test else None, record.agent_name if by_agent else None)
        key = (row, arm_of(record))
        group = groups.setdefault(key, ArmRuns(key[0], key[1], record.has_tool))
        if record.scored:
            group.runs.append(record)
        elif record.outcome == "error":
            group.errors += 1
    rows = list(dict.fromkeys(row for row, _ in groups))
    arms = list(dict.fromkeys(arm for _, arm in groups))
    return Aggregate(typed, rows, arms, groups)
