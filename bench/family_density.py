"""Can a family's density tell a denser file from context beside its results? Per counting model, how much denser one
family's results really are than the other families' of the same session (the server's count of each result, the
context apart), against how much denser the ``growth`` class's context makes its family read (the same, the context
its call ids declare added), each by characters and by counts that weigh what the characters are.

    python bench/family_density.py

Sessions: every corpus of ``bench/occupancy_accuracy.py``. Results of 300 characters or more, text alone. A family's
density is Σ tokens / Σ weight over its results; "denser" is its density over that of the session's other families
pooled. Weights: ``chars``; ``pieces``, the stand-in's pieces (a run of letters, up to three digits, one other
character, a run of whitespace, :mod:`pytest_agent_eval.model.tokenizers`); ``chars×pieces``, their geometric mean;
``classes``, letters/4 + digits/2 + other characters + whitespace runs. Where the densest real family reads denser
than the least dense ``growth`` family, that weight cannot tell them apart; where it reads less, the margin is how far
apart (docs/metrics/occupancy.md, "What it cannot see": too thin for a rule).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable

from occupancy_accuracy import corpora, first_segments
from tabulate import tabulate

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.occupancy import family
from pytest_agent_eval.model.truth import read_truth_log
from pytest_agent_eval.model.usage import declared_server_context
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN, ToolResult, segment_files

MIN_CHARS = 300
_PIECES = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+")


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


WEIGHTS: dict[str, Callable[[str], float]] = {
    "chars": len,
    "pieces": lambda t: len(_PIECES.findall(t)),
    "chars×pieces": lambda t: math.sqrt(len(t) * len(_PIECES.findall(t))),
    "classes": lambda t: (
        _count(r"[A-Za-z]", t) / 4 + _count(r"\d", t) / 2 + _count(r"[^\sA-Za-z\d]", t) + _count(r"\s+", t)
    ),
}


def results() -> list[tuple[str, str, str, str, str, int, int]]:
    """(model, class, session, family, text, tokens, context beside it) of every result big enough to weigh."""
    found = []
    for model, sessions, truth_log in corpora():
        counts = read_truth_log(truth_log)
        for first in first_segments(sessions):
            session = read_segments(segment_files(first))
            names = {call.id: call.name for call in session.calls}
            shown = {r.call_id: r for r in session.timeline if isinstance(r, ToolResult) and r.thread == MAIN}
            tokens: dict[str, int] = {}
            for count in counts.values():
                for call_id, total in count.results.items():
                    if call_id in shown:
                        tokens[call_id] = total - count.context.get(call_id, 0)
            for call_id, total in tokens.items():
                text = shown[call_id].text
                if len(text) < MIN_CHARS or len(text) != shown[call_id].chars:
                    continue
                beside = declared_server_context({"type": "tool_result", "tool_use_id": call_id})
                cls = first.relative_to(sessions).parts[0]
                fam = family(names.get(call_id, ""), CODEGRAPH)
                found.append((model, cls, first.parent.name, fam, text, total, beside))
    return found


def denser(rows: list[tuple[str, str, str, str, str, int, int]], weight: Callable[[str], float], model: str):
    """The densest real family of any session, and the least dense family the growth context made denser."""
    sessions: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0]))
    for m, cls, name, fam, text, tokens, beside in rows:
        if m == model:
            figures = sessions[(cls, name)][fam]
            figures[0] += tokens + beside
            figures[1] += weight(text)
            figures[2] += beside
    real: list[tuple[float, str]] = []
    growth: list[tuple[float, str]] = []
    for (cls, name), families in sessions.items():
        for fam, (tokens, weighed, beside) in families.items():
            others = [f for other, f in families.items() if other != fam]
            if not others:
                continue
            ratio = tokens / weighed / (sum(f[0] for f in others) / sum(f[1] for f in others))
            if beside:
                growth.append((ratio, f"{name} {fam}"))
            elif cls != "growth":
                real.append((ratio, f"{cls}/{name} {fam}"))
    return max(real), min(growth)


def main() -> int:
    rows = results()
    table = []
    for model in sorted({r[0] for r in rows}):
        for name, weight in WEIGHTS.items():
            (real, where), (grown, grown_where) = denser(rows, weight, model)
            margin = f"{grown / real:.2f}×" if real < grown else "cannot tell"
            table.append([model, name, f"{real:.2f}× ({where})", f"{grown:.2f}× ({grown_where})", margin])
    headers = ["model", "weight", "densest real family", "least dense growth family", "margin"]
    print(tabulate(table, headers=headers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
