"""Residual context occupancy: how many tokens of the window each tool family's results still
occupy when the run ends. docs/metrics/occupancy.md defines it, with its rules and examples.

Measured, not estimated. For every main-thread request ``ctx_k = input + cache_read +
cache_creation`` is the exact size of its prompt, so ``ctx_k − ctx_{k−1}`` is exactly what was
appended in between (gap k): the previous message's output, then the tool results and user text
that followed it. A chars/token ratio is calibrated on gaps that are mostly tool result, every
result is priced at it, and results leave the resident set on a compaction (all of them) or a
micro-compaction (a gap that grew by less than was appended: the oldest go first).

Only the main thread counts: a subagent has its own window and only its summary comes back.

Added to the original definition, because a single chars/token ratio cannot price every result right:

* **framing, priced by the characters that show it.** Every block and message carries structure its
  content does not show (a tool_result's type, ``tool_use_id`` and content array; a tool_use's type and
  id; each message's role and content array), so a 90-character Grep result costs about twice its
  characters' worth. The transcript shows that structure, so it is counted as characters of its own, the
  *framing* (:data:`RESULT_FRAME_CHARS` and the like, plus the ids as written), apart from the *content*
  (prose, thinking, a call's name and input, the results). Small gaps (content ≤
  :data:`CALIBRATION_MIN_CHARS`) with a tool result and nothing hidden (no redacted or empty thinking)
  measure its density: their growth beyond their content's price, per framing character, lower median
  (hidden content only pushes it up). The ratio is then re-measured on the big clean gaps net of their
  framing, a few rounds. A result is priced at its content's ratio plus its own framing at that density.

  Why characters, not a cost per block: a call and its result always share a gap (the call ends one
  request, its result opens the next), so no fit over gaps can tell a call's framing from its result's,
  and an even split per block charged the call's (and the messages') heavier framing to the result,
  small results 10–25 tokens high. Counted by characters, a result gets only its own block's share:
  ~30–40% of a small gap's framing, as the stand-in's counting model (:mod:`..model.usage`) has it.

  Without a believable small gap (none, or a density outside 0…:data:`MAX_FRAMING_TOKENS_PER_CHAR`) the
  original fall-back stands: a result is priced at the single ratio by its content, nothing on top; the
  rest of a clean gap (below) prices its framing at that ratio too, characters like any.
* **a clean gap measures its own results.** A gap the calibration kept as unshed grew by exactly what
  it appended, so its results are priced at that growth, less the rest of the gap (prose, calls,
  framing) at the run's terms, split among them by their prices: two Read results of one run came out
  at 2.4 and 3.5 chars/token, far more apart than any ratio can follow. Every other gap's results are
  priced at the ratio, and a shortfall past the tolerance there is still eviction, FIFO.
* **a ratio per family where its own gaps measure it**, for results no clean gap of their own measures
  (and to split a gap between families). Line-numbered source, explore output and Grep
  listings tokenise at different densities (a run's Read results came out 4–6% over-priced at the run's
  ratio). A big clean gap that is ≥ :data:`DISPERSION_RESULT_SHARE` one family's results measures that
  family's ratio directly; the family is priced at it (pooled over its gaps, within a factor
  :data:`SHED_FACTOR` of the run's ratio), every other family at the run's ratio.

What the transcript does not show (docs/metrics/occupancy.md, "Invisible growth", "Thinking", "Leaving the window"):

* **invisible growth is not a result's cost.** Thinking the model counts but streams empty or summarised, and
  reminders the CLI adds, make a gap read dense. Only gaps whose every thinking block shows its content (none
  redacted or under :data:`VISIBLE_THINKING_MIN_CHARS`) calibrate or price their own results; a clean gap denser
  than the centre by more than its robust spread (MAD) and :data:`SHED_FACTOR` is dropped; where every clean gap
  may hide growth, the least dense bounds the ratio (:data:`BOUND`). A family whose gaps read denser than the others'
  by :data:`GROWTH_FACTOR`, weighed by characters and by pieces both, measures nothing (:func:`_beside_growth`). A
  gap's growth beyond its content's price is reported as ``unexplained`` (``unexplained_thinking`` where it holds
  thinking, ``unexplained_beside`` where its family read so dense), and a shrink takes it, then the visible thinking,
  before any result. Whatever the factor, a family's growth beyond the other families' terms is its own cost or
  context beside it, which nothing here tells apart: it is the family's error bar, ``denser``.
* **thinking is assistant content**, never a tool family: visible thinking is priced at the ratio the segments'
  declared output measures (:func:`_declared_output`), or else at prose's (:data:`PROSE_CHARS_PER_TOKEN`); the
  same declared output tells what a gap's thinking hid, where one gap of its segment may hide. That ratio is right in
  sum, not per block: a result measured beside thinking is weighed against its price (:func:`_measured_scale`).
  Thinking a resumed turn's first request left out and the next one sent again is that gap's content
  (:func:`_returning`), not unexplained growth.
* **a compaction keeps what it names** (``compact_metadata.preserved_messages``): those results stay resident, the
  rest are evicted once; those the boundary's own gap brought are measured by the request after it, which holds the
  session's first request again (:func:`_measure_kept`).

Sanity (docs/metrics/occupancy.md, "Sanity"): a ratio no tokenizer produces (:data:`PLAUSIBLE_CHARS_PER_TOKEN`) is
never used, the simple calibrated estimate (:func:`simple_estimate`) is kept as a cross-check, and a shrink sheds only
results that were there before its gap.

The error bar stays the original one, on the same footing as the pricing: on gaps that are ≥ 95% one result,
the distance between that result's price — its content at the run's ratio plus its framing — and the
gap's growth. It bounds a result priced at the run's terms; one its own gap measured is closer (a family
ratio or a gap measured on the very gap it is tested on would hide its own error).
"""

from __future__ import annotations

import math
import re
import string
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.tool import RetrievalTool
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
# Growth a gap's visible content cannot explain (thinking counted but not streamed, CLI reminders) makes its ratio
# read dense: a gap whose ratio falls below both the centre less UNEXPLAINED_MADS scaled MADs and the centre over
# SHED_FACTOR is not calibrated on. 1.4826 scales a MAD to a normal spread's sigma.
UNEXPLAINED_MADS = 3.0
# Growth beside a result that nothing shows (context the server or the CLI adds): a family whose gaps read denser than
# the run's gaps of other families by more than this factor, by characters and by pieces both, measures nothing, and
# its gaps' excess is unexplained. Families of one run differ in density too, so the factor trades the two against each
# other: weighed both ways, the bench's real families read at most 1.25x denser than their run's others (django's Read
# under cl100k_base), the least context beside results it holds 1.30x (the stand-in's counting), and by characters
# alone real families read up to 1.73x (docs/metrics/occupancy.md, "Invisible growth"; bench/family_density.py).
GROWTH_FACTOR = 1.27
MAD_SIGMA = 1.4826
# What a BPE tokenizer splits text into before it merges: a run of letters, up to three digits, one other character,
# a run of whitespace, each optionally led by a space. Tokens a piece vary far less between kinds of text than tokens a
# character (source with short names, numbers and markup has more pieces a character than prose). ASCII classes: any
# other character is a piece of its own. count_pieces counts them 3.4 times as fast as findall over this pattern.
PIECE_RE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+", re.ASCII)
_WHITESPACE = " \t\n\r\x0b\x0c"  # \s under re.ASCII
# bytes.translate tables for count_pieces: letters as "a" amid spaces; digits as "0" amid spaces; whitespace as words
# of its own ("s" a space, "w" any other) amid spaces; and the bytes that are not other characters.
_LETTERS = bytes(ord("a") if chr(b) in string.ascii_letters else ord(" ") for b in range(256))
_DIGITS = bytes(ord("0") if chr(b) in string.digits else ord(" ") for b in range(256))
_SPACES = bytes(ord("s") if b == ord(" ") else ord("w") if chr(b) in _WHITESPACE else ord(" ") for b in range(256))
_NOT_OTHER = (string.ascii_letters + string.digits + _WHITESPACE).encode()
# Visible thinking is the model's prose: priced at prose's ratio (the stand-in's counting model, like the real
# tokenizer, puts English prose near 4.5). A thinking block shorter than VISIBLE_THINKING_MIN_CHARS (empty, or a
# summary) may hide what it counted, and so may a redacted one: its gap is not calibrated on.
PROSE_CHARS_PER_TOKEN = 4.5
# What a message's structure adds to the output tokens a segment declares: about half a token a framing character.
OUTPUT_FRAMING_TOKENS_PER_CHAR = 0.5
VISIBLE_THINKING_MIN_CHARS = 500
# Error bar: on a gap that is almost all one result, the measured growth is that result's size.
DISPERSION_RESULT_SHARE = 0.95
# Framing: the characters a block shows around its content (see the module docstring). Serialised compactly,
# a tool_result without its id and content, a tool_use without its id, name and input, any other block.
RESULT_FRAME_CHARS = len('{"type":"tool_result","tool_use_id":"","content":""}')
ERROR_FRAME_CHARS = len(',"is_error":true')
CALL_FRAME_CHARS = len('{"type":"tool_use","id":"","name":"","input":}')
BLOCK_FRAME_CHARS = len('{"type":"text","text":""}')
# A message's own wrapping: an assistant message, and the user message its results (or new text) come back in.
MESSAGE_FRAME_CHARS = len('{"role":"assistant","content":[]}')
# Above this a small gap's growth per framing character is hidden content, not structure (JSON punctuation
# is about a token a character).
MAX_FRAMING_TOKENS_PER_CHAR = 1.0
# Rounds of (framing density from the small gaps, ratio from the big ones net of it); it settles in two or
# three: a round that moves the density by less than SETTLED_DENSITY is the last.
CALIBRATION_ROUNDS = 4
SETTLED_DENSITY = 1e-4
# Below this shortfall a gap is attribution noise, not shedding (real shedding is thousands).
EVICTION_FLOOR_TOKENS = 200
EVICTION_TOOL_SHARE = 0.05

# Assistant content that may hold more than it shows: a model counts thinking it streams summarised or not at all.
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# What tokenizers produce on what a session holds: dense source and JSON near 2 chars/token, prose near 4.5, the
# densest (digits, punctuation runs, non-Latin text) above 1. A ratio outside this range was not measured on text:
# growth the transcript does not show, or shedding, made it (docs/metrics/occupancy.md, "Sanity").
PLAUSIBLE_CHARS_PER_TOKEN = (1.0, 8.0)
# The cross-check flags a run whose residual lies off the simple estimate's by more than the larger error bar and
# this share (a bar of a few gaps can be 0).
CROSS_CHECK_MIN_SHARE = 0.05

# How the ratio was obtained: on clean gaps, on every growing gap, or not at all.
# BOUND: every gap that could measure it holds thinking that may hide growth; the least dense bounds it.
MEASURED, ALL_GAPS, BOUND, DEFAULT = "measured", "all gaps", "bound", "default"
# IMPLAUSIBLE: the gaps measured a ratio no tokenizer produces; results are priced at the simple estimate's instead.
IMPLAUSIBLE = "implausible"


def family(tool_name: str, tool: RetrievalTool) -> str:
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
    framing_tokens_per_char: float = 0.0
    framing: str = DEFAULT
    family_chars_per_token: dict[str, float] = field(default_factory=dict)
    residual: dict[str, int] = field(default_factory=_zeros)
    contributed: dict[str, int] = field(default_factory=_zeros)
    residual_chars: dict[str, int] = field(default_factory=_zeros)
    residual_results: dict[str, int] = field(default_factory=_zeros)
    contributed_chars: dict[str, int] = field(default_factory=_zeros)
    contributed_results: dict[str, int] = field(default_factory=_zeros)
    evicted: int = 0
    unexplained: int = 0
    unexplained_thinking: int = 0
    # Of it, the growth of gaps whose family read denser than the run's others by GROWTH_FACTOR: context beside their
    # results, or their own cost; the data cannot tell, so its error bar is itself (docs/metrics/occupancy.md).
    unexplained_beside: int = 0
    # Per family, the growth of its clean gaps beyond its characters at the run's other families' ratio: its own cost
    # (a denser file) or context beside its results; the data cannot tell, so it is the family's error bar. Priced into
    # its results where the family reads less than GROWTH_FACTOR denser, unexplained_beside where more.
    denser: dict[str, int] = field(default_factory=dict)
    # Characters the CLI appends unseen to the last result of each user message, counted in it (Session.result_suffix:
    # Claude Code's tokens-left reminder); 0 where it appends none.
    unseen_suffix_chars: int = 0
    thinking_chars_per_token: float = PROSE_CHARS_PER_TOKEN
    compactions: int = 0
    turns: int = 0
    window: int = WINDOW_TOKENS
    tokens_processed: int = 0
    # The sanity check (docs/metrics/occupancy.md, "Sanity"): the simple calibrated estimate's ratio and resident
    # tokens, and, where this residual lies off it by more than the error bars, what differs ("" where it agrees).
    simple_chars_per_token: float = 0.0
    simple_residual: int = 0
    implausible_chars_per_token: float | None = None  # what the gaps measured where calibration is IMPLAUSIBLE
    cross_check: str = ""
    # Asked for (occupancy(by_request=True)), not stored: per main-thread request, its prompt size ("ctx") and
    # each family's resident tokens as it was sent. report.html draws it; the last one is the residual above.
    by_request: list[dict[str, int]] = field(default_factory=list)

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
            "framing_tokens_per_char": self.framing_tokens_per_char,
            "framing": self.framing,
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
            "unexplained": self.unexplained,
            "unexplained_thinking": self.unexplained_thinking,
            "unexplained_beside": self.unexplained_beside,
            "denser": dict(self.denser),
            "unseen_suffix_chars": self.unseen_suffix_chars,
            "thinking_chars_per_token": self.thinking_chars_per_token,
            "compactions": self.compactions,
            "turns": self.turns,
            "window": self.window,
            "tokens_processed": self.tokens_processed,
            "simple_chars_per_token": self.simple_chars_per_token,
            "simple_residual": self.simple_residual,
            "implausible_chars_per_token": self.implausible_chars_per_token,
            "cross_check": self.cross_check,
        }


@dataclass
class _Gap:
    """What was appended between two measured requests."""

    chars: int = 0  # content: prose, thinking, tool results
    frame: int = 0  # framing: every block's structure, a call's id, name and input (see the module docstring)
    tool_chars: int = 0  # of the content, tool results
    thinking_chars: int = 0  # of the content, thinking as the transcript shows it (assistant content, never a result)
    thinking_blocks: int = 0  # thinking blocks, redacted ones too
    hiding_blocks: int = 0  # of them, those that may hide what they counted: redacted, empty or a short summary
    hiding_segment: int | None = None  # the stream-json segment of the message that holds them
    hidden: float = 0.0  # tokens its thinking hid, as the segment's declared output tells them (0: not told)
    thinking_tokens: float = 0.0  # its visible thinking, priced (see _declared_output)
    returned: float = 0.0  # earlier visible thinking a shrink left out that this gap sent again, priced (_returning)
    returned_hidden: float = 0.0  # of it, thinking the declared output told was hidden: still growth nothing shows
    results: list[tuple[str, int, int]] = field(default_factory=list)  # (family, chars, frame), in order
    uuids: list[str] = field(default_factory=list)  # each result's event, as a compaction names what it keeps
    texts: list[str] = field(default_factory=list)  # each result's text (for _pieces; "" where it shows none)
    clearings: list[tuple[int, frozenset[str]]] = field(default_factory=list)  # (results before, kept) per boundary
    calls: list[tuple[int, int]] = field(default_factory=list)  # each result's call: (content, framing) characters
    at_last_boundary: tuple[int, int] = (0, 0)  # what the gap had shown but its results when its last boundary came
    delta: int = 0
    measured: bool = False  # kept by the calibration: its growth prices its own results
    beside: bool = False  # its family read as growth beside its results (_beside_growth): it measures nothing
    before: int = 0  # content characters earlier gaps appended since the last compaction: all a shrink could shed

    @property
    def cleared_at(self) -> int | None:
        """Results before this index were there when the (first) compaction in this gap summarised them away."""
        return self.clearings[0][0] if self.clearings else None

    @property
    def after_boundary(self) -> tuple[int, int]:
        """What the gap shows after its last boundary but results (the summary): content and framing characters."""
        return (
            self.chars - self.tool_chars - self.at_last_boundary[0],
            self.frame - self.result_frame - self.at_last_boundary[1],
        )

    @property
    def shown_chars(self) -> int:
        """The content that is not thinking: what a tool result has to dominate."""
        return self.chars - self.thinking_chars

    @property
    def clean(self) -> bool:
        """Growing, uncompacted and big enough to measure a ratio on."""
        return self.cleared_at is None and self.delta > 0 and self.shown_chars > CALIBRATION_MIN_CHARS

    @property
    def fully_shown(self) -> bool:
        """Growing, uncompacted, with tool results, and no thinking, which may hold more than it shows."""
        return self.cleared_at is None and self.delta > 0 and bool(self.results) and self.thinking_blocks == 0

    @property
    def explained(self) -> bool:
        """Every block's content is in the transcript, or what its thinking hid is told by the declared output."""
        return self.hiding_blocks == 0 or self.hidden > 0

    @property
    def tool_dominated(self) -> bool:
        return self.tool_chars >= CALIBRATION_TOOL_SHARE * self.shown_chars

    @property
    def result_frame(self) -> int:
        frames = 0
        for _, _, frame in self.results:
            frames += frame
        return frames

    def family_share(self) -> tuple[str, int, int] | None:
        """The family holding ≥ DISPERSION_RESULT_SHARE of the gap's shown content, its characters and framing."""
        if len(self.results) == 1:  # the common case: the gap's one result is its family's whole share
            fam, chars, frame = self.results[0]
            return (fam, chars, frame) if chars >= DISPERSION_RESULT_SHARE * self.shown_chars else None
        by_family: dict[str, tuple[int, int]] = {}
        for fam, chars, frame in self.results:
            had_chars, had_frame = by_family.get(fam, (0, 0))
            by_family[fam] = (had_chars + chars, had_frame + frame)
        if not by_family:
            return None
        fam, (chars, frame) = max(by_family.items(), key=lambda item: item[1][0])
        return (fam, chars, frame) if chars >= DISPERSION_RESULT_SHARE * self.shown_chars else None


@dataclass
class _Pricing:
    """Tokens of a result: its content at its family's ratio (or the run's), its framing at the framing density."""

    chars_per_token: float
    calibration: str
    framing: float = 0.0  # tokens per framing character of a result: 0 where no small gap measures it
    framing_calibration: str = DEFAULT
    family_ratio: dict[str, float] = field(default_factory=dict)
    implausible: float | None = None  # the ratio measured, where no tokenizer produces it (_sane)
    denser: dict[str, float] = field(default_factory=dict)  # each family's growth beyond the others' terms (_pooled)

    @property
    def rest_framing(self) -> float:
        """Tokens per framing character of the rest of a gap: measured, or else at the one ratio."""
        return self.framing if self.framing_calibration == MEASURED else 1 / self.chars_per_token

    def tokens(self, fam: str, chars: int, frame: int) -> float:
        return chars / self.family_ratio.get(fam, self.chars_per_token) + frame * self.framing

    def rest(self, gap: _Gap) -> float:
        """Everything of the gap that is not a tool result (prose, calls, framing) at the run's terms, its visible
        thinking at its own ratio."""
        prose = gap.chars - gap.tool_chars - gap.thinking_chars
        thinking = gap.thinking_tokens + gap.returned
        return prose / self.chars_per_token + thinking + (gap.frame - gap.result_frame) * self.rest_framing


@dataclass
class _Resident:
    family: str
    tokens: float
    chars: float
    uuid: str = ""


def occupancy(
    session: Session, tool: RetrievalTool, window: int = WINDOW_TOKENS, by_request: bool = False
) -> Occupancy:
    """Residual context occupancy of the session's main thread at its last request (``by_request``: and at each
    request before it, in :attr:`Occupancy.by_request`)."""
    ctxs, gaps, compactions = _gaps(session, tool)
    simple = _simple(gaps)
    thinking_ratio, thinking_measured = _declared_output(session, gaps)
    _returning(gaps)
    pricing = _calibrate(gaps)
    if pricing.calibration == MEASURED and any(g.hidden for g in gaps):
        # The declared output's structure is the prompt's kind of framing: at the density the small gaps measured, or
        # where none does at the run's ratio as the rest of a gap's framing is, not the stand-in's, what the thinking
        # hid is told again (the tokenizer decides how dense JSON is).
        for gap in gaps:
            gap.hidden = 0.0
            gap.measured = False
        thinking_ratio, thinking_measured = _declared_output(session, gaps, pricing.rest_framing)
        _returning(gaps)
        pricing = _calibrate(gaps)
    if any(g.returned and not g.measured for g in gaps):
        for gap in gaps:
            # Net of the thinking, such a gap does not read like the others, nor does its growth hold the thinking
            # with the rest at the run's terms: the thinking did not come back there. (A small result beside much
            # thinking reads unlike the others by the thinking's noise alone.)
            back = gap.measured or _holds(gap, pricing)
            gap.returned = gap.returned if back else 0.0
            gap.returned_hidden = gap.returned_hidden if back else 0.0
            gap.measured = False
        pricing = _calibrate(gaps)
    pricing = _sane(pricing, gaps, simple)
    out = Occupancy(
        ctx_final=ctxs[-1] if ctxs else 0,
        ctx_base=ctxs[0] if ctxs else 0,
        chars_per_token=pricing.chars_per_token,
        calibration=pricing.calibration,
        dispersion=_dispersion(gaps, pricing),
        thinking_chars_per_token=thinking_ratio,
        framing_tokens_per_char=pricing.framing,
        framing=pricing.framing_calibration,
        family_chars_per_token=dict(pricing.family_ratio),
        implausible_chars_per_token=pricing.implausible,
        denser={fam: round(tokens) for fam, tokens in pricing.denser.items()},
        unseen_suffix_chars=len(session.result_suffix),
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
    # Growth no visible content explains, still in the window: (tokens, in a gap with thinking, beside results whose
    # family read as growth), since the last compaction (its summary replaces it).
    unexplained: list[tuple[float, bool, bool]] = []
    thinking: list[tuple[float, bool, bool]] = []  # visible thinking still in the window, priced, since then

    ratio_of, ratio, framing = pricing.family_ratio.get, pricing.chars_per_token, pricing.framing

    def append(gap: _Gap, start: int, end: int | None = None, scale: float = 1.0) -> float:
        tokens = 0.0
        for (fam, chars, frame), uuid in zip(gap.results[start:end], gap.uuids[start:end], strict=True):
            priced = (chars / ratio_of(fam, ratio) + frame * framing) * scale  # pricing.tokens, inlined: hot loop
            tokens += priced
            contributed[fam] += priced
            out.contributed_chars[fam] += chars
            out.contributed_results[fam] += 1
            resident.append(_Resident(fam, priced, chars, uuid))
        return tokens

    for number, gap in enumerate(gaps):
        if by_request:
            out.by_request.append(_resident_at(resident, ctxs[number]))
        if gap.clearings:
            # The summary replaces everything before the boundary but what it keeps, this gap's earlier results too;
            # the gap's growth mixes the summary with the shedding, so it says nothing more.
            start = 0
            restorable: list[_Resident] = []  # Read results the last boundary evicted: the CLI may restore them
            for index, kept in gap.clearings:
                append(gap, start, index)
                start = index
                restorable = []
                evicted += _compact(resident, kept, restorable)
                unexplained.clear()
                thinking.clear()
            append(gap, start)
            restored = sum(r.tokens for r in restorable if r.family == "read")
            for r, tokens in _measure_kept(gap, resident, ctxs[number + 1] - ctxs[0], pricing, restored):
                contributed[r.family] += tokens - r.tokens
                r.tokens = tokens
            continue
        tool_tokens = append(gap, 0, scale=_measured_scale(gap, pricing, thinking_measured))
        shortfall = tool_tokens - gap.delta
        if shortfall > max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * tool_tokens):
            # What the transcript never showed leaves first (the CLI drops earlier turns' thinking when it resumes a
            # session): only a shrink beyond it sheds results, those that were there before this gap.
            shed = _drop_unexplained(thinking, _drop_unexplained(unexplained, shortfall))
            left_out = _evict_oldest(resident, shed, len(gap.results))
            evicted += left_out
            if shed - left_out > 0 and tool_tokens > 0:
                # Nothing was there before to shed: the gap's own results cost at most what it grew.
                _shrink_last(resident, contributed, len(gap.results), min(1.0, (shed - left_out) / tool_tokens))
            continue
        # Thinking the gap shows may leave again without a trace (the CLI drops earlier turns' thinking when it
        # resumes a session); growth beyond what the gap shows is neither a result's cost nor, by its absence, an
        # eviction.
        if gap.thinking_chars:
            thinking.append((gap.thinking_tokens, True, False))
        if gap.returned:
            thinking.append((gap.returned, True, False))
        excess = gap.delta - tool_tokens - pricing.rest(gap) + gap.returned_hidden  # hidden, come back: not shown
        if gap.results and excess > max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * gap.delta):
            unexplained.append((excess, gap.thinking_blocks > 0, gap.beside))
    if by_request and ctxs:
        out.by_request.append(_resident_at(resident, ctxs[-1]))

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
    out.unexplained = round(sum(tokens for tokens, *_ in unexplained))
    out.unexplained_thinking = round(sum(tokens for tokens, thinking, _ in unexplained if thinking))
    out.unexplained_beside = round(sum(tokens for tokens, _, beside in unexplained if beside))
    _cross_check(out, simple)
    return out


def _cross_check(out: Occupancy, simple: SimpleEstimate) -> None:
    """Hold the residual against the simple estimate's, where its ratio was measured: past the larger error bar (and
    CROSS_CHECK_MIN_SHARE, and the eviction floor), say so in :attr:`Occupancy.cross_check`."""
    out.simple_chars_per_token = round(simple.chars_per_token, 3)
    out.simple_residual = sum(simple.residual.values())
    refined = sum(out.residual.values())
    bar = max(out.dispersion or 0.0, simple.dispersion or 0.0, CROSS_CHECK_MIN_SHARE)
    off = refined - out.simple_residual
    # A simple estimate whose ratio no clean gap measured checks nothing.
    beyond = abs(off) > max(EVICTION_FLOOR_TOKENS, bar * max(refined, out.simple_residual))
    if simple.calibration == MEASURED and beyond:
        out.cross_check = (
            f"residual {refined:,} tok vs the simple estimate's {out.simple_residual:,} "
            f"({simple.chars_per_token:.2f} chars/tok): {off:+,} tok, beyond ±{bar:.0%}"
        )


def _gaps(session: Session, tool: RetrievalTool) -> tuple[list[int], list[_Gap], int]:
    """The main thread's measured prompt sizes, the gaps between them, and its compaction count.

    A message without usage (or with an empty one, as synthetic error messages have) is not a
    measurement point; its output still lands in the gap it was written in.
    """
    names = {call.id: call.name for call in session.calls}
    call_chars = {call.id: call.input_chars for call in session.calls}
    ctxs: list[int] = []
    gaps: list[_Gap] = []
    gap = _Gap()
    compactions = 0
    in_user_message = False  # the user items after an assistant message travel as one message
    suffix = session.result_suffix
    last_result: tuple[_Gap, int] | None = None  # the current user message's last result: the suffix rides on it
    for item in session.timeline:
        if item.thread != MAIN:
            continue
        if isinstance(item, Message):
            if suffix and last_result is not None:
                _append_unseen(*last_result, suffix)
            last_result = None
            ctx = item.usage.ctx if item.usage is not None else 0
            if ctx > 0:
                if ctxs:
                    gap.delta = ctx - ctxs[-1]
                    gaps.append(gap)
                ctxs.append(ctx)
                seen = 0 if gap.clearings else gap.before + gap.chars
                gap = _Gap(before=seen)
            in_user_message = False
            gap.chars += item.output_chars
            gap.frame += _message_frame(item)
            for block in item.blocks:
                kind = block.get("type")
                if kind == "thinking":
                    shown = len(block.get("thinking") or "")
                    gap.thinking_chars += shown
                    gap.hiding_blocks += shown < VISIBLE_THINKING_MIN_CHARS
                elif kind == "redacted_thinking":
                    gap.hiding_blocks += 1
                gap.thinking_blocks += kind in THINKING_BLOCKS
            if gap.hiding_blocks:
                gap.hiding_segment = item.segment
        elif isinstance(item, ToolResult):
            # A result without its call still occupies the window; it is charged to "other".
            frame = RESULT_FRAME_CHARS + len(item.call_id) + (ERROR_FRAME_CHARS if item.is_error else 0)
            gap.results.append((family(names.get(item.call_id, ""), tool), item.chars, frame))
            last_result = (gap, len(gap.results) - 1)
            gap.uuids.append(item.uuid)
            gap.texts.append(item.text)
            call_frame = MESSAGE_FRAME_CHARS + CALL_FRAME_CHARS + len(item.call_id)
            gap.calls.append((call_chars.get(item.call_id, 0), call_frame))
            gap.chars += item.chars
            gap.frame += frame + (0 if in_user_message else MESSAGE_FRAME_CHARS)
            in_user_message = True
            gap.tool_chars += item.chars
        elif isinstance(item, UserText):
            gap.chars += item.chars
            gap.frame += BLOCK_FRAME_CHARS + (0 if in_user_message else MESSAGE_FRAME_CHARS)
            in_user_message = True
        elif isinstance(item, Compaction):
            compactions += 1
            gap.clearings.append((len(gap.results), item.preserved))
            gap.at_last_boundary = (gap.chars - gap.tool_chars, gap.frame - gap.result_frame)
    return ctxs, gaps, compactions


def _append_unseen(gap: _Gap, index: int, suffix: str) -> None:
    """What the CLI appends to a result that the transcript does not show (:attr:`Session.result_suffix`), counted
    in that result: the model read it there. (Its pieces are its result's, by characters: :func:`_pieces`.)"""
    fam, chars, frame = gap.results[index]
    gap.results[index] = (fam, chars + len(suffix), frame)
    gap.chars += len(suffix)
    gap.tool_chars += len(suffix)


def _message_frame(message: Message) -> int:
    """An assistant message's framing characters: its wrapping, each block's, and each call's with its id."""
    frame = MESSAGE_FRAME_CHARS + BLOCK_FRAME_CHARS * len(message.blocks)
    for call in message.calls:
        frame += CALL_FRAME_CHARS + len(call.id)
    return frame


def _declared_output(
    session: Session, gaps: list[_Gap], framing: float = OUTPUT_FRAMING_TOKENS_PER_CHAR
) -> tuple[float, bool]:
    """What a stream-json segment's ``result`` declares, its output tokens (every request's summed, thinking the model
    did not stream included), tells of its thinking; a subagent's output or a compaction's summary would be in the sum
    too, so such a segment tells nothing. Where one gap of the segment holds thinking that may hide, the sum less what
    the messages show is what it hid (``_Gap.hidden``). Where none does, the sum less the rest of what they show is
    what their visible thinking cost: the chars/token of visible thinking, pooled over such segments (prose's where
    none measures it, or it comes out beyond SHED_FACTOR of prose's). Each gap's ``thinking_tokens`` is priced at it.
    That ratio, and whether the declared output measured it."""
    declared = {r.segment: r.output_tokens for r in session.results if r.output_tokens}
    main_only = {r.segment for r in session.results if r.main_output_only}
    shown = dict.fromkeys(declared, 0.0)  # what the segment's messages show, their thinking at prose's ratio
    thinking = dict.fromkeys(declared, 0)  # of which, visible thinking's characters
    hiding: set[int] = set()
    segment = 0
    for item in session.timeline:
        if isinstance(item, Message):
            segment = item.segment
            if segment not in declared:
                continue
            if item.thread != MAIN:  # a subagent's output is in the sum, unless the segment's declares the main's alone
                if segment not in main_only:
                    del declared[segment]
                continue
            shown[segment] += item.output_chars / PROSE_CHARS_PER_TOKEN + _message_frame(item) * framing
            for block in item.blocks:
                if block.get("type") == "thinking":
                    visible = len(block.get("thinking") or "")
                    thinking[segment] += visible
                    if visible < VISIBLE_THINKING_MIN_CHARS:
                        hiding.add(segment)
                elif block.get("type") == "redacted_thinking":
                    hiding.add(segment)
        elif isinstance(item, Compaction):
            declared.pop(segment, None)  # so may the summary's be
    chars = tokens = 0.0
    for segment, output in declared.items():
        if segment in hiding:
            gaps_hiding = [g for g in gaps if g.hiding_segment == segment]
            if len(gaps_hiding) == 1 and gaps_hiding[0].results:
                gaps_hiding[0].hidden = max(0.0, output - shown[segment])
        elif thinking[segment] >= VISIBLE_THINKING_MIN_CHARS:
            chars += thinking[segment]
            tokens += output - shown[segment] + thinking[segment] / PROSE_CHARS_PER_TOKEN
    ratio = chars / tokens if tokens > 0 else PROSE_CHARS_PER_TOKEN
    measured = tokens > 0 and PROSE_CHARS_PER_TOKEN / SHED_FACTOR <= ratio <= PROSE_CHARS_PER_TOKEN * SHED_FACTOR
    ratio = ratio if measured else PROSE_CHARS_PER_TOKEN
    for g in gaps:
        g.thinking_tokens = g.thinking_chars / ratio
    return ratio, measured


def _returning(gaps: list[_Gap]) -> None:
    """Visible thinking that leaves and comes back: on ``--resume`` Claude Code 2.1.332 leaves the earlier turns'
    thinking out of the new turn's first request and sends it again from the next one on. A gap with no result that
    shrinks by at least 1/SHED_FACTOR of the visible thinking still resident took all of it out; the next gap that grows
    is given it as ``returned`` (at the price it had). The calibration decides: the gap prices its results net of it
    only where, net of it, it reads like the run's other gaps (``occupancy`` clears it elsewhere and calibrates
    again)."""
    resident = left = hidden = left_hidden = 0.0
    for g in gaps:
        if g.clearings:  # a compaction's summary replaces it
            resident = left = hidden = left_hidden = 0.0
        elif g.delta < 0 and not g.results and resident and -g.delta >= resident / SHED_FACTOR:
            left, resident, left_hidden, hidden = left + resident, 0.0, left_hidden + hidden, 0.0
        elif g.delta > 0:
            g.returned, g.returned_hidden, left, left_hidden = left, left_hidden, 0.0, 0.0
            # Thinking the declared output told was hidden leaves and comes back alike.
            resident += g.thinking_tokens + g.returned + g.hidden
            hidden += g.hidden + g.returned_hidden


def _calibrate(gaps: list[_Gap]) -> _Pricing:
    """chars/token, pooled over the clean tool-dominated gaps that show all they hold, the shed and the unexplained
    ones dropped; then the framing density and the family ratios where the gaps measure them. Where every clean gap
    holds thinking that may hide growth, the least dense of them bounds it (see the module docstring)."""
    for g in gaps:
        g.beside = False
    candidates = [g for g in gaps if g.clean and g.tool_dominated]
    clean = [g for g in candidates if g.explained]
    if candidates and not clean:
        return _Pricing(_envelope(candidates), BOUND)
    if clean:
        small = [g for g in gaps if g.fully_shown and g.chars <= CALIBRATION_MIN_CHARS]
        ratio, kept = _pooled(clean, None)
        framing, measured = 0.0, DEFAULT
        for _ in range(CALIBRATION_ROUNDS if small else 0):
            densities = sorted((g.delta - g.chars / ratio) / g.frame for g in small)
            density = densities[(len(densities) - 1) // 2]
            pooled = _pooled(clean, density) if 0 < density <= MAX_FRAMING_TOKENS_PER_CHAR else None
            if pooled is None:  # not structure: hidden content, or shedding; every character at the one ratio
                ratio, kept = _pooled(clean, None)
                framing, measured = 0.0, DEFAULT
                break
            settled = abs(density - framing) < SETTLED_DENSITY
            (ratio, kept), framing, measured = pooled, density, MEASURED
            if settled:
                break
        # On the run's final terms: framing counted as characters makes a gap of small results read dense.
        denser: dict[str, float] = {}
        ratio, kept = _pooled(clean, framing if measured == MEASURED else None, denser)
        for g in kept:
            g.measured = True
        pricing = _Pricing(ratio, MEASURED, framing, measured, denser=denser)
        pricing.family_ratio = _family_ratios(kept, pricing)
        if measured == MEASURED:
            pricing.family_ratio |= _small_family_ratios(small, pricing)
        return pricing
    # Not over a gap with thinking: its growth may be what it does not show, which no ratio of what it shows prices.
    growing = [g for g in gaps if g.cleared_at is None and g.delta > 0 and g.chars > 0 and not g.thinking_blocks]
    if growing:
        return _Pricing(sum(g.chars for g in growing) / sum(g.delta for g in growing), ALL_GAPS, 0.0)
    return _Pricing(DEFAULT_CHARS_PER_TOKEN, DEFAULT, 0.0)


def _sane(pricing: _Pricing, gaps: list[_Gap], simple: SimpleEstimate) -> _Pricing:
    """A ratio no tokenizer produces is never used: growth the transcript does not show (or shedding) made it. Then
    no gap measures its results, every result is priced at the simple estimate's ratio (or the default), and the
    calibration says what was measured (``implausible``); a family's implausible ratio is dropped."""
    pricing.family_ratio = {f: r for f, r in pricing.family_ratio.items() if plausible(r)}
    if plausible(pricing.chars_per_token):
        return pricing
    for g in gaps:
        g.measured = False
    return _Pricing(simple.chars_per_token, IMPLAUSIBLE, implausible=pricing.chars_per_token)


def _holds(gap: _Gap, pricing: _Pricing) -> bool:
    """The gap grew by what it shows, its results and the thinking it was given back at the run's terms, within the
    eviction tolerance."""
    priced = sum(pricing.tokens(fam, chars, frame) for fam, chars, frame in gap.results)
    off = gap.delta - gap.hidden - pricing.rest(gap) - priced
    return gap.cleared_at is None and abs(off) <= max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * gap.delta)


def _net(g: _Gap, framing: float | None) -> float:
    """The growth of a gap's shown content: less its visible thinking at the prose ratio, the thinking it hid (where
    told), and its framing at ``framing`` tokens a character (``None``: framing characters are characters like any,
    at the one ratio)."""
    net = g.delta if framing is None else g.delta - framing * g.frame
    net = net - g.hidden if g.hidden else net
    net = net - g.returned if g.returned else net
    return net - g.thinking_tokens if g.thinking_chars else net


def _pooled(
    clean: list[_Gap], framing: float | None, denser: dict[str, float] | None = None
) -> tuple[float, list[_Gap]]:
    """The content's ratio pooled over the clean gaps net of their framing (``None``: framing characters are
    characters like any, at the one ratio) and of their visible thinking, and the gaps it was pooled over (where
    ``denser`` is given: not those whose family reads as growth beside their results, and ``denser`` gets each
    family's growth beyond the other families' terms, :func:`_beside_growth`)."""
    usable = [(g, g.shown_chars, net) for g in clean if (net := _net(g, framing)) > 0]
    if not usable:  # the framing leaves no gap any growth: it cannot be right
        return _pooled(clean, None, denser) if framing is not None else (DEFAULT_CHARS_PER_TOKEN, [])
    # Shedding can only push a gap's chars/token up, so the lower median is the honest centre; growth the gap does
    # not show can only pull it down, so a gap far below it, beyond the ratios' own spread, is not calibrated on.
    ratios = sorted(chars / net for _, chars, net in usable)
    centre = ratios[(len(ratios) - 1) // 2]
    ceiling = SHED_FACTOR * centre
    floor = _unexplained_floor(ratios, centre)
    kept: list[_Gap] = []
    kept_chars = 0
    kept_nets = []  # summed by sum(), as floats always were (its rounding differs from a loop's on 3.12+)
    for g, chars, net in usable:
        # A gap reads thin past the ceiling when it shed content, and it can shed only what earlier gaps brought.
        unshed = chars / centre - net > g.before / centre
        if floor <= chars / net <= ceiling or (chars / net > ceiling and unshed):
            kept.append(g)
            kept_chars += chars
            kept_nets.append(net)
    if denser is not None:
        kept, kept_chars, kept_nets = _beside_growth(kept, kept_chars, kept_nets, denser)
    return kept_chars / sum(kept_nets), kept


def _beside_growth(
    kept: list[_Gap], kept_chars: int, kept_nets: list[float], denser: dict[str, float]
) -> tuple[list[_Gap], int, list[float]]:
    """Where the gaps of a family (the families their results are of) grew beyond their characters at the ratio of the
    run's gaps of other families by more than max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE of their growth), that
    growth is the family's own cost or growth beside its results that nothing shows; the data cannot tell
    (docs/metrics/occupancy.md, "Invisible growth"). Each family's share of it, by characters, goes to ``denser``: the
    error bar of its residual either way. Where the family also reads denser by more than GROWTH_FACTOR, by its
    characters and by its pieces (:func:`_denser_by_pieces`), its gaps are dropped: marked ``beside``, they measure
    nothing, their results are priced at the run's terms and the rest of their growth is unexplained.

    The other families' terms come from gaps that show what they grew: a gap whose hidden thinking the declared output
    told measures its results only as well as that telling, which is often many times their size."""
    families = [frozenset(fam for fam, _, _ in g.results) for g in kept]
    dropped: set[int] = set()
    for group in dict.fromkeys(families):  # in the order the gaps came: the bars' order, whatever the hash seed
        mine = [i for i in range(len(kept)) if families[i] == group]
        others = [j for j in range(len(kept)) if not families[j] & group and not kept[j].hidden]
        if not others:
            continue
        theirs = sum(kept[j].shown_chars for j in others) / sum(kept_nets[j] for j in others)
        chars, net = sum(kept[i].shown_chars for i in mine), sum(kept_nets[i] for i in mine)
        beyond = net - chars / theirs
        if beyond <= max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * net):  # the unexplained rule's tolerance
            continue
        by_family: dict[str, int] = {}
        for i in mine:
            for fam, fam_chars, _ in kept[i].results:
                by_family[fam] = by_family.get(fam, 0) + fam_chars
        group_chars = sum(by_family.values())
        for fam, fam_chars in by_family.items():
            denser[fam] = denser.get(fam, 0.0) + beyond * fam_chars / group_chars
        if chars / net * GROWTH_FACTOR < theirs and _denser_by_pieces(kept, kept_nets, mine, others):
            dropped.update(mine)
    if not dropped:
        return kept, kept_chars, kept_nets
    for i in dropped:
        kept[i].beside = True
    left = [i for i in range(len(kept)) if i not in dropped]
    return [kept[i] for i in left], sum(kept[i].shown_chars for i in left), [kept_nets[i] for i in left]


def _denser_by_pieces(kept: list[_Gap], kept_nets: list[float], mine: list[int], others: list[int]) -> bool:
    """The gaps ``mine`` grew by more than GROWTH_FACTOR times the ``others``' growth a piece of what they show
    (:func:`_pieces`; where a gap's results show no text, the characters alone decide): context beside results makes a
    family read denser by any weight of what it shows, a denser file by its characters only (source with short names,
    numbers, markup: more pieces a character; docs/metrics/occupancy.md, "Invisible growth")."""
    pieces = {i: _pieces(kept[i]) for i in (*mine, *others)}
    if None in pieces.values():
        return True
    density = sum(kept_nets[i] for i in mine) / sum(pieces[i] for i in mine)
    return density > GROWTH_FACTOR * sum(kept_nets[j] for j in others) / sum(pieces[j] for j in others)


def _pieces(gap: _Gap) -> float | None:
    """What the gap shows, counted in pieces (:data:`PIECE_RE`): its results' pieces, scaled to all it shows by
    characters; ``None`` where its results show no text."""
    text_chars = sum(len(t) for t in gap.texts)
    if not text_chars:
        return None
    return sum(count_pieces(t) for t in gap.texts) * gap.shown_chars / text_chars


def count_pieces(text: str) -> int:
    """How many :data:`PIECE_RE` matches ``text`` holds, by the classes' runs (bytes.translate and split run in C): a
    letter run is a piece, a digit run one per three digits, any other character one, a whitespace run one but a single
    space before something else (that piece's leading space)."""
    data = text.encode("ascii", "replace")  # any other character, one byte: a piece of its own, as the pattern has it
    letters = len(data.translate(_LETTERS).split())
    digits = sum((len(run) + 2) // 3 for run in data.translate(_DIGITS).split())
    other = len(data.translate(None, _NOT_OTHER))
    runs = data.translate(_SPACES).split()
    spaces = len(runs) - runs.count(b"s") + (data.endswith(b" ") and runs[-1] == b"s")
    return letters + digits + other + spaces


def _envelope(candidates: list[_Gap]) -> float:
    """Every clean gap holds thinking that may hide growth, which only makes a gap read denser: the least dense gap
    (of those not shed, within SHED_FACTOR of the lower median) bounds the ratio from below, and prices results at
    most at what their gaps grew."""
    ratios = sorted(g.shown_chars / net for g in candidates if (net := _net(g, None)) > 0)
    if not ratios:
        return DEFAULT_CHARS_PER_TOKEN
    ceiling = SHED_FACTOR * ratios[(len(ratios) - 1) // 2]
    return max(r for r in ratios if r <= ceiling)


def _unexplained_floor(ratios: list[float], centre: float) -> float:
    """The lowest ratio a gap can read at and still be explained by what it shows: below the centre by more than
    the ratios' robust spread (UNEXPLAINED_MADS scaled MADs) and by more than SHED_FACTOR."""
    deviations = sorted(abs(r - centre) for r in ratios)
    spread = MAD_SIGMA * deviations[(len(deviations) - 1) // 2]
    return min(centre / SHED_FACTOR, centre - UNEXPLAINED_MADS * spread)


def _drop_unexplained(unexplained: list[tuple[float, bool, bool]], tokens: float) -> float:
    """Take ``tokens`` of a shrink from growth that is not a result (unexplained, or thinking) still resident, oldest
    first; what is left of them."""
    while tokens > 0 and unexplained:
        grown, *kind = unexplained[0]
        if grown <= tokens:
            unexplained.pop(0)
            tokens -= grown
        else:
            unexplained[0] = (grown - tokens, *kind)
            tokens = 0
    return tokens


def _measure_kept(
    gap: _Gap, resident: deque[_Resident], growth: float, pricing: _Pricing, restored: float = 0.0
) -> list[tuple[_Resident, float]]:
    """The results of a boundary's gap that the boundary keeps, measured: the request after a compaction holds the
    session's context again (Claude Code 2.1.332 re-sends the first request's reminders, appended to the last message
    it keeps), the summary, the kept calls and the kept results. So its growth over the session's first request
    (``growth``), less what the gap shows after the boundary, the kept calls and the results already priced, is what
    this gap's kept results cost. Each with its measured price; none where the measure is beyond SHED_FACTOR of their
    prices (the first request was not the context's).

    Claude Code 2.1.332 can also restore the files whose Read results the boundary evicted (``restored``: their prices),
    appended to the last kept result, which no transcript shows: where the measure less them lies nearer the kept
    results' prices than the measure does, they were restored and are no part of it."""
    index, kept = gap.clearings[-1]
    mine = {uuid: i for i, uuid in enumerate(gap.uuids[:index]) if uuid and uuid in kept}
    here = [r for r in resident if r.uuid in mine]
    priced = sum(r.tokens for r in here)
    if priced <= 0:
        return []
    summary, frame = gap.after_boundary  # the summary is prose, the model's and the CLI's
    calls = 0
    for i in mine.values():
        calls += gap.calls[i][0]
        frame += gap.calls[i][1]
    rest = summary / PROSE_CHARS_PER_TOKEN + calls / pricing.chars_per_token + frame * pricing.rest_framing
    measured = growth - rest - sum(r.tokens for r in resident if r.uuid not in mine)
    if (
        restored
        and measured - restored > 0
        and abs(math.log((measured - restored) / priced)) < abs(math.log(max(measured, 1.0) / priced))
    ):
        measured -= restored
    # A bound prices results at most at what they cost (every measuring gap may hide growth): any measure below it
    # that some tokenizer could produce stands.
    low = sum(r.chars for r in here) / PLAUSIBLE_CHARS_PER_TOKEN[1] if pricing.calibration == BOUND else None
    if not (low or priced / SHED_FACTOR) <= measured <= priced * SHED_FACTOR:
        return []
    return [(r, r.tokens * measured / priced) for r in here]


def _compact(resident: deque[_Resident], kept: frozenset[str], left: list[_Resident] | None = None) -> float:
    """A compaction: every resident result leaves (into ``left``, where given) but those the boundary names as kept;
    the tokens that left."""
    evicted = 0.0
    for _ in range(len(resident)):
        r = resident.popleft()
        if r.uuid and r.uuid in kept:
            resident.append(r)
        else:
            evicted += r.tokens
            if left is not None:
                left.append(r)
    return evicted


def _family_ratios(kept: list[_Gap], pricing: _Pricing) -> dict[str, float]:
    """chars/token of each family that has gaps of its own: what is left of their growth once the rest of
    the gap (prose, framing) is priced at the run's terms, pooled; kept within SHED_FACTOR of the run's."""
    chars: dict[str, int] = {}
    tokens: dict[str, float] = {}
    for g in kept:
        share = g.family_share()
        if share is None:
            continue
        fam, fam_chars, fam_frame = share
        chars[fam] = chars.get(fam, 0) + fam_chars
        rest = (
            (g.shown_chars - fam_chars) / pricing.chars_per_token
            + g.thinking_tokens
            + g.returned
            + (g.frame - fam_frame) * pricing.rest_framing
        )
        tokens[fam] = tokens.get(fam, 0.0) + g.delta - g.hidden - rest - fam_frame * pricing.framing
    ratio = pricing.chars_per_token
    measured = {fam: chars[fam] / tokens[fam] for fam in chars if tokens[fam] > 0}
    return {fam: r for fam, r in measured.items() if ratio / SHED_FACTOR <= r <= ratio * SHED_FACTOR}


def _small_family_ratios(small: list[_Gap], pricing: _Pricing) -> dict[str, float]:
    """chars/token of "other" where no big gap measures it, on the small gaps whose results are all its: what is left
    of their growth once the rest (the call, prose, framing) is priced at the run's terms, pooled. "other" holds the
    agent's own tools (spawning and waiting for a subagent, a todo list): short JSON of ids and keys, far denser than
    the run's ratio (Codex's spawn_agent and wait_agent outputs)."""
    chars = 0
    tokens = 0.0
    for g in small:
        if "other" in pricing.family_ratio or not g.results or any(fam != "other" for fam, _, _ in g.results):
            continue
        fam_chars = sum(c for _, c, _ in g.results)
        rest = (g.shown_chars - fam_chars) / pricing.chars_per_token + (g.frame - g.result_frame) * pricing.rest_framing
        chars += fam_chars
        tokens += g.delta - rest - g.result_frame * pricing.framing
    ratio = chars / tokens if tokens > 0 and chars else 0.0
    return {"other": ratio} if plausible(ratio) else {}


def _measured_scale(gap: _Gap, pricing: _Pricing, thinking_measured: bool) -> float:
    """A gap the calibration kept as unshed measured its own results: its growth less the rest of it (prose,
    calls, framing) at the run's terms. The factor that brings the results' prices to that; 1 elsewhere.

    Where the gap also holds visible thinking (its own, or returned) at a ratio the declared output measured
    (``thinking_measured``), the segments' thinking is right in sum, not block by block: the gap's measure carries the
    error of its thinking's price, the results' price at the run's terms the ratio's. Two estimates of one figure,
    each off by about the same share of what it prices (a block's thinking and a file's content vary alike in
    chars/token), so weighted by the inverse of their variance the share cancels: the measure weighs as the results'
    price squared, the price as the thinking's squared. A result beside thinking far bigger than itself keeps about
    its price; beside a little, about its measure. Where the thinking's ratio is prose's, assumed, its error is the
    same in every gap and in the ratio pooled net of it: the two are not independent, and the measure stands."""
    if not gap.measured:
        return 1.0
    priced = sum(pricing.tokens(fam, chars, frame) for fam, chars, frame in gap.results)
    measured = gap.delta - gap.hidden - pricing.rest(gap)
    if priced <= 0 or measured <= 0:
        return 1.0
    thinking = gap.thinking_tokens + gap.returned
    if thinking and thinking_measured:
        measured = (measured * priced**2 + priced * thinking**2) / (priced**2 + thinking**2)
    return measured / priced


def _dispersion(gaps: list[_Gap], pricing: _Pricing) -> float | None:
    """Median relative error of the run-level pricing (ratio and framing) on gaps that are (almost) one tool
    result."""
    errors = sorted(
        abs(sum(chars / pricing.chars_per_token + frame * pricing.framing for _, chars, frame in g.results) - g.delta)
        / g.delta
        for g in gaps
        if g.clean
        and g.results
        and not g.thinking_blocks
        and max(chars for _, chars, _ in g.results) >= DISPERSION_RESULT_SHARE * g.chars
    )
    return errors[(len(errors) - 1) // 2] if errors else None


def _resident_at(resident: deque[_Resident], ctx: int) -> dict[str, int]:
    """One request of :attr:`Occupancy.by_request`: its prompt size and each family's resident tokens."""
    tokens = dict.fromkeys(FAMILIES, 0.0)
    for r in resident:
        tokens[r.family] += r.tokens
    return {"ctx": ctx, **{fam: round(value) for fam, value in tokens.items()}}


def _shrink_last(resident: deque[_Resident], contributed: dict[str, float], count: int, share: float) -> None:
    """The last ``count`` resident results, priced ``share`` lower (what they contributed too)."""
    for r in list(resident)[-count:]:
        contributed[r.family] -= r.tokens * share
        r.tokens *= 1 - share


def _evict_oldest(resident: deque[_Resident], tokens: float, appended: int = 0) -> float:
    """Drop ``tokens`` from the oldest resident results (micro-compaction sheds those first), never from the last
    ``appended``: the results of the gap that fell short came with it, and shedding takes what was there before."""
    evicted = 0.0
    while tokens > 0 and len(resident) > appended:
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


@dataclass
class SimpleEstimate:
    """The simple calibrated estimate (docs/metrics/occupancy.md, "Sanity"): one chars/token pooled over the clean gaps
    that are mostly tool result and hold no thinking (else over every growing gap without thinking), every result
    priced at it by its characters, compactions and micro-compaction as usual. ``dispersion``: its error bar, as
    :attr:`Occupancy.dispersion` is occupancy's."""

    chars_per_token: float
    calibration: str
    dispersion: float | None
    residual: dict[str, int]


def simple_estimate(session: Session, tool: RetrievalTool) -> SimpleEstimate:
    """The simple calibrated estimate of the session's main thread at its last request (see :class:`SimpleEstimate`)."""
    _, gaps, _ = _gaps(session, tool)
    return _simple(gaps)


def _simple(gaps: list[_Gap]) -> SimpleEstimate:
    clean = [g for g in gaps if g.clean and g.tool_dominated and not g.thinking_blocks]
    calibration = MEASURED if clean else ALL_GAPS
    clean = clean or [g for g in gaps if g.cleared_at is None and g.delta > 0 and g.chars and not g.thinking_blocks]
    grown = sum(g.delta for g in clean)
    ratio = sum(g.chars for g in clean) / grown if grown > 0 else 0.0
    if not plausible(ratio):
        ratio, calibration = DEFAULT_CHARS_PER_TOKEN, DEFAULT
    resident: deque[_Resident] = deque()
    for gap in gaps:
        start = 0
        for index, kept in gap.clearings:
            resident.extend(
                _Resident(f, c / ratio, c, u)
                for (f, c, _), u in zip(gap.results[start:index], gap.uuids[start:index], strict=True)
            )
            start = index
            _compact(resident, kept)
        appended = [
            _Resident(f, c / ratio, c, u) for (f, c, _), u in zip(gap.results[start:], gap.uuids[start:], strict=True)
        ]
        resident.extend(appended)
        shortfall = sum(r.tokens for r in appended) - gap.delta
        if not gap.clearings and shortfall > max(EVICTION_FLOOR_TOKENS, EVICTION_TOOL_SHARE * (shortfall + gap.delta)):
            _evict_oldest(resident, shortfall)
    left = dict.fromkeys(FAMILIES, 0.0)
    for r in resident:
        left[r.family] += r.tokens
    errors = sorted(
        abs(sum(chars for _, chars, _ in g.results) / ratio - g.delta) / g.delta
        for g in clean
        if g.results and max(chars for _, chars, _ in g.results) >= DISPERSION_RESULT_SHARE * g.chars
    )
    dispersion = errors[(len(errors) - 1) // 2] if errors else None
    return SimpleEstimate(ratio, calibration, dispersion, {f: round(t) for f, t in left.items()})


def plausible(chars_per_token: float) -> bool:
    """A chars/token some tokenizer produces on text a session holds (:data:`PLAUSIBLE_CHARS_PER_TOKEN`)."""
    low, high = PLAUSIBLE_CHARS_PER_TOKEN
    return low <= chars_per_token <= high
