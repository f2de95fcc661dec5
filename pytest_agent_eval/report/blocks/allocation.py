"""The explore-allocation block, as every run prints it.

Per call as well as pooled: a run-level number hides the shape that matters most, call 1 on
target and call 3 pure noise. ``--envelope`` adds how each response was divided across files.
"""

from __future__ import annotations

from pytest_agent_eval.metrics.allocation import Allocation, FileUse

_QUERY_WIDTH = 46  # as the sufficiency block cuts queries


def render_allocation(a: Allocation, envelope: bool = False, indent: str = "") -> str:
    efficiency = a.efficiency
    if efficiency is None:
        return f"{indent}Explore allocation: no {a.explore} responses with file sections"
    envelope_chars = a.envelope_chars  # a sum over every section, which each file line divides by: summed once
    rows = a.by_file()
    used_files = sum(1 for f in rows if f.via)
    lines = [
        f"{indent}Explore allocation — share of returned bytes the answer used "
        f"({_plural(len(a.calls), 'call')}, {_plural(len(rows), 'file')}):",
    ]
    if a.answer_source == "globs":
        cited = f"{used_files}/{len(rows)} files in the --answer set"
    else:
        cited = f"{used_files}/{len(rows)} files cited; path-cited alone {_pct(a.path_efficiency)}"
    lines.append(
        f"{indent}  efficiency {_pct(efficiency):>6}  {a.used_chars:,} of {envelope_chars:,} chars   ({cited})"
    )
    if a.answer_source == "none":
        lines.append(f"{indent}  !! no final answer text found — efficiency is not meaningful for this run")
    for c in a.calls:
        lines.append(
            f"{indent}  call {c.index}: {_pct(c.efficiency):>6}  {c.used_chars:,}/{c.envelope_chars:,} chars"
            f"  {c.used_files}/{c.files} files"
        )
    lines += [_file_line(f, envelope_chars, indent + "  ") for f in rows]
    if envelope:
        for c in a.calls:
            sections = [f for f in a.files if f.call == c.index]
            query = c.query if len(c.query) <= _QUERY_WIDTH else c.query[: _QUERY_WIDTH - 1] + "…"
            lines.append(
                f'{indent}  envelope of call {c.index} "{query}": {c.envelope_chars:,} chars, '
                f"{_plural(len(sections), 'file')}"
            )
            lines += [_file_line(f, c.envelope_chars, indent + "    ", why=False) for f in sections]
    return "\n".join(lines)


def _file_line(f: FileUse, total: int, indent: str, why: bool = True) -> str:
    line = f"{indent}{'*' if f.via else ' '} {_pct(f.chars / total):>6} {f.chars:>6}  {f.path}"
    if not why:
        return line
    channel = f"symbol `{f.symbol}`" if f.via == "symbol" else f.via or "—"
    return f"{line}  {channel}"


def _pct(fraction: float | None) -> str:
    return "—" if fraction is None else f"{fraction * 100:.1f}%"


def _plural(n: int, one: str) -> str:
    return f"{n} {one if n == 1 else one + 's'}"
