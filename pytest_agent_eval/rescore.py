"""Score old transcripts again with today's classifier.

Seed 001 could not tell whether a moved baseline meant the classifier moved or the logs did; rescoring the
same files with the current metrics answers that. Two layouts are read:

* a campaign folder (``manifest.json`` + ``items.jsonl``): every item's segments, its record kept and its
  ``scores`` replaced;
* a folder laid out by the original harness: ``run-<label>.jsonl`` with later turns in
  ``run-<label>.t2.jsonl``, … (searched recursively; ``ab-readme/<repo>/`` subfolders name the entry).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.metrics.sufficiency import BUCKETS
from pytest_agent_eval.report.compare import residual
from pytest_agent_eval.report.stats import percent, tokens
from pytest_agent_eval.report.store import MANIFEST, Campaign
from pytest_agent_eval.score import DEFAULT_WINDOW, score_session
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import Session, TranscriptError, segment_files

Record = dict[str, Any]

_LATER_SEGMENT = re.compile(r"\.t\d+\.jsonl$")
# run-<entry>-<arm>-<n>, where the entry may itself contain dashes and either end may be missing.
_LABEL = re.compile(r"^run-?(?:(?P<entry>.+?)-)??(?P<arm>with|without|new|baseline|base)(?:-(?P<run>\d+))?$")
# Words the original harness put in labels that name the harness mode, not the corpus entry.
_MODES = frozenset({"headless", "tmux", "interactive"})


def find_sessions(folder: str | Path) -> list[list[Path]]:
    """Each session's segment files, in order: a campaign's items, else every ``run-*.jsonl`` family."""
    folder = Path(folder)
    if folder.is_file():
        return [segment_files(folder)]
    if (folder / MANIFEST).is_file():
        campaign = Campaign.open(folder)
        return [[campaign.resolve(s) for s in item["segments"]] for item in campaign.items() if item.get("segments")]
    firsts = sorted(p for p in folder.rglob("run*.jsonl") if not _LATER_SEGMENT.search(p.name))
    return [segment_files(p) for p in firsts]


def parse_label(label: str) -> dict[str, Any]:
    """``run-express-with-1`` → entry express, arm with, run 1; what cannot be read stays None."""
    match = _LABEL.match(label)
    if match is None:
        return {"entry": None, "arm": None, "run": None}
    entry = match["entry"]
    if entry is not None:
        words = [w for w in entry.split("-") if w not in _MODES]
        entry = "-".join(words) or None
    return {"entry": entry, "arm": match["arm"], "run": int(match["run"]) if match["run"] else None}


def rescore(folder: str | Path, tool: RetrievalTool = CODEGRAPH, window: int = DEFAULT_WINDOW) -> list[Record]:
    """Item records for every session under ``folder``, scored with the current metrics."""
    folder = Path(folder)
    if folder.is_dir() and (folder / MANIFEST).is_file():
        return _rescore_campaign(Campaign.open(folder), tool, window)
    root = folder.parent if folder.is_file() else folder
    records = []
    for files in find_sessions(folder):
        first = files[0]
        label = first.name[: -len(".jsonl")]
        guess = parse_label(label)
        relative = first.parent.relative_to(root)
        # ab-readme keeps one folder per repo: that folder is the entry when the label does not name one.
        entry = guess["entry"] or (relative.parts[-1] if relative.parts else label)
        item_id = "/".join([*relative.parts, label])
        record: Record = {
            "id": item_id,
            "entry": entry,
            "arm": guess["arm"],
            "run": guess["run"],
            "segments": [str(p.relative_to(root)) for p in files],
        }
        records.append(_scored(record, files, tool, window))
    return records


def _rescore_campaign(campaign: Campaign, tool: RetrievalTool, window: int) -> list[Record]:
    records = []
    for item in campaign.items():
        segments = item.get("segments") or []
        if not segments:
            records.append(dict(item))
            continue
        files = [campaign.resolve(s) for s in segments]
        # Gates are not re-run here, so the outcome the campaign recorded stands unless the transcript is broken.
        records.append(_scored(dict(item), files, tool, window, keep_outcome=True))
    return records


def _scored(record: Record, files: list[Path], tool: RetrievalTool, window: int, keep_outcome: bool = False) -> Record:
    try:
        session = Session.from_files(files)
    except (TranscriptError, OSError) as exc:
        record.update(outcome="error", error=str(exc), scores=None)
        return record
    scores = score_session(session, tool, window)
    record["scores"] = scores
    if session.infra_error:
        record.update(outcome="error", error=session.infra_error)
    elif not keep_outcome or "outcome" not in record:
        # A rescored folder has no gates: "passed" here means a usable transcript that scored.
        record.update(outcome="passed", error=None)
    return record


def render_rescore(records: list[Record]) -> str:
    """One row per session: label, turns, residual, sufficiency counts, allocation; then the pooled buckets."""
    rows = []
    pooled = dict.fromkeys((key for key, _, _ in BUCKETS), 0)
    for record in records:
        scores = record.get("scores")
        if not scores:
            rows.append([record["id"], "", "", "", "", f"error: {record.get('error') or 'not scored'}"])
            continue
        counts = scores["sufficiency"]["counts"]
        for key in pooled:
            pooled[key] += counts.get(key, 0)
        value = residual(record)
        kind = "file-access" if record.get("arm") == "without" else tool_name(scores)
        efficiency = scores["allocation"].get("efficiency")
        rows.append(
            [
                record["id"],
                scores["occupancy"].get("turns", ""),
                f"{tokens(value)} {kind}" if value is not None else "n/a",
                " / ".join(str(counts.get(key, 0)) for key in pooled),
                percent(efficiency) if efficiency is not None else "n/a",
                f"error: {record['error']}" if record.get("outcome") == "error" else "",
            ]
        )
    head = ["label", "turns", "residual", "again / returned / missed / grep / moved on", "allocation", ""]
    table = tabulate(rows, headers=head, tablefmt="simple", disable_numparse=True)
    total = sum(pooled.values())
    shares = (
        " · ".join(f"{label} {pooled[key]} ({pooled[key] / total:.0%})" for key, label, _ in BUCKETS)
        if total
        else "no answered explore call"
    )
    return f"{table}\n\npooled over {len(records)} session(s), {total} answered explore calls: {shares}\n"


def tool_name(scores: dict[str, Any]) -> str:
    return str(scores.get("tool") or CODEGRAPH.name)
