"""One session → every metric, as plain data and as the text blocks the seeds print.

This is the single entry point the CLI and the pytest plugin share.
"""

from __future__ import annotations

from collections import Counter
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
            "ends_mid_turn": self.session.ends_mid_turn,
            "unfinished_segments": list(self.session.parse.unfinished),
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
        tools = ", ".join(f"{name} {n}" for name, n in session.tool_counts().items()) or "none"
        bad = f" ({session.parse.bad_lines} bad lines skipped)" if session.parse.bad_lines else ""
        lines = [
            f"Session: {len(session.files) or 1} segment(s), {session.parse.events} events{bad}",
            verdict_lines(session, self.tool),
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
        for name in session.parse.unfinished:
            lines.append(f"NOTICE: {name} ends mid-turn (no result event): cut off; the figures cover what was written")
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
                f"contamination: {len(con.leaks)} results carried {self.tool.name} output; "
                f"{con.cli_calls} CLI calls, {con.cli_blocked} denied by the hook",
            ]
        )


def verdict_lines(session: Session, tool: RetrievalTool = CODEGRAPH) -> str:
    """``VERDICT: <explore> used Nx | Read N | Grep/Bash N`` and ``TOKENS:`` summed once per API request.

    Every thread counts, subagents included: that is what the interactive arm is run to see. Usage is taken
    once per message id (the CLI repeats it on every content block of a message).
    """
    counts = Counter(call.name for call in session.calls)
    explore = sum(n for name, n in counts.items() if tool.is_explore(name))
    reads = counts["Read"] + counts["NotebookRead"]
    searches = counts["Grep"] + counts["Glob"] + counts["Bash"]
    usages = {}
    for message in session.messages(None):
        if message.usage is not None:
            usages.setdefault(message.id, message.usage)
    total_in = sum(u.input for u in usages.values())
    out = sum(u.output for u in usages.values())
    read = sum(u.cache_read for u in usages.values())
    write = sum(u.cache_creation for u in usages.values())
    return (
        f"VERDICT: {tool.explore} used {explore}x | Read {reads} | Grep/Bash {searches}\n"
        f"TOKENS: in {total_in:,} | out {out:,} | cache read {read:,} | cache write {write:,}"
        f" | {len(usages)} request{'' if len(usages) == 1 else 's'}"
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
