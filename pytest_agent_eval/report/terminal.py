"""The terminal tables over a session's runs. They only render: the numbers come from one
:class:`~pytest_agent_eval.report.aggregate.Aggregate`, with the catalogue's labels and formatters, so they read
the same as ``report.html``.

Every per-arm figure shows as ``median [min–max]`` over runs; arms are compared run against run with the
interval their number allows (report/stats.py ``mean_interval``); an arm with fewer than two runs says so.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import tabulate as tabulate_module
from tabulate import tabulate

from pytest_agent_eval.agents import agent_title
from pytest_agent_eval.campaign.record import ItemRecord, as_records
from pytest_agent_eval.metrics.figures import (
    ALLOCATION,
    ANSWERS,
    BEHAVIOUR,
    CONTAMINATION,
    FIGURES,
    OCCUPANCY,
    SUFFICIENCY,
)
from pytest_agent_eval.metrics.format import (
    change,
    direction,
    dollars,
    formatter,
    median_range,
    number,
    percent,
    seconds,
    signed,
    tokens,
)
from pytest_agent_eval.metrics.gates import describe_leak
from pytest_agent_eval.metrics.sufficiency import BUCKETS
from pytest_agent_eval.report.agents import side_by_side
from pytest_agent_eval.report.aggregate import (
    Aggregate,
    ArmRuns,
    Row,
    aggregate,
    tells_agents_apart,
    unavailable,
)
from pytest_agent_eval.report.grades import answer_cell
from pytest_agent_eval.report.stats import small_n_warning
from pytest_agent_eval.report.verdict import OVERALL, verdicts
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import STAND_IN_PREFIX

MODEL_FREE_BACKENDS = ("scripted", "cassette")
MODEL_FREE_NOTE = " — these figures measure the pipeline and the tool's responses, not a model"
_PRESERVE_PARAM = "preserve_whitespace" in inspect.signature(tabulate).parameters

Records = Iterable[ItemRecord | Mapping[str, Any]]

# The ARM COMPARISON's sections: a title, and the figures it shows (in the catalogue's order).
SECTION_TITLES = {
    BEHAVIOUR: "behaviour",
    OCCUPANCY: "occupancy (residual at end of run)",
    SUFFICIENCY: "sufficiency (what the agent did next)",
    ALLOCATION: "allocation (share of returned bytes the answer cited)",
    CONTAMINATION: "contamination",
    ANSWERS: "answers (against the corpus's answer key)",
}
PAIRED_FIGURES = ("residual_tokens", "ctx_final", "tokens_processed", "tool_calls", "duration_s", "cost_usd")
PAIRED_FIGURES += ("key_recall", "key_seen")  # the answers against the key: paired only where an entry has one


def backend_note(backend: Any, model: str | None = None) -> str:
    """What drove the agent; a model-free backend is said to measure the pipeline, not a model."""
    name = backend_name(backend) or "not recorded"
    description = str(backend.get("description") or name) if isinstance(backend, dict) else name
    note = f"model backend: {description}"
    if model and name not in MODEL_FREE_BACKENDS:
        note += f" · model {model}"
    if name in MODEL_FREE_BACKENDS and "not a model" not in description:
        note += MODEL_FREE_NOTE
    return note


def backend_name(backend: Any) -> str | None:
    """A record's backend by name (records hold a dict since the harness describes it, a name before)."""
    if isinstance(backend, dict):
        return str(backend.get("name")) if backend.get("name") else None
    return str(backend) if backend else None


def model_notes(records: Iterable[ItemRecord]) -> list[str]:
    """One note per model-free backend behind these records (a stand-in model must say so in every report it
    appears in); none for the real API."""
    records = list(records)
    by_name = {backend_name(r.backend): r for r in records}
    return [
        backend_note(record.backend, record.model) + agents_note(records, name)
        for name, record in sorted(by_name.items(), key=lambda pair: str(pair[0]))
        if name in MODEL_FREE_BACKENDS
    ]


def agents_note(records: Sequence[ItemRecord], backend: str | None) -> str:
    """`` · agents Claude Code, Codex``: which agents ran against ``backend``, when the records hold several."""
    if not tells_agents_apart(records):
        return ""
    names = dict.fromkeys(r.agent_name for r in records if backend_name(r.backend) == backend)
    return f" · agents {', '.join(agent_title(name) for name in names)}" if names else ""


def model_fields(records: Iterable[ItemRecord], requested: str | None) -> dict[str, Any]:
    """``summary.json``'s model keys: ``model``, what answered the agent's requests as its transcripts name it
    (a stand-in names itself ``stand-in-…``); ``model_requested``, what the CLI was told (``--agent-eval-model``),
    which a stand-in ignores; and, when the two differ, a ``model_note`` saying so."""
    records = list(records)
    answered = list(dict.fromkeys(m for r in records for m in ((r.scores or {}).get("models") or [])))
    stand_ins = [m for m in answered if m.startswith(STAND_IN_PREFIX)]
    free = sorted({str(backend_name(r.backend)) for r in records if backend_name(r.backend) in MODEL_FREE_BACKENDS})
    if free:  # whatever name its messages carry (a cassette replays a real model's), the stand-in answered
        answered = stand_ins or [f"{STAND_IN_PREFIX}-{name}" for name in free]
    fields: dict[str, Any] = {"model": ", ".join(answered) or requested, "model_requested": requested}
    if answered and requested and requested not in answered:
        who = "a stand-in model" if free else "the model its transcripts name"
        fields["model_note"] = (
            f"{fields['model']} ({who}) answered every request; {requested} is only what the CLI was told"
        )
    return fields


def simulated_cost(records: Iterable[ItemRecord]) -> bool:
    """Whether the costs are a stand-in model's (computed from simulated tokens), not an API bill."""
    names = {backend_name(r.backend) for r in records if r.backend}
    return bool(names) and names <= set(MODEL_FREE_BACKENDS)


def header(records: Sequence[ItemRecord]) -> str:
    """Names the model backend of every run; a run that errored before its model started has none to name."""
    backends = {backend_name(r.backend): r.backend for r in records if backend_name(r.backend)}
    lines = []
    for name, backend in sorted(backends.items()):
        model = next((r.model for r in records if backend_name(r.backend) == name), None)
        lines.append(backend_note(backend, model) + agents_note(records, name))
    if simulated_cost(records):
        lines.append("costs are SIMULATED: the stand-in model's token counts at list prices, not an API bill")
    return "\n".join(lines)


def item_blocks(record: ItemRecord) -> str:
    title = f"── {record.id} ({record.outcome}) "
    body = record.blocks or record.infra_error or ""
    failed = [g for g in record.gates if not g["passed"]]
    gates = "".join(f"\nGATE FAILED {g['gate']}: {g['message']}" for g in failed)
    return f"{title:─<100}\n{body.rstrip()}{gates}"


def run_line(record: ItemRecord, tool: str) -> str:
    """One run in one line: what it left resident and processed, what followed its explore calls, its time and
    cost, and what voids or fails it (the blocks, with -vv or in report.html, say how each figure came about)."""
    if not record.scored:
        return f"{record.id} {record.outcome}: {record.infra_error or record.error or 'not scored'}"
    figures = record.figures
    kind = tool if record.has_tool else "file access"
    parts = [
        f"{record.id} {record.outcome}",
        f"retrieval residual {_show(figures.get('residual_tokens'), tokens)} ({kind})",
        f"final context {_show(figures.get('ctx_final'), tokens)}",
        f"{_show(figures.get('tool_calls'), number)} tool calls",
    ]
    if figures.get("explore_calls"):
        parts.append(
            f"{number(figures['explore_calls'])} explore calls: "
            f"{_show(figures.get('sufficient_share'), _whole)} moved on, "
            f"allocation {_show(figures.get('allocation'), _whole)}"
        )
    parts += [_show(figures.get("duration_s"), seconds), _show(figures.get("cost_usd"), dollars)]
    if figures.get("cli_calls"):
        parts.append(f"{number(figures['cli_calls'])} CLI calls ({number(figures.get('cli_blocked') or 0)} denied)")
    if record.contaminated:
        parts.append("CONTAMINATED")
    parts += [f"GATE FAILED {g['gate']}" for g in record.gates if not g["passed"]]
    return " · ".join(parts)


def run_lines(records: Sequence[ItemRecord]) -> str:
    tool = tool_name(records)
    head = "RUNS — one line each (-vv prints every run's blocks; report.html has them and the transcript)"
    return "\n".join([head, *(f"  {run_line(record, tool)}" for record in records)])


def tool_name(records: Sequence[ItemRecord]) -> str:
    return next((str(r.scores["tool"]) for r in records if r.scores and r.scores.get("tool")), CODEGRAPH.name)


# -- arm comparison ------------------------------------------------------------------------------------------
def cell(group: ArmRuns | None, figure: str) -> str:
    """One figure of one entry × arm as every table prints it: ``median [min–max]``; a figure the agent's records
    do not give, ``not available (why)``."""
    return unavailable([group], figure) or median_range(group.values(figure) if group else [], formatter(figure))


def pooled_allocation(group: ArmRuns | None) -> str:
    used, envelope, _ = group.pooled_allocation() if group else (0, 0, 0)
    return f"{used / envelope:.1%} ({used:,}/{envelope:,} chars)" if envelope else "n/a"


def paired_cell(found: Aggregate, row: Row, arm: str, reference: str, figure: str) -> str | None:
    """``mean [low, high] (t, 5 pairs)`` of arm − reference, run against run; with too few pairs or one value
    every time, the mean and why there is no interval; None when no run pairs."""
    paired = found.paired(row, arm, reference, figure)
    if paired is None:
        return None
    show, found_interval = formatter(figure), paired.interval
    if not found_interval.has_interval:
        return f"{signed(paired.mean, show)} ({found_interval.note})"
    low, high = signed(found_interval.low, show), signed(found_interval.high, show)  # type: ignore[arg-type]
    return f"{signed(paired.mean, show)} [{low}, {high}] ({found_interval.note})"


def arm_comparison(row: Row, records: Records, found: Aggregate | None = None, notes: list[str] | None = None) -> str:
    """One row's figures per arm, then the paired differences of every pair report.html shows for it."""
    found = found or aggregate(records)
    entry = row.label  # as the tables name the row
    arms = found.arms_of(row)
    groups = [found.group(row, arm) for arm in arms]
    tool = tool_name(found.records)
    simulated = simulated_cost(found.records)
    head = ["", *(f"{arm} (n={len(g.runs) if g else 0})" for arm, g in zip(arms, groups, strict=True))]
    rows: list[list[str]] = []
    for section, title in SECTION_TITLES.items():
        rows.append([title, *[""] * len(arms)])
        for figure in (f for f in FIGURES.values() if f.section == section):
            title = figure.title(tool) + (" (simulated)" if figure.name == "cost_usd" and simulated else "")
            show = answer_cell if section == ANSWERS else cell  # an entry without a key reads "not graded"
            rows.append([f"  {title}", *(show(g, figure.name) for g in groups)])
        if section == ALLOCATION:
            rows.append(["  pooled efficiency", *(pooled_allocation(g) for g in groups)])
    if any(g.errors for g in groups if g):
        rows.append(["infrastructure errors (not scored)", *(str(g.errors if g else 0) for g in groups)])
    lines = [f"ARM COMPARISON — {entry}", _table(rows, head, "simple")]
    lines += contamination_lines(g for g in groups if g is not None)
    lines += boundary_lines(g for g in groups if g is not None)
    for arm, reference in found.pairs(row):
        lines.append(f"paired {arm} − {reference}, run against run: mean difference [95% interval] (its method)")
        for name in PAIRED_FIGURES:
            text = paired_cell(found, row, arm, reference, name)
            text = text or unavailable((found.group(row, arm), found.group(row, reference)), name)
            if text is not None:
                lines.append(f"  {FIGURES[name].title(tool):<20} {text}")
    for arm, group in zip(arms, groups, strict=True):
        warning = small_n_warning(len(group.runs) if group else 0)
        if warning:
            caveat(lines, notes, f"{entry} / {arm}: {warning}")
    return "\n".join(lines)


def caveat(lines: list[str], notes: list[str] | None, text: str) -> None:
    """A caveat on the figures: a ``warning:`` line of the table, or one of the ``notes`` a caller gathers to
    issue itself (the pytest plugin issues them as AgentEvalWarnings, which -W and filterwarnings govern)."""
    if notes is None:
        lines.append(f"warning: {text}")
    else:
        notes.append(text)


def contamination_lines(groups: Iterable[ArmRuns]) -> list[str]:
    """Each contaminated run of an arm without the tool, with the first call that carried the tool's output."""
    lines = []
    for run in (run for group in groups if not group.has_tool for run in group.runs if run.contaminated):
        leaks = ((run.scores or {}).get("contamination") or {}).get("leaks") or []
        line = f"CONTAMINATED {run.id}"
        if leaks:
            line += f": {describe_leak(leaks[0])}" + (f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else "")
        lines.append(line)
    return lines


# -- campaign ------------------------------------------------------------------------------------------------
def boundary_lines(groups: Iterable[ArmRuns]) -> list[str]:
    """Each run whose model server refused a request, or whose transcript disagrees with what the model received
    (:mod:`pytest_agent_eval.metrics.evidence`), with the first of each."""
    lines = []
    for run in (run for group in groups for run in group.runs):
        evidence = (run.scores or {}).get("evidence") or {}
        for label, found in (("REFUSED at the model boundary", "refused"), ("INTEGRITY FAILED", "problems")):
            items = [str(i) for i in evidence.get(found) or []]
            if items:
                lines.append(f"{label} {run.id}: {items[0]}" + (f" (+{len(items) - 1} more)" if len(items) > 1 else ""))
    return lines


def contaminated_note(found: Aggregate, include_contaminated: bool = False) -> str | None:
    """Says how many contaminated without-arm runs the campaign tables dropped (or kept)."""
    count = found.contaminated()
    if not count:
        return None
    if include_contaminated:
        return f"({count} contaminated without-arm run(s) KEPT by --agent-eval-include-contaminated)"
    return f"({count} contaminated without-arm run(s) dropped; --agent-eval-include-contaminated keeps them)"


def campaign_pairs(found: Aggregate, include_contaminated: bool) -> list[tuple[str, ArmRuns, ArmRuns]]:
    """Per row (by its label), the W and WO runs the campaign tables read (contaminated WO runs dropped unless
    kept)."""
    pair = found.pair()
    if pair is None:
        return []
    out = []
    for row in found.rows:
        w, wo = found.group(row, pair[0]), found.group(row, pair[1])
        if w is None or wo is None:
            continue
        if not include_contaminated:
            wo = wo.without_contaminated()
        if w.runs and wo.runs:
            out.append((row.label, w, wo))
    return out


def relative_change(w: float | None, wo: float | None) -> float | None:
    """Relative change of W over WO; positive means the with-arm has MORE."""
    return w / wo - 1 if w is not None and wo else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def campaign_table(
    records: Records, include_contaminated: bool = False, found: Aggregate | None = None, notes: list[str] | None = None
) -> str | None:
    """Per entry, the retrieval residual of W (the tool's responses) against WO (file access), as
    docs/metrics/occupancy.md defines it."""
    found = found or aggregate(records)
    pairs = campaign_pairs(found, include_contaminated)
    if not pairs:
        return None
    w_label, wo_label = found.pair() or ("", "")
    rows, warnings = [], []
    changes = _changes(found, include_contaminated)
    for entry, w, wo in pairs:
        if min(len(w.runs), len(wo.runs)) < 2:
            medians = f"medians over W n={len(w.runs)} / WO n={len(wo.runs)}"
            caveat(warnings, notes, f"{entry}: {medians} — one run is no measurement")
        w_res, wo_res = w.median("residual_tokens"), wo.median("residual_tokens")
        w_ctx, wo_ctx = w.median("ctx_final"), wo.median("ctx_final")
        w_share, wo_share = _ratio(w_res, w_ctx), _ratio(wo_res, wo_ctx)
        moved = changes.get((entry, "residual_tokens"))
        rows.append(
            [
                entry,
                f"{_show(w.median('turns'), number)}/{_show(wo.median('turns'), number)}",
                f"{_show(w_ctx, tokens)}→{_show(wo_ctx, tokens)}",
                f"{_show(w_res, tokens)}→{_show(wo_res, tokens)}"
                + (f"  ({change(moved)})" if moved is not None else ""),
                f"{_show(w_share, percent)}→{_show(wo_share, percent)}",
                f"{_show(_ratio(w_res, w.window), percent)}→{_show(_ratio(wo_res, wo.window), percent)}",
            ]
        )
    head = ["entry", "turns W→WO", "final ctx W→WO", "residual W→WO", "% of ctx W→WO", "% of window W→WO"]
    lines = [
        f"CAMPAIGN — W = {w_label}: the tool's responses still resident · WO = {wo_label}: "
        "Read + Grep/Glob + Bash results still resident (medians over runs; (±N%): the mean of the paired "
        "changes, the verdict's own figure)",
        _table(rows, head, "plain"),
        "",
    ]
    for agent in dict.fromkeys(w.row.agent for _, w, _ in pairs):
        average = changes.get((_overall(agent), "residual_tokens"))
        if average is None:
            continue
        line = f"{_average(agent)}: retrieval residual {abs(average):.0%} {direction(average)} with the tool"
        context = changes.get((_overall(agent), "ctx_final"))
        if context is not None:
            line += f" · final context {abs(context):.0%} {direction(context)}"
        lines.append(line + " (the verdict's paired means over every entry)")
    note = contaminated_note(found, include_contaminated)
    if note:
        lines.append(note)
    lines += warnings
    return "\n".join(lines)


def throughput_table(
    records: Records, include_contaminated: bool = False, found: Aggregate | None = None
) -> str | None:
    """Time, tool calls, tokens processed and cost, W→WO, with what the with-arm saved."""
    found = found or aggregate(records)
    pairs = campaign_pairs(found, include_contaminated)
    if not pairs:
        return None
    rows = []
    changes = _changes(found, include_contaminated)
    for entry, w, wo in pairs:
        rows.append(
            [
                entry,
                _pair(w, wo, "duration_s", seconds),
                _pair(w, wo, "tool_calls", number),
                _pair(w, wo, "tokens_processed", tokens, changes.get((entry, "tokens_processed"))),
                _pair(w, wo, "cost_usd", dollars, changes.get((entry, "cost_usd"))),
            ]
        )
    cost = "cost W→WO (saved, simulated)" if simulated_cost(found.records) else "cost W→WO (saved)"
    head = ["entry", "time W→WO", "tools W→WO", "tokens W→WO (saved)", cost]
    text = _table(rows, head, "plain")
    for agent in dict.fromkeys(w.row.agent for _, w, _ in pairs):
        saved = {name: changes.get((_overall(agent), figure)) for name, figure in SAVED_FIGURES}
        average = " · ".join(_saved(name, -moved) for name, moved in saved.items() if moved is not None)
        text += f"\n\n{_average(agent)} saved: {average}" if average else ""
    return text + ("\n(medians over runs; saved: the mean of the paired changes, the verdict's own figure)")


# What AVERAGE saved reads, by the verdict's figures: one estimate of one figure everywhere.
SAVED_FIGURES = (("cost", "cost_usd"), ("tokens", "tokens_processed"), ("time", "duration_s"))


def _changes(found: Aggregate, include_contaminated: bool) -> dict[tuple[str, str], float]:
    """(row label or ``overall[ · agent]``, figure) → the mean paired change the verdict states, W against WO."""
    pair = found.pair()
    out: dict[tuple[str, str], float] = {}
    for verdict in verdicts(found, include_contaminated):
        if pair is None or (verdict.arm, verdict.reference) != pair:
            continue
        label = _overall(verdict.row.agent) if verdict.overall else verdict.label
        for found_change in verdict.changes:
            if found_change.mean is not None:
                out[label, found_change.figure] = found_change.mean
    return out


def _overall(agent: str | None) -> str:
    return OVERALL if agent is None else f"{OVERALL} · {agent}"


def _average(agent: str | None) -> str:
    """``AVERAGE``, or ``AVERAGE · codex`` of one agent's rows."""
    return "AVERAGE" if agent is None else f"AVERAGE · {agent}"


def secondary_table(records: Records, found: Aggregate | None = None) -> str | None:
    """The campaign's secondary readings of the with-arm (docs/report.md): what followed each explore, and
    allocation, per entry."""
    found = found or aggregate(records)
    w_label = next((g.arm for g in found.groups.values() if g.has_tool), None)
    if w_label is None:
        return None
    keys = [key for key, _, _ in BUCKETS]
    pooled = dict.fromkeys(keys, 0)
    pooled_used = pooled_envelope = pooled_calls = 0
    rows = []
    for row in found.rows:
        group = found.group(row, w_label) or ArmRuns(row, w_label, True)
        counts = group.bucket_counts()
        used, envelope, calls = group.pooled_allocation()
        answered = sum(counts[k] for k in keys)
        for key in keys:
            pooled[key] += counts[key]
        pooled_used += used
        pooled_envelope += envelope
        pooled_calls += calls
        rows.append(
            [
                row.label,
                str(answered),
                *(f"{counts[k]} {counts[k] / answered:.0%}" if answered else "0" for k in keys),
                percent(used / envelope) if envelope else "n/a",
                tokens(envelope),
            ]
        )
    if not rows:
        return None
    head = ["repo", "calls", "again", "read-ret", "read-miss", "grep", "MOVED ON", "alloc eff", "envelope"]
    total = sum(pooled.values())
    labels = {key: label for key, label, _ in BUCKETS}
    labels["read_missed"] = "Read a file we did NOT return"
    shares = [f"{labels[k]} {pooled[k] / total:.0%}" if total else f"{labels[k]} n/a" for k in keys]
    efficiency = percent(pooled_used / pooled_envelope) if pooled_envelope else "n/a"
    return "\n".join(
        [
            f"SECONDARY READINGS — {w_label}, absolute (no before/after)",
            _table(rows, head, "plain"),
            "",
            f"POOLED ({total} answered explore calls):",
            "  " + " · ".join(shares[:3]),
            "  · " + " · ".join(shares[3:]),
            f"POOLED allocation efficiency: {efficiency} over {pooled_calls} calls / {tokens(pooled_envelope)} chars",
        ]
    )


def _whole(share: float) -> str:
    return f"{share:.0%}"


def _saved(name: str, share: float) -> str:
    """``cost 14%``; a negative saving says what it is: ``time none (75% more with the tool)``."""
    return f"{name} {share:.0%}" if share >= 0 else f"{name} none ({-share:.0%} more with the tool)"


def _show(value: float | None, fmt: Callable[[float], str]) -> str:
    return "n/a" if value is None else fmt(value)


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


def _pair(w: ArmRuns, wo: ArmRuns, figure: str, show: Callable[[float], str], moved: float | None = None) -> str:
    """``W→WO`` medians; with ``moved`` (the verdict's mean paired change), what the with-arm saved."""
    missing = unavailable([w, wo], figure)
    if missing:
        return missing
    a, b = w.median(figure), wo.median(figure)
    if a is None or b is None:
        return "n/a"
    text = f"{show(a)}→{show(b)}"
    if moved is not None:
        text += f"  ({-moved:.0%})"
    return text


# -- everything ----------------------------------------------------------------------------------------------
def terminal_report(
    records: Records,
    verbose: bool = False,
    campaign: bool = False,
    include_contaminated: bool = False,
    entry_order: Sequence[str] = (),
    notes: list[str] | None = None,
    arm_order: Sequence[str] = (),
) -> str:
    """Header, one line per run (with ``verbose``: every run's blocks instead), an ARM COMPARISON per entry, the
    campaign tables; ``campaign`` adds the with-arm's secondary readings. Given ``notes``, the caveats go there, not
    into the tables."""
    found = aggregate(records, entry_order=entry_order, arm_order=arm_order)
    parts = [header(found.records)]
    if verbose:
        parts += [item_blocks(r) for r in found.records]
    elif found.records:
        parts.append(run_lines(found.records))
    parts += [arm_comparison(row, found.records, found, notes) for row in found.rows]
    tables = [
        campaign_table(found.records, include_contaminated, found, notes),
        throughput_table(found.records, include_contaminated, found),
    ]
    if campaign:
        tables.append(secondary_table(found.records, found))
    parts += [table for table in tables if table]
    return "\n\n".join(p for p in parts if p) + "\n"


def summary(
    records: Records,
    meta: dict[str, Any],
    include_contaminated: bool = False,
    entry_order: Sequence[str] = (),
    arm_order: Sequence[str] = (),
) -> dict[str, Any]:
    """``summary.json``: ``meta``, what drove the agent (a stand-in model's notes, whether the costs are
    simulated), which arm did better (the verdicts), per entry and arm the median/min/max of every figure, and
    every record; all in one order (:func:`~pytest_agent_eval.report.aggregate.reading_order`)."""
    found = aggregate(records, entry_order=entry_order, arm_order=arm_order)
    found_verdicts = verdicts(found, include_contaminated)
    agents = side_by_side(found_verdicts)
    return {
        **meta,
        "model_notes": model_notes(found.records),
        "simulated_costs": simulated_cost(found.records),
        "verdicts": [v.to_dict() for v in found_verdicts],
        **({"agents": [on.to_dict() for on in agents]} if agents else {}),
        "entries": found.summary(),
        "records": [r.to_dict() for r in found.records],
    }


def render_rescore(records: Records) -> str:
    """One row per session: label, turns, retrieval residual, sufficiency counts, allocation; the pooled buckets."""
    typed = as_records(records)
    rows = []
    keys = [key for key, _, _ in BUCKETS]
    pooled = dict.fromkeys(keys, 0)
    for record in typed:
        scores = record.scores
        who = [agent_title(record.agent_name), record.arm_label]  # which agent, which arm: the id alone hid them
        if not scores:
            rows.append([record.id, *who, "", "", "", "", record.error or "not scored"])
            continue
        counts = scores["sufficiency"]["counts"]
        for key in pooled:
            pooled[key] += counts.get(key, 0)
        value = record.figures.get("residual_tokens")
        kind = str(scores.get("tool") or CODEGRAPH.name) if record.has_tool else "file-access"
        efficiency = record.figures.get("allocation")
        rows.append(
            [
                record.id,
                *who,
                scores["occupancy"].get("turns", ""),
                f"{tokens(value)} {kind}" if value is not None else "n/a",
                " / ".join(str(counts.get(key, 0)) for key in pooled),
                percent(efficiency) if efficiency is not None else "n/a",
                (record.error or "error") if record.outcome == "error" else "",
            ]
        )
    head = ["label", "agent", "arm", "turns", "residual", "again / returned / missed / grep / moved on", "allocation",
            "error"]  # fmt: skip
    if not any(row[-1] for row in rows):  # an empty column would print a bare "--" under no heading
        head, rows = head[:-1], [row[:-1] for row in rows]
    table = tabulate(rows, headers=head, tablefmt="simple", disable_numparse=True)
    total = sum(pooled.values())
    shares = (
        " · ".join(f"{label} {pooled[key]} ({pooled[key] / total:.0%})" for key, label, _ in BUCKETS)
        if total
        else "no answered explore call"
    )
    return f"{table}\n\npooled over {len(typed)} session(s), {total} answered explore calls: {shares}\n"
