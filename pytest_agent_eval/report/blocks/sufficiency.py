"""The explore-sufficiency block, as every run prints it.

The per-call lines matter as much as the counts: they name the query that fell short and the
file the agent read instead, which is usually enough to reproduce the miss.
"""

from __future__ import annotations

from pytest_agent_eval.metrics.sufficiency import BUCKETS, Sufficiency
from pytest_agent_eval.transcript import MAIN

_QUERY_WIDTH = 46


def render_sufficiency(s: Sufficiency, indent: str = "") -> str:
    answered = s.answered
    if not answered:
        line = f"{indent}Explore sufficiency: no answered {s.explore} calls"
        return line + (f" ({_plural(s.errors, 'errored/unanswered call')}, not bucketed)" if s.errors else "")
    lines = [f"{indent}Explore sufficiency — what the agent did NEXT ({_plural(answered, 'answered call')}):"]
    for key, label, meaning in BUCKETS:
        count = s.counts[key]
        percent = f"{int(100 * count / answered + 0.5)}%"  # half up, not Python's round-half-even
        lines.append(f"{indent}  {count:>3} {percent:>4}  {label:<31}{meaning}")
    for number, call in enumerate(s.calls, 1):
        query = call.query if len(call.query) <= _QUERY_WIDTH else call.query[: _QUERY_WIDTH - 1] + "…"
        where = " [subagent]" if call.thread != MAIN else ""
        files = _plural(call.files, "file")
        note = f" {call.note}" if call.note else ""
        lines.append(f'{indent}  {number}.{where} "{query}" [{files}] → {call.reaction}{note}')
    notes = []
    if s.concurrent:
        notes.append(f"{_plural(s.concurrent, 'concurrent file access', 'concurrent file accesses')} stepped over")
    if s.errors:
        notes.append(f"{_plural(s.errors, 'errored/unanswered call')} (not bucketed)")
    if notes:
        lines.append(f"{indent}  note: {' · '.join(notes)}")
    return "\n".join(lines)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
