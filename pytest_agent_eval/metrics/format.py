"""How a number prints: one formatter per unit, used by the gates' messages, the terminal, the HTML and compare.

Tokens print to one decimal of a thousand, truncated (``54,950`` → ``54.9k``), durations as ``3m 05s``, shares
as ``27.5%``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_agent_eval.metrics.figures import COUNT, SECONDS, SHARE, TOKENS, USD, lookup

Formatter = Callable[[float], str]


def percent(value: float) -> str:
    """A share: ``0.549`` → ``54.9%``."""
    return f"{value:.1%}"


def tokens(value: float) -> str:
    """A token count as every table prints it: ``54950`` → ``54.9k``, ``1_250_000`` → ``1.2M``."""
    if abs(value) >= 1_000_000:
        return f"{_floor1(value / 1_000_000)}M"
    if abs(value) >= 1000:
        return f"{_floor1(value / 1000)}k"
    return f"{value:.0f}"


def seconds(value: float) -> str:
    """``12.34`` → ``12.3s``; a minute or more → ``3m 05s``."""
    if round(value, 1) < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m {rest:02d}s"


def dollars(value: float) -> str:
    return f"${value:.2f}"


def number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


FORMATTERS: dict[str, Formatter] = {
    "percent": percent,
    "tokens": tokens,
    "seconds": seconds,
    "dollars": dollars,
    "number": number,
}
BY_UNIT: dict[str, Formatter] = {SHARE: percent, TOKENS: tokens, SECONDS: seconds, USD: dollars, COUNT: number}


def _floor1(value: float) -> str:
    # Truncate rather than round, so 54,950 reads 54.9k and never rounds up past what was measured.
    sign = "-" if value < 0 else ""
    return f"{sign}{math.floor(abs(value) * 10 + 1e-9) / 10:.1f}"


def formatter(figure: str) -> Formatter:
    """How the named figure prints (a name not in the catalogue prints as a plain number)."""
    found = lookup(figure)
    return BY_UNIT[found.unit] if found is not None else number


def show(figure: str, value: float | None) -> str:
    return "n/a" if value is None else formatter(figure)(value)


def signed(value: float, fmt: Formatter) -> str:
    """``+1.2k`` / ``−300``: the sign always shown, a true minus sign for a drop (a drop too small to show is
    ``+0.0s``, never ``−0.0s``)."""
    shown = fmt(abs(value))
    return f"−{shown}" if value < 0 and shown != fmt(0.0) else f"+{shown}"


def median_range(values: Sequence[float | None], fmt: Formatter | str = number) -> str:
    """``median [min–max]`` over the values present; one value shows alone, none shows ``n/a``."""
    show_one = FORMATTERS[fmt] if isinstance(fmt, str) else fmt
    present = [v for v in values if v is not None]
    if not present:
        return "n/a"
    middle = show_one(statistics.median(present))
    if len(present) == 1:
        return middle
    return f"{middle} [{show_one(min(present))}–{show_one(max(present))}]"


def change(value: float | None) -> str:
    """A relative change: ``+88%``; nothing when there is none."""
    return f"{value:+.0%}" if value is not None else ""


def direction(value: float) -> str:
    return "HIGHER" if value > 0 else "LOWER" if value < 0 else "UNCHANGED"


def stall_note(driver: Mapping[str, Any]) -> str:
    """``stalled: turn 1 silent 280.4s after user tool_result (threshold 30s)`` from a :meth:`RunRecord.to_dict`."""
    silences = driver.get("longest_silence_s") or []
    after = driver.get("silence_after") or []
    turns = [t for t in driver.get("stalled_turns") or [] if 0 < t <= len(silences)]
    what = ", ".join(
        f"turn {t} silent {silences[t - 1]:.1f}s" + (f" after {after[t - 1]}" if t <= len(after) else "") for t in turns
    )
    return f"stalled: {what} (threshold {driver.get('stall_s') or 0:g}s)"
