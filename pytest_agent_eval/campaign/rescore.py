"""Score old transcripts again with today's classifier.

A baseline that moved may mean the classifier moved or the transcripts did; rescoring the same files with the
current metrics tells which. Two layouts are read:

* a campaign folder (``manifest.json`` + ``items.jsonl``): every item's segments, its record kept and its
  ``scores`` replaced; an item whose segments cannot be read (missing, or a path leading outside the
  campaign) is an item in error saying why, and nothing outside the campaign folder is read;
* a folder laid out by the original harness: ``run-<label>.jsonl`` with later turns in
  ``run-<label>.t2.jsonl``, … (searched recursively; ``ab-readme/<repo>/`` subfolders name the entry).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.recognition import recognise, say_no_usage
from pytest_agent_eval.agents.registry import recorded_tool
from pytest_agent_eval.campaign.made_by import agent_of, tool_of
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import ITEMS, MANIFEST, PROBE_FOLDER, Campaign, StoreError
from pytest_agent_eval.corpus.cases import Arm
from pytest_agent_eval.corpus.keys import AnswerKey
from pytest_agent_eval.metrics.figures import figures_of
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model.record import requests_beside
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import Session, TranscriptError, is_later_segment, segment_files

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
        sessions = []
        for item in campaign.items():
            try:
                sessions.append(campaign.segments(item))
            except StoreError:
                continue  # rescore() says why; a list of sessions has no place for it
        return [files for files in sessions if files]
    # A campaign item's block-probe/ holds the harness's own check that the CLI is blocked, not an eval session.
    firsts = sorted(p for p in folder.rglob("run*.jsonl") if not is_later_segment(p) and p.parent.name != PROBE_FOLDER)
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


def rescore(
    folder: str | Path,
    tool: RetrievalTool | None = None,
    window: int = WINDOW_TOKENS,
    problems: list[str] | None = None,
) -> list[ItemRecord]:
    """Item records for every session under ``folder``, scored with the current metrics; lines of a campaign
    that cannot be read at all are named in ``problems``. Without ``tool``, each item is scored with the tool its
    record (or campaign) names, read back from where it came; a folder without records, with the tool the
    original harness ran (codegraph)."""
    folder = Path(folder)
    said: list[str] = [] if problems is None else problems
    if folder.is_dir() and (folder / MANIFEST).is_file():
        campaign = Campaign.open(folder)
        records = _rescore_campaign(campaign, tool, window, said)
        said += campaign.problems
        return records
    if problems is not None and folder.is_dir() and (folder / ITEMS).is_file():
        problems.append(
            f"{folder}: a campaign's {ITEMS} without its {MANIFEST}: its transcripts are rescored as a plain "
            "folder's, named by their files, without the records' entries, arms and runs"
        )
    root = folder.parent if folder.is_file() else folder
    tool = tool or recorded_tool(None)
    records = []
    for files in find_sessions(folder):
        first = files[0]
        # the file's name without .jsonl (run-express-with-1), or without its suffix (a transcript saved as .txt)
        label = (first.name[: -len(".jsonl")] if first.name.endswith(".jsonl") else first.stem) or first.name
        guess = parse_label(label)
        relative = first.parent.relative_to(root)
        # ab-readme keeps one folder per repo: that folder is the entry when the label does not name one.
        entry = guess["entry"] or (relative.parts[-1] if relative.parts else label)
        item_id = "/".join([*relative.parts, label])
        found = recognise(first) if first.is_file() else None  # a plain folder names no agent: its files say whose
        record = ItemRecord.from_dict(
            {
                "id": item_id,
                "entry": entry,
                "arm": guess["arm"],
                "run": guess["run"],
                "segments": [str(p.relative_to(root)) for p in files],
                "agent": found.agent.name if found is not None and found.claimed else None,
            }
        )
        records += _scored(record, files, tool, window, said=said)
    return records


def _sessions(record: ItemRecord, files: list[Path], manifest: dict[str, Any] | None = None) -> list[Session]:
    """The sessions of a record's files, read by its agent (found where the record says it came from) as the record
    it is (several for a log of several runs)."""
    agent = agent_of(record, manifest)
    found = recognise(files[0], [agent])
    sessions = agent.read_record(files, found.kind) if found.claimed else [agent.read_transcript(files)]
    for session in sessions:
        say_no_usage(session)
    return sessions


def _rescore_campaign(
    campaign: Campaign, tool: RetrievalTool | None, window: int, said: list[str]
) -> list[ItemRecord]:
    records = []
    for item in campaign.items():
        try:
            item_tool = tool or tool_of(item, campaign.manifest)
        except ValueError as exc:
            item.outcome, item.error, item.scores, item.figures = "error", str(exc), None, {}
            records.append(item)
            continue
        if not item.segments:
            records.append(item)
            continue
        try:
            files = campaign.segments(item)
        except StoreError as exc:
            item.outcome, item.error, item.scores, item.figures = "error", str(exc), None, {}
            records.append(item)
            continue
        # Gates are not re-run here, so the outcome the campaign recorded stands unless the transcript is broken.
        records += _scored(item, files, item_tool, window, keep_outcome=True, said=said, manifest=campaign.manifest)
    return records


def _scored(record: ItemRecord, files: list[Path], tool: RetrievalTool, window: int, keep_outcome: bool = False,
            said: list[str] | None = None, manifest: dict[str, Any] | None = None) -> list[ItemRecord]:  # fmt: skip
    """The record scored again; a file of several runs is one record each (``<id>#<n>``). What a record does not
    hold is named in ``said``."""
    try:
        sessions = _sessions(record, files, manifest)
        requests = requests_beside(files[0])  # the model server's record, where the run kept one
    except (TranscriptError, OSError, ValueError) as exc:
        record.outcome, record.error, record.scores, record.figures = "error", str(exc), None, {}
        return [record]
    if len(sessions) == 1:
        return [_score_one(record, sessions[0], requests, tool, window, keep_outcome, said)]
    runs = [ItemRecord.from_dict({**record.to_dict(), "id": f"{record.id}#{n}"}) for n in range(1, len(sessions) + 1)]
    return [_score_one(r, s, None, tool, window, keep_outcome, said) for r, s in zip(runs, sessions, strict=True)]


def _score_one(record: ItemRecord, session: Session, requests: Any, tool: RetrievalTool, window: int,
               keep_outcome: bool, said: list[str] | None) -> ItemRecord:  # fmt: skip
    for figure, why in session.missing.items():
        if said is not None:
            said.append(f"{record.id}: not in its record ({figure}): {why}")
    # The key the run was graded against travels in its record: a rescore regrades without the corpus.
    answers = (record.scores or {}).get("answers")
    keyed = isinstance(answers, dict)
    key = AnswerKey.from_dict(answers.get("key")) if keyed else None
    questions = [q for q in answers.get("questions") or [] if isinstance(q, str)] if keyed else []
    card = score(session, tool, window, requests=requests, key=key, keyed=keyed, questions=questions)
    judged = (record.scores or {}).get("judge")  # replayed from the record: a judge is never asked again
    record.scores = card.to_dict()
    if judged:
        record.scores["judge"] = judged
    record.figures = figures_of(
        record.scores, has_tool=Arm(record.arm).has_tool, wall_s=record.agent_s, tool=tool, stalled=record.stalled
    )
    if session.infra_error:
        record.outcome, record.error = "error", session.infra_error
    elif not keep_outcome:
        # A rescored folder has no gates: "passed" here means a usable transcript that scored.
        record.outcome, record.error = "passed", None
    return record
