"""report.html's picture of residual occupancy: each run's context over its requests, stacked by family.

One SVG per run, drawn here in Python (the page fetches nothing and needs no script to show it): a column per
main-thread request, as tall as that request's prompt, split into what each family's results still occupied
when it was sent (:attr:`~pytest_agent_eval.metrics.occupancy.Occupancy.by_request`) and the rest (system
prompt, tool schemas, questions, the agent's prose and calls). The last column is the run's end: its families
are the residual figures of the tables. The runs of one entry share their scales, so with and without the tool
compare side by side.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agent_eval.metrics.format import tokens
from pytest_agent_eval.metrics.occupancy import FAMILIES

REST = "rest"
SERIES = (*FAMILIES, REST)  # bottom to top: the tool's results first, the rest on top
COLORS = {
    "tool": "#1e88e5",
    "read": "#8d6e63",
    "search": "#f0ad4e",
    "bash": "#9b59b6",
    "other": "#26a69a",
    REST: "#cfd8dc",
}
WIDTH, HEIGHT = 560, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 10, 10, 24


def series_labels(tool: str) -> dict[str, str]:
    """What each series is, as the legend and the tooltips name it."""
    return {
        "tool": f"{tool} results",
        "read": "file reads (Read)",
        "search": "searches (Grep/Glob)",
        "bash": "shell (Bash)",
        "other": "other tools",
        REST: "the rest (prompt, schemas, prose, calls)",
    }


def legend(tool: str) -> str:
    items = "".join(
        f'<span class="key"><i style="background:{COLORS[name]}"></i>{_e(label)}</span>'
        for name, label in series_labels(tool).items()
    )
    return f'<p class="legend">{items}</p>'


def layers(request: Mapping[str, int]) -> dict[str, int]:
    """One request's column: each family's resident tokens and the rest of its prompt (never below zero: the
    families' tokens are priced, the prompt is measured)."""
    stacked = {fam: int(request.get(fam, 0)) for fam in FAMILIES}
    stacked[REST] = max(0, int(request.get("ctx", 0)) - sum(stacked.values()))
    return stacked


def run_chart(requests: Sequence[Mapping[str, int]], tool: str, top: float, columns: int, title: str) -> str:
    """One run's SVG: ``requests`` as :attr:`Occupancy.by_request` holds them, on a scale of ``top`` tokens and
    ``columns`` requests (the entry's largest, so its runs compare)."""
    labels = series_labels(tool)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, columns)
    bar = max(1.0, step * 0.8)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top) if top else TOP + plot_h

    stacks = [layers(request) for request in requests]
    groups = []
    for name in SERIES:
        rects = []
        for k, stack in enumerate(stacks):
            below = sum(stack[lower] for lower in SERIES[: SERIES.index(name)])
            height = y(below) - y(below + stack[name])
            if height <= 0:
                continue
            tip = f"request {k + 1}: {labels[name]} {tokens(stack[name])} of {tokens(sum(stack.values()))} context"
            rects.append(
                f'<rect x="{LEFT + k * step:.1f}" y="{y(below + stack[name]):.1f}" width="{bar:.1f}" '
                f'height="{height:.1f}"><title>{_e(tip)}</title></rect>'
            )
        groups.append(f'<g class="series" data-family="{name}" fill="{COLORS[name]}">{"".join(rects)}</g>')
    axis = (
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>'
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>'
        f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{_e(tokens(top))}</text>'
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">0</text>'
        f'<text x="{LEFT}" y="{HEIGHT - 6}">request 1</text>'
        f'<text x="{LEFT + max(0, len(stacks) - 1) * step + bar:.1f}" y="{HEIGHT - 6}" text-anchor="end">'
        f"{len(stacks)}</text>"
    )
    return (
        f'<svg class="occupancy" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>{"".join(groups)}{axis}</svg>'
    )


def scale(runs: Sequence[Sequence[Mapping[str, int]]]) -> tuple[float, int]:
    """The largest prompt and the most requests of some runs: the scale they share."""
    top = max((request.get("ctx", 0) for requests in runs for request in requests), default=0)
    columns = max((len(requests) for requests in runs), default=0)
    return float(top), columns


def summary_line(requests: Sequence[Mapping[str, int]], tool: str, has_tool: bool) -> str:
    """Under a run's chart: its end, in the tables' words."""
    if not requests:
        return "no measured request"
    last = layers(requests[-1])
    retrieval = last["tool"] if has_tool else last["read"] + last["search"] + last["bash"]
    kind = f"{tool} results" if has_tool else "file access"
    count = f"{len(requests)} request{'' if len(requests) == 1 else 's'}"
    final = tokens(requests[-1].get("ctx", 0))
    return f"{count} · final context {final} · retrieval residual {tokens(retrieval)} ({kind})"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
