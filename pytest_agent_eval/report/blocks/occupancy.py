"""The "Residual context occupancy at end of run" block printed under every arm (docs/metrics/occupancy.md)."""

from __future__ import annotations

from pytest_agent_eval.metrics.occupancy import ALL_GAPS, BOUND, DEFAULT, IMPLAUSIBLE, MEASURED, Occupancy
from pytest_agent_eval.tool import RetrievalTool

_CALIBRATION_LABELS = {
    MEASURED: "measured",
    ALL_GAPS: "fallback over all gaps (none tool-dominated)",
    BOUND: "bound (every measuring gap holds thinking)",
    DEFAULT: "default",
    IMPLAUSIBLE: "simple estimate's",
}
# Each built-in family's row label; "tool" is the retrieval tool's own name.
_FAMILY_LABELS = {"read": "Read", "search": "Grep/Glob", "bash": "Bash", "other": "other tools"}


def render_occupancy(o: Occupancy, tool: RetrievalTool) -> str:
    """The block, one row per family; shares are of the final context and of the nominal window."""
    win = f"{o.window / 1000:g}k"

    def pct(part: int, whole: int) -> str:
        return f"{part / whole * 100:.1f}%" if whole > 0 else "0.0%"

    def head(label: str, tokens: int) -> str:
        return f"  {label:<18}{f'{tokens:,} tok':>12}"

    def row(label: str, tokens: int, chars: int | None = None, results: int = 0) -> str:
        line = f"{head(label, tokens)}  {pct(tokens, o.ctx_final):>6} of ctx  {pct(tokens, o.window):>6} of {win} win"
        if chars is not None:
            line += f"   ({chars:,} chars, {results} result{'' if results == 1 else 's'})"
        return line

    def family_row(label: str, *families: str) -> str:
        tokens = chars = results = 0
        for f in families:  # one loop for the three sums (most rows have one family)
            tokens += o.residual[f]
            chars += o.residual_chars[f]
            results += o.residual_results[f]
        return row(label, tokens, chars, results)

    measure = f"  measure: {o.chars_per_token:.2f} chars/tok {_CALIBRATION_LABELS.get(o.calibration, o.calibration)}"
    if o.dispersion is not None:
        measure += f" ±{o.dispersion * 100:.1f}%"
    if o.implausible_chars_per_token is not None:  # never used silently: no tokenizer produces it
        measure += f" (the gaps measured {o.implausible_chars_per_token:.2f}, which no tokenizer produces)"
    measure += f" · turns {o.turns} · compactions {o.compactions}"
    if o.evicted > 0:
        measure += f" · evicted {o.evicted:,} tok"
    if o.unexplained > 0:  # growth no visible content explains: hidden thinking, CLI reminders; in base, not a result
        measure += f" · unexplained {o.unexplained:,} tok ({o.unexplained_thinking:,} with thinking)"
    if o.unexplained_beside > 0:  # beside results of a family read far denser: context, or theirs; it cannot tell
        measure += f", of which {o.unexplained_beside:,} beside results, theirs or not: ±{o.unexplained_beside:,}"
    if o.denser:  # growth beyond the other families' terms: the family's own cost, or context beside it; it cannot tell
        labels = {"tool": tool.name, **_FAMILY_LABELS}
        bars = ", ".join(f"{labels[fam]} ±{tokens:,} tok" for fam, tokens in o.denser.items())
        measure += f"\n  read denser than the other families, their own cost or context beside them: {bars}"
    if o.unseen_suffix_chars:  # in the results' characters above, though no transcript shows it
        measure += (
            f"\n  counted: {o.unseen_suffix_chars} chars the CLI appends unseen to each user message's last result"
            " (its tokens-left reminder)"
        )
    if o.cross_check:  # the refined pricing and the simple calibrated estimate disagree beyond their error bars
        measure += f"\n  cross-check: {o.cross_check}"
    return "\n".join(
        [
            "Residual context occupancy at end of run:",
            f"{head('final context', o.ctx_final)}  {pct(o.ctx_final, o.window):>6} of {win} window",
            family_row(tool.name, "tool"),
            family_row(_FAMILY_LABELS["read"], "read"),
            family_row(_FAMILY_LABELS["search"], "search"),
            family_row(_FAMILY_LABELS["bash"], "bash"),
            family_row("→ file-access", "read", "search", "bash"),
            family_row(_FAMILY_LABELS["other"], "other"),
            row("base (prompt+prose)", o.base),
            f"{head('  of which fixed', o.ctx_base)}  system + tool schemas + question, before any tool answered",
            measure,
        ]
    )
