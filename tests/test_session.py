"""EvalSession without pytest: records in; manifest versions, summary.json, report.html and the compare gate out."""

from __future__ import annotations

import json

from support.records import with_run, without_run

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.metrics import gates
from pytest_agent_eval.run.evaluation import EvalSession
from pytest_agent_eval.settings.config import AgentEvalConfig
from pytest_agent_eval.settings.parsers import parse_rules
from pytest_agent_eval.tool import CODEGRAPH


def session_of(tmp_path, records, **settings) -> EvalSession:
    cfg = AgentEvalConfig(out=tmp_path / "out", corpus=tmp_path / "no-corpus.json", **settings)
    session = EvalSession(cfg)
    session.claim()
    session.start()
    for record in records:
        data = {**record, "tool_version": "1.6.1", "backend": {"name": "scripted", "description": "scripted agent"}}
        session.collect(f"evals/test_ab.py::test_ab[{record['id']}]", ItemRecord.from_dict(data).to_dict())
    return session


def test_a_session_writes_its_campaign_and_reports_once(tmp_path):
    session = session_of(tmp_path, [with_run(1), with_run(2), without_run(1), without_run(2)])
    assert session.finish() is False  # no baseline: nothing can regress
    campaign = Campaign.open(session.campaign_dir)
    summary = json.loads((campaign.path / "summary.json").read_text())
    assert summary["entries"]["express"]["with"]["runs"] == 2
    assert [r["id"] for r in summary["records"]] == ["express-with-1", "express-with-2", "express-without-1",
                                                      "express-without-2"]  # fmt: skip
    assert (campaign.path / "report.html").is_file()
    assert campaign.manifest["versions"]["codegraph"] == {"with": "1.6.1", "without": "1.6.1"}
    text = "\n".join(line.text for line in session.terminal_lines())
    assert "ARM COMPARISON — express" in text and "paired with − without" in text
    assert f"agent-eval: campaign {campaign.id}: 4 run(s) in {campaign.path}" in text
    session.close()


def test_the_compare_gate_fails_exactly_on_a_regression(tmp_path):
    baseline = session_of(tmp_path / "a", [with_run(1), with_run(2)])
    baseline.finish()
    rules = parse_rules("allocation:-5pt")
    before = baseline.campaign_dir / "summary.json"  # its records; the items were never run into the folder
    same = session_of(tmp_path / "b", [with_run(1), with_run(2)], compare=before, compare_fail=rules)
    assert same.finish() is False
    worse = [with_run(1, cite=False), with_run(2, cite=False)]
    regressed = session_of(tmp_path / "c", worse, compare=before, compare_fail=rules)
    assert regressed.finish() is True
    lines = regressed.terminal_lines()
    failed = [line for line in lines if line.text.startswith("agent-eval: REGRESSION in express")]
    assert failed and failed[0].markup == {"red": True, "bold": True}
    assert "with allocation (allocation:-5pt)" in failed[0].text


def test_a_gate_message_reads_like_the_tables_and_stays_exact():
    thresholds = gates.parse_thresholds({"residual_tokens": {"max": 60_000}, "codegraph_calls": {"max": 0}})
    figures = {"residual_tokens": 60_001, "retrieval_calls": 1}
    verdicts = gates.evaluate(
        {}, figures, entry="e", arm_name="with", arm_label="with", thresholds=thresholds, tool=CODEGRAPH
    )
    messages = [v.message for v in verdicts if not v.passed]
    # 60,001 and 60,000 both print as 60.0k: the exact numbers say why the gate failed
    assert messages == [
        "residual_tokens 60.0k (60,001) is above the maximum 60.0k (60,000)",
        "retrieval_calls 1 is above the maximum 0",  # codegraph_calls: the figure's old name, still read
    ]


def test_the_summary_goes_to_a_known_path_and_latest_names_the_campaign(tmp_path):
    from pytest_agent_eval.campaign.baseline import latest

    first = session_of(tmp_path, [with_run(1), without_run(1)])
    first.finish()
    first.close()
    json_path = tmp_path / "ci" / "agent-eval.json"
    second = session_of(tmp_path, [with_run(1), without_run(1)], json_path=json_path)
    second.finish()
    campaign = second.campaign_dir
    assert json_path.read_text() == (campaign / "summary.json").read_text()  # the same summary, at a known path
    assert json_path in second.written
    out = tmp_path / "out"
    assert (out / "latest").read_text() == f"{campaign.name}\n"  # a file: out/*/summary.json finds each once
    assert latest(out) == campaign
    assert latest(out, exclude=campaign) == first.campaign_dir
    assert len(list(out.glob("*/summary.json"))) == 2
    second.close()


def test_compare_alone_means_the_latest_campaign(pytester):
    config = pytester.parseconfig("--agent-eval-compare")
    assert config.getoption("agent_eval_compare") == "latest"
    config = pytester.parseconfig("--agent-eval-compare", "nightly")
    assert config.getoption("agent_eval_compare") == "nightly"


def test_the_manifest_records_what_ran_per_test_function(tmp_path):
    from pytest_agent_eval.campaign.manifest import what_ran

    def record(test: str, arm: str, run: int) -> ItemRecord:
        return ItemRecord.from_dict(
            {"id": f"express-{arm}-{run}", "entry": "express", "arm": arm, "arm_label": arm, "run": run, "turns": 2,
             "nodeid": f"evals/test_x.py::{test}[express-{arm}-{run}]", "outcome": "passed"}
        )  # fmt: skip

    # test_narrowed's marker ran only the with-arm, once; test_ab ran both arms twice
    records = [record("test_ab", arm, run) for arm in ("with", "without") for run in (2, 1)]
    records.append(record("test_narrowed", "with", 1))
    assert what_ran(records) == {
        "evals/test_x.py::test_ab": {
            "entries": ["express"], "agents": ["claude-code"], "arms": ["with", "without"], "runs": [1, 2],
            "turns": [2], "items": 4
        },
        "evals/test_x.py::test_narrowed": {"entries": ["express"], "agents": ["claude-code"], "arms": ["with"],
                                           "runs": [1], "turns": [2], "items": 1},
    }  # fmt: skip
    session = session_of(tmp_path, [with_run(1), without_run(1)])
    session.finish()
    (ran,) = Campaign.open(session.campaign_dir).manifest["ran"].values()  # these records name no test
    assert (ran["arms"], ran["items"]) == (["with", "without"], 2)
    session.close()


def test_the_settings_stay_settings_the_campaign_folder_is_the_sessions(tmp_path):
    # Two sessions of one config (a merge, a rescore, a second run in one process) each write their own folder:
    # the folder is what a session learned as it ran, not a setting.
    cfg = AgentEvalConfig(out=tmp_path / "out", corpus=tmp_path / "no-corpus.json")
    before = dict(vars(cfg))
    first, second = EvalSession(cfg), EvalSession(cfg)
    first.start()
    assert first.campaign_dir is not None and first.campaign_dir.parent == tmp_path / "out"
    assert second.campaign_dir is None
    assert vars(cfg) == before
