"""Named baselines: saved compactly, found by name, ``latest`` or folder, unpacked for rescore and replay."""

from __future__ import annotations

import json
import re
import tarfile
import time

import pytest
from support.records import recorded_campaign, with_run, without_run

from pytest_agent_eval.campaign import baseline
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign, StoreError, load_records
from pytest_agent_eval.cli import main
from pytest_agent_eval.run.evaluation import EvalSession, SessionError
from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError, resolve
from pytest_agent_eval.settings.parsers import parse_rules


def test_save_keeps_records_and_the_named_segments_in_one_archive(tmp_path):
    campaign = recorded_campaign(tmp_path / "out")
    saved = baseline.save(campaign, "nightly", tmp_path / "out")
    assert saved == tmp_path / "out" / "baselines" / "nightly"
    assert sorted(p.name for p in saved.iterdir()) == ["items.jsonl", "manifest.json", "transcripts.tar.gz"]
    with tarfile.open(saved / "transcripts.tar.gz") as archive:
        names = sorted(archive.getnames())
    assert names == ["items/express-with-1/run-with-1.jsonl", "items/express-with-1/run-with-1.t2.jsonl"]
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["baseline"]["name"] == "nightly" and manifest["baseline"]["campaign"] == campaign.id
    assert [r.id for r in load_records(saved)] == ["express-with-1"]  # compare reads it without unpacking

    # saving again under the name replaces it whole
    other = recorded_campaign(tmp_path / "out", cite=False)
    baseline.save(other, "nightly", tmp_path / "out")
    assert load_records(saved)[0].figures["allocation"] == 0
    assert sorted(p.name for p in saved.parent.iterdir()) == ["nightly"]


def test_unpack_lays_a_baseline_out_as_a_campaign_and_refuses_paths_out(tmp_path):
    campaign = recorded_campaign(tmp_path / "out")
    saved = baseline.save(campaign, "b", tmp_path / "out")
    unpacked = Campaign.open(baseline.unpack(saved, tmp_path / "unpacked"))
    (record,) = unpacked.items()
    original = campaign.segments(campaign.items()[0])
    assert [p.read_bytes() for p in unpacked.segments(record)] == [p.read_bytes() for p in original]
    assert baseline.recording(unpacked, "express-with-1", "express", "with", 1) == unpacked.segments(record)
    # a pinned build's id finds the recording by entry, arm and run
    pinned = baseline.recording(unpacked, "express-with:local:cg-1", "express", "with", 1)
    assert pinned == unpacked.segments(record)
    with pytest.raises(StoreError, match=r"no recording of express-without-1 \(it recorded: express-with-1\)"):
        baseline.recording(unpacked, "express-without-1", "express", "without", 1)

    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("manifest.json", "items.jsonl"):
        (evil / name).write_bytes((saved / name).read_bytes())
    outside = tmp_path / "outside.jsonl"
    outside.write_text("{}")
    with tarfile.open(evil / "transcripts.tar.gz", "w:gz") as archive:
        archive.add(outside, arcname="../outside-again.jsonl")
    with pytest.raises(StoreError) as info:
        baseline.unpack(evil, tmp_path / "unpacked-evil")
    assert str(info.value) == (
        f"saved baseline {evil}: transcripts.tar.gz holds '../outside-again.jsonl', outside the campaign: not unpacked"
    )
    assert not (tmp_path / "outside-again.jsonl").exists()


def test_find_tries_a_name_then_latest_then_a_folder_and_names_what_it_tried(tmp_path):
    out = tmp_path / "out"
    older = recorded_campaign(out)
    time.sleep(0.01)
    newer = recorded_campaign(out)
    baseline.save(older, "kept", out)
    assert baseline.find("kept", out) == out / "baselines" / "kept"
    assert baseline.find("latest", out) == newer.path  # the baselines folder is no campaign
    assert baseline.find("latest", out, exclude=newer.path) == older.path  # a resumed campaign is not its own baseline
    assert baseline.find(str(older.path), out) == older.path
    with pytest.raises(StoreError) as info:
        baseline.find("nope", out)
    message = str(info.value)
    assert message.startswith("cannot find baseline 'nope': ")
    assert f"no baseline named 'nope' in {out / 'baselines'}" in message and "nope: no such file or folder" in message
    with pytest.raises(StoreError, match=r"no campaign in .* for 'latest'"):
        baseline.find("latest", tmp_path / "empty")


def test_latest_excludes_the_sessions_own_campaign(tmp_path):
    out = tmp_path / "out"
    only = recorded_campaign(out)
    with pytest.raises(StoreError, match="for 'latest'"):
        baseline.find("latest", out, exclude=only.path)


def test_the_latest_file_names_the_newest_campaign_and_every_command_takes_its_path(tmp_path, capsys):
    """``<out>/latest`` is a file, not a link (docs/campaigns-and-ci.md says why): ``ls latest/`` fails, so every
    command that takes a campaign takes the file's path as well as the word."""
    from pathlib import Path

    from pytest_agent_eval.campaign.store import point_latest

    out = tmp_path / "out"
    only = recorded_campaign(out)
    point_latest(only.path)
    pointer = out / "latest"
    assert pointer.is_file() and not pointer.is_symlink() and pointer.read_text() == f"{only.path.name}\n"
    assert baseline.find(str(pointer), out) == only.path == baseline.find("latest", out)
    assert main(["plan", str(pointer)]) == 0 and str(only.path) in capsys.readouterr().out
    page = (Path(__file__).resolve().parents[1] / "docs" / "campaigns-and-ci.md").read_text()
    assert "is a one-line file naming the newest campaign, not a link to it" in page


def test_cli_compare_and_rescore_take_a_saved_baseline(tmp_path, capsys):
    out = tmp_path / "out"
    baseline.save(recorded_campaign(out), "good", out)
    time.sleep(0.01)
    recorded_campaign(out, cite=False)  # the newest campaign: its answer cites nothing
    rule = ["--compare-fail", "allocation:-5pt", "--out", str(out)]
    assert main(["compare", "good", "good", *rule]) == 0
    assert "gate: passed — 1 of 1 baseline (entry, arm) pair(s) compared" in capsys.readouterr().out
    assert main(["compare", "good", "latest", *rule]) == 1
    assert "FAILED allocation:-5pt" in capsys.readouterr().out
    assert main(["compare", "gone", "latest", *rule]) == 2
    assert "cannot find baseline 'gone'" in capsys.readouterr().err
    assert main(["rescore", str(out / "baselines" / "good"), "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["id"] == "express-with-1" and record["figures"]["allocation"] == 1.0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: (b / "transcripts.tar.gz").write_bytes(b"junk" * 100), r"transcripts\.tar\.gz is not a readable"),
        (
            lambda b: (b / "transcripts.tar.gz").write_bytes((b / "transcripts.tar.gz").read_bytes()[:400]),
            r"transcripts\.tar\.gz is not a readable .*\(Compressed file ended",
        ),
        (lambda b: (b / "items.jsonl").unlink(), r"no items\.jsonl \(it is incomplete"),
        (lambda b: (b / "manifest.json").unlink(), r"no manifest\.json \(it is incomplete"),
    ],
    ids=["junk-archive", "truncated-archive", "no-items", "no-manifest"],
)
def test_cli_rescore_of_a_damaged_baseline_is_one_error_naming_it(tmp_path, capsys, damage, message):
    saved = baseline.save(recorded_campaign(tmp_path / "out"), "broken", tmp_path / "out")
    damage(saved)
    assert main(["rescore", str(saved)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"agent-eval: error: saved baseline {saved}: ")
    assert re.search(message, err), err


def session_of(tmp_path, records, **settings) -> EvalSession:
    cfg = AgentEvalConfig(out=tmp_path / "out", corpus=tmp_path / "no-corpus.json", **settings)
    session = EvalSession(cfg)
    session.claim()
    session.start()
    for record in records:
        data = {**record, "backend": {"name": "scripted", "description": "scripted agent"}}
        outcome = record.get("outcome", "passed")
        shipped = session.finish_item(ItemRecord.from_dict(data), outcome=outcome, error=None, ran_s=1.0)
        session.collect(f"evals/test_ab.py::test_ab[{record['id']}]", shipped)
    return session


def test_a_session_saves_a_baseline_and_a_later_one_gates_against_it_by_name(tmp_path):
    first = session_of(tmp_path, [with_run(1), with_run(2), without_run(1), without_run(2)], save_baseline="main")
    assert first.finish() is False
    text = "\n".join(line.text for line in first.terminal_lines())
    assert "agent-eval: saved baseline main (4 record(s), " in text and str(tmp_path / "out/baselines/main") in text
    first.close()

    rules = parse_rules("allocation:-5pt")
    worse = [with_run(1, cite=False), with_run(2, cite=False), without_run(1), without_run(2)]
    second = session_of(tmp_path, worse, compare="main", compare_fail=rules)
    assert second.compare_path == tmp_path / "out" / "baselines" / "main"
    assert second.finish() is True
    lines = second.terminal_lines()
    assert any(line.text.startswith("agent-eval: REGRESSION in express") for line in lines)
    last = next(line for line in lines if line.text.startswith("agent-eval: the session fails: gate: FAILED"))
    assert last.markup == {"red": True}
    summary = json.loads((second.campaign.path / "summary.json").read_text())
    assert summary["gate"]["passed"] is False and summary["gate"]["pairs"] == 2
    assert summary["gate"]["baseline"] == str(tmp_path / "out" / "baselines" / "main")
    assert [(r["arm"], r["metric"], r["rule"]) for r in summary["gate"]["regressions"]] == [
        ("with", "allocation", "allocation:-5pt")
    ]
    # report.html carries the comparison and its verdicts
    html = (second.campaign.path / "report.html").read_text()
    assert 'id="comparison" data-gate="failed"' in html and "FAILED allocation:-5pt" in html
    second.close()

    # nothing in common: the session fails and says why, rather than passing on an empty comparison
    elsewhere = session_of(tmp_path, [with_run(1, entry="gin")], compare="main", compare_fail=rules)
    assert elsewhere.finish() is True
    text = "\n".join(line.text for line in elsewhere.terminal_lines())
    assert "agent-eval: GATE FAILED: compared nothing" in text
    elsewhere.close()


def test_replay_and_min_pairs_options_are_checked_when_read(tmp_path):
    def config(**given):
        return resolve(lambda attr: given.get(attr), lambda key: "", tmp_path)

    assert config(replay="recorded").replay == "recorded"
    assert config(replay="recorded", backend="cassette").backend == "cassette"  # its cassettes come from the baseline
    with pytest.raises(OptionError, match=r"--agent-eval-replay: .* cannot run with --agent-eval-backend scripted"):
        config(replay="recorded", backend="scripted")
    with pytest.raises(OptionError, match="--agent-eval-compare-min-pairs: needs a baseline"):
        config(compare_min_pairs="2")
    with pytest.raises(OptionError, match="--agent-eval-save-baseline: expected a name"):
        config(save_baseline="../up")
    assert config(compare="main", compare_min_pairs="2").compare_min_pairs == 2


def test_a_session_refuses_a_replay_baseline_it_cannot_find(tmp_path):
    session = EvalSession(AgentEvalConfig(out=tmp_path / "out", replay="recorded"))
    with pytest.raises(SessionError, match=r"--agent-eval-replay: cannot find baseline 'recorded': no baseline named"):
        session.claim()


def test_a_session_that_selected_no_agent_item_warns_that_it_compared_nothing(tmp_path):
    first = session_of(tmp_path, [with_run(1), with_run(2)], save_baseline="main")
    first.finish()
    first.close()
    # an ini agent_eval_compare applies to a unit-test session too: no agent item ran, so it is no evaluation
    empty = EvalSession(AgentEvalConfig(out=tmp_path / "out", corpus=tmp_path / "none.json", compare="main"))
    empty.claim()
    assert empty.finish() is False
    assert empty.terminal_lines() == []  # the plugin issues the warning (an AgentEvalWarning), no table
    assert empty.warnings() == ["--agent-eval-compare main: no agent item ran, nothing was compared"]
    empty.close()
    # an agent item that ran but was not scored (skipped, errored) takes part: that gate compared nothing, and fails
    skipped = {"id": "express-with-1", "entry": "express", "arm": "with", "run": 1, "outcome": "skipped"}
    unscored = session_of(tmp_path, [skipped], compare="main")
    assert unscored.finish() is True
    assert any("GATE FAILED: compared nothing" in line.text for line in unscored.terminal_lines())
    unscored.close()
