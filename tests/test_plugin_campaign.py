"""Campaigns through the pytest plugin, with pytester and the stand-in ``claude`` of :mod:`support.standin`.

A session writes a new campaign folder; ``--agent-eval-resume`` finishes one without re-running what it
completed; ``--agent-eval-retries`` re-runs infrastructure errors only; ``--agent-eval-compare-fail`` fails
the session on a regression; two builds of codegraph can be the two arms; ``--agent-eval-campaign`` runs a
tagged campaign. Only the model is a stand-in; codegraph is a fake binary where an index must be built.
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from pathlib import Path

import pytest
from support.sessions import api_error, no_result, with_clean, without_clean, without_contaminated
from support.standin import Q_EXPRESS, STANDIN_FIXTURES, Project, clean_scripts, entry, repo_fixture

from pytest_agent_eval.campaign.store import config_hash
from pytest_agent_eval.report import terminal as tables
from pytest_agent_eval.report.aggregate import Row

pytestmark = pytest.mark.slow  # pytester sessions, several in subprocesses, that run the stand-in claude


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    return Project(pytester, [entry("express", Q_EXPRESS)])


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def scripted(project: Project, arm: str, question: str, call: int | None = None) -> str:
    """The transcript the stand-in prints for (arm, question) — what a segment must hold, byte for byte."""
    key = hashlib.sha1(question.encode()).hexdigest()[:10]
    return (project.standin / (f"{arm}-{key}.call{call}.jsonl" if call else f"{arm}-{key}.jsonl")).read_text()


# -- a new campaign per session ------------------------------------------------------------------------------
def test_each_session_writes_a_new_campaign_and_never_touches_an_old_one(project):
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "1")
    result.assert_outcomes(passed=2)
    [first] = project.campaigns()
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", first.name)
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    result.stdout.fnmatch_lines([f"agent-eval: campaign {first.name}: 2 run(s) in {first}"])
    result.stdout.fnmatch_lines([f"agent-eval: wrote {first / 'report.html'}"])

    # the manifest: what was asked, its hash, and the versions and backend the runs resolved
    manifest = json.loads((first / "manifest.json").read_text())
    config = manifest["config"]
    assert manifest["config_hash"] == config_hash(config)
    assert [e["name"] for e in config["entries"]] == ["express"]
    assert config["entries"][0]["questions"] == [Q_EXPRESS]
    assert [a["label"] for a in config["arms"]] == ["with", "without"]
    assert config["runs"] == 1 and config["model"] == "sonnet"
    assert manifest["versions"] == {"codegraph": {"with": "1.6.1", "without": "1.6.1"}, "claude-code": "standin"}
    assert manifest["backend"]["name"] == "scripted"

    # the records: one per item, segments relative to the campaign, scores, times
    records = {r["id"]: r for r in lines_of(first / "items.jsonl")}
    assert set(records) == {"express-with-1", "express-without-1"}
    record = records["express-with-1"]
    assert (record["entry"], record["arm"], record["arm_label"], record["run"]) == ("express", "with", "with", 1)
    assert record["outcome"] == "passed" and record["error"] is None
    assert record["tool_version"] == "1.6.1" and (record["agent"], record["agent_version"]) == (
        "claude-code",
        "standin",
    )
    assert record["backend"]["name"] == "scripted"
    assert record["questions"] == [Q_EXPRESS]
    assert record["segments"] == ["items/express-with-1/run-with-1.jsonl"]
    assert (first / record["segments"][0]).read_text() == scripted(project, "with", Q_EXPRESS)
    assert record["scores"]["sufficiency"]["counts"]["sufficient"] == 1
    assert record["figures"]["retrieval_calls"] == 1
    assert 0 < record["agent_s"] <= record["wall_s"]
    assert "blocks" not in record  # terminal text, re-derived from the segments

    # report.html with its charts and summary.json sit in the campaign
    page = (first / "report.html").read_text()
    for chart in ("chart-residual", "chart-sufficiency", "chart-allocation"):
        assert f'id="{chart}"' in page
    data = json.loads(re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page, re.S)[1])
    assert [r["entry"] for r in data["residual"]] == ["express"]
    assert {b["arm"] for b in data["buckets"]} == {"with", "without"}
    assert json.loads((first / "summary.json").read_text())["campaign"] == first.name

    project.run("--agent-eval-runs", "1").assert_outcomes(passed=2)
    assert len(project.campaigns()) == 2 and project.campaign() != first
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == before


def test_collect_only_and_deselected_sessions_write_no_campaign(project):
    clean_scripts(project)
    project.run("--collect-only").assert_outcomes()
    project.run("-k", "nothing-matches")
    project.run("-k", "nothing-matches", "-n", "2", in_subprocess=True)  # the controller made one for the workers
    assert project.campaigns() == []
    assert project.calls() == []


# -- resume --------------------------------------------------------------------------------------------------
def test_resume_rescores_complete_items_and_runs_the_rest(project):
    project.script("with", Q_EXPRESS, with_clean())
    project.script("without", Q_EXPRESS, api_error())
    project.run("--agent-eval-runs", "2").assert_outcomes(passed=2, errors=2)
    [campaign] = project.campaigns()
    assert len(project.calls()) == 4
    errored = scripted(project, "without", Q_EXPRESS)

    # The without-arm's API is back; and a threshold now fails the with-arm, which was complete.
    project.script("without", Q_EXPRESS, without_clean())
    (project.path / "agent-eval.yaml").write_text("arms:\n  with: {codegraph_calls: {max: 0}}\n")
    result = project.run("--agent-eval-runs", "2", "--agent-eval-resume", str(campaign))
    result.assert_outcomes(passed=2, failed=2)
    calls = project.calls()[4:]
    assert [c["arm"] for c in calls] == ["without", "without"]  # the complete with-runs were not re-run
    assert project.campaigns() == [campaign]  # no new folder
    # the re-scored runs went through the same gates
    result.stdout.fnmatch_lines(["*FAILED evals/test_ab.py::test_ab[[]express-with-1]*"])
    result.stdout.fnmatch_lines(["*retrieval_calls 1 is above the maximum 0*"])
    result.stdout.fnmatch_lines(["*2 re-scored from the resumed campaign, not re-run*"])
    out = result.stdout.str()
    assert "with (n=2)" in out and "without (n=2)" in out  # the tables include them

    items = {r["id"]: r for r in lines_of(campaign / "items.jsonl")}
    assert {i: r["outcome"] for i, r in items.items()} == {
        "express-with-1": "passed",
        "express-with-2": "passed",
        "express-without-1": "passed",
        "express-without-2": "passed",
    }
    assert len((campaign / "items.jsonl").read_text().splitlines()) == 6  # 4 first, then the 2 re-runs
    # the errored attempt's transcript was kept aside, not overwritten
    folder = campaign / "items" / "express-without-1"
    assert (folder / "attempt-1" / "run-without-1.jsonl").read_text() == errored
    assert (folder / "run-without-1.jsonl").read_text() == scripted(project, "without", Q_EXPRESS)
    summary = json.loads((campaign / "summary.json").read_text())
    resumed = {r["id"]: r.get("resumed", False) for r in summary["records"]}
    assert resumed == {
        "express-with-1": True,
        "express-with-2": True,
        "express-without-1": False,
        "express-without-2": False,
    }


def test_resume_under_xdist_and_with_other_settings(project):
    project.script("with", Q_EXPRESS, with_clean())
    project.script("without", Q_EXPRESS, no_result())
    project.run("--agent-eval-runs", "1").assert_outcomes(passed=1, errors=1)
    [campaign] = project.campaigns()
    project.script("without", Q_EXPRESS, without_clean())
    result = project.run("--agent-eval-runs", "1", "--agent-eval-resume", str(campaign), "-n", "2", in_subprocess=True)
    result.assert_outcomes(passed=2)
    assert [c["arm"] for c in project.calls()] == ["with", "without", "without"]
    assert "settings differ" not in result.stdout.str()
    # a resume restores the campaign's settings: a flag that contradicts them is refused, naming both values
    refused = project.run("--agent-eval-runs", "2", "--agent-eval-resume", str(campaign))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--agent-eval-runs 2 contradicts the resumed campaign, which ran with --agent-eval-runs 1"
        in refused.stderr.str()
    )
    # a corpus edited since: the terminal says the config moved
    corpus = project.path / "corpus.json"
    corpus.write_text(corpus.read_text().replace("Content-Type?", "Content-Type header?"))
    result = project.run("--agent-eval-resume", str(campaign))
    result.assert_outcomes(passed=2)
    assert len(project.calls()) == 3  # both items were complete: re-scored, not re-run
    result.stdout.fnmatch_lines(["*agent-eval: warning: this session's settings differ from the resumed campaign's*"])
    assert project.campaigns() == [campaign]


def test_resume_of_a_folder_that_is_no_campaign_is_a_usage_error(project):
    (project.path / "empty").mkdir()
    result = project.run("--agent-eval-resume", "empty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agent-eval-resume:" in result.stderr.str() and "not a campaign folder" in result.stderr.str()


# -- retries -------------------------------------------------------------------------------------------------
def test_retries_rerun_infrastructure_errors_only(pytester):
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("broken", "q2")])
    project.script("with", Q_EXPRESS, with_clean())  # fails a gate: never retried
    project.script("without", Q_EXPRESS, api_error(), call=1)  # an API error once, then fine
    project.script("without", Q_EXPRESS, without_clean())
    project.script("with", "q2", no_result())  # never finishes
    project.script("without", "q2", without_clean())
    (project.path / "agent-eval.yaml").write_text("arms:\n  with: {codegraph_calls: {max: 0}}\n")
    result = project.run("--agent-eval-runs", "1", "--agent-eval-retries", "1")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    arms = [(c["arm"], c["argv"][c["argv"].index("-p") + 1]) for c in project.calls()]
    assert arms.count(("with", Q_EXPRESS)) == 1
    assert arms.count(("without", Q_EXPRESS)) == 2
    assert arms.count(("with", "q2")) == 2
    assert "broken-with-1: turn 1: claude exited 0 without a result event" in result.stdout.str()
    assert "(attempt 2 of 2)" in result.stdout.str()

    campaign = project.campaign()
    records = {r["id"]: r for r in lines_of(campaign / "items.jsonl")}
    assert records["express-without-1"]["outcome"] == "passed"
    assert records["express-without-1"]["attempts"] == [
        {"error": "turn 1: API error in assistant message: rate_limit", "folder": "attempt-1"}
    ]
    assert records["express-with-1"]["attempts"] == []
    folder = campaign / "items" / "express-without-1"
    assert (folder / "attempt-1" / "run-without-1.jsonl").read_text() == scripted(project, "without", Q_EXPRESS, 1)
    assert records["express-without-1"]["segments"] == ["items/express-without-1/run-without-1.jsonl"]
    assert records["broken-with-1"]["outcome"] == "error"
    assert len(records["broken-with-1"]["attempts"]) == 1
    assert records["broken-with-1"]["segments"] == ["items/broken-with-1/run-with-1.jsonl"]


# -- compare-fail --------------------------------------------------------------------------------------------
def test_compare_fail_fails_the_session_exactly_when_a_metric_regressed(project):
    clean_scripts(project)
    project.run("--agent-eval-runs", "1").assert_outcomes(passed=2)
    baseline = project.campaign()
    rules = "allocation:-5pt,sufficient:-10pt,residual:+20%"

    same = project.run(
        "--agent-eval-runs", "1", "--agent-eval-compare", str(baseline), "--agent-eval-compare-fail", rules
    )
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["*entry*arm*metric*before*after*change*", "*express*with*allocation*+0.0pt*"])
    assert "REGRESSION" not in same.stdout.str()

    # The answer now cites the small file: allocation drops from 83% to 17% of the returned bytes.
    project.script("with", Q_EXPRESS, with_clean("It lives in `lib/express.js`."))
    worse = project.run(
        "--agent-eval-runs", "1", "--agent-eval-compare", str(baseline), "--agent-eval-compare-fail", rules
    )
    worse.assert_outcomes(passed=2)  # every item passed; the session fails on the comparison
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(
        [
            "*express*with*allocation*83.2%*16.8%*-66.4pt*FAILED allocation:-5pt*",
            "*agent-eval: REGRESSION in express: with allocation (allocation:-5pt)*",
        ]
    )
    # a JSON baseline works the same
    summary = baseline / "summary.json"
    again = project.run(
        "--agent-eval-runs", "1", "--agent-eval-compare", str(summary), "--agent-eval-compare-fail", rules
    )
    assert again.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent-eval-compare", "base", "--agent-eval-compare-fail", "allocation:-5"], "--agent-eval-compare-fail:"),
        (["--agent-eval-compare", "base", "--agent-eval-compare-fail", "speed:-5%"], "unknown metric"),
        (["--agent-eval-compare-fail", "allocation:-5pt"], "needs a baseline: --agent-eval-compare"),
        (["--agent-eval-compare", "nowhere"], "nowhere: no such file or folder"),
    ],
)
def test_bad_compare_options_are_usage_errors(project, args, message):
    (project.path / "base").mkdir()
    (project.path / "base" / "manifest.json").write_text('{"id": "base"}')
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


# -- a new build against a baseline build --------------------------------------------------------------------
FAKE_CODEGRAPH = """#!/bin/sh
# A fake codegraph build: says its version, and an index it builds records who built it.
if [ "$1" = "--version" ]; then echo {version}; exit 0; fi
if [ "$1" = "init" ]; then mkdir -p "$3/.codegraph" && echo {version} > "$3/.codegraph/built-by"; exit 0; fi
exit 1
"""

TWO_BUILDS_CONFTEST = (
    STANDIN_FIXTURES
    + """

BUILDS = {"local:" + str(HERE / "cg-new"): ("cg-new", "1.7.0-dev"), "1.6.0": ("cg-1.6.0", "1.6.0")}


@pytest.fixture
def tool_build(agent_case, agent_eval_config):
    spec = agent_eval_config.tool_spec(agent_case.arm)
    folder, version = BUILDS[spec]
    return Provisioned("codegraph", HERE / folder / "codegraph", version, spec)
"""
    + repo_fixture("corpus_repo")
)


def test_two_builds_of_codegraph_as_two_arms(project, monkeypatch):
    monkeypatch.setenv("AGENT_EVAL_CACHE", str(project.path / "cache"))  # the real index step, into a scratch cache
    project.pytester.makeconftest(TWO_BUILDS_CONFTEST)
    for folder, version in (("cg-new", "1.7.0-dev"), ("cg-1.6.0", "1.6.0")):
        binary = project.path / folder / "codegraph"
        binary.parent.mkdir()
        binary.write_text(FAKE_CODEGRAPH.format(version=version))
        binary.chmod(0o755)
    project.script("with", Q_EXPRESS, with_clean())
    arms = f"with@local:{project.path / 'cg-new'},with@1.6.0"

    collected = project.run("--collect-only", "-q", "--agent-eval-runs", "2", "--arms", arms, "-k", "with:1.6.0")
    assert [line for line in collected.stdout.lines if "::" in line] == [
        "evals/test_ab.py::test_ab[express-with:1.6.0-1]",
        "evals/test_ab.py::test_ab[express-with:1.6.0-2]",
    ]
    result = project.run("--agent-eval-runs", "2", "--arms", arms)
    result.assert_outcomes(passed=4)
    # each arm's workspace carries the index its own build made, and its MCP config starts that build
    assert sorted(c["built_by"] for c in project.calls()) == ["1.6.0", "1.6.0", "1.7.0-dev", "1.7.0-dev"]
    campaign = project.campaign()
    for item, folder in (("express-with_local_cg-new-1", "cg-new"), ("express-with_1.6.0-2", "cg-1.6.0")):
        servers = json.loads((campaign / "items" / item / "mcp-codegraph.json").read_text())["mcpServers"]
        assert servers["codegraph"]["command"] == str(project.path / folder / "codegraph")
    records = {r["id"]: r for r in lines_of(campaign / "items.jsonl")}
    assert set(records) == {
        "express-with:local:cg-new-1",
        "express-with:local:cg-new-2",
        "express-with:1.6.0-1",
        "express-with:1.6.0-2",
    }
    assert records["express-with:1.6.0-1"]["tool_version"] == "1.6.0"
    assert records["express-with:local:cg-new-1"]["tool_version"] == "1.7.0-dev"
    manifest = json.loads((campaign / "manifest.json").read_text())
    assert manifest["versions"]["codegraph"] == {"with@local:cg-new": "1.7.0-dev", "with@1.6.0": "1.6.0"}
    out = result.stdout.str()
    head = next(line for line in out.splitlines() if "with@local:cg-new (n=2)" in line)
    assert "with@1.6.0 (n=2)" in head  # both columns of the ARM COMPARISON
    assert "paired with@local:cg-new − with@1.6.0, run against run" in out
    assert "CAMPAIGN — W" not in out  # no without-arm: no with/without campaign table


# -- a tagged campaign ---------------------------------------------------------------------------------------
TURNS = ["How does res.send work?", "Where is ETag set?", "What about HEAD?"]


def campaign_project(pytester: pytest.Pytester) -> Project:
    readme = [entry("express", "||".join(TURNS)), entry("gin", "Gin routes?||And groups?||And 404?", "Go")]
    for item in readme:
        item["campaign"] = "readme"
    project = Project(pytester, [*readme, entry("other", "Not in the campaign?")])
    for question in [*TURNS, "Gin routes?", "And groups?", "And 404?"]:
        project.script("with", question, with_clean())
        project.script("without", question, without_clean())
    # The first without-arm run of express reaches codegraph through Bash on its first turn.
    project.script("without", TURNS[0], without_contaminated(), call=1)
    return project


def test_campaign_selects_its_entries_three_turns_and_drops_contaminated_runs(pytester):
    project = campaign_project(pytester)
    result = project.run("--agent-eval-runs", "2", "--agent-eval-campaign", "readme")
    result.assert_outcomes(passed=7, failed=1)  # the contaminated run fails its gate
    result.stdout.fnmatch_lines(["*FAILED evals/test_ab.py::test_ab[[]express-without-1]*"])
    result.stdout.fnmatch_lines(["*contamination: without-arm contaminated: 1 tool result(s) carried codegraph*"])
    prompts = [c["argv"][c["argv"].index("-p") + 1] for c in project.calls()]
    assert len(prompts) == 2 * 2 * 2 * 3  # entries × arms × runs × 3 turns
    assert "Not in the campaign?" not in prompts
    out = result.stdout.str()
    assert "ARM COMPARISON — other" not in out
    assert "CAMPAIGN — W = with" in out
    assert "(1 contaminated without-arm run(s) dropped; --agent-eval-include-contaminated keeps them)" in out
    assert "AVERAGE saved:" in out
    assert "warning: express: medians over W n=2 / WO n=1 — one run is no measurement" in out  # after the drop
    assert "warning: gin:" not in out
    for line in ("SECONDARY READINGS — with", "POOLED (12 answered explore calls):", "POOLED allocation efficiency:"):
        assert line in out
    assert re.search(r"repo\s+calls\s+again\s+read-ret\s+read-miss\s+grep\s+MOVED ON\s+alloc eff\s+envelope", out)
    assert json.loads((project.campaign() / "manifest.json").read_text())["config"]["campaign"] == "readme"

    kept = campaign_project_rerun(project, "--agent-eval-include-contaminated")
    assert "(1 contaminated without-arm run(s) KEPT by --agent-eval-include-contaminated)" in kept


def campaign_project_rerun(project: Project, *args: str) -> str:
    for counter in project.standin.glob("count-*"):
        counter.unlink()  # the contaminated transcript is the first call's again
    result = project.run("--agent-eval-runs", "2", "--agent-eval-campaign", "readme", *args)
    result.assert_outcomes(passed=7, failed=1)
    return result.stdout.str()


def test_campaign_naming_no_entry_is_a_collection_error(project):
    result = project.run("--agent-eval-campaign", "readme", "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(['*--agent-eval-campaign readme: no corpus entry has "campaign": "readme"*'])


def test_contaminated_runs_move_the_campaign_medians_only_when_included():
    def record(arm: str, run: int, residual: int, contaminated: bool = False) -> dict:
        figures = {"residual_tokens": residual, "ctx_final": 50_000, "turns": 3}
        return {
            "entry": "gin",
            "arm": arm,
            "arm_label": arm,
            "run": run,
            "figures": figures,
            "contaminated": contaminated,
        }

    records = [record("with", 1, 16_000), record("without", 1, 2_000, True), record("without", 2, 8_000)]
    # the medians move; the change beside them is the verdict's, run 1 against run 1: none once run 1 is dropped
    assert re.search(r"16\.0k→8\.0k +\d", tables.campaign_table(records))
    assert "16.0k→5.0k  (+700%)" in tables.campaign_table(records, include_contaminated=True)


# -- statistics in the tables --------------------------------------------------------------------------------
def test_arm_comparison_pairs_runs_and_warns_below_two():
    def record(arm: str, run: int, calls: int) -> dict:
        figures = {"tool_calls": calls, "residual_tokens": 1000 * calls}
        return {"entry": "gin", "arm": arm, "arm_label": arm, "run": run, "figures": figures}

    two = [record("with", 1, 12), record("with", 2, 30), record("without", 1, 2), record("without", 2, 10)]
    text = tables.arm_comparison(Row("gin"), two)
    assert "paired with − without, run against run: mean difference [95% interval] (its method)" in text
    assert re.search(r"tool calls\s+\+15 \(n=2: too few pairs for an interval\)", text)
    assert "21 [12–30]" in text  # median [min–max]
    assert "warning" not in text

    one = tables.arm_comparison(Row("gin"), two[:1] + two[2:3])
    assert re.search(r"tool calls\s+\+10 \(n=1: too few pairs for an interval\)", one)
    assert "warning: gin / with: n=1: one run is no measurement (give --agent-eval-runs 2 or more)" in one
    assert "warning: gin / without: n=1" in one


def test_item_ids_tell_two_tests_of_one_case_apart(project):
    clean_scripts(project)
    (project.path / "evals" / "test_mine.py").write_text(
        textwrap.dedent("""
        def test_mine(agent_result):
            assert agent_result.figures["tool_calls"] >= 1
    """)
    )
    project.run("--agent-eval-runs", "1", "--arms", "with").assert_outcomes(passed=2)
    ids = sorted(r["id"] for r in lines_of(project.campaign() / "items.jsonl"))
    assert ids == ["test_ab.express-with-1", "test_mine.express-with-1"]
    assert sorted(p.name for p in (project.campaign() / "items").iterdir()) == ids


def test_a_stalled_transcript_is_not_resumed_as_complete(project):
    # A run killed mid-write leaves a segment without a result event: resume runs it again.
    project.script("with", Q_EXPRESS, with_clean(), mode="stall")
    project.run("--agent-eval-runs", "1", "--arms", "with", "--agent-eval-timeout", "2").assert_outcomes(errors=1)
    campaign = project.campaign()
    project.script("with", Q_EXPRESS, with_clean())
    result = project.run("--agent-eval-runs", "1", "--arms", "with", "--agent-eval-resume", str(campaign))
    result.assert_outcomes(passed=1)
    assert len(project.calls()) == 2
