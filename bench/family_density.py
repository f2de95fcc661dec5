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

Then whether a lump per gap tells it where a density cannot: context beside results is about the same amount in every
gap, a denser family's excess grows with its results' characters. Per session and family (the families of a gap's
results), over the clean gaps occupancy's calibration kept, each gap's excess is its growth net of framing and thinking
less its characters at the ratio of the session's gaps of other families; ``excess = a + b × characters`` is fitted by
least squares where the family has gaps of two sizes or more and two gaps or more of other families stand beside them.
``a`` beyond EVICTION_FLOOR_TOKENS would be the lump. Its standard error takes each gap's noise from the other
families' gaps: their scatter about their own pooled ratio (σ, tokens per gap). ``truth``: what the server counted
beside the family's results, per gap. Last, per counting model, the context's family against the real ones (nothing
beside them): those whose lump is beyond the floor at as many σ, and how many of those whose gaps grew by more than
the floor beyond the other families' terms have too few gaps to fit at all (docs/metrics/occupancy.md, "What it
cannot see": it does not separate).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from occupancy_accuracy import corpora, first_segments
from tabulate import tabulate

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics import occupancy as occ
from pytest_agent_eval.metrics.occupancy import EVICTION_FLOOR_TOKENS, family
from pytest_agent_eval.metrics.truth import read_truth_log
from pytest_agent_eval.model.usage import declared_server_context
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN, Session, ToolResult, segment_files

MIN_CHARS = 300
_PIECES = occ.PIECE_RE


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


def kept_gaps(session: Session) -> tuple[list[occ._Gap], list[float]]:
    """The clean gaps occupancy's calibration kept (those whose family read as growth beside results too), and each
    one's growth net of its framing and thinking at the run's terms (occupancy's first calibration)."""
    _, gaps, _ = occ._gaps(session, CODEGRAPH)
    occ._declared_output(session, gaps)
    occ._returning(gaps)
    pricing = occ._calibrate(gaps)
    framing = pricing.framing if pricing.framing_calibration == occ.MEASURED else None
    kept = [g for g in gaps if g.measured or g.beside]
    return kept, [occ._net(g, framing) for g in kept]


def _fit(sizes: list[int], excesses: list[float]) -> tuple[float, float]:
    """Least squares ``excess = a + b × size``: (a, b)."""
    mean_size, mean_excess = sum(sizes) / len(sizes), sum(excesses) / len(excesses)
    spread = sum((x - mean_size) ** 2 for x in sizes)
    b = sum((x - mean_size) * (e - mean_excess) for x, e in zip(sizes, excesses, strict=True)) / spread
    return mean_excess - b * mean_size, b


@dataclass
class Lump:
    """One family of one session: its kept gaps' excess over the other families' terms, fitted against their sizes."""

    model: str
    session: str  # class/session
    family: str  # the families of its gaps' results, joined by "+"
    gaps: int
    apart: float  # the largest gap's characters over the smallest's
    excess: float  # per gap, tokens
    lump: float | None  # a, tokens per gap (None: one gap, or gaps of one size, or fewer than two of other families)
    error: float  # a's standard error, tokens
    truth: float  # what the server counted beside the family's results, per gap

    @property
    def sigmas(self) -> float:
        return self.lump / self.error if self.error else math.inf


def lumps() -> list[Lump]:
    """Every family of every session that has gaps of other families beside its own, fitted where it can be."""
    found = []
    for model, sessions, _ in corpora():
        for first in first_segments(sessions):
            session = read_segments(segment_files(first))
            call_ids = {r.uuid: r.call_id for r in session.timeline if isinstance(r, ToolResult) and r.thread == MAIN}
            kept, nets = kept_gaps(session)
            groups = [frozenset(fam for fam, _, _ in g.results) for g in kept]
            name = f"{first.relative_to(sessions).parts[0]}/{first.parent.name}"
            for group in set(groups):
                mine = [i for i, g in enumerate(groups) if g == group]
                others = [j for j, g in enumerate(groups) if not g & group]
                if not others:
                    continue
                sizes = [kept[i].shown_chars for i in mine]
                theirs = sum(kept[j].shown_chars for j in others) / sum(nets[j] for j in others)
                excesses = [nets[i] - sizes[k] / theirs for k, i in enumerate(mine)]
                truth = sum(
                    declared_server_context({"type": "tool_result", "tool_use_id": call_ids.get(uuid, "")})
                    for i in mine
                    for uuid in kept[i].uuids
                )
                row = Lump(model, name, "+".join(sorted(group)), len(mine), max(sizes) / min(sizes),
                           sum(excesses) / len(mine), None, 0.0, truth / len(mine))  # fmt: skip
                if len(others) >= 2 and len(set(sizes)) >= 2:
                    scatter = [nets[j] - kept[j].shown_chars / theirs for j in others]
                    sigma = math.sqrt(sum(e * e for e in scatter) / (len(others) - 1))
                    mean_size = sum(sizes) / len(sizes)
                    spread = sum((x - mean_size) ** 2 for x in sizes)
                    row.lump, _ = _fit(sizes, excesses)
                    row.error = sigma * math.sqrt(1 / len(sizes) + mean_size**2 / spread)
                found.append(row)
    return found


def as_the_rule_weighs() -> list[list[str]]:
    """Per counting model, occupancy's own view (:func:`~pytest_agent_eval.metrics.occupancy._beside_growth`): each
    family's kept gaps against the other families', denser by the lesser of the two weights it holds them to (the
    characters, and the pieces, :func:`~pytest_agent_eval.metrics.occupancy._pieces`); the densest real family, and the
    least dense family the growth context made denser. Families whose gaps hold thinking are left out of the real ones:
    a thinking block's price is their noise, not their content (the rule weighs them all the same)."""
    rows = []
    for model, sessions, _ in corpora():
        real: list[tuple[float, str]] = []
        growth: list[tuple[float, str]] = []
        for first in first_segments(sessions):
            session = read_segments(segment_files(first))
            kept, nets = kept_gaps(session)
            groups = [frozenset(fam for fam, _, _ in g.results) for g in kept]
            name = f"{first.relative_to(sessions).parts[0]}/{first.parent.name}"
            for group in dict.fromkeys(groups):
                mine = [i for i, g in enumerate(groups) if g == group]
                others = [j for j, g in enumerate(groups) if not g & group]
                pieces = {i: occ._pieces(kept[i]) for i in (*mine, *others)}
                if not others or None in pieces.values() or any(kept[i].hidden or kept[i].returned for i in mine):
                    continue
                chars = {i: kept[i].shown_chars for i in (*mine, *others)}
                denser = min(
                    sum(nets[i] for i in mine) / sum(weight[i] for i in mine)
                    / (sum(nets[j] for j in others) / sum(weight[j] for j in others))
                    for weight in (chars, pieces)
                )
                where = f"{name} {'+'.join(sorted(group))}"
                beside = any(
                    declared_server_context({"type": "tool_result", "tool_use_id": call_id})
                    for i in mine
                    for call_id in call_ids_of(session, kept[i])
                )
                if beside:
                    growth.append((denser, where))
                elif not any(kept[i].thinking_blocks for i in (*mine, *others)):
                    real.append((denser, where))
        (most, at), (least, grown) = max(real), min(growth)
        rows.append([model, f"{most:.2f}× ({at})", f"{least:.2f}× ({grown})", f"{occ.GROWTH_FACTOR}"])
    return rows


def call_ids_of(session: Session, gap: occ._Gap) -> list[str]:
    """The call ids of a gap's results."""
    by_uuid = {r.uuid: r.call_id for r in session.timeline if isinstance(r, ToolResult) and r.thread == MAIN}
    return [by_uuid.get(uuid, "") for uuid in gap.uuids]


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
    print()
    print("as occupancy's rule weighs them: kept gaps, denser by characters and by pieces (the lesser), no thinking")
    print(tabulate(as_the_rule_weighs(), headers=["model", "densest real family", "least dense growth family",
                                                   "GROWTH_FACTOR"]))  # fmt: skip
    print()
    every = sorted(lumps(), key=lambda r: (r.model, r.session, r.family))
    fitted = [r for r in every if r.lump is not None]
    table = [[r.model, r.session, r.family, r.gaps, f"{r.apart:.3f}", f"{r.excess:+,.0f}", f"{r.lump:+,.0f}",
              f"{r.error:,.0f}", f"{r.sigmas:+.1f}", f"{r.truth:,.0f}"] for r in fitted]  # fmt: skip
    headers = ["model", "session", "family", "gaps", "sizes apart", "excess/gap", "lump a", "± (1σ)", "a/σ", "truth"]
    print("a lump per gap (a) or a share per character? excess = a + b × characters over a family's kept gaps")
    print(tabulate(table, headers=headers, disable_numparse=True))
    print()
    verdict = []
    for model in sorted({r.model for r in every}):
        mine = [r for r in every if r.model == model]
        real = [r for r in fitted if r.model == model and not r.truth and r.lump > EVICTION_FLOOR_TOKENS]
        dense = [r for r in mine if not r.truth and r.excess > EVICTION_FLOOR_TOKENS]
        for r in (r for r in fitted if r.model == model and r.truth):
            as_sure = [
                f"{o.session} {o.family} {o.lump:+,.0f} ({o.sigmas:+.1f}σ)" for o in real if o.sigmas >= r.sigmas
            ]
            verdict.append([model, f"{r.session} {r.family}", f"{r.truth:,.0f}",
                            f"{r.lump:+,.0f} ± {r.error:,.0f} ({r.sigmas:+.1f}σ)", "; ".join(as_sure) or "none",
                            f"{sum(o.lump is None for o in dense)}/{len(dense)}"])  # fmt: skip
    floor = EVICTION_FLOOR_TOKENS
    headers = ["model", "context beside", "truth", "lump a", f"real families with a lump > {floor}, as sure",
               f"real families denser by > {floor}/gap, unfittable"]  # fmt: skip
    print(tabulate(verdict, headers=headers, disable_numparse=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
