"""How the reports say whether the answers were right (docs/metrics/answers.md): the answer figures of an entry
without a key read "not graded", never 0; the verdict line carries each arm's key recall; a stand-in's answers
are said to be the stand-in's; and whether a judge ran."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.format import formatter, median_range
from pytest_agent_eval.report.aggregate import ArmRuns

NOT_GRADED = "not graded"
GRADE_FIGURE = "key_recall"
STAND_IN_NOTE = "(grades the stand-in's answers, not a model's)"
NO_JUDGE = "no judge ran"


def _answers(run: ItemRecord) -> dict[str, Any]:
    answers = (run.scores or {}).get("answers")
    return answers if isinstance(answers, dict) else {}


def is_graded(runs: Iterable[ItemRecord]) -> bool:
    """Whether any of ``runs`` was graded against a key."""
    return any(_answers(run).get("graded") for run in runs)


def answer_cell(group: ArmRuns | None, figure: str) -> str:
    """An answer figure of one entry × arm: ``median [min–max]``, or "not graded" when its entry has no key."""
    if group is not None and group.runs and not is_graded(group.runs):
        return NOT_GRADED
    return median_range(group.values(figure) if group else [], formatter(figure))


def grade_text(groups: Sequence[tuple[str, ArmRuns]]) -> str:
    """``answer key recall with 63% [50%–75%] · without 38%``; "not graded" when no run had a key; ``(grades the
    stand-in's answers …)`` when a stand-in answered; empty when no run was scored for answers at all."""
    runs = [run for _, group in groups for run in group.runs]
    if not any(_answers(run) for run in runs):
        return ""  # records from before answers were graded
    title = FIGURES[GRADE_FIGURE].label
    if not is_graded(runs):
        return f"{title} {NOT_GRADED}"
    cells = " · ".join(f"{arm} {answer_cell(group, GRADE_FIGURE)}" for arm, group in groups)
    stand_in = any((run.scores or {}).get("stand_in") for run in runs)
    return f"{title} {cells}" + (f" {STAND_IN_NOTE}" if stand_in else "")


def grade_medians(groups: Sequence[tuple[str, ArmRuns]]) -> dict[str, float | None]:
    """Each arm's median key recall, for ``summary.json``; None for an arm not graded."""
    return {arm: group.median(GRADE_FIGURE) for arm, group in groups}


def judge_text(records: Iterable[ItemRecord]) -> str:
    """Whether a judge graded the answers: ``judge NAME: 4 runs graded, mean 0.75``, or "no judge ran" (with why,
    when a judge was asked for and could not run: no real key)."""
    judged = [(run.scores or {}).get("judge") for run in records]
    grades = [j for j in judged if isinstance(j, dict) and isinstance(j.get("grade"), (int, float))]
    if not grades:
        why = next((j["skipped"] for j in judged if isinstance(j, dict) and j.get("skipped")), None)
        return f"{NO_JUDGE} ({why})" if why else NO_JUDGE
    names = ", ".join(dict.fromkeys(str(j.get("judge") or "?") for j in grades))
    mean = sum(float(j["grade"]) for j in grades) / len(grades)
    return f"judge {names}: {len(grades)} run(s) graded, mean grade {mean:.2f}"
