"""report.html's agents section: per entry, each agent's arm against its reference (with against without) as
one table and one chart, the chart drawn as the page's others are (an SVG the page's own script draws from its
JSON chart data; no network). Only a campaign of several agents has it
(:func:`pytest_agent_eval.report.agents.side_by_side`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from pytest_agent_eval.agents import agent_title
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.agents import AgentsOn
from pytest_agent_eval.report.verdict import NO_INTERVAL


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def agents_section(found: Sequence[AgentsOn], tool: str) -> str:
    """The section (empty without several agents): a table, and the chart the page's script draws from
    :func:`chart_data` (under ``agents`` in the page's chart data)."""
    if not found:
        return ""
    agents = list(dict.fromkeys(agent for on in found for agent, _ in on.changes))
    figure = FIGURES[found[0].figure].title(tool)
    head = "".join(f"<th>{_e(name)}</th>" for name in ["entry", "arms", *(agent_title(a) for a in agents)])
    rows = []
    for on in found:
        by_agent = dict(on.changes)
        cells = "".join(
            f'<td data-agent="{_e(agent)}" class="agent-change">{_e(by_agent[agent].value_text())}</td>'
            if agent in by_agent
            else '<td class="meta">did not run</td>'
            for agent in agents
        )
        rows.append(f"<tr><td>{_e(on.entry)}</td><td>{_e(on.arm)} vs {_e(on.reference)}</td>{cells}</tr>")
    return "\n".join(
        [
            '<section id="agents"><h2>Agents side by side</h2>',
            f'<p class="hint">{_e(figure)}: each agent\'s arm against its reference, run against run within that '
            "agent (never one agent's runs against another's): mean relative change [95% interval] (its method)</p>",
            f'<div class="scroll"><table class="figures agents"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>",
            f"<figure><figcaption>{_e(figure)}, with vs without, per agent</figcaption>"
            '<div class="chart" id="chart-agents"></div></figure>',
            "</section>",
        ]
    )


def chart_data(found: Sequence[AgentsOn]) -> list[dict[str, Any]]:
    """Per entry: each agent's change (mean, interval) and the text the table shows for it."""
    return [
        {
            "entry": on.entry,
            "arms": f"{on.arm} vs {on.reference}",
            "agents": [
                {
                    "agent": agent,
                    "title": agent_title(agent),
                    "mean": change.mean,
                    "low": change.low if change.word != NO_INTERVAL else None,
                    "high": change.high if change.word != NO_INTERVAL else None,
                    "text": change.value_text(),
                }
                for agent, change in on.changes
            ],
        }
        for on in found
    ]
