"""report.html's agents section: per entry, each agent's arm against its reference (with against without) as
one table and one chart, the chart in the style of the page's others (an SVG drawn by the page's own script from
JSON data; no network). Only a campaign of several agents has it
(:func:`pytest_agent_eval.report.agents.side_by_side`)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from pytest_agent_eval.agents import agent_title
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.agents import AgentsOn
from pytest_agent_eval.report.verdict import NO_INTERVAL


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def agents_section(found: Sequence[AgentsOn], tool: str) -> str:
    """The section (empty without several agents): a table, a chart, and the data and script that draw it."""
    if not found:
        return ""
    agents = list(dict.fromkeys(agent for on in found for agent, _ in on.changes))
    figure = FIGURES[found[0].figure].title(tool)
    head = "".join(f"<th>{_e(name)}</th>" for name in ["entry", "arms", *(agent_title(a) for a in agents)])
    rows = []
    for on in found:
        by_agent = dict(on.changes)
        cells = "".join(
            f'<td data-agent="{_e(agent)}" class="change">{_e(by_agent[agent].value_text())}</td>'
            if agent in by_agent
            else '<td class="meta">did not run</td>'
            for agent in agents
        )
        rows.append(f"<tr><td>{_e(on.entry)}</td><td>{_e(on.arm)} vs {_e(on.reference)}</td>{cells}</tr>")
    data = json.dumps(chart_data(found), ensure_ascii=False).replace("<", "\\u003c")
    return "\n".join(
        [
            '<section id="agents"><h2>Agents side by side</h2>',
            f'<p class="hint">{_e(figure)}: each agent\'s arm against its reference, run against run within that '
            "agent (never one agent's runs against another's): mean relative change [95% bootstrap interval]</p>",
            f'<div class="scroll"><table class="figures agents"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>",
            f"<figure><figcaption>{_e(figure)}, with vs without, per agent</figcaption>"
            '<div class="chart" id="chart-agents"></div></figure>',
            "</section>",
            f'<script type="application/json" id="agents-data">{data}</script>',
            f"<script>{_JS}</script>",
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


# Bars from no change to the mean change, a whisker over the interval: the residual chart's drawing.
_JS = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg", host = document.getElementById("chart-agents");
  var rows = JSON.parse(document.getElementById("agents-data").textContent);
  function el(name, attrs, parent, text) {
    var node = document.createElementNS(NS, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  var W = 760, left = 150, right = 260, barH = 14, H = 20, max = 0, colors = ["#1e88e5", "#8e24aa", "#43a047"];
  rows.forEach(function (r) {
    H += Math.max(1, r.agents.length) * (barH + 4) + 14;
    r.agents.forEach(function (a) {
      [a.mean, a.low, a.high].forEach(function (v) { if (v !== null) max = Math.max(max, Math.abs(v)); });
    });
  });
  var root = el("svg", {viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img"}, host);
  var half = (W - left - right) / 2, zero = left + half;
  var scale = function (v) { return zero + half * v / (max || 1); };
  var y = 14, order = [];
  rows.forEach(function (r) {
    el("text", {x: left - 8, y: y + 11, "text-anchor": "end", "font-weight": "bold"}, root, r.entry);
    r.agents.forEach(function (a) {
      if (order.indexOf(a.agent) < 0) order.push(a.agent);
      var color = colors[order.indexOf(a.agent) % colors.length];
      if (a.mean === null) {
        el("text", {x: zero + 4, y: y + 11, "class": "empty"}, root, a.title + ": no paired run");
        y += barH + 4;
        return;
      }
      var x = Math.min(zero, scale(a.mean));
      var bar = el("rect", {x: x, y: y, width: Math.max(1, Math.abs(scale(a.mean) - zero)), height: barH,
                            fill: color, "class": "bar agent", "data-agent": a.agent}, root);
      el("title", {}, bar, a.title + " " + r.arms + ": " + a.text);
      if (a.low !== null) {
        el("line", {x1: scale(a.low), x2: scale(a.high), y1: y + barH / 2, y2: y + barH / 2, stroke: "#222"}, root);
      }
      el("text", {x: Math.max(scale(a.mean), a.high !== null ? scale(a.high) : zero, zero) + 6, y: y + 11}, root,
         a.title + " " + a.text);
      y += barH + 4;
    });
    y += 14;
  });
  el("line", {x1: zero, x2: zero, y1: 8, y2: H - 8, "class": "axis"}, root);
  host.setAttribute("data-rendered", "true");
})();
"""
