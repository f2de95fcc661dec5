"""One session → every metric, as plain data (a :class:`Scorecard`).

This is the single entry point the CLI and the pytest plugin share; it renders nothing
(:func:`pytest_agent_eval.report.blocks.render_scorecard` prints a card, one block per metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.corpus.keys import AnswerKey
from pytest_agent_eval.metrics.allocation import Allocation, allocation
from pytest_agent_eval.metrics.answers import AnswerGrade, grade
from pytest_agent_eval.metrics.contamination import Contamination, contamination
from pytest_agent_eval.metrics.evidence import Evidence, evidence, reached_the_model
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS, Occupancy, occupancy
from pytest_agent_eval.metrics.sufficiency import Sufficiency, sufficiency
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.tool.explore_answer import explore_sections
from pytest_agent_eval.transcript import Session


@dataclass
class Scorecard:
    session: Session
    tool: RetrievalTool
    occupancy: Occupancy
    sufficiency: Sufficiency
    allocation: Allocation
    contamination: Contamination
    evidence: Evidence | None = None  # the transcript held against the model's request record, when there is one
    answers: AnswerGrade | None = None  # the answer against the entry's key (metrics/answers.py)

    def to_dict(self) -> dict[str, Any]:
        results = self.session.results
        costs = [r.cost_usd for r in results if r.cost_usd is not None]
        durations = [r.duration_ms for r in results if r.duration_ms is not None]
        data = {
            "files": [str(p) for p in self.session.files],
            "tool": self.tool.name,
            "explore": self.tool.explore,  # the report marks explore calls by it, whatever the tool
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
        if self.evidence is not None:
            data["evidence"] = self.evidence.to_dict()
        if self.answers is not None:
            data["answers"] = self.answers.to_dict()
        return data


def score(
    session: Session,
    tool: RetrievalTool,
    window: int = WINDOW_TOKENS,
    answer_globs: Sequence[str] = (),
    requests: Sequence[dict[str, Any]] | None = None,
    key: AnswerKey | None = None,
    keyed: bool = False,
    questions: Sequence[str] = (),
) -> Scorecard:
    """Every metric of ``session``; with ``requests`` (the model server's record of the run,
    :mod:`pytest_agent_eval.model.record`) holding a Messages request, the transcript is held against it too
    (:mod:`pytest_agent_eval.metrics.evidence`). ``keyed``: the run is of a corpus entry, so its answer is graded
    against ``key`` (None: "not graded"), its ``questions`` taken out of the answer; a transcript scored on its
    own has no entry and no grade."""
    sections = explore_sections(session.calls, tool)  # both metrics read them: parsed once
    seen = contamination(session, tool)
    return Scorecard(
        session=session,
        tool=tool,
        occupancy=occupancy(session, tool, window),
        sufficiency=sufficiency(session, tool, sections),
        allocation=allocation(session, tool, answer_globs, sections),
        contamination=seen,
        evidence=evidence(session, requests, tool, seen.leaks) if requests and reached_the_model(requests) else None,
        answers=grade(session, key, tool, questions) if keyed or key is not None else None,
    )


def score_session(session: Session, tool: RetrievalTool, window: int = WINDOW_TOKENS) -> dict[str, Any]:
    """Every figure of one session as JSON-ready data."""
    return score(session, tool, window).to_dict()
