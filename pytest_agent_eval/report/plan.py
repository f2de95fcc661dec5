"""How many paired runs a campaign needs, from an earlier one (``agent-eval plan``; docs/report.md, "How many
runs to decide").

Every verdict figure's paired changes have a spread in the earlier campaign; from it,
:func:`~pytest_agent_eval.report.stats.pairs_needed` says how many pairs make a 95% interval exclude no change
when the true change is ``change``, with probability ``power``. The plan is the most any verdict figure needs, per
row, and over the campaign.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.aggregate import aggregate
from pytest_agent_eval.report.stats import MIN_PAIRS_FOR_INTERVAL, POWER, pairs_needed
from pytest_agent_eval.report.terminal import tool_name
from pytest_agent_eval.report.verdict import Verdict, verdicts


@dataclass(frozen=True)
class Need:
    """One verdict's figure: its pairs and spread in the earlier campaign, and the pairs a change needs."""

    row: str
    figure: str
    pairs: int
    sd: float | None
    needed: int | None  # None: the spread is unknown (fewer than two pairs)


def needs(found: Sequence[Verdict], change: float, power: float = POWER) -> list[Need]:
    """Per verdict (entry, and ``overall``) and figure, the pairs a ``change`` needs at its observed spread."""
    out = []
    for verdict in found:
        for each in verdict.changes:
            if not each.pairs or each.interval is None:
                continue
            sd = each.interval.sd
            out.append(Need(verdict.label, each.figure, each.pairs, sd, pairs_needed(sd, change, power=power)))
    return out


def plan(records: Iterable[ItemRecord], change: float, power: float = POWER) -> tuple[str, dict[str, Any]]:
    """The plan as a table with its conclusion, and as data (``--json``)."""
    records = list(records)
    tool = tool_name(records)
    found = needs(verdicts(aggregate(records)), change, power)
    rows_of = list(dict.fromkeys(need.row for need in found))
    figures = list(dict.fromkeys(need.figure for need in found))
    by = {(need.row, need.figure): need for need in found}
    table = [[row, *(_cell(by.get((row, figure))) for figure in figures)] for row in rows_of]
    head = ["row", *(FIGURES[figure].title(tool) for figure in figures)]
    known = [need for need in found if need.needed is not None]
    most = max(known, key=lambda need: need.needed or 0, default=None)
    lines = [
        f"paired runs that tell a change of {change:.0%} from noise (95% interval, {power:.0%} power), from the "
        "spread of each figure's paired changes",
        tabulate(table, headers=head, tablefmt="simple", disable_numparse=True),
        "",
    ]
    if most is None:
        lines.append(f"plan: no figure has a spread yet: run {MIN_PAIRS_FOR_INTERVAL} or more pairs first")
    else:
        title = FIGURES[most.figure].title(tool)
        lines.append(f"plan: --agent-eval-runs {most.needed} ({title} on {most.row} needs the most)")
    data = {
        "change": change,
        "power": power,
        "runs": most.needed if most is not None else None,
        "needs": [need.__dict__ for need in found],
    }
    return "\n".join(lines) + "\n", data


def _cell(need: Need | None) -> str:
    if need is None:
        return ""
    if need.needed is None:
        return f"unknown (n={need.pairs}: no spread)"
    return f"{need.needed} (sd {need.sd:.0%}, n={need.pairs})"
