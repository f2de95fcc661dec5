"""Sharding without pytest: the partition, the merge's checks, and what a resume takes from the manifest."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from support.records import with_run, without_run
from support.selection import selection

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.selection import ResumeError, manifest_options, restore
from pytest_agent_eval.campaign.shard import SIZE_WEIGHTS, item_weight, partition
from pytest_agent_eval.campaign.store import Campaign, load_records
from pytest_agent_eval.cli import main
from pytest_agent_eval.run.evaluation import EvalSession
from pytest_agent_eval.run.merge import MergeError, merge
from pytest_agent_eval.settings.config import AgentEvalConfig
from pytest_agent_eval.settings.shard import Shard, ShardError, parse_shard


# -- the partition -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", ""])
def test_a_bad_shard_spec_is_refused(text):
    with pytest.raises(ShardError, match="I/N"):
        parse_shard(text)


def test_parse_shard():
    assert parse_shard(" 2/3 ") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"


def test_every_item_lands_on_exactly_one_shard_and_a_repository_on_one_shard():
    items = selection()
    shards = partition(items, 3)
    ids = [i for shard in shards for i in shard]
    assert sorted(ids) == sorted(i for i, _ in items) and len(ids) == len(set(ids))
    cases = dict(items)
    for repo in {case.entry.repo for _, case in items}:
        holders = {n for n, shard in enumerate(shards) if any(cases[i].entry.repo == repo for i in shard)}
        assert len(holders) == 1, repo  # one clone, one index build per repository and tool version
    # each shard keeps the items' own order
    order = [i for i, _ in items]
    assert all(shard == sorted(shard, key=order.index) for shard in shards)


def test_the_partition_does_not_depend_on_the_order_items_come_in():
    items = selection()
    shuffled = items[:]
    random.Random(7).shuffle(shuffled)
    assert [set(s) for s in partition(items, 3)] == [set(s) for s in partition(shuffled, 3)]


PARTITION_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from support.selection import selection
from pytest_agent_eval.campaign.shard import partition
print(json.dumps(partition(selection(), 3)))
"""


@pytest.mark.parametrize("seed", ["0", "12345"])
def test_the_partition_does_not_depend_on_pythons_hash_seed(seed):
    """Another machine is another process with another string hash: the partition must not move."""
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", PARTITION_SCRIPT, str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == partition(selection(), 3)


def test_shards_are_balanced_by_size_class_and_turns():
    items = selection()
    cases = dict(items)
    loads = [sum(item_weight(cases[i]) for i in shard) for shard in partition(items, 3)]
    heaviest_group = max(
        sum(item_weight(c) for _, c in items if c.entry.repo == repo) for repo in {c.entry.repo for _, c in items}
    )
    assert max(loads) - min(loads) <= heaviest_group  # greedy LPT: within one group of even
    assert item_weight(cases["e2-with-1"]) == SIZE_WEIGHTS["Large"] * 3


def test_more_shards_than_repositories_leave_some_empty():
    items = [(i, c) for i, c in selection() if c.entry.repo.endswith("r0")]
    shards = partition(items, 3)
    assert sorted(len(s) for s in shards) == [0, 0, len(items)]


# -- merge -----------------------------------------------------------------------------------------------------
RECORDS = {
    "express": [with_run(1), with_run(2), without_run(1), without_run(2)],
    "gin": [with_run(1, entry="gin"), without_run(1, entry="gin", lines=300)],
}


def shard_campaign(tmp_path, index: int, count: int, entries: list[str], **manifest) -> Campaign:
    """A shard's campaign as a session writes it: selection in the manifest, records in items.jsonl."""
    cfg = AgentEvalConfig(out=tmp_path / f"shard{index}", corpus=tmp_path / "no-corpus.json", shard=Shard(index, count))
    session = EvalSession(cfg)
    every = [r["id"] for name in RECORDS for r in RECORDS[name]]
    session.selection["selected"] = every
    session.shard_ids = [r["id"] for name in entries for r in RECORDS[name]]
    campaign = session.start()
    for name in entries:
        for data in RECORDS[name]:
            record = ItemRecord.from_dict({**data, "tool_version": "1.6.1", "backend": {"name": "scripted"}})
            record.nodeid = f"evals/test_ab.py::test_ab[{record.id}]"
            campaign.record(record)
            session.collect(record.nodeid, record.to_dict())
    session.finish()
    if manifest:
        data = json.loads((campaign.path / "manifest.json").read_text())
        data.update(manifest)
        (campaign.path / "manifest.json").write_text(json.dumps(data))
    return Campaign.open(campaign.path)


def test_merge_makes_one_campaign_of_the_shards(tmp_path):
    one = shard_campaign(tmp_path, 1, 2, ["gin"])
    two = shard_campaign(tmp_path, 2, 2, ["express"])
    session = merge(tmp_path / "merged", [two.path, one.path])
    merged = Campaign.open(tmp_path / "merged")
    assert [r.id for r in merged.items()] == [r["id"] for name in RECORDS for r in RECORDS[name]]
    assert merged.manifest["config_hash"] == one.manifest["config_hash"]
    # where its agents and tool came from, so that what reads the merged campaign back finds them
    assert merged.manifest["plugins"] == one.manifest["plugins"] == {
        "agents": {"claude-code": {"from": "built-in"}},
        "tool": {"name": "codegraph", "from": {"from": "built-in"}},
    }
    assert merged.manifest["shard"] == {
        "count": 2,
        "merged_from": [{"index": 1, "campaign": one.id}, {"index": 2, "campaign": two.id}],
    }
    assert [p.name for p in session.written] == ["summary.json", "report.html"]
    summary = json.loads((merged.path / "summary.json").read_text())
    assert set(summary["entries"]) == {"express", "gin"}
    assert len(load_records(merged.path)) == 6


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("config_hash", "f" * 64, "shards disagree on config_hash: "),
        ("corpus_hash", "0" * 64, "shards disagree on corpus_hash: "),
        ("versions", {"codegraph": {"with": "1.7.0"}}, "shards disagree on versions.codegraph.with: '1.6.1'"),
        ("backend", {"name": "anthropic"}, "shards disagree on backend.name: 'scripted'"),
    ],
)
def test_shards_that_disagree_are_refused_naming_the_field_and_both_values(tmp_path, field, value, message):
    one = shard_campaign(tmp_path, 1, 2, ["gin"])
    two = shard_campaign(tmp_path, 2, 2, ["express"], **{field: value})
    with pytest.raises(MergeError) as caught:
        merge(tmp_path / "merged", [one.path, two.path])
    text = str(caught.value)
    assert text.startswith(message) and "shard 1/2" in text and "shard 2/2" in text
    assert repr({"versions": "1.7.0", "backend": "anthropic"}.get(field, value)) in text
    assert not (tmp_path / "merged").exists()  # nothing half-written


def test_a_missing_a_duplicated_or_an_unsharded_campaign_is_refused(tmp_path):
    one = shard_campaign(tmp_path, 1, 3, ["gin"])
    two = shard_campaign(tmp_path, 2, 3, ["express"])
    with pytest.raises(MergeError, match=r"^shard 2/3, 3/3 missing: given 1/3$"):  # express is shard 2's
        merge(tmp_path / "merged", [one.path])
    # Shard 3 held nothing (two repositories, three shards), so it wrote no campaign: 1 and 2 are all of it.
    merge(tmp_path / "merged", [one.path, two.path])
    assert len(Campaign.open(tmp_path / "merged").items()) == 6
    # the empty one may be any shard: the merged manifest names each given shard by its own index, of three
    three = shard_campaign(tmp_path, 3, 3, ["express"])
    merge(tmp_path / "merged-1-3", [three.path, one.path])
    assert Campaign.open(tmp_path / "merged-1-3").manifest["shard"] == {
        "count": 3, "merged_from": [{"index": 1, "campaign": one.id}, {"index": 3, "campaign": three.id}]}  # fmt: skip
    with pytest.raises(MergeError, match=r"^shard 1/3 given twice: "):
        merge(tmp_path / "merged-twice", [one.path, one.path, two.path])
    plain = EvalSession(AgentEvalConfig(out=tmp_path / "plain", corpus=tmp_path / "none.json")).start()
    with pytest.raises(MergeError, match="not a shard's campaign"):
        merge(tmp_path / "merged", [plain.path])


def test_an_item_in_two_shards_or_a_shard_missing_items_is_refused(tmp_path):
    one = shard_campaign(tmp_path, 1, 2, ["gin", "express"])
    two = shard_campaign(tmp_path, 2, 2, ["express"])
    with pytest.raises(MergeError, match=r"^item express-with-1 is in two shards: shard 1/2 .* and shard 2/2"):
        merge(tmp_path / "merged", [one.path, two.path])
    three = shard_campaign(tmp_path / "b", 1, 2, ["gin"])
    lines = (three.path / "items.jsonl").read_text().splitlines()
    (three.path / "items.jsonl").write_text("\n".join(lines[:1]) + "\n")  # interrupted after one item
    four = shard_campaign(tmp_path / "b", 2, 2, ["express"])
    with pytest.raises(MergeError, match=r"shard 1/2 .* has no record of 1 of its items \(gin-without-1\)"):
        merge(tmp_path / "merged", [three.path, four.path])


def test_merge_will_not_write_into_a_folder_that_holds_something(tmp_path):
    one = shard_campaign(tmp_path, 1, 1, ["gin", "express"])
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("keep")
    with pytest.raises(MergeError, match="exists and is not an empty folder"):
        merge(tmp_path / "taken", [one.path])
    assert (tmp_path / "taken" / "x").read_text() == "keep"


def rewrite_manifest(campaign: Campaign, edit) -> None:
    path = campaign.path / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["shard"].update(index="2"), "shard.index is '2', not a whole number from 1 to 2"),
        (lambda m: m.update(shard=[2, 2]), "shard is [2, 2], not an object with index and count"),
        (lambda m: m["shard"].pop("count"), "shard.count is missing, not a positive whole number"),
        (lambda m: m.update(selection="abc"), "selection is 'abc', not an object"),
    ],
    ids=["index-a-string", "shard-a-list", "no-count", "selection-a-string"],
)
def test_a_malformed_shard_manifest_is_refused_naming_the_file_and_the_key(tmp_path, edit, message):
    one = shard_campaign(tmp_path, 1, 2, ["gin"])
    two = shard_campaign(tmp_path, 2, 2, ["express"])
    rewrite_manifest(two, edit)
    with pytest.raises(MergeError) as caught:
        merge(tmp_path / "merged", [one.path, two.path])
    assert str(caught.value) == f"{two.path / 'manifest.json'}: {message}"
    assert not (tmp_path / "merged").exists()


def test_a_failed_merge_leaves_nothing_in_out_and_can_be_run_again(tmp_path, monkeypatch):
    one = shard_campaign(tmp_path, 1, 2, ["gin"])
    two = shard_campaign(tmp_path, 2, 2, ["express"])
    for shard in (one, two):
        rewrite_manifest(shard, lambda m: m["config"].update(runs="lots"))
    with pytest.raises(MergeError) as caught:
        merge(tmp_path / "merged", [one.path, two.path])
    assert str(caught.value).startswith(f"{one.path / 'manifest.json'} (shard 1/2): its settings cannot be read: ")
    assert "--agent-eval-runs" in str(caught.value) and not (tmp_path / "merged").exists()
    for shard in (one, two):
        rewrite_manifest(shard, lambda m: m["config"].update(runs=2))

    # A write that fails all the same takes back what it wrote: the empty folder given stays, and empty.
    def disk_full(self):
        raise OSError(28, "No space left on device")

    (tmp_path / "merged").mkdir()
    with monkeypatch.context() as patched:
        patched.setattr(EvalSession, "finish", disk_full)
        with pytest.raises(MergeError, match=r"merged: the merged campaign could not be written: .*No space left"):
            merge(tmp_path / "merged", [one.path, two.path])
    assert list((tmp_path / "merged").iterdir()) == []
    merge(tmp_path / "merged", [one.path, two.path])
    assert len(Campaign.open(tmp_path / "merged").items()) == 6


def test_merge_into_a_shard_is_refused(tmp_path):
    one = shard_campaign(tmp_path, 1, 2, ["gin"])
    two = shard_campaign(tmp_path, 2, 2, ["express"])
    with pytest.raises(MergeError, match=r"merged: inside shard 2/2 \(.*\): write the merged campaign elsewhere"):
        merge(two.path / "merged", [one.path, two.path])
    assert not (two.path / "merged").exists()


def test_merge_of_a_folder_that_does_not_exist_says_so(tmp_path, capsys):
    nope = tmp_path / "m" / "nope"
    assert main(["merge", str(tmp_path / "merged"), str(nope)]) == 2
    assert capsys.readouterr().err == f"agent-eval: error: merge: {nope}: no such folder\n"


# -- resume ----------------------------------------------------------------------------------------------------
MANIFEST = {
    "config": {
        "corpus": "/c/corpus.json",
        "arms": [
            {"label": "with", "name": "with", "tool_spec": "1.6.1"},
            {"label": "with@1.5.0", "name": "with", "tool_spec": "1.5.0"},
        ],
        "runs": 4,
        "turns": None,
        "tool_version": "1.6.1",
        "model": "sonnet",
        "effort": "high",
        "max_budget_usd": 4.0,
        "agent_timeout": 900.0,
        "backend": "scripted",
        "campaign": None,
    },
    "selection": {"args": ["evals"], "keyword": "express", "markexpr": "", "mode": "headless", "selected": ["a"]},
    "shard": {"index": 2, "count": 3, "ids": ["a"]},
}


def test_a_resume_takes_the_manifests_settings_and_selection(tmp_path):
    assert manifest_options(MANIFEST) == {
        "arms": "with,with@1.5.0",
        "runs": "4",
        "tool_version": "1.6.1",
        "corpus": "/c/corpus.json",
        "model": "sonnet",
        "effort": "high",
        "max_budget_usd": "4.0",
        "agent_timeout": "900.0",
        "backend": "scripted",
        "mode": "headless",
        "shard": "2/3",
    }
    restored = restore(MANIFEST, {"runs": "4", "arms": "with, with@1.5.0"}.get, "", "")
    assert (restored.keyword, restored.markexpr, restored.selected) == ("express", "", ["a"])
    assert restored.options["runs"] == "4"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"runs": "2"}, "--agent-eval-runs 2 contradicts the resumed campaign, which ran with --agent-eval-runs 4"),
        (
            {"shard": "1/3"},
            "--agent-eval-shard 1/3 contradicts the resumed campaign, which ran with --agent-eval-shard 2/3",
        ),
        (
            {"turns": "1"},
            "--agent-eval-turns 1 contradicts the resumed campaign, which ran with --agent-eval-turns not set",
        ),
        ({"arms": "with"}, "--agent-eval-arms with contradicts"),
    ],
)
def test_a_flag_that_contradicts_the_resumed_campaign_is_named_with_both_values(given, message):
    with pytest.raises(ResumeError, match=message.replace("(", r"\(")):
        restore(MANIFEST, given.get, "", "")


def test_a_selection_that_contradicts_the_resumed_campaign_is_named():
    message = "-k 'gin' contradicts the resumed campaign, which selected with -k 'express'"
    with pytest.raises(ResumeError, match=message):
        restore(MANIFEST, {}.get, "gin", "")
    assert restore(MANIFEST, {}.get, "express", "").keyword == "express"


def test_a_resume_gives_back_the_tool_the_replay_and_the_cassettes_the_campaign_ran_with(tmp_path):
    """They decide what a run measures without being in the hashed config: a resume that lost them would finish
    the campaign with codegraph, or a real model, and pool those runs with the earlier ones."""
    (tmp_path / "mytool.py").write_text(
        "from dataclasses import replace\nfrom pytest_agent_eval.tool import CODEGRAPH\n"
        "MINE = replace(CODEGRAPH, name='mine', package='mine-mcp')\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        from pytest_agent_eval.settings.config import resolve

        ini = {"agent_eval_tool": "mytool:MINE", "agent_eval_replay": "recorded"}.get
        cfg = resolve({"cassettes": "a.jsonl"}.get, lambda key: ini(key, ""), tmp_path)
        session = EvalSession(cfg)
        manifest = {**MANIFEST, "selection": {**MANIFEST["selection"], **session.selection_record()["selection"]}}
        given = {"tool": "mytool:MINE", "replay": "recorded", "cassettes": str(Path.cwd() / "a.jsonl")}
        assert manifest["selection"]["options"] == {**given, "offline": "false"}  # offline kept whatever it is
        assert {attr: manifest_options(manifest)[attr] for attr in given} == given
        assert restore(manifest, {"tool": " mytool:MINE", "cassettes": "a.jsonl"}.get, "", "").options["tool"] == (
            "mytool:MINE"
        )  # flags that agree change nothing
        (tmp_path / "other.py").write_text(
            "from mytool import MINE as OTHER\nfrom pytest_agent_eval import CODEGRAPH\n"
        )
        with pytest.raises(ResumeError, match="--agent-eval-tool other:CODEGRAPH contradicts the resumed campaign, "
                                              "which ran with --agent-eval-tool mytool:MINE"):  # fmt: skip
            restore(manifest, {"tool": "other:CODEGRAPH"}.get, "", "")
        # Another name for the same tool agrees; the campaign's own reference is what is restored.
        assert restore(manifest, {"tool": "other:OTHER"}.get, "", "").options["tool"] == "mytool:MINE"
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("mytool", "other"):
            sys.modules.pop(name, None)


def test_a_campaign_from_before_the_options_were_kept_resumes_with_what_is_given():
    assert not {"tool", "replay", "cassettes"} & set(manifest_options(MANIFEST))
    assert "tool" not in restore(MANIFEST, {"tool": "pytest_agent_eval:CODEGRAPH"}.get, "", "").options
