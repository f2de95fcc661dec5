"""THE catalogue of figures: every scalar a scored run is read by, named once.

A figure has a name (the key in ``agent-eval.yaml``, ``--agent-eval-compare-fail``, junit properties and
``summary.json``), a label (what tables print; ``{tool}`` becomes the retrieval tool's name), a unit (which
decides how it prints and whether percentage points mean anything), a direction (which way is better, if
any), and how it aggregates across the runs of one entry × arm (the median, shown with its range).

The gates, the compare gate, the terminal tables and the HTML all read this table, so one question gets
one answer. ``residual_tokens`` is the *retrieval residual* (docs/metrics/occupancy.md, "The figures built on it"):
what the arm's own way of retrieving left resident at the end — the tool's responses in an arm with the tool,
Read + Grep/Glob + Bash results (file access) in an arm without it. The two parts stay available as
``tool_residual`` and ``file_access_residual``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.metrics.occupancy import FILE_ACCESS, WINDOW_TOKENS
from pytest_agent_eval.metrics.sufficiency import BUCKETS
from pytest_agent_eval.tool import RetrievalTool

# Units: how a figure prints (metrics.format) and whether a change can be read in percentage points.
TOKENS, SHARE, SECONDS, USD, COUNT = "tokens", "share", "seconds", "usd", "count"
HIGHER, LOWER = 1, -1  # the better direction; None: neither (a count that describes, not judges)
MEDIAN = "median"  # every figure aggregates across runs as median [min–max]


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str
    better: int | None
    description: str
    section: str
    headline: bool = False  # compared by default (agent-eval compare shows these without a rule)
    aggregate: str = MEDIAN

    @property
    def is_share(self) -> bool:
        return self.unit == SHARE

    def title(self, tool_name: str) -> str:
        return self.label.format(tool=tool_name)


BEHAVIOUR, OCCUPANCY, SUFFICIENCY, ALLOCATION, CONTAMINATION = (
    "behaviour",
    "occupancy",
    "sufficiency",
    "allocation",
    "contamination",
)
ANSWERS = "answers"

_CATALOGUE = (
    Figure("duration_s", "duration", SECONDS, LOWER, "wall time of the agent processes, seconds", BEHAVIOUR),
    Figure("cost_usd", "cost", USD, LOWER, "cost the CLI reported", BEHAVIOUR, headline=True),
    Figure("tool_calls", "tool calls", COUNT, None, "tool calls, every thread", BEHAVIOUR),
    Figure("read_calls", "Read", COUNT, None, "Read tool calls", BEHAVIOUR),
    Figure("retrieval_calls", "{tool} calls", COUNT, None, "calls to the retrieval tool's MCP tools", BEHAVIOUR),
    Figure("turns", "turns", COUNT, None, "assistant requests in the main thread", OCCUPANCY),
    Figure(
        "tokens_processed", "tokens processed", TOKENS, LOWER, "prompt tokens summed over requests", OCCUPANCY, True
    ),
    Figure("ctx_final", "final context", TOKENS, LOWER, "final context, tokens", OCCUPANCY),
    Figure("tool_residual", "{tool} residual", TOKENS, LOWER, "the tool's responses still resident", OCCUPANCY),
    Figure(
        "file_access_residual",
        "file-access residual",
        TOKENS,
        LOWER,
        "Read + Grep/Glob + Bash results still resident at the end",
        OCCUPANCY,
    ),
    Figure(
        "residual_tokens",
        "retrieval residual",
        TOKENS,
        LOWER,
        "the arm's retrieval still resident at the end: the tool's responses with it, file access without",
        OCCUPANCY,
        headline=True,
    ),
    Figure("residual_share", "share of final context", SHARE, LOWER, "retrieval residual / final context", OCCUPANCY),
    Figure("window_share", "share of window", SHARE, LOWER, "retrieval residual / the context window", OCCUPANCY),
    Figure("explore_calls", "answered explore calls", COUNT, None, "answered explore calls", SUFFICIENCY),
    Figure(
        "explore_again_share",
        "explore again",
        SHARE,
        LOWER,
        "share of explore calls followed by another",
        SUFFICIENCY,
        headline=True,
    ),
    Figure(
        "read_returned_share",
        "Read a file we returned",
        SHARE,
        None,
        "share followed by a Read of a file the response returned",
        SUFFICIENCY,
    ),
    Figure(
        "read_missed_share",
        "Read a file we did not return",
        SHARE,
        None,
        "share followed by a Read of a file it did not return",
        SUFFICIENCY,
    ),
    Figure("search_share", "Grep/Glob", SHARE, None, "share followed by Grep/Glob or a shell search", SUFFICIENCY),
    Figure(
        "sufficient_share",
        "moved on / answered",
        SHARE,
        HIGHER,
        "share followed by moving on / answering",
        SUFFICIENCY,
        headline=True,
    ),
    Figure(
        "explore_errors", "errored calls", COUNT, LOWER, "explore calls that errored or never returned", SUFFICIENCY
    ),
    Figure(
        "allocation",
        "efficiency per run",
        SHARE,
        HIGHER,
        "allocation efficiency: share of returned chars on files the answer cited",
        ALLOCATION,
        headline=True,
    ),
    Figure("path_allocation", "path-cited alone", SHARE, HIGHER, "allocation counting path citations only", ALLOCATION),
    # The answer against the corpus's key (metrics/answers.py); None where the entry has no key: not graded.
    Figure("key_recall", "answer key recall", SHARE, HIGHER, "share of the key's files, symbols, facts named", ANSWERS),
    Figure("key_seen", "key files seen", SHARE, HIGHER, "share of key files returned, read or searched", ANSWERS),
    Figure("read_recall", "key files read", SHARE, HIGHER, "share of key files read before the answer", ANSWERS),
    Figure("read_precision", "reads on key files", SHARE, HIGHER, "share of the files read that are key", ANSWERS),
    Figure("key_rank", "rank of first key file", COUNT, LOWER, "where the tool returned the first key file", ANSWERS),
    Figure(
        "judge_grade", "judge's grade", SHARE, HIGHER, "the judge's mean grade of the turns (metrics/judge.py)", ANSWERS
    ),
    # Contamination's figures: what the without-arm's gate reads (metrics/contamination.py computes them).
    Figure(
        "leaks",
        "results carrying the tool's output",
        COUNT,
        LOWER,
        "tool results (any tool, any thread) that carried one of the tool's output fingerprints",
        CONTAMINATION,
    ),
    Figure(
        "cli_calls",
        "CLI calls",
        COUNT,
        None,
        "shell calls the command matcher reads as running the tool's CLI",
        CONTAMINATION,
    ),
    Figure(
        "cli_blocked",
        "CLI calls denied",
        COUNT,
        None,
        "of those, refused by the agent's deny — Claude Code's hook, Codex's rules (proven by its own denial)",
        CONTAMINATION,
    ),
)
FIGURES: dict[str, Figure] = {figure.name: figure for figure in _CATALOGUE}

# Spellings earlier versions used (agent-eval.yaml, --agent-eval-compare-fail, stored records) → today's name.
ALIASES: dict[str, str] = {
    "codegraph_calls": "retrieval_calls",
    "codegraph_residual": "tool_residual",
    "sufficient": "sufficient_share",
    "explore_again": "explore_again_share",
    "residual": "residual_tokens",
    "tokens": "tokens_processed",
    "cost": "cost_usd",
    "cli_returned_output": "leaks",
}


def lookup(name: str) -> Figure | None:
    """The figure a name (or an old spelling of it) means; None if it names none."""
    return FIGURES.get(ALIASES.get(name, name))


def figures_of(
    scores: Mapping[str, Any],
    *,
    has_tool: bool,
    wall_s: float | None = None,
    tool: RetrievalTool | None = None,
    stalled: bool = False,
) -> dict[str, float | None]:
    """Every figure of one scored run (``scores`` as :meth:`Scorecard.to_dict` writes it); None where the run
    has no value (allocation without an explore call). A run with a stalled turn has no duration: its time is
    the stall's, and a table would read it as time saved or lost. The retrieval tool's calls are ``tool``'s, else
    those of the tool the scores name (scores from before they named one were codegraph's)."""
    named = str(scores.get("tool") or "codegraph").lower()
    owns = tool.owns if tool is not None else lambda name: named in name.lower()
    occ = scores.get("occupancy") or {}
    suf = scores.get("sufficiency") or {}
    alloc = scores.get("allocation") or {}
    con = scores.get("contamination") or {}
    counts = scores.get("tool_counts") or {}
    residual = occ.get("residual") or {}
    ctx_final = occ.get("ctx_final")
    window = occ.get("window") or WINDOW_TOKENS
    tool_residual = residual.get("tool", 0) or 0
    file_access = sum(residual.get(k, 0) or 0 for k in FILE_ACCESS)
    retrieval = tool_residual if has_tool else file_access
    buckets = suf.get("counts") or {}
    answered = sum(buckets.get(key, 0) or 0 for key, _, _ in BUCKETS)
    if wall_s is None and scores.get("duration_ms"):
        wall_s = scores["duration_ms"] / 1000
    out: dict[str, float | None] = {
        "duration_s": round(wall_s, 3) if wall_s is not None and not stalled else None,
        "cost_usd": scores.get("cost_usd"),
        "tool_calls": sum(counts.values()),
        "read_calls": counts.get("Read", 0),
        "retrieval_calls": sum(n for name, n in counts.items() if owns(name)),
        "turns": occ.get("turns"),
        "tokens_processed": occ.get("tokens_processed"),
        "ctx_final": ctx_final,
        "tool_residual": tool_residual,
        "file_access_residual": file_access,
        "residual_tokens": retrieval,
        "residual_share": (retrieval / ctx_final) if ctx_final else None,
        "window_share": retrieval / window,
        "explore_calls": answered,
        "explore_errors": _count(suf.get("errors")),
        "allocation": alloc.get("efficiency"),
        "path_allocation": alloc.get("path_efficiency"),
        "leaks": len(con.get("leaks") or []),
        "cli_calls": con.get("cli_calls", 0),
        "cli_blocked": con.get("cli_blocked", 0),
    }
    answers = scores.get("answers") or {}
    out.update(
        {
            "key_recall": answers.get("recall"),
            "key_seen": answers.get("seen_share"),
            "read_recall": answers.get("read_recall"),
            "read_precision": answers.get("read_precision"),
            "key_rank": answers.get("rank"),
            "judge_grade": (scores.get("judge") or {}).get("grade"),
        }
    )
    for key, _, _ in BUCKETS:
        out[f"{key}_share"] = (buckets.get(key, 0) or 0) / answered if answered else None
    return out


def _count(value: Any) -> int:
    if isinstance(value, int):
        return value
    return len(value) if isinstance(value, (list, tuple, dict)) else 0
