"""Residual context occupancy: how many tokens of the window each tool family's results still
occupy when the run ends (seed 002).

Measured, not estimated. For every main-thread request ``ctx_k = input + cache_read +
cache_creation`` is the exact size of its prompt, so ``ctx_k − ctx_{k−1}`` is exactly what was
appended in between (gap k): the previous message's output, then the tool results and user text
that followed it. A chars/token ratio is calibrated on gaps that are mostly tool result, every
result is priced at it, and results leave the resident set on a compaction (all of them) or a
micro-compaction (a gap that grew by less than was appended: the oldest go first).

Only the main thread counts: a subagent has its own window and only its summary comes back.

Added to the seed, because a single chars/token ratio cannot price every result right:

* **a per-result cost.** Every content block carries framing its characters do not show (its type,
  ``tool_use_id``, the content array: ~40 tokens on the API), so a 90-character Grep result costs about
  twice its characters' worth. Small gaps (≤ :data:`CALIBRATION_MIN_CHARS`) with a tool result and
  nothing hidden (no redacted or empty thinking) measure it: their growth beyond their characters'
  price, per block, lower median (hidden content only pushes it up). The 80% rule does not apply to
  them: a call's own input is a fixed share of a small gap and is priced like any characters. The ratio
  is then re-measured on the big clean gaps net of that framing, a few rounds. Without such a gap, or
  when the cost lands outside 0…:data:`MAX_PER_RESULT_TOKENS`, it is 0: characters alone are priced,
  as in the seed. A call and its result always share a gap, so the cost is split evenly
  between the blocks: a call's framing is heavier than a result's, which leaves small results
  over-priced by ~10–20 tokens each.
* **a clean gap measures its own results.** A gap the calibration kept as unshed grew by exactly what
  it appended, so its results are priced at that growth, less the rest of the gap (prose, calls,
  framing) at the run's terms, split among them by their prices: two Read results of one run came out
  at 2.4 and 3.5 chars/token, far more apart than any ratio can follow. Every other gap's results are
  priced at the ratio, and a shortfall past the seed's tolerance there is still eviction, FIFO.
* **a ratio per family where its own gaps measure it**, for results no clean gap of their own measures
  (and to split a gap between families). Line-numbered source, explore output and Grep
  listings tokenise at different densities (a run's Read results came out 4–6% over-priced at the run's
  ratio). A big clean gap that is ≥ :data:`DISPERSION_RESULT_SHARE` one family's results measures that
  family's ratio directly; the family is priced at it (pooled over its gaps, within a factor
  :data:`SHED_FACTOR` of the run's ratio), every other family at the run's ratio.

The error bar stays the seed's, on the same footing as the pricing: on gaps that are ≥ 95% one result,
the distance between that result's price — the run's ratio plus the per-result cost — and the gap's
growth. It bounds a result priced at the run's terms; one its own gap measured is closer (a family
ratio or a gap measured on the very gap it is tested on would hide its own error).
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
# Per-result cost: above this a small gap's growth is hidden content, not framing (the API's is ~40).
MAX_PER_RESULT_TOKENS = 120
# Rounds of (per-result cost from the small gaps, ratio from the big ones net of it); it settles in two or
# three: a round that moves the cost by less than SETTLED_TOKENS is the last.
CALIBRATION_ROUNDS = 4
SETTLED_TOKENS = 0.01
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
    per_result_tokens: float = 0.0
    family_chars_per_token: dict[str, float] = field(default_factory=dict)
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
            "per_result_tokens": self.per_result_tokens,
            "family_chars_per_token": dict(self.family_chars_per_token),
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
    tool_chars: int = 0  # of which tool results
    blocks: int = 0  # content blocks appended: each carries its framing
    hidden_blocks: int = 0  # of which redacted or empty thinking: tokens the transcript does not show
    results: list[tuple[str, int]] = field(default_factory=list)  # (family, chars), in order
    cleared_at: int | None = None  # results before this index were compacted away
    delta: int = 0
    measured: bool = False  # kept by the calibration: its growth prices its own results

    @property
    def clean(self) -> bool:
        """Growing, uncompacted and big enough to measure a ratio on."""
        return self.cleared_at is None and self.delta > 0 and self.chars > CALIBRATION_MIN_CHARS

    @property
    def fully_shown(self) -> bool:
        """Growing, uncompacted, with tool results, and every block's content in the transcript."""
        return self.cleared_at is None and self.delta > 0 and bool(self.results) and self.hidden_blocks == 0

    @property
    def tool_dominated(self) -> bool:
        return self.tool_chars >= CALIBRATION_TOOL_SHARE * self.chars

    def family_share(self) -> tuple[str, int] | None:
        """The family holding ≥ DISPERSION_RESULT_SHARE of the gap's characters, and its characters."""
        by_family: dict[str, int] = {}
        for fam, chars in self.results:
            by_family[fam] = by_family.get(fam, 0) + chars
        fam, chars = max(by_family.items(), key=lambda item: item[1], default=("", 0))
        return (fam, chars) if by_family and chars >= DISPERSION_RESULT_SHARE * self.chars else None


@dataclass
class _Pricing:
    """Tokens of a result: its characters at its family's ratio (or the run's), plus the per-result cost."""

    chars_per_token: float
    calibration: str
    per_result: float = 0.0
    family_ratio: dict[str, float] = field(default_factory=dict)

    def tokens(self, fam: str, chars: int) -> float:
        return chars / self.family_ratio.get(fam, self.chars_per_token) + self.per_result


@dataclass
class _Resident:
    family: str
    tokens: float
    chars: float


def occupancy(session: Session, tool: RetrievalTool = CODEGRAPH, window: int = WINDOW_TOKENS) -> Occupancy:
    """Residual context occupancy of the session's main thread at its last request."""
    ctxs, gaps, compactions = _gaps(session, tool)
    pricing = _calibrate(gaps)
    out = Occupancy(
        ctx_final=ctxs[-1] if ctxs else 0,
        ctx_base=ctxs[0] if ctxs else 0,
        chars_per_token=pricing.chars_per_token,
        calibration=pricing.calibration,
        dispersion=_dispersion(gaps, pricing),
        per_result_tokens=pricing.per_result,
        family_chars_per_token=dict(pricing.family_ratio),
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

    ratio_of, ratio, per_result = pricing.family_ratio.get, pricing.chars_per_token, pricing.per_result

    def append(results: list[tuple[str, int]], scale: float = 1.0) -> float:
        tokens = 0.0
        for fam, chars in results:
            priced = (chars / ratio_of(fam, ratio) + per_result) * scale  # pricing.tokens, inlined: the hot loop
            tokens += priced
            contributed[fam] += priced
            out.contributed_chars[fam] += chars
            out.contributed_results[fam] += 1
            resident.append(_Resident(fam, priced, chars))
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
        tool_tokens = append(gap.results, _measured_scale(gap, pricing))
        shortfall = tool_tokens - gap.delta
        if shortfall > max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * tool_tokens):
            evicted += _evict_oldest(resident, shortfall)

    left = dict.fromkeys(FAMILIES, 0.0)
    left_chars = dict.fromkeys(FAMILIES, 0.0)
    for r in resident:
        left[r.family] += r.tokens
        left_chars[r.family] += r.chars
        out.residual_results[r.family] += 1
    for fam in FAMILIES:
        out.residual[fam] = round(left[fam])
        out.contributed[fam] = round(contributed[fam])
        out.residual_chars[fam] = round(left_chars[fam])
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
            gap.blocks += len(item.blocks) + len(item.calls)
            gap.hidden_blocks += sum(_hidden(block) for block in item.blocks)
        elif isinstance(item, ToolResult):
            # A result without its call still occupies the window; it is charged to "other".
            gap.results.append((family(names.get(item.call_id, ""), tool), item.chars))
            gap.chars += item.chars
            gap.tool_chars += item.chars
            gap.blocks += 1
        elif isinstance(item, UserText):
            gap.chars += item.chars
            gap.blocks += 1
        elif isinstance(item, Compaction):
            compactions += 1
            gap.cleared_at = len(gap.results)
    return ctxs, gaps, compactions


def _hidden(block: dict[str, Any]) -> bool:
    """Thinking the transcript does not show: redacted, or streamed empty with only its signature."""
    kind = block.get("type")
    return kind == "redacted_thinking" or (kind == "thinking" and not block.get("thinking"))


def _calibrate(gaps: list[_Gap]) -> _Pricing:
    """chars/token, pooled over the clean tool-dominated gaps with the shed ones dropped; then the
    per-result cost and the family ratios where the gaps measure them (see the module docstring)."""
    clean = [g for g in gaps if g.clean and g.tool_dominated]
    if clean:
        framing = [g for g in gaps if g.fully_shown and 0 < g.chars <= CALIBRATION_MIN_CHARS]
        pooled = _pooled(clean, 0.0)
        assert pooled is not None  # a clean gap grows
        ratio, kept = pooled
        per_result = 0.0
        for _ in range(CALIBRATION_ROUNDS if framing else 0):
            costs = sorted((g.delta - g.chars / ratio) / g.blocks for g in framing)
            settled = abs(costs[(len(costs) - 1) // 2] - per_result) < SETTLED_TOKENS
            per_result = costs[(len(costs) - 1) // 2]
            framed = _pooled(clean, per_result) if 0 < per_result <= MAX_PER_RESULT_TOKENS else None
            if framed is None:
                per_result, (ratio, kept) = 0.0, pooled
                break
            ratio, kept = framed
            if settled:
                break
        for g in kept:
            g.measured = True
        return _Pricing(ratio, MEASURED, per_result, _family_ratios(kept, ratio, per_result))
    growing = [g for g in gaps if g.cleared_at is None and g.delta > 0 and g.chars > 0]
    if growing:
        return _Pricing(sum(g.chars for g in growing) / sum(g.delta for g in growing), ALL_GAPS)
    return _Pricing(DEFAULT_CHARS_PER_TOKEN, DEFAULT)


def _pooled(clean: list[_Gap], per_result: float) -> tuple[float, list[_Gap]] | None:
    """The ratio pooled over the clean gaps net of their framing, and the gaps it was pooled over; None when
    the framing leaves no gap any growth (it cannot be right)."""

    usable = [(g, net) for g in clean if (net := g.delta - per_result * g.blocks) > 0]
    if not usable:
        return None
    # Shedding can only push a gap's chars/token up, so the lower median is the honest centre.
    ratios = sorted(g.chars / net for g, net in usable)
    ceiling = SHED_FACTOR * ratios[(len(ratios) - 1) // 2]
    kept = [(g, net) for g, net in usable if g.chars / net <= ceiling]
    return sum(g.chars for g, _ in kept) / sum(net for _, net in kept), [g for g, _ in kept]


def _family_ratios(kept: list[_Gap], ratio: float, per_result: float) -> dict[str, float]:
    """chars/token of each family that has gaps of its own: what is left of their growth once the rest of
    the gap (prose, framing) is priced at the run's terms, pooled; kept within SHED_FACTOR of the run's."""
    chars: dict[str, int] = {}
    tokens: dict[str, float] = {}
    for g in kept:
        share = g.family_share()
        if share is None:
            continue
        fam, fam_chars = share
        chars[fam] = chars.get(fam, 0) + fam_chars
        tokens[fam] = tokens.get(fam, 0.0) + g.delta - per_result * g.blocks - (g.chars - fam_chars) / ratio
    measured = {fam: chars[fam] / tokens[fam] for fam in chars if tokens[fam] > 0}
    return {fam: r for fam, r in measured.items() if ratio / SHED_FACTOR <= r <= ratio * SHED_FACTOR}


def _measured_scale(gap: _Gap, pricing: _Pricing) -> float:
    """A gap the calibration kept as unshed measured its own results: its growth less the rest of it (prose,
    calls, framing) at the run's terms. The factor that brings the results' prices to that; 1 elsewhere."""
    if not gap.measured:
        return 1.0
    priced = sum(pricing.tokens(fam, chars) for fam, chars in gap.results)
    rest = (gap.chars - gap.tool_chars) / pricing.chars_per_token + pricing.per_result * (gap.blocks - len(gap.results))
    measured = gap.delta - rest
    return measured / priced if priced > 0 and measured > 0 else 1.0


def _dispersion(gaps: list[_Gap], pricing: _Pricing) -> float | None:
    """Median relative error of the run-level pricing (ratio and per-result cost) on gaps that are (almost)
    one tool result."""
    errors = sorted(
        abs(sum(chars / pricing.chars_per_token + pricing.per_result for _, chars in g.results) - g.delta) / g.delta
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
            head.chars *= 1 - tokens / head.tokens
            head.tokens -= tokens
            evicted += tokens
            tokens = 0
    return evicted
