"""A baseline of a Codex campaign packs each record's rollout beside its streams: it rescores as the campaign does,
and its recordings replay. The session is a real Codex CLI 0.171.0 one (``tests/data/codex/two-turns``)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from support.codex import campaign_of

from pytest_agent_eval.agents.codex.cassette import ResponsesCassetteBackend
from pytest_agent_eval.campaign import baseline
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.cli import main
from pytest_agent_eval.run.backends import cassette_backend

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/codex/two-turns"
ITEM = "express-with-1"


def codex_campaign(out: Path) -> Campaign:
    return campaign_of(out, DATA, "with", turns=2)


def _rescored(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["rescore", str(folder), "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    return record


def test_a_codex_baseline_packs_the_rollout_and_rescores_as_the_campaign_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    campaign = codex_campaign(out)
    saved = baseline.save(campaign, "codex", out)
    with tarfile.open(saved / baseline.TRANSCRIPTS) as archive:
        names = sorted(archive.getnames())
    folder = f"items/{ITEM}"
    assert names == [f"{folder}/run-with-1.jsonl", f"{folder}/run-with-1.rollout", f"{folder}/run-with-1.t2.jsonl"]
    from_campaign, from_baseline = _rescored(campaign.path, capsys), _rescored(saved, capsys)
    assert from_baseline["outcome"] == "passed" and from_baseline["error"] is None
    where = from_baseline["scores"].pop("files"), from_campaign["scores"].pop("files")  # where each was unpacked
    assert [Path(p).name for p in where[0]] == [Path(p).name for p in where[1]] == ["run-with-1.jsonl",
                                                                                   "run-with-1.t2.jsonl"]  # fmt: skip
    assert from_baseline["scores"] == from_campaign["scores"] and from_baseline["figures"] == from_campaign["figures"]
    assert from_campaign["scores"]["occupancy"]["ctx_final"] > 0


def test_a_codex_baselines_recording_replays(tmp_path: Path) -> None:
    out = tmp_path / "out"
    saved = baseline.save(codex_campaign(out), "codex", out)
    unpacked = Campaign.open(baseline.unpack(saved, tmp_path / "unpacked"))
    segments = baseline.recording(unpacked, ITEM, "express", "with", 1)
    backend = cassette_backend(segments)
    assert isinstance(backend, ResponsesCassetteBackend) and len(backend.turns) == 6
    assert backend.rollout == segments[0].with_name("run-with-1.rollout")
