"""A campaign folder is input like any other: reading it never trusts it, and two sessions never share it.

A line torn mid-character, a record of the wrong shape and a segment path leading outside the campaign are each
named (file and line, or item) and skipped or marked as an error; ``agent-eval rescore``, ``compare`` and a
resume go on with the rest and never read outside the campaign folder. A campaign being resumed is locked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.standin import Q_EXPRESS, Project, entry
from support.synth import Transcript

from pytest_agent_eval.campaign.record import SCHEMA, ItemRecord, RecordError
from pytest_agent_eval.campaign.rescore import rescore
from pytest_agent_eval.campaign.store import Campaign, StoreError
from pytest_agent_eval.cli import main
from pytest_agent_eval.report.html import render_html
from pytest_agent_eval.run.evaluation import EvalSession, SessionError
from pytest_agent_eval.settings.config import AgentEvalConfig


def finished(path: Path, answer: str = "done") -> Path:
    t = Transcript()
    t.init()
    t.say(answer)
    t.result(answer)
    return t.write(path)


def good(campaign: Campaign, item_id: str) -> dict:
    path = finished(campaign.item_dir(item_id) / f"run-{item_id}.jsonl")
    return {
        "id": item_id,
        "entry": "express",
        "arm": "with",
        "run": 1,
        "outcome": "passed",
        "segments": [str(path.relative_to(campaign.path))],
    }


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    """Two good items around a torn line, a record of the wrong shape, and an item whose segment escapes."""
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    (tmp_path / "secret").mkdir()
    outside = finished(tmp_path / "secret" / "run.jsonl", answer="never read")
    lines = [
        json.dumps(good(campaign, "first")).encode(),
        json.dumps({"id": "torn", "entry": "café"}, ensure_ascii=False).encode()[:-3],  # cut inside "é"
        json.dumps({"id": "shape", "entry": "express", "arm": "with", "segments": "run.jsonl"}).encode(),
        json.dumps([1, 2]).encode(),
        json.dumps({**good(campaign, "escape"), "segments": ["../../secret/run.jsonl"]}).encode(),
        json.dumps({**good(campaign, "passwd"), "segments": ["../../../../../../etc/passwd"]}).encode(),
        json.dumps(good(campaign, "last")).encode(),
    ]
    assert b"\xc3" in lines[1] and outside.is_file()
    (campaign.path / "items.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return campaign


def test_reading_names_each_bad_line_and_keeps_the_rest(campaign):
    items = campaign.items()
    assert [r.id for r in items] == ["first", "escape", "passwd", "last"]
    problems = "\n".join(campaign.problems)
    assert "items.jsonl:2: a torn line" in problems
    assert "items.jsonl:3: not an item record: segments: expected list, got 'run.jsonl'" in problems
    assert "items.jsonl:4: not an item record: expected a JSON object, got list" in problems
    assert len(campaign.problems) == 3


def test_a_segment_outside_the_campaign_is_never_read(campaign):
    [escape] = [r for r in campaign.items() if r.id == "escape"]
    with pytest.raises(StoreError, match="lies outside the campaign folder"):
        campaign.segments(escape)
    records = {r.id: r for r in rescore(campaign.path)}
    for item_id in ("escape", "passwd"):
        assert records[item_id].outcome == "error"
        assert "outside the campaign folder" in records[item_id].error
        assert records[item_id].scores is None  # the transcript out there was not scored: never read
    assert records["first"].scores is not None and records["last"].outcome == "passed"
    assert campaign.complete_ids() == {"first", "last"}  # a resume runs the escaping items again, in the campaign
    page = render_html(campaign.items(), "t", "note", campaign.path)
    assert "never read" not in page and "lies outside the campaign folder" in page


def test_cli_rescore_and_compare_warn_per_record_and_go_on(campaign, capsys):
    assert main(["rescore", str(campaign.path)]) == 0
    captured = capsys.readouterr()
    assert "agent-eval: warning:" in captured.err and "items.jsonl:2: a torn line" in captured.err
    assert "Traceback" not in captured.err
    assert "first" in captured.out and "outside the campaign folder" in captured.out
    # its readable records carry no figures: the comparison compared nothing, which a gate never passes
    assert main(["compare", str(campaign.path), str(campaign.path)]) == 1
    captured = capsys.readouterr()
    assert "items.jsonl:3: not an item record" in captured.err and "Traceback" not in captured.err
    assert "GATE FAILED: compared nothing" in captured.out


def test_resume_reads_a_damaged_campaign(campaign, tmp_path):
    cfg = AgentEvalConfig(resume=campaign.path, out=tmp_path / "out")
    session = EvalSession(cfg)
    session.claim()
    try:
        assert sorted(session.resumed()) == ["first", "last"]
    finally:
        session.close()


def test_a_campaign_being_resumed_is_locked(campaign, tmp_path):
    first = EvalSession(AgentEvalConfig(resume=campaign.path, out=tmp_path / "out"))
    first.claim()
    second = EvalSession(AgentEvalConfig(resume=campaign.path, out=tmp_path / "out"))
    with pytest.raises(SessionError, match=r"--agent-eval-resume: .*another session is resuming this campaign"):
        second.claim()
    first.close()
    second.claim()  # free again once the first session ended
    second.close()


def test_a_second_resume_of_the_same_folder_exits_at_once(pytester):
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    campaign = Campaign.create(project.path / "out", {"backend": "scripted"})
    with campaign.resuming():
        result = project.run("--agent-eval-resume", str(campaign.path), in_subprocess=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "another session is resuming this campaign" in result.stderr.str()
    assert not (campaign.path / "items.jsonl").exists()  # nothing ran into it


def test_schema_1_records_still_read(tmp_path):
    """Today's record from what campaigns wrote before the schema: the tool's family keyed "codegraph",
    figures under old names."""
    old = {
        "id": "express-with-1",
        "entry": "express",
        "arm": "with",
        "run": 1,
        "outcome": "passed",
        "scores": {
            "occupancy": {"residual": {"codegraph": 900, "read": 10, "search": 0, "bash": 0}, "ctx_final": 9000}
        },
        "figures": {"codegraph_calls": 2, "codegraph_residual": 900},
    }
    record = ItemRecord.from_dict(old)
    assert record.schema == SCHEMA
    assert record.scores["occupancy"]["residual"]["tool"] == 900
    assert record.figures["residual_tokens"] == 900 and record.figures["residual_share"] == 0.1
    without = ItemRecord.from_dict({"id": "x", "entry": "e", "arm": "without", "figures": {"residual": 5}})
    assert without.figures == {"residual_tokens": 5} and not without.has_tool
    with pytest.raises(RecordError, match="unknown record version 9"):
        ItemRecord.from_dict({**old, "schema": 9})
    round_trip = ItemRecord.from_dict(record.to_dict())
    assert round_trip == record
