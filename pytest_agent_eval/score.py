"""One session → every metric, as plain data and as the text blocks the seeds print.

This is the single entry point the CLI and the pytest plugin share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.metrics.allocation import Allocation, allocation
from pytest_agent_eval.metrics.contamination import Contamination, contamination
from pytest_agent_eval.metrics.occupancy import Occupancy, occupancy
from pytest_agent_eval.metrics.sufficiency import Sufficiency, sufficiency
from pytest_agent_eval.report.blocks.allocation import render_allocation
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.report.blocks.occupancy import render_occupancy
from pytest_agent_eval.report.blocks.sufficiency import render_sufficiency
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import Session

DEFAULT_WINDOW = 200_000


@dataclass
class Scorecard:
    session: Session
    tool: RetrievalTool
    occupancy: Occupancy
    sufficiency: Sufficiency
    allocation: Allocation
    contamination: Contamination

    def to_dict(self) -> dict[str, Any]:
        results = self.session.results
        costs = [r.cost_usd for r in results if r.cost_usd is not None]
        durations = [r.duration_ms for r in results if r.duration_ms is not None]
        return {
            "files": [str(p) for p in self.session.files],
            "tool": self.tool.name,
            "occupancy": self.occupancy.to_dict(),
            "sufficiency": self.sufficiency.to_dict(),
            "allocation": self.allocation.to_dict(),
            "contamination": self.contamination.to_dict(),
            "tool_counts": self.session.tool_counts(),
            "parse": {"events": self.session.parse.events, "bad_lines": self.session.parse.bad_lines},
            "results": len(results),
            "infra_error": self.session.infra_error,
            "models": self.session.models,
            "stand_in": self.session.stand_in,
            "cost_usd": round(sum(costs), 6) if costs else None,
            "duration_ms": sum(durations) if durations else None,
        }

    def render(self, brief: bool = False, envelope: bool = False) -> str:
        blocks = [self.header()]
        if brief:
            blocks.append(self.brief())
        else:
            blocks += [
                render_occupancy(self.occupancy, self.tool),
                render_sufficiency(self.sufficiency),
                render_allocation(self.allocation, envelope=envelope),
                render_contamination(self.contamination),
            ]
        return "\n\n".join(blocks) + "\n"

    def header(self) -> str:
        session = self.session
        counts = session.tool_counts()
        explore = sum(n for name, n in counts.items() if self.tool.is_explore(name))
        reads = sum(n for name, n in counts.items() if name in ("Read", "NotebookRead"))
        searches = sum(n for name, n in counts.items() if name in ("Grep", "Glob", "Bash"))
        tools = ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"
        bad = f" ({session.parse.bad_lines} bad lines skipped)" if session.parse.bad_lines else ""
        lines = [
            f"Session: {len(session.files) or 1} segment(s), {session.parse.events} events{bad}",
            f"VERDICT: {self.tool.explore} used {explore}x | Read {reads} | Grep/Bash {searches}",
            f"tools: {tools}",
        ]
        if session.models:
            lines.append(f"model: {', '.join(session.models)}")
        if session.stand_in:
            lines.append(
                f"STAND-IN MODEL ({session.stand_in}): these figures measure the pipeline and the tool's responses, "
                "not a model"
            )
        if session.infra_error:
            lines.append(f"INFRASTRUCTURE: {session.infra_error}")
        return "\n".join(lines)

    def brief(self) -> str:
        occ, suf, alloc, con = self.occupancy, self.sufficiency, self.allocation, self.contamination
        eff = "n/a" if alloc.efficiency is None else f"{alloc.efficiency:.1%}"
        answered = sum(suf.counts.values())
        share = f"{suf.counts['sufficient'] / answered:.0%}" if answered else "n/a"
        return "\n".join(
            [
                f"occupancy: final ctx {occ.ctx_final:,} tok · {self.tool.name} residual "
                f"{occ.residual['codegraph']:,} tok · file-access residual {occ.file_access:,} tok",
                f"sufficiency: {answered} answered calls, {share} moved on",
                f"allocation: efficiency {eff}",
                f"contamination: {con.cli_returned_output} CLI calls returned output, {con.cli_blocked} blocked",
            ]
        )


def score(
    session: Session,
    tool: RetrievalTool = CODEGRAPH,
    window: int = DEFAULT_WINDOW,
    answer_globs: Sequence[str] = (),
) -> Scorecard:
    return Scorecard(
        session=session,
        tool=tool,
        occupancy=occupancy(session, tool, window),
        sufficiency=sufficiency(session, tool),
        allocation=allocation(session, tool, answer_globs),
        contamination=contamination(session, tool),
    )


def score_session(session: Session, tool: RetrievalTool = CODEGRAPH, window: int = DEFAULT_WINDOW) -> dict[str, Any]:
    """Every figure of one session as JSON-ready data."""
    return score(session, tool, window).to_dict()


def render_session(
    session: Session,
    tool: RetrievalTool = CODEGRAPH,
    window: int = DEFAULT_WINDOW,
    brief: bool = False,
    envelope: bool = False,
) -> str:
    """The text blocks the seeds print for one session."""
    return score(session, tool, window).render(brief=brief, envelope=envelope)
