"""report.html's answers section: per entry × arm, the answer figures against the corpus's key ("not graded" for
an entry without one), each pair of arms' paired difference of key recall with its interval, and whether a judge
ran (docs/metrics/answers.md)."""

from __future__ import annotations

import html
from typing import Any

from pytest_agent_eval.metrics.figures import ANSWERS, FIGURES
from pytest_agent_eval.report.aggregate import Aggregate
from pytest_agent_eval.report.grades import GRADE_FIGURE, STAND_IN_NOTE, answer_cell, judge_text
from pytest_agent_eval.report.terminal import paired_cell

COLUMNS = tuple(figure.name for figure in FIGURES.values() if figure.section == ANSWERS)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def answers_section(found: Aggregate) -> str:
    """The section; empty when no run was scored for its answers (records from before answers were graded)."""
    if not any(isinstance((run.scores or {}).get("answers"), dict) for run in found.records):
        return ""
    head = "".join(f"<th>{_e(n)}</th>" for n in ["entry", "arm", *(FIGURES[c].label for c in COLUMNS)])
    rows = []
    for (row, arm), group in found.groups.items():
        cells = "".join(f'<td data-figure="{c}">{_e(answer_cell(group, c))}</td>' for c in COLUMNS)
        rows.append(f"<tr><td>{_e(row.label)}</td><td>{_e(arm)}</td>{cells}</tr>")
    paired = []
    for row in found.rows:
        for arm, reference in found.pairs(row):
            text = paired_cell(found, row, arm, reference, GRADE_FIGURE)  # the verdict's interval, its method named
            if text is not None:
                paired.append(
                    f'<li data-entry="{_e(row.label)}">{_e(row.label)}: {_e(arm)} − {_e(reference)} {_e(text)}</li>'
                )
    stand_in = any((run.scores or {}).get("stand_in") for run in found.records)
    return (
        '<section id="answers"><h2>Answers against the key</h2>'
        '<p class="hint">median [min–max] over the scored runs; an entry whose corpus entry has no key is not graded'
        + (f" · {_e(STAND_IN_NOTE)}" if stand_in else "")
        + "</p>"
        + f'<div class="scroll"><table class="figures"><thead><tr>{head}</tr></thead>'
        + f"<tbody>{''.join(rows)}</tbody></table></div>"
        + (
            f"<p>{_e(FIGURES[GRADE_FIGURE].label)}, paired run against run [95% interval]:</p>"
            f"<ul>{''.join(paired)}</ul>"
            if paired
            else ""
        )
        + f'<p class="judge" id="judge">{_e(judge_text(found.records))}</p></section>'
    )
