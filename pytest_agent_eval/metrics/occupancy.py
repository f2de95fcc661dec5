"""Residual context occupancy: how many tokens of the window each tool family's results still
occupy when the run ends (seed 002).

Measured, not estimated. For every main-thread request ``ctx_k = input + cache_read +
cache_creation`` is the exact size of its prompt, so ``ctx_k − ctx_{k−1}`` is exactly what was
appended in between (gap k): the previous message's output, then the tool results and user text
that followed it. A chars/token ratio is calibrated on gaps that are mostly tool result, every
result is priced at it, and results leave the resident set on a compaction (all of them) or a
micro-compaction (a gap that grew by less than was appended: the oldest go first).

Only the main thread counts: a subagent has its own window and only its summary comes back.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import MAIN, Compaction, Message, Session, ToolResult, UserText

FAMILIES = ("tool", "read", "search", "bash", "other")  # "tool": the retrieval tool under test, whatever its name
# The without-arm's way of getting the same bytes into the agent's head.
FILE_ACCESS = ("read", "search", "bash")
_BUILTIN_FAMILIES = {
    "Read": "read",
    "NotebookRead": "read",
    "Grep": "search",
    "Glob": "search",
    "Bash": "bash",
    "BashOutput": "bash",
}

WINDOW_TOKENS = 200_000
DEFAULT_CHARS_PER_TOKEN = 3.0
# Calibration: a gap is clean when it is big enough to price and mostly tool result; a gap whose
# window also shed content reads as absurdly dense, so one far above the lower median is dropped.
CALIBRATION_MIN_CHARS = 500
CALIBRATION_TOOL_SHARE = 0.8
SHED_FACTOR = 1.5
# Error bar: on a gap that is almost all one result, the measured growth is that result's size.
DISPERSION_RESULT_SHARE = 0.95
# Below this shortfall a gap is attribution noise, not shedding (real shedding is thousands).
EVICTION_FLOOR_TOKENS = 200
EVICTION_TOOL_SHARE = 0.05

# How the ratio was obtained: on clean gaps, on every growing gap, or not at all.
MEASURED, ALL_GAPS, DEFAULT = "measured", "all gaps", "default"


def family(tool_name: str, tool: RetrievalTool = CODEGRAPH) -> str:
    """The family a tool's results are charged to; any tool of the retrieval server is "tool"."""
    if tool_name and tool.owns(tool_name):
        return "tool"
    return _BUILTIN_FAMILIES.get(tool_name, "other")


def _zeros() -> dict[str, int]:
    return dict.fromkeys(FAMILIES, 0)


@dataclass
class Occupancy:
    """One run's occupancy; token figures are rounded, per family keyed by :data:`FAMILIES`."""

    ctx_final: int = 0
    ctx_base: int = 0
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    calibration: str = DEFAULT
    dispersion: float | None = None
    residual: dict[str, int] = field(default_factory=_zeros)
    contributed: dict[str, int] = field(default_factory=_zeros)
    residual_chars: dict[str, int] = field(default_factory=_zeros)
    residual_results: dict[str, int] = field(default_factory=_zeros)
    contributed_chars: dict[str, int] = field(default_factory=_zeros)
    contributed_results: dict[str, int] = field(default_factory=_zeros)
    evicted: int = 0
    compactions: int = 0
    turns: int = 0
    window: int = WINDOW_TOKENS
    tokens_processed: int = 0

    @property
    def calibrated(self) -> bool:
        return self.calibration == MEASURED

    @property
    def file_access(self) -> int:
        return sum(self.residual[f] for f in FILE_ACCESS)

    @property
    def base(self) -> int:
        """Prompt, prose and everything that is not a tool result (clamped: pricing is an estimate)."""
        return max(0, self.ctx_final - sum(self.residual.values()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ctx_final": self.ctx_final,
            "ctx_base": self.ctx_base,
            "chars_per_token": self.chars_per_token,
            "calibrated": self.calibrated,
            "calibration": self.calibration,
            "dispersion": self.dispersion,
            "residual": dict(self.residual),
            "contributed": dict(self.contributed),
            "residual_chars": dict(self.residual_chars),
            "residual_results": dict(self.residual_results),
            "contributed_chars": dict(self.contributed_chars),
            "contributed_results": dict(self.contributed_results),
            "file_access": self.file_access,
            "base": self.base,
            "evicted": self.evicted,
            "compactions": self.compactions,
            "turns": self.turns,
            "window": self.window,
            "tokens_processed": self.tokens_processed,
        }


@dataclass
class _Gap:
    """What was appended between two measured requests."""

    chars: int = 0
    results: list[tuple[str, int]] = field(default_factory=list)  # (family, chars), in order
    cleared_at: int | None = None  # results before this index were compacted away
    delta: int = 0

    @property
    def tool_chars(self) -> int:
        return sum(chars for _, chars in self.results)

    @property
    def clean(self) -> bool:
        """Growing, uncompacted and big enough to measure a ratio on."""
        return self.cleared_at is None and self.delta > 0 and self.chars > CALIBRATION_MIN_CHARS


@dataclass
class _Resident:
    family: str
    tokens: float


def occupancy(session: Session, tool: RetrievalTool = CODEGRAPH, window: int = WINDOW_TOKENS) -> Occupancy:
    """Residual context occupancy of the session's main thread at its last request."""
    ctxs, gaps, compactions = _gaps(session, tool)
    ratio, calibration = _calibrate(gaps)
    out = Occupancy(
        ctx_final=ctxs[-1] if ctxs else 0,
        ctx_base=ctxs[0] if ctxs else 0,
        chars_per_token=ratio,
        calibration=calibration,
        dispersion=_dispersion(gaps, ratio),
        compactions=compactions,
        turns=len(ctxs),
        window=window,
        # Throughput, every thread, off the per-request usage: result.usage has changed meaning
        # between Claude Code versions and under-counts whichever arm takes more turns.
        tokens_processed=sum(m.usage.ctx for m in session.messages(None) if m.usage is not None),
    )

    resident: deque[_Resident] = deque()
    contributed = dict.fromkeys(FAMILIES, 0.0)
    evicted = 0.0

    def append(results: list[tuple[str, int]]) -> float:
        tokens = 0.0
        for fam, chars in results:
            priced = chars / ratio
            tokens += priced
            contributed[fam] += priced
            out.contributed_chars[fam] += chars
            out.contributed_results[fam] += 1
            resident.append(_Resident(fam, priced))
        return tokens

    for gap in gaps:
        if gap.cleared_at is not None:
            # The summary replaces everything before the boundary, this gap's earlier results too;
            # the gap's growth mixes the summary with the shedding, so it says nothing more.
            append(gap.results[: gap.cleared_at])
            evicted += sum(r.tokens for r in resident)
            resident.clear()
            append(gap.results[gap.cleared_at :])
            continue
        tool_tokens = append(gap.results)
        shortfall = tool_tokens - gap.delta
        if shortfall > max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * tool_tokens):
            evicted += _evict_oldest(resident, shortfall)

    left = dict.fromkeys(FAMILIES, 0.0)
    for r in resident:
        left[r.family] += r.tokens
        out.residual_results[r.family] += 1
    for fam in FAMILIES:
        out.residual[fam] = round(left[fam])
        out.contributed[fam] = round(contributed[fam])
        out.residual_chars[fam] = round(left[fam] * ratio)
    out.evicted = round(evicted)
    return out


def _gaps(session: Session, tool: RetrievalTool) -> tuple[list[int], list[_Gap], int]:
    """The main thread's measured prompt sizes, the gaps between them, and its compaction count.

    A message without usage (or with an empty one, as synthetic error messages have) is not a
    measurement point; its output still lands in the gap it was written in.
    """
    names = {call.id: call.name for call in session.calls}
    ctxs: list[int] = []
    gaps: list[_Gap] = []
    gap = _Gap()
    compactions = 0
    for item in session.timeline:
        if item.thread != MAIN:
            continue
        if isinstance(item, Message):
            ctx = item.usage.ctx if item.usage is not None else 0
            if ctx > 0:
                if ctxs:
                    gap.delta = ctx - ctxs[-1]
                    gaps.append(gap)
                ctxs.append(ctx)
                gap = _Gap()
            gap.chars += item.output_chars
        elif isinstance(item, ToolResult):
            # A result without its call still occupies the window; it is charged to "other".
            gap.results.append((family(names.get(item.call_id, ""), tool), len(item.text)))
            gap.chars += len(item.text)
        elif isinstance(item, UserText):
            gap.chars += len(item.text)
        elif isinstance(item, Compaction):
            compactions += 1
            gap.cleared_at = len(gap.results)
    return ctxs, gaps, compactions


def _calibrate(gaps: list[_Gap]) -> tuple[float, str]:
    """chars/token, pooled over the clean tool-dominated gaps, with the shed ones dropped."""
    clean = [g for g in gaps if g.clean and g.tool_chars >= CALIBRATION_TOOL_SHARE * g.chars]
    if clean:
        # Shedding can only push a gap's chars/token up, so the lower median is the honest centre.
        ratios = sorted(g.chars / g.delta for g in clean)
        ceiling = SHED_FACTOR * ratios[(len(ratios) - 1) // 2]
        kept = [g for g in clean if g.chars / g.delta <= ceiling]
        return sum(g.chars for g in kept) / sum(g.delta for g in kept), MEASURED
    growing = [g for g in gaps if g.cleared_at is None and g.delta > 0 and g.chars > 0]
    if growing:
        return sum(g.chars for g in growing) / sum(g.delta for g in growing), ALL_GAPS
    return DEFAULT_CHARS_PER_TOKEN, DEFAULT


def _dispersion(gaps: list[_Gap], ratio: float) -> float | None:
    """Median relative error of the run-level ratio on gaps that are (almost) one tool result."""
    errors = sorted(
        abs(g.tool_chars / ratio - g.delta) / g.delta
        for g in gaps
        if g.clean and g.results and max(chars for _, chars in g.results) >= DISPERSION_RESULT_SHARE * g.chars
    )
    return errors[(len(errors) - 1) // 2] if errors else None


def _evict_oldest(resident: deque[_Resident], tokens: float) -> float:
    """Drop ``tokens`` from the oldest resident results (micro-compaction sheds those first)."""
    evicted = 0.0
    while tokens > 0 and resident:
        head = resident[0]
        if head.tokens <= tokens:
            resident.popleft()
            tokens -= head.tokens
            evicted += head.tokens
        else:
            head.tokens -= tokens
            evicted += tokens
            tokens = 0
    return evicted
