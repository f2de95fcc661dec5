"""One self-contained HTML report of a campaign: the verdict, tables, charts, each run's context over its
requests, and every run's transcript.

Self-contained means it opens from an archive years later with no network: CSS and JS are inline, and nothing
is fetched. Three charts are SVG drawn by the page's own script from the JSON embedded in it: when the script
has drawn one it sets ``data-rendered`` on it, and ``data-charts-rendered`` on ``<body>`` once all are drawn,
so a headless browser can tell a drawn page from a broken one. The occupancy charts are SVG written here
(:mod:`pytest_agent_eval.report.occupancy_chart`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_agent_eval.campaign.made_by import agent_of, tool_of
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign, StoreError, inside, write_atomic
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.metrics.format import percent, seconds, stall_note, tokens
from pytest_agent_eval.metrics.gates import describe_leak
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS, occupancy
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.metrics.sufficiency import BUCKETS
from pytest_agent_eval.report import occupancy_chart
from pytest_agent_eval.report.agents import side_by_side
from pytest_agent_eval.report.agents_html import agents_section
from pytest_agent_eval.report.agents_html import chart_data as agents_chart_data
from pytest_agent_eval.report.aggregate import Aggregate, aggregate, unavailable
from pytest_agent_eval.report.answers_html import answers_section
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.report.compare import GateResult, comparison_cells, gate_line
from pytest_agent_eval.report.grades import grade_text
from pytest_agent_eval.report.replay import caveat as replay_caveat
from pytest_agent_eval.report.replay import replay_note
from pytest_agent_eval.report.stats import small_n_warning
from pytest_agent_eval.report.terminal import (
    agents_note,
    backend_name,
    backend_note,
    cell,
    model_fields,
    paired_cell,
    simulated_cost,
    tool_name,
)
from pytest_agent_eval.report.verdict import BETTER, NO_PAIRS, UNCLEAR, WORSE, Verdict, shown, verdicts
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import Compaction, Message, Session, ToolResult, UserText

Records = Sequence[ItemRecord | Mapping[str, Any]]

REPORT = "report.html"
# Explore responses run to 30k+ characters; the report shows the head of each result, and says so.
RESULT_CHARS = 4000
TEXT_CHARS = 6000
BUCKET_LABELS = {key: label for key, label, _ in BUCKETS}
BUCKET_COLORS = {
    "explore_again": "#d9534f",
    "read_returned": "#f0ad4e",
    "read_missed": "#9b59b6",
    "search": "#5bc0de",
    "sufficient": "#5cb85c",
}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


# -- the data the charts are drawn from ----------------------------------------------------------------------
def chart_data(found: Aggregate) -> dict[str, Any]:
    """What the page's script draws: residual per entry and arm, pooled buckets per arm, allocation per call."""
    residuals = []
    for row in found.rows:
        arms = []
        for arm in found.arms_of(row):
            group = found.groups[row, arm]
            spread = group.spread("residual_tokens")
            arms.append(
                {
                    "arm": arm,
                    # The retrieval residual is the tool's responses with the tool, file access without it.
                    "kind": "tool" if group.has_tool else "file-access",
                    "spread": None if spread is None else vars(spread),
                    # the numbers as every table prints them: the page's script formats nothing itself
                    "text": None if spread is None else {k: tokens(v) for k, v in vars(spread).items() if k != "n"},
                }
            )
        residuals.append({"entry": row.label, "arms": arms})
    buckets = []
    for arm in found.arms:
        counts = dict.fromkeys(BUCKET_LABELS, 0)
        for group in (g for g in found.groups.values() if g.arm == arm):
            for key, value in group.bucket_counts().items():
                counts[key] = counts.get(key, 0) + value
        total = sum(counts.values())
        shares = {key: percent(n / total) for key, n in counts.items() if n} if total else {}
        buckets.append({"arm": arm, "counts": counts, "shares": shares})
    allocation = []
    for (row, arm), group in found.groups.items():
        calls = [
            {
                "run": run.run,
                "index": call["index"],
                "query": call.get("query", ""),
                "value": call["efficiency"],
                "text": percent(call["efficiency"]),
            }
            for run in group.runs
            for call in ((run.scores or {}).get("allocation") or {}).get("calls") or []
            if call.get("efficiency") is not None
        ]
        if calls:
            allocation.append({"group": f"{row.label} · {arm}", "calls": calls})
    return {
        "residual": residuals,
        "buckets": buckets,
        "bucketLabels": BUCKET_LABELS,
        "bucketColors": BUCKET_COLORS,
        "allocation": allocation,
        "axis": [{"at": at, "text": percent(at)} for at in (0, 0.25, 0.5, 0.75, 1)],
    }


# -- the page ------------------------------------------------------------------------------------------------
def render_html(
    records: Records,
    title: str = "agent-eval report",
    backend_note: str = "",
    base_dir: str | Path | None = None,
    comparison: GateResult | None = None,
    compared_with: str | None = None,
    include_contaminated: bool = False,
    manifest: Mapping[str, Any] | None = None,
    entry_order: Sequence[str] = (),
    arm_order: Sequence[str] = (),
) -> str:
    """The whole report as one HTML string; segments are read inside ``base_dir`` (the campaign), never outside,
    with the agent and tool each record (or ``manifest``, the campaign's) says made it (campaign/made_by.py).
    With ``comparison`` (the session's compare gate against ``compared_with``) it shows the gate's verdicts; the
    verdict banner leaves out contaminated without-arm runs unless ``include_contaminated``, as the tables do."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    found = aggregate(records, entry_order=entry_order, arm_order=arm_order)
    records = found.records
    tools: dict[str, RetrievalTool] = {}  # each run's, as _load found it
    sessions = {record.id: _load(record, base, manifest, tools) for record in records}
    replayed = replay_source(records)
    found_verdicts = shown(verdicts(found, include_contaminated))
    agents = side_by_side(found_verdicts)  # several agents: each one's arms compared, side by side
    drawn = {**chart_data(found), **({"agents": agents_chart_data(agents)} if agents else {})}
    data = json.dumps(drawn, ensure_ascii=False).replace("<", "\\u003c")
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No network, ever: a report opened from an archive must not call home or break offline.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="backend" id="backend-note">{_e(backend_note or "model backend: not recorded")}</p>',
        f'<p class="meta" id="tool">retrieval tool under test: {_e(tool_name(records))}</p>',
        f'<p class="meta">{len(records)} item record(s) · generated {_e(generated)}</p></header>',
        _warnings(found),
        _replay(replayed),
        "<main>",
        _verdict_banner(found_verdicts, tool_name(records), simulated_cost(records)),
        _comparison(comparison, compared_with, replayed is not None),
        '<section id="tables"><h2>Per entry × arm</h2>',
        '<p class="hint">median [min–max] over the scored runs of each arm</p>',
        _table(found),
        *(_paired_table(found, arm, reference) for arm, reference in found.pairs()),
        "</section>",
        answers_section(found),
        '<section id="charts"><h2>Charts</h2>',
        _chart("chart-residual", "Residual at end of run: the tool's responses (with) vs file access (without)"),
        _chart("chart-sufficiency", "Explore sufficiency: what the agent did next, pooled per arm"),
        _chart("chart-allocation", "Allocation efficiency per explore call"),
        "</section>",
        agents_section(agents, tool_name(records)),
        _occupancy_section(found, sessions, tools),
        '<section id="runs"><h2>Runs</h2>',
        "<p class=\"hint\">each run's figures as <code>-vv</code> prints them, then its transcript: a tool's "
        "result is folded (click to open); leaks of the tool's output and calls the agent's deny refused are "
        "marked</p>",
        *(_run(record, sessions[record.id], tools.get(record.id)) for record in records),
        "</section></main>",
        f'<script type="application/json" id="chart-data">{data}</script>',
        f"<script>{_JS}</script>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def replay_source(records: Sequence[ItemRecord]) -> str | None:
    """The baseline a replayed campaign's recordings came from (None: not a replay)."""
    backends = [r.backend for r in records if isinstance(r.backend, dict)]
    return next((str(b["replay"]) for b in backends if b.get("replay")), None)


def _replay(source: str | None) -> str:
    """A replayed campaign says which figures measure the build and which the recording fixed."""
    if source is None:
        return ""
    return f'<div class="warning" id="replay-note"><pre>{_e(replay_note(source))}</pre></div>'


def _comparison(result: GateResult | None, compared_with: str | None, replayed: bool = False) -> str:
    """The compare gate's rows and verdict: before → after, the mean change with its interval, each rule."""
    if result is None:
        return ""
    verdict = gate_line(result)
    state = "failed" if result.failed else "passed"
    problems = "".join(f'<p class="warning">GATE FAILED: {_e(p)}</p>' for p in result.problems)
    rows = []
    for row in result.rows:
        css = "failed" if row.failed else ("undecided" if row.undecided else "")
        cells = comparison_cells(row, replay_caveat(row.metric) if replayed else None)
        rows.append(f'<tr class="{css}">{"".join(f"<td>{_e(c)}</td>" for c in cells)}</tr>')
    head = "".join(
        f"<th>{_e(h)}</th>"
        for h in ["entry", "arm", "metric", "before", "after", "change", "mean [interval]", "n", "verdict"]
    )
    table = (
        f'<div class="scroll"><table class="figures compare"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        if rows
        else ""
    )
    return (
        f'<section id="comparison" data-gate="{state}"><h2>Compared with {_e(compared_with or "the baseline")}</h2>'
        f'<p class="gate {state}">{_e(verdict)}</p>{problems}'
        '<p class="hint">before → after are medians; the mean of the paired changes (run k against run k) carries '
        "the verdict's interval, its method named (none below 3 pairs, t up to 30, bootstrap from 30)</p>"
        f"{table}</section>"
    )


VERDICT_CLASSES = {BETTER: "better", WORSE: "worse", UNCLEAR: "unclear"}


REPEATS = (
    "run again, a campaign on the stand-in gives these figures again but for times and durations, where the agent "
    "sends the stand-in the same requests; what a CLI puts of its own into them (a shell result's wall time, what it "
    'resends after --resume) moves its token counts, as docs/report.md "Two runs of one campaign" measures per agent'
)


def _verdict_banner(found: list[Verdict], tool: str, stand_in: bool = False) -> str:
    """Which arm did better: a line per entry (and overall), each figure's change with its interval, in words; on
    a stand-in, what running the campaign again would and would not repeat."""
    if not found:
        return ""
    lines = []
    for verdict in found:
        changes = " · ".join(
            f'<span class="change {VERDICT_CLASSES.get(change.word, "no-interval")}" data-figure="{change.figure}">'
            f"{_e(change.text(tool))}</span>"
            for change in verdict.changes
        )
        grade = grade_text(verdict.grades)  # each arm's answers against the key (report/grades.py)
        changes += f' · <span class="grade">{_e(grade)}</span>' if grade else ""
        lines.append(
            f'<p class="verdict-line" data-entry="{_e(verdict.label)}"><strong>{_e(verdict.label)}</strong> '
            f'<span class="meta">{_e(verdict.scope)}</span>: {changes if verdict.pairs else _e(NO_PAIRS)}</p>'
        )
        if verdict.pairs:  # what it rests on and what points the other way; then how many runs would decide
            lines.append(f'<p class="hint verdict-reading">{_e(verdict.reading(tool))}</p>')
            lines.append(f'<p class="hint verdict-power">{_e(verdict.power_line(tool))}</p>')
    return (
        '<section id="verdict" class="banner"><h2>Verdict</h2><p class="hint">the change of each figure, run '
        "against run (mean [95% interval], the method named: none below 3 pairs, t up to 30, bootstrap from 30); "
        "better or worse only when the interval lies wholly on one side of no change, or every pair gave the same "
        "change</p>"
        + "".join(lines)
        + (f'<p class="hint repeats">{_e(REPEATS)}</p>' if stand_in else "")
        + "</section>"
    )


def _occupancy_section(
    found: Aggregate, sessions: Mapping[str, Session | str], tools: Mapping[str, RetrievalTool]
) -> str:
    """Per entry, each run's context over its requests stacked by family, the arms side by side on one scale."""
    tool = tool_name(found.records)
    figures = []
    for row in found.rows:
        arms = found.arms_of(row)
        series: dict[str, list[dict[str, int]]] = {}
        for arm in arms:
            for run in found.groups[row, arm].runs:
                session = sessions.get(run.id)
                if isinstance(session, Session):
                    scores = run.scores or {}
                    window = (scores.get("occupancy") or {}).get("window") or WINDOW_TOKENS
                    found_occupancy = occupancy(session, tools[run.id], window, by_request=True)
                    series[run.id] = found_occupancy.by_request
        top, columns = occupancy_chart.scale(list(series.values()))
        columns_html = []
        for arm in arms:
            group = found.groups[row, arm]
            charts = []
            for run in group.runs:
                if run.id not in series:
                    charts.append(f'<p class="meta">{_e(run.id)}: no transcript to draw</p>')
                    continue
                title = f"{run.id}: context over its requests, by family"
                svg = occupancy_chart.run_chart(series[run.id], tool, top, columns, title)
                caption = occupancy_chart.summary_line(series[run.id], tool, group.has_tool)
                if run.contaminated:
                    caption += " · CONTAMINATED: the tool's output reached it"
                charts.append(
                    f'<figure class="run-occupancy" data-run="{_e(run.id)}"><figcaption>{_e(run.id)} · '
                    f'<span class="meta">{_e(caption)}</span></figcaption>{svg}</figure>'
                )
            columns_html.append(f'<div class="arm"><h4>{_e(arm)}</h4>{"".join(charts)}</div>')
        figures.append(
            f'<div class="entry-occupancy" data-entry="{_e(row.label)}"><h3>{_e(row.label)}</h3>'
            f'<div class="arms" style="grid-template-columns:repeat({max(1, len(arms))},minmax(0,1fr))">'
            f"{''.join(columns_html)}</div></div>"
        )
    if not figures:
        return ""
    return (
        '<section id="occupancy"><h2>Context over the requests, by family</h2>'
        '<p class="hint">each column is one request to the model, as tall as its prompt; the colours are what each '
        "family's results still occupied when it was sent, grey the rest. The last column is the end of the run: "
        "its coloured part is the residual the tables show. The runs of an entry share their scales.</p>"
        f"{occupancy_chart.legend(tool)}{''.join(figures)}</section>"
    )


def _warnings(found: Aggregate) -> str:
    lines = []
    for (row, arm), group in found.groups.items():
        warning = small_n_warning(len(group.runs))
        if warning:
            lines.append(f"<li>{_e(row.label)} · {_e(arm)}: {_e(warning)}</li>")
    errors = sum(group.errors for group in found.groups.values())
    if errors:
        lines.append(f"<li>{errors} run(s) ended in an infrastructure error and are not scored</li>")
    if not lines:
        return ""
    return f'<div class="warning" id="small-n"><strong>Read with care</strong><ul>{"".join(lines)}</ul></div>'


# The per entry × arm table's columns, and the paired table's: figures of the catalogue, printed by its units.
COLUMNS = (
    "residual_tokens",
    "ctx_final",
    "sufficient_share",
    "explore_again_share",
    "allocation",
    "tokens_processed",
    "cost_usd",
    "duration_s",
)
PAIRED_COLUMNS = ("residual_tokens", "tokens_processed", "cost_usd")


def _table(found: Aggregate) -> str:
    tool = tool_name(found.records)
    simulated = " (simulated)" if simulated_cost(found.records) else ""
    titles = [FIGURES[name].title(tool) + (simulated if name == "cost_usd" else "") for name in COLUMNS]
    head = "".join(f"<th>{_e(name)}</th>" for name in ["entry", "arm", "n", *titles])
    rows = []
    for (row, arm), group in found.groups.items():
        warning = small_n_warning(len(group.runs))
        n = len(group.runs)
        n_cell = f'<td class="small-n" title="{_e(warning)}">{n} ⚠</td>' if warning else f"<td>{n}</td>"
        cells = "".join(
            f'<td data-figure="{name}">{_e(unavailable([group], name) or cell(group, name))}</td>' for name in COLUMNS
        )
        rows.append(f"<tr><td>{_e(row.label)}</td><td>{_e(arm)}</td>{n_cell}{cells}</tr>")
    table = f'<table class="figures"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def _paired_table(found: Aggregate, arm: str, reference: str) -> str:
    """Arm − reference per entry, run against run, with the interval their number allows of the mean difference."""
    tool = tool_name(found.records)
    simulated = " (simulated)" if simulated_cost(found.records) else ""
    lines = []
    for row in found.rows:
        if (arm, reference) not in found.pairs(row):
            continue
        cells = []
        for name in PAIRED_COLUMNS:
            text = paired_cell(found, row, arm, reference, name)
            if text is None:  # no pair: a figure the agent's records do not give is said so, not warned about
                missing = unavailable((found.group(row, arm), found.group(row, reference)), name)
                kind = "not-available" if missing else "small-n"
                text = missing or small_n_warning(0) or ""
                cells.append(f'<td data-figure="{name}" class="{kind}">{_e(text)}</td>')
                continue
            cells.append(f'<td data-figure="{name}">{_e(text)}</td>')
        lines.append(f"<tr><td>{_e(row.label)}</td>{''.join(cells)}</tr>")
    if not lines:
        return ""
    titles = [FIGURES[n].title(tool) + (simulated if n == "cost_usd" else "") for n in PAIRED_COLUMNS]
    head = "".join(f"<th>{_e(name)}</th>" for name in ["entry", *titles])
    return (
        f'<h3>{_e(arm)} − {_e(reference)}, paired by run</h3><p class="hint">mean difference [95% interval] '
        f"(its method: t up to 30 pairs, bootstrap from 30; none below 3); negative means {_e(arm)} spent less</p>"
        f'<div class="scroll"><table class="figures paired" data-arms="{_e(arm)} − {_e(reference)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table></div>"
    )


def _chart(chart_id: str, caption: str) -> str:
    return f'<figure><figcaption>{_e(caption)}</figcaption><div class="chart" id="{chart_id}"></div></figure>'


# -- one run's transcript ------------------------------------------------------------------------------------
def _load(
    record: ItemRecord, base: Path, manifest: Mapping[str, Any] | None, tools: dict[str, RetrievalTool]
) -> Session | str:
    """The run's transcript, read by the agent that made it, or why there is none to show (as the HTML that says
    so); the tool it ran with (its fingerprints and explore tool, to score it again) goes into ``tools``."""
    try:
        segments = [inside(base, s) for s in record.segments]
    except StoreError as exc:
        return f'<p class="warning">{_e(exc)}</p>'
    missing = [p for p in segments if not p.is_file()]
    if not segments:
        return '<p class="meta">no transcript segments recorded</p>'
    if missing:
        return f'<p class="warning">segment not found: {_e(missing[0])}</p>'
    try:
        tool = tool_of(record, manifest)
        session = agent_of(record, manifest).read_transcript(segments)
    except (ValueError, OSError) as exc:  # a TranscriptError, or an agent or tool that cannot be loaded here
        return f'<p class="warning">unreadable transcript: {_e(exc)}</p>'
    tools[record.id] = tool
    return session


def _run(record: ItemRecord, session: Session | str, tool: RetrievalTool | None) -> str:
    scores = record.scores or {}
    outcome = record.outcome
    label = " · ".join(str(x) for x in (record.entry, record.arm_label, record.run) if x is not None)
    summary = (
        f'<summary><span class="outcome {_e(outcome)}">{_e(outcome)}</span> '
        f'<strong>{_e(record.id)}</strong> <span class="meta">{_e(label)}</span></summary>'
    )
    body = [_run_meta(record), _leaks(record, scores)]
    if isinstance(session, str) or tool is None:
        body.append(str(session))
    else:
        if record.scored:
            body.append(_blocks(session, scores, tool))
        body.append(_transcript(session, scores, tool))
    return f'<details class="run" id="run-{_e(record.id)}">{summary}{"".join(body)}</details>'


def _blocks(session: Session, scores: Mapping[str, Any], tool: RetrievalTool) -> str:
    """The run's blocks as ``-vv`` prints them (records keep no text: scored again off the transcript)."""
    window = (scores.get("occupancy") or {}).get("window") or WINDOW_TOKENS
    text = render_scorecard(score(session, tool, window))
    return (
        '<details class="blocks"><summary>figures of this run, as <code>-vv</code> prints them</summary>'
        f"<pre>{_e(text)}</pre></details>"
    )


def _leaks(record: ItemRecord, scores: dict[str, Any]) -> str:
    """The results that carried the tool's output to the agent; a contaminated without-arm says so first."""
    leaks = (scores.get("contamination") or {}).get("leaks") or []
    if not leaks:
        return ""
    void = "CONTAMINATED: " if not record.has_tool else ""
    items = "".join(f"<li>{_e(describe_leak(leak))}</li>" for leak in leaks)
    return f'<div class="warning leaks">{void}{len(leaks)} result(s) carried the tool\'s output<ul>{items}</ul></div>'


def _run_meta(record: ItemRecord) -> str:
    rows = []
    for question in record.questions:
        rows.append(f"<li>question: {_e(question)}</li>")
    if record.error:
        rows.append(f'<li class="error">error: {_e(record.error)}</li>')
    known = {
        "tool_version": record.tool_version,
        record.agent or "agent": record.agent_version,
        "backend": backend_name(record.backend),
    }
    versions = ", ".join(f"{k} {v}" for k, v in known.items() if v)
    if versions:
        rows.append(f"<li>{_e(versions)}</li>")
    model = model_fields([record], record.model)
    if model["model"]:
        rows.append(f"<li>model: {_e(model.get('model_note') or model['model'])}</li>")
    timing = [f"{k} {seconds(v)}" for k, v in (("wall_s", record.wall_s), ("agent_s", record.agent_s)) if v is not None]
    if timing:
        rows.append(f"<li>{_e(' · '.join(timing))}</li>")
    if record.stalled:
        note = f"{stall_note(record.driver or {})}: its time is no measurement (no duration in the tables)"
        rows.append(f'<li class="warning stalled">{_e(note)}</li>')
    return f'<ul class="run-meta">{"".join(rows)}</ul>' if rows else ""


def _transcript(session: Session, scores: dict[str, Any], tool: RetrievalTool) -> str:
    """The timeline, with each explore call marked by its bucket and the files the answer cited from it."""
    verdict_list = (scores.get("sufficiency") or {}).get("calls") or []
    by_id = {v["call"]: v for v in verdict_list if v.get("call")}
    in_order = iter(verdict_list)  # records written before verdicts carried the call id: in session order
    allocation = scores.get("allocation") or {}
    index_of = {c["call"]: c["index"] for c in allocation.get("calls") or [] if c.get("call")}
    leaks = (scores.get("contamination") or {}).get("leaks") or []
    leaked = {leak.get("call_id"): leak.get("fingerprint") for leak in leaks}
    commands = {c.get("call_id"): c for c in (scores.get("contamination") or {}).get("commands") or []}
    files_by_call: dict[int, list[dict[str, Any]]] = {}
    for use in allocation.get("files") or []:
        files_by_call.setdefault(use["call"], []).append(use)
    # Allocation numbers only the answered explore calls, in session order.
    marks: dict[str, str] = {}
    answered = 0
    for call in session.calls:
        if not tool.is_explore(call.name):
            continue
        verdict = by_id.get(call.id) if by_id else next(in_order, None)
        cited = []
        if call.answered:
            answered += 1
            cited = files_by_call.get(index_of.get(call.id, answered), [])
        marks[call.id] = _explore_mark(verdict, cited)

    out = []
    for item in _results_in_call_order(session):
        thread = "" if item.thread == "main" else f'<span class="thread">subagent {_e(item.thread[-8:])}</span> '
        if isinstance(item, Message):
            if item.text.strip():
                out.append(f'<div class="msg">{thread}<pre>{_e(_clip(item.text, TEXT_CHARS))}</pre></div>')
            for call in item.calls:
                explore = " explore" if call.id in marks else ""
                args = json.dumps(call.input, ensure_ascii=False)
                cli_mark = _cli_mark(commands.get(call.id), session.denial)
                out.append(
                    f'<div class="call{explore}" data-call="{_e(call.id)}">{thread}<code class="tool">'
                    f"{_e(call.name)}</code> <code>{_e(_clip(args, 400))}</code>{cli_mark}"
                    f"{marks.get(call.id, '')}</div>"
                )
            if item.error:
                out.append(f'<div class="warning">API error: {_e(item.error)}</div>')
        elif isinstance(item, ToolResult):
            flag = ' <span class="error">error</span>' if item.is_error else ""
            css = "result"
            if item.call_id in leaked:
                flag += f' <span class="error leak">tool output: {_e(leaked[item.call_id])}</span>'
                css += " leaked"
            clipped = "" if len(item.text) <= RESULT_CHARS else f", first {RESULT_CHARS:,} shown"
            out.append(
                f'<details class="{css}"><summary>{thread}result {len(item.text):,} chars{clipped}{flag}</summary>'
                f"<pre>{_e(item.text[:RESULT_CHARS])}</pre></details>"
            )
        elif isinstance(item, UserText):
            out.append(f'<div class="user">{thread}<pre>{_e(_clip(item.text, TEXT_CHARS))}</pre></div>')
        elif isinstance(item, Compaction):
            out.append(f'<div class="compaction">compaction (pre {item.pre_tokens or "?"} tokens)</div>')
    answers = session.answer_texts()
    if answers:
        answer = "\n\n".join(answers)
        out.append(f'<div class="answer"><h4>Final answer</h4><pre>{_e(_clip(answer, TEXT_CHARS))}</pre></div>')
    return f'<div class="timeline">{"".join(out)}</div>'


def _results_in_call_order(session: Session) -> list[Any]:
    """The timeline, each run of consecutive tool results in the order of their calls: an agent records the
    results of parallel calls as they finish, which no two runs share (docs/report.md, "One order")."""
    position = {call.id: index for index, call in enumerate(session.calls)}
    out: list[Any] = []
    results: list[ToolResult] = []
    for item in [*session.timeline, None]:
        if isinstance(item, ToolResult):
            results.append(item)
            continue
        out += sorted(results, key=lambda result: position.get(result.call_id, len(position)))
        results = []
        if item is not None:
            out.append(item)
    return out


def _cli_mark(command: Mapping[str, Any] | None, denial: str) -> str:
    """A shell call the contamination gate read as running the tool's CLI: refused by the agent's deny (``denial``,
    as its records word it), or not."""
    if command is None:
        return ""
    if command.get("blocked"):
        return f' <span class="denied">CLI call {_e(denial)}</span>'
    if command.get("printed"):
        return ' <span class="error leak">CLI call ran and printed: the arm is void</span>'
    return ' <span class="denied">CLI call, showed nothing</span>'


def _explore_mark(verdict: dict[str, Any] | None, cited: list[dict[str, Any]]) -> str:
    if verdict is None:
        return ""
    bucket = verdict.get("bucket")
    if bucket is None:
        badge = f'<span class="bucket errored">{_e(verdict.get("reaction", "errored"))} — not bucketed</span>'
    else:
        note = f" {verdict['note']}" if verdict.get("note") else ""
        badge = (
            f'<span class="bucket" data-bucket="{_e(bucket)}" style="background:{BUCKET_COLORS[bucket]}">'
            f"{_e(BUCKET_LABELS[bucket])}</span> → {_e(verdict.get('reaction', ''))}{_e(note)}"
        )
    rows = "".join(
        f'<li class="{"cited" if use.get("via") else "unused"}"><code>{_e(use["path"])}</code> '
        f"{use['chars']:,} chars · "
        f"{_e(_via(use))}</li>"
        for use in cited
    )
    files = f'<ul class="files">{rows}</ul>' if rows else ""
    return f'<div class="verdict">{badge}{files}</div>'


def _via(use: dict[str, Any]) -> str:
    if not use.get("via"):
        return "not cited"
    if use.get("symbol"):
        return f"cited via {use['via']} {use['symbol']}"
    return f"cited via {use['via']}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n… ({len(text) - limit:,} more chars)"


# -- the campaign's report -----------------------------------------------------------------------------------
def write_html(
    campaign: Campaign,
    comparison: GateResult | None = None,
    compared_with: str | None = None,
    include_contaminated: bool = False,
    entry_order: Sequence[str] = (),
    arm_order: Sequence[str] = (),
) -> Path:
    """``report.html`` in the campaign folder, from its items as recorded (and the session's compare gate), its
    entries in ``entry_order`` (the corpus's)."""
    records = campaign.items()
    named = next((r.backend for r in records if backend_name(r.backend)), None)
    backend = named or campaign.manifest.get("backend")
    title = f"agent-eval campaign {campaign.id}"
    note = backend_note(backend) + agents_note(records, backend_name(backend))  # with several: which ran on it
    configured = [arm.get("label") for arm in (campaign.manifest.get("config") or {}).get("arms") or []]
    arm_order = arm_order or [label for label in configured if isinstance(label, str)]  # the session's --arms
    text = render_html(
        records, title, note, campaign.path, comparison, compared_with, include_contaminated, campaign.manifest,
        entry_order, arm_order
    )
    path = campaign.path / REPORT
    write_atomic(path, text)
    return path


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:14px 24px}header h1{margin:0 0 4px;font-size:20px}
.backend{background:#fff3cd;color:#5c4400;padding:6px 10px;border-radius:4px;display:inline-block;margin:4px 0}
.meta{color:#888;font-size:12px}header .meta{color:#b0bec5}
main{padding:8px 24px 40px}h2{border-bottom:1px solid #ddd;padding-bottom:4px}
.warning{background:#fdecea;border-left:4px solid #d9534f;padding:8px 14px;margin:12px 24px}
.warning ul{margin:4px 0}.hint{color:#666;margin-top:-6px}
.scroll{overflow-x:auto}table.figures{border-collapse:collapse;background:#fff;font-variant-numeric:tabular-nums}
table.figures th,table.figures td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
table.figures th{background:#eceff1}td.small-n{background:#fdecea;color:#a94442;font-weight:bold}
figure{background:#fff;border:1px solid #ddd;border-radius:4px;padding:10px;margin:12px 0}
figcaption{font-weight:600;margin-bottom:6px}.chart svg{max-width:100%;height:auto}
.chart text{font-size:11px;fill:#333}.chart .axis{stroke:#999}.chart .empty{fill:#999}
details.run{background:#fff;border:1px solid #ddd;border-radius:4px;margin:6px 0;padding:4px 10px}
details.run>summary{cursor:pointer;padding:4px 0}.outcome{padding:1px 6px;border-radius:3px;color:#fff}
.outcome.passed{background:#5cb85c}.outcome.failed{background:#d9534f}.outcome.error{background:#777}
.timeline pre{white-space:pre-wrap;margin:2px 0;font-size:12px}.msg{border-left:3px solid #90a4ae;padding-left:8px}
.user{border-left:3px solid #263238;padding-left:8px;background:#eceff1}
.call{margin:4px 0;padding:2px 6px;background:#f5f5f5}.call.explore{background:#e8f4fd;border:1px solid #5bc0de}
code.tool{font-weight:bold}.thread{font-size:11px;background:#ddd;padding:0 4px;border-radius:3px}
details.result{margin:2px 0 2px 16px;color:#555}details.result pre{max-height:360px;overflow:auto}
details.result summary{cursor:pointer;font-size:12px}
.bucket{color:#fff;padding:1px 6px;border-radius:3px;font-size:12px}.bucket.errored{background:#777}
.verdict{margin:4px 0 2px 12px}.files{margin:2px 0;font-size:12px}.files .cited{color:#2e7d32}
.files .unused{color:#999}.compaction{text-align:center;color:#a94442;border-top:2px dashed #a94442}
tr.failed td{background:#fdecea;color:#a94442;font-weight:bold}tr.undecided td{background:#fff3cd}
.gate{font-weight:bold;padding:6px 10px;border-radius:4px;display:inline-block}
.gate.failed{background:#d9534f;color:#fff}.gate.passed{background:#5cb85c;color:#fff}
.answer{border:1px solid #5cb85c;background:#f1f8f1;padding:4px 10px;margin-top:8px}.error{color:#a94442}
.banner{background:#fff;border:1px solid #ddd;border-left:6px solid #263238;border-radius:4px;padding:2px 16px 8px;
margin:16px 0}.banner h2{border:0;margin:8px 0 4px}.verdict-line{margin:6px 0}
.change{padding:1px 6px;border-radius:3px;white-space:nowrap;display:inline-block;margin:1px 0}
.change.better{background:#e3f2e3;color:#1b5e20}.change.worse{background:#fdecea;color:#a94442}
.change.unclear,.change.no-interval{background:#eceff1;color:#455a64}
.legend .key{margin-right:14px;white-space:nowrap;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.arms{display:grid;gap:12px}.arm h4{margin:4px 0}
figure.run-occupancy{margin:6px 0}svg.occupancy{max-width:100%;height:auto;display:block}
svg.occupancy text{font-size:11px;fill:#333}svg.occupancy .axis{stroke:#999}
.timeline pre,.call code{overflow-wrap:anywhere}.denied{background:#fff3cd;color:#5c4400;padding:0 4px;
border-radius:3px;font-size:12px}details.result.leaked{border-left:4px solid #d9534f;padding-left:6px}
details.blocks{margin:6px 0}details.blocks pre{font-size:12px;overflow-x:auto;background:#f5f5f5;padding:6px}
"""

_JS = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("chart-data").textContent);

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(NS, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function svg(host, width, height) {
    var root = el("svg", {viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img"});
    host.appendChild(root);
    return root;
  }
  function done(host) { host.setAttribute("data-rendered", "true"); }
  // The widest of these labels as drawn (a margin sized to it: no label is cut, whatever an entry or agent is named).
  function widest(host, labels, attrs) {
    var probe = svg(host, 10, 10), most = 0;
    labels.forEach(function (t) { most = Math.max(most, el("text", attrs || {}, probe, t).getComputedTextLength()); });
    host.removeChild(probe);
    return Math.ceil(most);
  }
  function empty(root, width, text) {
    el("text", {x: width / 2, y: 30, "text-anchor": "middle", "class": "empty"}, root, text);
  }

  function residual(host) {
    // the right margin holds the label after the longest bar ("without 55.6k file-access (n=1!)")
    var rows = data.residual, barH = 14, H = 20, max = 0, ends = [];
    var label = function (a) {
      return a.arm + " " + a.text.median + " " + a.kind + (a.spread.n < 2 ? " (n=" + a.spread.n + "!)" : "");
    };
    rows.forEach(function (r) {
      H += Math.max(1, r.arms.length) * (barH + 4) + 14;
      r.arms.forEach(function (a) { if (a.spread) { max = Math.max(max, a.spread.max); ends.push(label(a)); } });
    });
    var left = Math.max(150, 16 + widest(host, rows.map(function (r) { return r.entry; }), {"font-weight": "bold"}));
    var right = Math.max(230, 12 + widest(host, ends)), W = left + 380 + right;
    var root = svg(host, W, H);
    if (!rows.length || !max) { empty(root, W, "no residual figures"); return done(host); }
    var scale = function (v) { return left + (W - left - right) * v / max; };
    var y = 14;
    rows.forEach(function (r) {
      el("text", {x: left - 8, y: y + 11, "text-anchor": "end", "font-weight": "bold"}, root, r.entry);
      r.arms.forEach(function (a) {
        var s = a.spread, color = a.kind === "tool" ? "#1e88e5" : "#8d6e63";
        if (!s) {
          el("text", {x: left + 4, y: y + 11, "class": "empty"}, root, a.arm + ": not scored");
          y += barH + 4;
          return;
        }
        var bar = el("rect", {x: left, y: y, width: Math.max(1, scale(s.median) - left), height: barH,
                              fill: color, "class": "bar " + a.kind}, root);
        el("title", {}, bar, a.arm + " " + a.kind + " residual, median " + a.text.median + " [" + a.text.min + "–" +
           a.text.max + "] n=" + s.n);
        el("line", {x1: scale(s.min), x2: scale(s.max), y1: y + barH / 2, y2: y + barH / 2, stroke: "#222"}, root);
        el("text", {x: scale(s.max) + 6, y: y + 11}, root, label(a));
        y += barH + 4;
      });
      y += 14;
    });
    el("line", {x1: left, x2: left, y1: 8, y2: H - 8, "class": "axis"}, root);
    done(host);
  }

  function sufficiency(host) {
    var rows = data.buckets, keys = Object.keys(data.bucketLabels), barH = 22;
    var names = rows.map(function (r) { var n = 0; keys.forEach(function (k) { n += r.counts[k] || 0; });
                                        return r.arm + " (" + n + " calls)"; });
    var left = Math.max(150, 16 + widest(host, names)), W = left + 570;
    var H = 66 + rows.length * (barH + 12), root = svg(host, W, H);
    if (!rows.length) { empty(root, W, "no explore calls"); return done(host); }
    rows.forEach(function (r, i) {
      var y = 10 + i * (barH + 12), total = 0, x = left;
      keys.forEach(function (k) { total += r.counts[k] || 0; });
      el("text", {x: left - 8, y: y + 15, "text-anchor": "end"}, root, r.arm + " (" + total + " calls)");
      if (!total) { el("text", {x: left + 4, y: y + 15, "class": "empty"}, root, "no answered explore call"); return; }
      keys.forEach(function (k) {
        var n = r.counts[k] || 0, w = (W - left - 20) * n / total;
        if (!n) return;
        var seg = el("rect", {x: x, y: y, width: w, height: barH, fill: data.bucketColors[k],
                              "class": "bucket " + k}, root);
        el("title", {}, seg, data.bucketLabels[k] + ": " + n + " (" + r.shares[k] + ")");
        if (w > 34) {
          el("text", {x: x + w / 2, y: y + 15, "text-anchor": "middle", style: "fill:#fff"}, root, r.shares[k]);
        }
        x += w;
      });
    });
    // The legend wraps to a second line rather than running off the chart.
    var lx = left, ly = H - 24;
    keys.forEach(function (k) {
      var label = el("text", {x: lx + 14, y: ly}, root, data.bucketLabels[k]);
      var width = 24 + label.getComputedTextLength();
      if (lx + width > W && lx > left) {
        lx = left;
        ly += 16;
        label.setAttribute("x", lx + 14);
        label.setAttribute("y", ly);
      }
      el("rect", {x: lx, y: ly - 10, width: 10, height: 10, fill: data.bucketColors[k]}, root);
      lx += width;
    });
    done(host);
  }

  function allocation(host) {
    var rows = data.allocation, right = 28, rowH = 30, H = 40 + rows.length * rowH;
    var left = Math.max(150, 16 + widest(host, rows.map(function (r) { return r.group; }))), W = left + 570;
    var root = svg(host, W, H);
    if (!rows.length) { empty(root, W, "no explore call returned a file section"); return done(host); }
    var scale = function (v) { return left + (W - left - right) * v; };
    data.axis.forEach(function (t) {
      el("line", {x1: scale(t.at), x2: scale(t.at), y1: 8, y2: H - 22, "class": "axis", "stroke-dasharray": "2,3"},
         root);
      el("text", {x: scale(t.at), y: H - 8, "text-anchor": "middle"}, root, t.text);
    });
    rows.forEach(function (r, i) {
      var y = 20 + i * rowH;
      el("text", {x: left - 8, y: y + 4, "text-anchor": "end"}, root, r.group);
      r.calls.forEach(function (c, j) {
        // A small fixed vertical offset per call, so equal efficiencies stay visible as separate dots.
        var dot = el("circle", {cx: scale(c.value), cy: y + ((j % 3) - 1) * 5, r: 5, fill: "#1e88e5",
                                "fill-opacity": 0.6, "class": "call-dot"}, root);
        el("title", {}, dot, "run " + c.run + " call " + c.index + " “" + c.query + "”: " + c.text);
      });
    });
    done(host);
  }

  function agents(host) {
    // Per entry, a bar per agent from no change to its mean change, a whisker over its interval.
    var rows = data.agents, barH = 14, H = 20, max = 0, order = [], ends = [];
    var colors = ["#1e88e5", "#8e24aa", "#43a047"];
    rows.forEach(function (r) {
      r.agents.forEach(function (a) { ends.push(a.title + " " + a.text); });
    });
    var left = Math.max(150, 16 + widest(host, rows.map(function (r) { return r.entry; }), {"font-weight": "bold"}));
    var right = Math.max(260, 12 + widest(host, ends)), W = left + 350 + right;
    rows.forEach(function (r) {
      H += Math.max(1, r.agents.length) * (barH + 4) + 14;
      r.agents.forEach(function (a) {
        [a.mean, a.low, a.high].forEach(function (v) { if (v !== null) max = Math.max(max, Math.abs(v)); });
      });
    });
    var root = svg(host, W, H), half = (W - left - right) / 2, zero = left + half;
    var scale = function (v) { return zero + half * v / (max || 1); };
    var y = 14;
    rows.forEach(function (r) {
      el("text", {x: left - 8, y: y + 11, "text-anchor": "end", "font-weight": "bold"}, root, r.entry);
      r.agents.forEach(function (a) {
        if (order.indexOf(a.agent) < 0) order.push(a.agent);
        if (a.mean === null) {
          el("text", {x: zero + 4, y: y + 11, "class": "empty"}, root, a.title + ": no paired run");
          y += barH + 4;
          return;
        }
        var to = scale(a.mean), color = colors[order.indexOf(a.agent) % colors.length];
        var bar = el("rect", {x: Math.min(zero, to), y: y, width: Math.max(1, Math.abs(to - zero)), height: barH,
                              fill: color, "class": "bar agent", "data-agent": a.agent}, root);
        el("title", {}, bar, a.title + " " + r.arms + ": " + a.text);
        if (a.low !== null) {
          el("line", {x1: scale(a.low), x2: scale(a.high), y1: y + barH / 2, y2: y + barH / 2, stroke: "#222"}, root);
        }
        el("text", {x: Math.max(scale(a.mean), a.high !== null ? scale(a.high) : zero, zero) + 6, y: y + 11}, root,
           a.title + " " + a.text);
        y += barH + 4;
      });
      y += 14;
    });
    el("line", {x1: zero, x2: zero, y1: 8, y2: H - 8, "class": "axis"}, root);
    done(host);
  }

  var charts = [["chart-residual", residual], ["chart-sufficiency", sufficiency], ["chart-allocation", allocation]];
  if (data.agents) charts.push(["chart-agents", agents]);  // several agents only
  charts.forEach(function (pair) { pair[1](document.getElementById(pair[0])); });
  document.body.setAttribute("data-charts-rendered", String(charts.length));
})();
"""
