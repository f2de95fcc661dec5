"""Terminal tables over the runs of a session, and the same figures as ``summary.json``.

Input is plain data — one record per item, as the plugin collects them on the controller — so the tables
read the same under xdist as in one process, and can be rebuilt from ``summary.json`` alone.

Small n is the rule here (runs make 1–5 explore calls), so every per-arm figure is shown as
``median [min–max]`` over runs, never as a single number; arms are compared run against run (the paired
difference of run k of each arm) with a bootstrap interval; and an arm with fewer than two runs says so.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import tabulate as tabulate_module
from tabulate import tabulate

from pytest_agent_eval.metrics.sufficiency import BUCKETS
from pytest_agent_eval.report.gates import describe_leak
from pytest_agent_eval.report.stats import bootstrap_ci, paired_differences, small_n_warning

MODEL_FREE_BACKENDS = ("scripted", "cassette")
_PRESERVE_PARAM = "preserve_whitespace" in inspect.signature(tabulate).parameters

Record = dict[str, Any]

# (label, figure, formatter) rows of the ARM COMPARISON, by section.
_SECTIONS: list[tuple[str, list[tuple[str, str, str]]]] = [
    (
        "behaviour",
        [
            ("duration", "duration_s", "duration"),
            ("tool calls", "tool_calls", "int"),
            ("Read", "read_calls", "int"),
            ("codegraph calls", "codegraph_calls", "int"),
            ("cost", "cost_usd", "usd"),
        ],
    ),
    (
        "occupancy (residual at end of run)",
        [
            ("final context", "ctx_final", "tok"),
            ("codegraph residual", "codegraph_residual", "tok"),
            ("file-access residual", "file_access_residual", "tok"),
            ("retrieval residual", "residual_tokens", "tok"),
            ("share of final context", "residual_share", "pct"),
            ("share of window", "window_share", "pct"),
            ("turns", "turns", "num"),
        ],
    ),
    (
        "sufficiency (what the agent did next)",
        [
            ("answered explore calls", "explore_calls", "int"),
            ("explore again", "explore_again_share", "pct"),
            ("Read a file we returned", "read_returned_share", "pct"),
            ("Read a file we did not return", "read_missed_share", "pct"),
            ("Grep/Glob", "search_share", "pct"),
            ("moved on / answered", "sufficient_share", "pct"),
            ("errored calls", "explore_errors", "int"),
        ],
    ),
    (
        "allocation (share of returned bytes the answer cited)",
        [
            ("efficiency per run", "allocation", "pct"),
            ("path-cited alone", "path_allocation", "pct"),
        ],
    ),
    (
        "contamination",
        [
            ("results carrying the tool's output", "leaks", "int"),
            ("CLI calls (command matcher)", "cli_calls", "int"),
            ("of those, denied by the hook", "cli_blocked", "int"),
        ],
    ),
]


# (label, figure, formatter) of the paired differences under each ARM COMPARISON.
_PAIRED: list[tuple[str, str, str]] = [
    ("retrieval residual", "residual_tokens", "tok"),
    ("final context", "ctx_final", "tok"),
    ("tokens processed", "tokens_processed", "tok"),
    ("tool calls", "tool_calls", "int"),
    ("duration", "duration_s", "sec"),
    ("cost", "cost_usd", "usd"),
]


def _scores(record: Record) -> dict[str, Any]:
    # Item records call it "scores"; summary.json files written before campaigns called it "score".
    return record.get("scores") or record.get("score") or {}


# -- formatting ------------------------------------------------------------------------------------------------
def fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "tok":
        return f"{value:,.0f}"
    if kind == "usd":
        return f"${value:.2f}"
    if kind == "duration":
        return duration(value)
    if kind == "sec":
        return f"{value:,.1f}s"
    if kind == "int":
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{value:g}"


def duration(seconds: float) -> str:
    seconds = round(seconds)
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m {rest}s" if minutes else f"{rest}s"


def kilo(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    return f"{value / 1000:.0f}k" if value >= 1000 else f"{value:.0f}"


def spread(values: Sequence[float | None], kind: str) -> str:
    """``median [min–max]`` over runs; a single run shows only its value."""
    present = [v for v in values if v is not None]
    if not present:
        return "n/a"
    middle = statistics.median(present)
    if len(present) == 1:
        return fmt(middle, kind)
    return f"{fmt(middle, kind)} [{fmt(min(present), kind)}–{fmt(max(present), kind)}]"


def _median(records: Iterable[Record], figure: str) -> float | None:
    values = [r["figures"].get(figure) for r in records]
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# -- header --------------------------------------------------------------------------------------------------
def header(records: Sequence[Record]) -> str:
    """Names the model backend; a model-free backend is said to measure the pipeline, not a model."""
    backends = {(r.get("backend") or {}).get("name", "?"): (r.get("backend") or {}) for r in records}
    lines = []
    for name, backend in sorted(backends.items()):
        description = backend.get("description") or name
        model = next((r.get("model") for r in records if (r.get("backend") or {}).get("name") == name), None)
        line = f"model backend: {description}"
        if model and name not in MODEL_FREE_BACKENDS:
            line += f" · model {model}"
        if name in MODEL_FREE_BACKENDS and "not a model" not in description:
            line += " — these figures measure the pipeline and the tool's responses, not a model"
        lines.append(line)
    return "\n".join(lines)


# -- per item ------------------------------------------------------------------------------------------------
def item_blocks(record: Record) -> str:
    title = f"── {record['id']} ({record.get('outcome', '?')}) "
    body = record.get("blocks") or record.get("infra_error") or ""
    failed = [g for g in record.get("gates") or [] if not g["passed"]]
    gates = "".join(f"\nGATE FAILED {g['gate']}: {g['message']}" for g in failed)
    return f"{title:─<100}\n{body.rstrip()}{gates}"


# -- arm comparison ------------------------------------------------------------------------------------------
def scored(records: Iterable[Record]) -> list[Record]:
    """Runs that produced a transcript worth reading (infrastructure errors have no figures)."""
    return [r for r in records if r.get("figures")]


def arm_labels(records: Iterable[Record]) -> list[str]:
    return list(dict.fromkeys(r["arm_label"] for r in records))


def arm_comparison(entry: str, records: Sequence[Record]) -> str:
    runs = scored(records)
    labels = arm_labels(records)
    by_arm = {label: [r for r in runs if r["arm_label"] == label] for label in labels}
    errors = {
        label: sum(1 for r in records if r["arm_label"] == label and r.get("outcome") == "error") for label in labels
    }
    head = ["", *(f"{label} (n={len(by_arm[label])})" for label in labels)]
    rows: list[list[str]] = []
    for title, section in _SECTIONS:
        rows.append([title, *[""] * len(labels)])
        for label, figure, kind in section:
            cells = [spread([r["figures"].get(figure) for r in by_arm[arm]], kind) for arm in labels]
            rows.append([f"  {label}", *cells])
        if title.startswith("allocation"):
            rows.append(["  pooled efficiency", *(_pooled_allocation(by_arm[arm]) for arm in labels)])
    if any(errors.values()):
        rows.append(["infrastructure errors (not scored)", *(str(errors[arm]) for arm in labels)])
    lines = [f"ARM COMPARISON — {entry}", _table(rows, head, "simple")]
    lines += contamination_lines(runs)
    lines += paired_lines(runs, labels)
    for label in labels:
        warning = small_n_warning(len(by_arm[label]))
        if warning:
            lines.append(f"warning: {entry} / {label}: {warning}")
    return "\n".join(lines)


def contamination_lines(runs: Sequence[Record]) -> list[str]:
    """Each contaminated without-arm run, with the first call that carried the tool's output to the agent."""
    lines = []
    for run in runs:
        if run["arm"] != "without" or not run.get("contaminated"):
            continue
        leaks = ((run.get("scores") or {}).get("contamination") or {}).get("leaks") or []
        line = f"CONTAMINATED {run.get('id', '?')}"
        if leaks:
            line += f": {describe_leak(leaks[0])}" + (f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else "")
        lines.append(line)
    return lines


def reference_arm(records: Sequence[Record], labels: Sequence[str]) -> str | None:
    """What the other arms are compared against: the first without-arm, else the last arm (the baseline build)."""
    if len(labels) < 2:
        return None
    without = next((r["arm_label"] for r in records if r["arm"] == "without" and r["arm_label"] in labels), None)
    return without or labels[-1]


def paired_lines(runs: Sequence[Record], labels: Sequence[str]) -> list[str]:
    """Each arm minus the reference, run k against run k: mean difference and its 95% bootstrap interval."""
    reference = reference_arm(runs, labels) if runs else None
    if reference is None:
        return []
    lines = []
    for label in (a for a in labels if a != reference):
        lines.append(f"paired {label} − {reference}, run against run: mean difference [95% bootstrap CI]")
        for title, figure, kind in _PAIRED:
            diffs = paired_differences(_by_run(runs, label, figure), _by_run(runs, reference, figure))
            if not diffs:
                continue
            mean = statistics.fmean(diffs)
            low, high = bootstrap_ci(diffs)
            text = f"{_signed(mean, kind)} [{_signed(low, kind)}, {_signed(high, kind)}]"
            note = f"  n={len(diffs)} pair(s)" + ("  (n<2: no interval to read)" if len(diffs) < 2 else "")
            lines.append(f"  {title:<20} {text}{note}")
    return lines


def _by_run(runs: Sequence[Record], label: str, figure: str) -> dict[int, float | None]:
    return {r["run"]: r["figures"].get(figure) for r in runs if r["arm_label"] == label}


def _signed(value: float, kind: str) -> str:
    return ("+" if value >= 0 else "−") + fmt(abs(value), kind)


def _pooled_allocation(runs: Sequence[Record]) -> str:
    used = envelope = 0
    for run in runs:
        alloc = _scores(run).get("allocation") or {}
        used += alloc.get("used_chars") or 0
        envelope += alloc.get("envelope_chars") or 0
    if not envelope:
        return "n/a"
    return f"{used / envelope:.1%} ({used:,}/{envelope:,} chars)"


# -- campaign ------------------------------------------------------------------------------------------------
def with_without(records: Sequence[Record]) -> tuple[str, str] | None:
    """The W and WO arms of the campaign table: the first arm of each kind, in the order they ran."""
    labels = arm_labels(records)
    with_arm = next((r["arm_label"] for r in records if r["arm"] == "with"), None)
    without_arm = next((r["arm_label"] for r in records if r["arm"] == "without"), None)
    if with_arm is None or without_arm is None or not labels:
        return None
    return with_arm, without_arm


def campaign_usable(records: Iterable[Record], include_contaminated: bool = False) -> list[Record]:
    """Scored runs minus contaminated without-arms, which measured the tool after all (seed 002)."""
    if include_contaminated:
        return scored(records)
    return [r for r in scored(records) if not (r["arm"] == "without" and r.get("contaminated"))]


def contaminated_note(records: Sequence[Record], include_contaminated: bool = False) -> str | None:
    """Says how many contaminated without-arm runs the campaign tables dropped (or kept)."""
    count = sum(1 for r in scored(records) if r["arm"] == "without" and r.get("contaminated"))
    if not count:
        return None
    if include_contaminated:
        return f"({count} contaminated without-arm run(s) KEPT by --agent-eval-include-contaminated)"
    return f"({count} contaminated without-arm run(s) dropped; --agent-eval-include-contaminated keeps them)"


def campaign_table(records: Sequence[Record], include_contaminated: bool = False) -> str | None:
    """Per entry, the tool's residual in the with-arm against file-access residual in the without-arm."""
    pair = with_without(records)
    if pair is None:
        return None
    w_label, wo_label = pair
    usable = campaign_usable(records, include_contaminated)
    rows, residual_changes, share_changes, warnings = [], [], [], []
    for entry in dict.fromkeys(r["entry"] for r in records):
        w = [r for r in usable if r["entry"] == entry and r["arm_label"] == w_label]
        wo = [r for r in usable if r["entry"] == entry and r["arm_label"] == wo_label]
        if not w or not wo:
            continue
        if min(len(w), len(wo)) < 2:
            warnings.append(f"warning: {entry}: medians over W n={len(w)} / WO n={len(wo)} — seeds: never n=1")
        w_res, wo_res = _median(w, "codegraph_residual"), _median(wo, "file_access_residual")
        w_ctx, wo_ctx = _median(w, "ctx_final"), _median(wo, "ctx_final")
        w_share = _ratio(w_res, w_ctx)
        wo_share = _ratio(wo_res, wo_ctx)
        change = _change(w_res, wo_res)
        if change is not None:
            residual_changes.append(change)
        share_change = _change(w_share, wo_share)
        if share_change is not None:
            share_changes.append(share_change)
        window = _scores(w[0]).get("occupancy", {}).get("window") or 200_000
        rows.append(
            [
                entry,
                f"{fmt(_median(w, 'turns'), 'num')}/{fmt(_median(wo, 'turns'), 'num')}",
                f"{kilo(w_ctx)}→{kilo(wo_ctx)}",
                f"{kilo(w_res)}→{kilo(wo_res)}" + (f"  ({change:+.0%})" if change is not None else ""),
                f"{fmt(w_share, 'pct')}→{fmt(wo_share, 'pct')}",
                f"{fmt(_ratio(w_res, window), 'pct')}→{fmt(_ratio(wo_res, window), 'pct')}",
            ]
        )
    if not rows:
        return None
    head = ["entry", "turns W→WO", "final ctx W→WO", "residual W→WO", "% of ctx W→WO", "% of window W→WO"]
    text = _table(rows, head, "plain")
    lines = [
        f"CAMPAIGN — W = {w_label}: the tool's responses still resident · WO = {wo_label}: "
        "Read + Grep/Glob + Bash results still resident (medians over runs)",
        text,
        "",
    ]
    if residual_changes:
        average = statistics.mean(residual_changes)
        line = f"AVERAGE: retrieval residual {abs(average):.0%} {_direction(average)} with the tool"
        if share_changes:
            share = statistics.mean(share_changes)
            line += f" · share-of-context {abs(share):.0%} {_direction(share)}"
        lines.append(line)
    note = contaminated_note(records, include_contaminated)
    if note:
        lines.append(note)
    lines += warnings
    return "\n".join(lines)


def throughput_table(records: Sequence[Record], include_contaminated: bool = False) -> str | None:
    """Time, tool calls, tokens processed and cost, W→WO, with what the with-arm saved."""
    pair = with_without(records)
    if pair is None:
        return None
    w_label, wo_label = pair
    usable = campaign_usable(records, include_contaminated)
    rows = []
    saved: dict[str, list[float]] = {"cost": [], "tokens": [], "time": [], "tool calls": []}
    for entry in dict.fromkeys(r["entry"] for r in records):
        w = [r for r in usable if r["entry"] == entry and r["arm_label"] == w_label]
        wo = [r for r in usable if r["entry"] == entry and r["arm_label"] == wo_label]
        if not w or not wo:
            continue
        for name, figure in (
            ("cost", "cost_usd"),
            ("tokens", "tokens_processed"),
            ("time", "duration_s"),
            ("tool calls", "tool_calls"),
        ):
            a, b = _median(w, figure), _median(wo, figure)
            if a is not None and b:
                saved[name].append(1 - a / b)
        rows.append(
            [
                entry,
                _pair(w, wo, "duration_s", lambda v: duration(v)),
                _pair(w, wo, "tool_calls", lambda v: f"{v:g}"),
                _pair(w, wo, "tokens_processed", kilo, saved=True),
                _pair(w, wo, "cost_usd", lambda v: f"${v:.2f}", saved=True),
            ]
        )
    if not rows:
        return None
    head = ["entry", "time W→WO", "tools W→WO", "tokens W→WO (saved)", "cost W→WO (saved)"]
    average = " · ".join(f"{name} {statistics.mean(v):.0%}" for name, v in saved.items() if v)
    text = _table(rows, head, "plain")
    return f"{text}\n\nAVERAGE saved: {average}" if average else text


def secondary_table(records: Sequence[Record]) -> str | None:
    """Seed 002's secondary readings of the with-arm: what followed each explore, and allocation, per entry."""
    w_label = next((r["arm_label"] for r in records if r["arm"] == "with"), None)
    if w_label is None:
        return None
    runs = [r for r in scored(records) if r["arm_label"] == w_label]
    keys = [key for key, _, _ in BUCKETS]
    pooled = dict.fromkeys(keys, 0)
    pooled_used = pooled_envelope = pooled_calls = 0
    rows = []
    for entry in dict.fromkeys(r["entry"] for r in records):
        counts = dict.fromkeys(keys, 0)
        used = envelope = calls = 0
        for run in (r for r in runs if r["entry"] == entry):
            for key, value in (_scores(run).get("sufficiency", {}).get("counts") or {}).items():
                counts[key] = counts.get(key, 0) + value
            alloc = _scores(run).get("allocation") or {}
            used += alloc.get("used_chars") or 0
            envelope += alloc.get("envelope_chars") or 0
            calls += sum(1 for c in alloc.get("calls") or [] if c.get("efficiency") is not None)
        answered = sum(counts[k] for k in keys)
        for key in keys:
            pooled[key] += counts[key]
        pooled_used += used
        pooled_envelope += envelope
        pooled_calls += calls
        rows.append(
            [
                entry,
                str(answered),
                *(f"{counts[k]} {counts[k] / answered:.0%}" if answered else "0" for k in keys),
                fmt(used / envelope, "pct") if envelope else "n/a",
                kilo(envelope),
            ]
        )
    if not rows:
        return None
    head = ["repo", "calls", "again", "read-ret", "read-miss", "grep", "MOVED ON", "alloc eff", "envelope"]
    total = sum(pooled.values())
    labels = {key: label for key, label, _ in BUCKETS}
    labels["read_missed"] = "Read a file we did NOT return"
    shares = [f"{labels[k]} {pooled[k] / total:.0%}" if total else f"{labels[k]} n/a" for k in keys]
    efficiency = fmt(pooled_used / pooled_envelope, "pct") if pooled_envelope else "n/a"
    return "\n".join(
        [
            f"SECONDARY READINGS — {w_label}, absolute (no before/after)",
            _table(rows, head, "plain"),
            "",
            f"POOLED ({total} answered explore calls):",
            "  " + " · ".join(shares[:3]),
            "  · " + " · ".join(shares[3:]),
            f"POOLED allocation efficiency: {efficiency} over {pooled_calls} calls / {kilo(pooled_envelope)} chars",
        ]
    )


def _table(rows: list[list[str]], head: list[str], style: str) -> str:
    """tabulate, keeping the indent that puts a figure under its section (it strips cells by default)."""
    if _PRESERVE_PARAM:
        return tabulate(rows, headers=head, tablefmt=style, disable_numparse=True, preserve_whitespace=True)
    saved = tabulate_module.PRESERVE_WHITESPACE  # tabulate < 0.10 has only the module switch
    tabulate_module.PRESERVE_WHITESPACE = True
    try:
        return tabulate(rows, headers=head, tablefmt=style, disable_numparse=True)
    finally:
        tabulate_module.PRESERVE_WHITESPACE = saved


def _pair(
    w: Sequence[Record], wo: Sequence[Record], figure: str, show: Callable[[float], str], saved: bool = False
) -> str:
    a, b = _median(w, figure), _median(wo, figure)
    if a is None or b is None:
        return "n/a"
    text = f"{show(a)}→{show(b)}"
    if saved and b:
        text += f"  ({1 - a / b:.0%})"
    return text


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _change(w: float | None, wo: float | None) -> float | None:
    """Relative change of W over WO; positive means the with-arm leaves MORE behind."""
    return w / wo - 1 if w is not None and wo else None


def _direction(change: float) -> str:
    return "HIGHER" if change > 0 else "LOWER" if change < 0 else "UNCHANGED"


# -- everything ----------------------------------------------------------------------------------------------
def terminal_report(
    records: Sequence[Record], verbose: bool = False, campaign: bool = False, include_contaminated: bool = False
) -> str:
    """Header, (with ``verbose``) every item's blocks, an ARM COMPARISON per entry, the campaign tables;
    ``campaign`` adds seed 002's secondary readings."""
    parts = [header(records)]
    if verbose:
        parts += [item_blocks(r) for r in records]
    for entry in dict.fromkeys(r["entry"] for r in records):
        parts.append(arm_comparison(entry, [r for r in records if r["entry"] == entry]))
    tables = [campaign_table(records, include_contaminated), throughput_table(records, include_contaminated)]
    if campaign:
        tables.append(secondary_table(records))
    for table in tables:
        if table:
            parts.append(table)
    return "\n\n".join(p for p in parts if p) + "\n"


def summary(records: Sequence[Record], meta: dict[str, Any]) -> dict[str, Any]:
    """``summary.json``: ``meta``, per entry and arm the median/min/max of every figure, and every record."""
    arms: dict[str, dict[str, Any]] = {}
    for entry in dict.fromkeys(r["entry"] for r in records):
        entry_records = [r for r in records if r["entry"] == entry]
        arms[entry] = {}
        for label in arm_labels(entry_records):
            runs = [r for r in scored(entry_records) if r["arm_label"] == label]
            figures = sorted({k for r in runs for k in r["figures"]})
            arms[entry][label] = {
                "runs": len(runs),
                "errors": sum(1 for r in entry_records if r["arm_label"] == label and r.get("outcome") == "error"),
                "median": {k: _median(runs, k) for k in figures},
                "min": {k: _extreme(runs, k, min) for k in figures},
                "max": {k: _extreme(runs, k, max) for k in figures},
            }
    return {**meta, "entries": arms, "records": list(records)}


def _extreme(runs: Sequence[Record], figure: str, pick: Callable) -> float | None:
    present = [r["figures"].get(figure) for r in runs if r["figures"].get(figure) is not None]
    return pick(present) if present else None
