"""The agents side by side: per entry, each agent's arm against its reference (with against without), when a
campaign ran several agents (``--agent-eval-agents``).

Arms are compared within each agent only — the rows of :mod:`pytest_agent_eval.report.aggregate` tell agents apart,
so Claude Code's with-arm pairs with Claude Code's without-arm, never with Codex's — and the change is the verdict's
(:mod:`pytest_agent_eval.report.verdict`: the mean of the paired relative changes with its 95% interval).
The terminal's side-by-side lines, ``summary.json``'s ``agents`` and report.html's agents section all read
:func:`side_by_side`; a campaign of one agent has none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.agents import agent_title
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.aggregate import Row
from pytest_agent_eval.report.verdict import Change, Verdict

SIDE_BY_SIDE_FIGURE = "residual_tokens"  # what the tool is for: less of the retrieval left in the context


@dataclass(frozen=True)
class AgentsOn:
    """One entry (or ``overall · …``: the entries pooled) and one pair of arms: each agent's change, in the order
    the agents ran."""

    entry: str
    arm: str
    reference: str
    figure: str
    changes: list[tuple[str, Change]]  # (agent name, its change)

    def line(self, tool: str) -> str:
        """``express: retrieval residual with vs without: Claude Code −73% [−80%, −60%] better · Codex −41% […]``"""
        title = FIGURES[self.figure].title(tool)
        sides = " · ".join(f"{agent_title(agent)} {change.value_text()}" for agent, change in self.changes)
        return f"{self.entry}: {title} {self.arm} vs {self.reference}: {sides}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "arm": self.arm,
            "reference": self.reference,
            "figure": self.figure,
            "agents": {agent: {"title": agent_title(agent), **change.to_dict()} for agent, change in self.changes},
        }


def side_by_side(found: Sequence[Verdict], figure: str = SIDE_BY_SIDE_FIGURE) -> list[AgentsOn]:
    """Per entry and pair of arms, every agent's change of ``figure`` (the verdicts of
    :func:`~pytest_agent_eval.report.verdict.verdicts`); the entries pooled last, as ``overall``. Empty unless
    the verdicts tell agents apart."""
    out: dict[tuple[str, str, str], list[tuple[str, Change]]] = {}
    for verdict in found:
        agent = verdict.row.agent
        change = verdict.change(figure)
        if agent is None or change is None:
            continue
        label = Row(verdict.row.entry, verdict.row.test).label  # the entry (and test), whichever agent
        out.setdefault((label, verdict.arm, verdict.reference), []).append((agent, change))
    return [AgentsOn(entry, arm, reference, figure, changes) for (entry, arm, reference), changes in out.items()]
