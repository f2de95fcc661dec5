import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.synth import Transcript

from pytest_agent_eval.campaign import store
from pytest_agent_eval.campaign.record import same_item
from pytest_agent_eval.campaign.store import Campaign, StoreError, config_hash, load_records

CONFIG = {"backend": "scripted", "corpus": ["express"], "runs": 2, "versions": {"codegraph": "1.6.1"}}


def finished(path: Path) -> Path:
    t = Transcript()
    t.init()
    t.say("done")
    t.result("done")
    return t.write(path)


def test_create_names_the_folder_and_writes_the_manifest(tmp_path):
    campaign = Campaign.create(tmp_path / "out", CONFIG)
    assert campaign.path.parent == tmp_path / "out"
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", campaign.path.name)
    # The first 3 hex are the config's: campaigns of one config sort together.
    assert campaign.path.name[-6:-3] == config_hash(CONFIG)[:3]
    manifest = json.loads((campaign.path / "manifest.json").read_text())
    assert manifest["id"] == campaign.path.name == campaign.id
    assert manifest["config"] == CONFIG
    assert manifest["config_hash"] == config_hash(CONFIG)
    assert manifest["backend"] == "scripted"
    assert manifest["versions"] == {"codegraph": "1.6.1"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", manifest["created"])
    assert Campaign.open(campaign.path).manifest == manifest


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_create_never_reuses_an_existing_folder(tmp_path, monkeypatch):
    # Force the random part to collide once: the folder that exists must be left alone.
    draws = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(store.secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(store.time, "strftime", lambda fmt, t: "20260801-101500")
    first = Campaign.create(tmp_path, CONFIG)
    first.record({"id": "express-with-1", "outcome": "passed"})
    before = (first.path / "items.jsonl").read_bytes()
    second = Campaign.create(tmp_path, CONFIG)
    assert second.path != first.path
    assert second.path.name == f"20260801-101500-{config_hash(CONFIG)[:3]}bbb"
    assert (first.path / "items.jsonl").read_bytes() == before
    assert json.loads((first.path / "manifest.json").read_text())["id"] == first.path.name
    assert second.items() == []


def test_many_campaigns_in_one_second_get_distinct_folders(tmp_path):
    paths = {Campaign.create(tmp_path, CONFIG).path for _ in range(30)}
    assert len(paths) == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)


def test_item_dir_is_created_and_safe(tmp_path):
    campaign = Campaign.create(tmp_path, CONFIG)
    path = campaign.item_dir("evals/test_ab.py::test_ab[express-with-1]")
    assert path.is_dir()
    assert path.parent == campaign.path / "items"
    assert path.name == "evals_test_ab.py_test_ab_express-with-1"
    assert campaign.item_dir("express-with-1") == campaign.path / "items" / "express-with-1"


def test_last_record_per_id_wins_in_the_order_items_first_ran(tmp_path):
    campaign = Campaign.create(tmp_path, CONFIG)
    campaign.record({"id": "a", "outcome": "error"})
    campaign.record({"id": "b", "outcome": "passed"})
    campaign.record({"id": "a", "outcome": "passed"})
    # A line torn by a crash mid-write is stepped over, not fatal.
    with (campaign.path / "items.jsonl").open("a") as handle:
        handle.write('{"id": "c", "outcome": "pa')
    assert [(r.id, r.outcome) for r in campaign.items()] == [("a", "passed"), ("b", "passed")]
    with pytest.raises(ValueError, match="id: expected a non-empty string"):
        campaign.record({"outcome": "passed"})


def test_two_processes_recording_at_once_lose_nothing(tmp_path):
    campaign = Campaign.create(tmp_path, CONFIG)
    # Two writers racing with large records: a store that rewrites or truncates its file would lose lines here.
    worker = textwrap.dedent(
        """
        import sys
        from pytest_agent_eval.campaign.store import Campaign
        campaign = Campaign.open(sys.argv[1])
        for i in range(60):
            campaign.record({"id": f"{sys.argv[2]}-{i}", "outcome": "passed", "pad": sys.argv[2] * 40_000})
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", worker, str(campaign.path), name], stderr=subprocess.PIPE)
        for name in ("p", "q")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    lines = (campaign.path / "items.jsonl").read_text().splitlines()
    assert len(lines) == 120
    records = [json.loads(line) for line in lines]  # every line is whole JSON
    assert all(r["pad"] == r["id"][0] * 40_000 for r in records)
    assert {r.id for r in campaign.items()} == {f"{n}-{i}" for n in "pq" for i in range(60)}


def test_complete_ids_for_resume(tmp_path):
    campaign = Campaign.create(tmp_path, CONFIG)

    def item(item_id, outcome="passed", segments=None):
        campaign.record({"id": item_id, "outcome": outcome, "segments": segments if segments is not None else []})

    done = finished(campaign.item_dir("done") / "run-done.jsonl")
    item("done", segments=[str(done.relative_to(campaign.path))])
    item("failed-gate", outcome="failed", segments=[str(finished(campaign.item_dir("f") / "run.jsonl"))])
    item("errored", outcome="error", segments=[str(finished(campaign.item_dir("e") / "run.jsonl"))])
    item("missing", segments=["items/missing/run-missing.jsonl"])
    item("no-segments")
    killed = campaign.item_dir("killed") / "run.jsonl"
    t = Transcript()
    t.init()
    t.say("half way")
    t.write(killed)
    item("killed", segments=[str(killed)])
    torn = campaign.item_dir("torn") / "run.jsonl"
    torn.write_text(finished(torn).read_text() + '{"type": "assist')
    item("torn", segments=[str(torn)])
    # A later turn that never finished: the item is not complete even though turn 1 is.
    t1 = finished(campaign.item_dir("turns") / "run.jsonl")
    t2 = campaign.item_dir("turns") / "run.t2.jsonl"
    t2.write_text("")
    item("turns", segments=[str(t1), str(t2)])
    # An item first errored, then re-ran cleanly: the last record decides.
    item("rerun", outcome="error")
    item("rerun", segments=[str(finished(campaign.item_dir("rerun") / "run.jsonl"))])
    assert campaign.complete_ids() == {"done", "failed-gate", "rerun"}


def test_load_records_from_every_source(tmp_path):
    campaign = Campaign.create(tmp_path / "out", CONFIG)
    campaign.record({"id": "a", "entry": "express", "outcome": "passed"})
    campaign.record({"id": "a", "entry": "express", "outcome": "failed"})
    assert [r.outcome for r in load_records(campaign.path)] == ["failed"]
    assert [r.outcome for r in load_records(campaign.path / "items.jsonl")] == ["failed"]
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"meta": {}, "items": [{"id": "x"}, {"id": "y"}]}))
    assert [r.id for r in load_records(summary)] == ["x", "y"]
    plugin_summary = tmp_path / "plugin-summary.json"
    plugin_summary.write_text(json.dumps({"records": [{"id": "z"}]}))
    assert [r.id for r in load_records(plugin_summary)] == ["z"]
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"id": "w"}]))
    assert [r.id for r in load_records(listed)] == ["w"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.json", "{not json", "not a JSON file"),
        ("object.json", '{"meta": {}}', "expected a list of item records"),
        ("numbers.json", "[1, 2]", "expected a list of item records"),
    ],
)
def test_load_records_names_the_bad_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(StoreError, match=re.escape(str(path)) + ".*" + message):
        load_records(path)


def test_load_records_rejects_missing_paths_and_plain_folders(tmp_path):
    with pytest.raises(StoreError, match="no such file or folder"):
        load_records(tmp_path / "nope.json")
    with pytest.raises(StoreError, match="not a campaign folder"):
        load_records(tmp_path)
    with pytest.raises(StoreError, match=r"no manifest\.json"):
        Campaign.open(tmp_path)


def test_an_item_is_the_same_whatever_rootdir_or_pyargs_made_of_its_path():
    # A resume from another folder collects the campaign's evals/test_ab.py under another path: still its items.
    packaged = "venv/lib/python3.11/site-packages/pytest_agent_eval/evals/test_ab.py::test_ab[express-with-1]"
    assert same_item("evals/test_ab.py::test_ab[express-with-1]", packaged)
    assert same_item("test_ab.py::test_ab[express-with-1]", "evals\\test_ab.py::test_ab[express-with-1]")
    assert not same_item("evals/test_ab.py::test_ab[express-with-1]", "evals/test_ab.py::test_ab[express-with-2]")
    assert not same_item(
        "evals/test_two.py::test_first[express-with-1]", "evals/test_two.py::test_second[express-with-1]"
    )
    assert not same_item("evals/test_a.py::test_ab[express-with-1]", "evals/test_b.py::test_ab[express-with-1]")
