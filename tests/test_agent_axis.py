"""The agent as an axis of the evaluation (``--agent-eval-agents``): the option and the marker, item ids (the
session's own agent keeps its ids), rows that tell agents apart (arms compared within an agent, never across),
and, through pytester, a mixed campaign of the stand-in claude and a second stand-in agent
(:mod:`support.second_agent`) — resumed, sharded and merged into the records of one run, compared, and its report
showing the agents side by side; and the real Claude Code and Codex CLIs' campaign sharded, merged and resumed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.browser import CHROMIUM, chart, chromium
from support.e2e import RealTools, inner_env, leftovers, run_pytest, summary
from support.paths import REPO
from support.sameness import differences, masked
from support.second_agent import NEXT, REFERENCE, add_next, without_reading
from support.sessions import api_error
from support.standin import NEXT_CALL, Q_EXPRESS, Q_GIN, Project, clean_scripts, entry

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.cli import main as agent_eval
from pytest_agent_eval.corpus.cases import Arm, cases_for
from pytest_agent_eval.corpus.load import CorpusEntry
from pytest_agent_eval.report.agents import side_by_side
from pytest_agent_eval.report.aggregate import aggregate
from pytest_agent_eval.report.compare import gate
from pytest_agent_eval.report.verdict import shown, verdicts
from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError, for_test, resolve

AGENTS = f"claude-code,{REFERENCE}"
TIMES = {"duration_s", "wall_s", "agent_s"}  # what two sessions never share


# -- the option ------------------------------------------------------------------------------------------------
def settings(options: dict[str, str], ini: dict[str, str] | None = None) -> AgentEvalConfig:
    return resolve(options.get, lambda key: (ini or {}).get(key, ""), Path.cwd())


def test_agents_take_built_in_names_or_module_attr_the_first_being_the_sessions_own():
    cfg = settings({"agents": "codex, claude-code"})
    assert [a.name for a in cfg.agents] == ["codex", "claude-code"] and cfg.agent is CODEX
    assert settings({"agent": "codex"}).agents == [CODEX]  # --agent-eval-agent takes a built-in name too
    assert settings({}).agents == [CLAUDE_CODE]
    assert settings({}, {"agent_eval_agents": "claude-code,codex"}).agents == [CLAUDE_CODE, CODEX]
    for given, message in [
        ({"agents": "claude-code,aider"}, "--agent-eval-agents: unknown agent 'aider': the built-in agents are "
                                          "claude-code, codex, gemini, opencode; or give MODULE:ATTR naming a "
                                          "CodingAgent"),
        ({"agents": "codex,codex"}, "--agent-eval-agents: agent 'codex' given twice in 'codex,codex'"),
        ({"agents": " , "}, "--agent-eval-agents: no agent in ' , '"),
        ({"agents": "claude-code,codex", "agent": "codex"}, "--agent-eval-agents and --agent-eval-agent (or its "
                                                            "ini key) exclude each other"),
    ]:  # fmt: skip
        with pytest.raises(OptionError, match=re.escape(message)):
            settings(given)
    with pytest.raises(OptionError, match="ini agent_eval_agents and --agent-eval-agent"):
        settings({"agent": "codex"}, {"agent_eval_agents": "claude-code,codex"})


def test_the_marker_takes_agents_and_only_another_agents_ids_name_it():
    cfg = AgentEvalConfig(agents=[CLAUDE_CODE, CODEX])
    assert for_test(cfg).agents == [CLAUDE_CODE, CODEX]
    assert for_test(cfg, kwargs={"agents": ["codex"]}).agents == [CODEX]
    assert for_test(cfg, kwargs={"agents": "claude-code"}).agents == [CLAUDE_CODE]
    with pytest.raises(OptionError, match="unknown agent 'nope'"):
        for_test(cfg, kwargs={"agents": "nope"})
    express = CorpusEntry("express", "JavaScript", "https://github.com/expressjs/express", "Small", 10, ("q",))
    cases = cases_for([express], [Arm("with"), Arm("without")], 1, None, agents=[None, CODEX])
    assert [c.id for c in cases] == ["express-with-1", "express-without-1", "express-codex-with-1",
                                     "express-codex-without-1"]  # fmt: skip


def test_each_agents_cli_is_provisioned_once_per_worker(tmp_path, monkeypatch):
    from pytest_agent_eval.agents.claude_code.agent import ClaudeCode
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.plugin import fixtures

    provisioned = []

    def provision(agent, cache, spec=None):
        provisioned.append(agent.name)
        return Provisioned(agent.executable, tmp_path / agent.name, "1", "1")

    monkeypatch.setattr(ClaudeCode, "provision", provision)
    cfg, memo, failures = AgentEvalConfig(), {}, FailureMemo(tmp_path, "session")
    builds = [fixtures.agent_build(agent, cfg, memo, failures) for agent in (CLAUDE_CODE, NEXT, CLAUDE_CODE, NEXT)]
    assert provisioned == ["claude-code", NEXT.name]  # one build per agent, each item given its own agent's
    assert [b.bin.name for b in builds] == ["claude-code", NEXT.name, "claude-code", NEXT.name]


# -- arms within an agent --------------------------------------------------------------------------------------
def runs(agent: str, arm: str, residuals: list[float], entry: str = "express") -> list[ItemRecord]:
    figures = {"tokens_processed": 1000.0, "duration_s": 1.0, "cost_usd": 0.01}
    return [
        ItemRecord(f"{entry}-{agent}-{arm}-{run}", entry, arm, arm, run=run, agent=agent,
                   figures={**figures, "residual_tokens": value})
        for run, value in enumerate(residuals, start=1)
    ]  # fmt: skip


def test_arms_pair_within_an_agent_never_across():
    mixed = [*runs("claude-code", "with", [100, 110]), *runs("codex", "without", [1000, 1000])]
    found = aggregate(mixed)
    assert [row.label for row in found.rows] == ["express · claude-code", "express · codex"]
    assert verdicts(found) == []  # Claude Code's with-arm never pairs with Codex's without-arm
    both = mixed + runs("claude-code", "without", [400, 400]) + runs("codex", "with", [500, 600])
    found = aggregate(both)
    by_row = {v.label: v.change("residual_tokens") for v in verdicts(found)}
    assert by_row["express · claude-code"].mean == pytest.approx((100 / 400 + 110 / 400) / 2 - 1)
    assert by_row["express · codex"].mean == pytest.approx((500 / 1000 + 600 / 1000) / 2 - 1)
    [on] = side_by_side(shown(verdicts(found)))
    assert on.line("codegraph") == (
        "express: retrieval residual with vs without: Claude Code −74% (n=2: too few pairs for an interval) · "
        "Codex CLI −45% (n=2: too few pairs for an interval)"
    )
    # one agent: rows as they always were, nothing side by side
    alone = aggregate([r for r in both if r.agent == "codex"])
    assert [row.label for row in alone.rows] == ["express"] and side_by_side(verdicts(alone)) == []


def test_the_compare_gate_pairs_a_baseline_with_the_same_agent_only():
    baseline = runs("claude-code", "with", [100, 100]) + runs("claude-code", "without", [400, 400])
    mixed = baseline + runs("codex", "with", [900, 900]) + runs("codex", "without", [100, 100])
    result = gate(baseline, mixed)
    assert [(row.label, arm) for row, arm in result.matched] == [
        ("express · claude-code", "with"), ("express · claude-code", "without")]  # fmt: skip
    assert all(row.change == 0 for row in result.rows if row.metric == "residual_tokens")
    other = gate(baseline, runs("codex", "with", [100, 100]) + runs("codex", "without", [400, 400]))
    assert other.matched == [] and other.failed  # Codex's runs are no measure of Claude Code's


# -- a mixed campaign through the plugin -----------------------------------------------------------------------
@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("gin", Q_GIN)])
    clean_scripts(project)
    add_next(project, [Q_EXPRESS, Q_GIN], REPO / "tests")
    return project


def comparable(campaign: Path) -> dict[str, dict]:
    """Each item's agent, outcome and figures, without the times no two sessions share."""
    return {
        r.id: {
            "agent": r.agent,
            "outcome": r.outcome,
            "figures": {k: v for k, v in r.figures.items() if k not in TIMES},
        }
        for r in Campaign.open(campaign).items()
    }


def args(out: str, *more: str) -> list[str]:
    return ["evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-out", out,
            "--agent-eval-runs", "2", *more]  # fmt: skip


def only_campaign(folder: Path) -> Path:
    [campaign] = [p for p in folder.iterdir() if p.is_dir()]
    return campaign


@pytest.mark.slow
def test_two_runs_of_one_campaign_give_the_same_summary_and_report(project):
    """Two sessions of one campaign, their items finishing in whatever order two workers finish them: the same
    summary.json and report.html, byte for byte, times and durations aside (docs/report.md, "One order")."""
    found = []
    for name in ("first", "second"):
        done = project.pytester.runpytest(*args(name, "-k", "express", "--agent-eval-agents", AGENTS, "-n", "2"))
        done.assert_outcomes(passed=8)
        campaign = only_campaign(project.path / name)
        found.append([masked((campaign / f).read_text(), campaign) for f in ("summary.json", "report.html")])
    for first, second in zip(*found, strict=True):
        assert first == second, differences(first, second)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_a_keyword_that_selects_no_agent_item_names_the_entries(project, workers):
    """Under xdist the controller collects nothing: its workers say what -k selected and left out."""
    found = project.pytester.runpytest(*args("none", "-k", "nosuchentry", *workers))
    found.assert_outcomes()
    found.stdout.fnmatch_lines(["agent-eval: -k 'nosuchentry' selected no agent item; the entries are express, gin *"])
    if workers:
        some = project.pytester.runpytest(*args("some", "-k", "express and with-1 and not codex", *workers))
        some.assert_outcomes(passed=1)
        assert "selected no agent item" not in some.stdout.str()
        return
    chosen = project.pytester.runpytest(*args("one", "-k", "express and with", "--collect-only"))
    assert "selected no agent item" not in chosen.stdout.str()
    # the header names the configured arms; a selection of fewer says which it runs
    chosen.stdout.fnmatch_lines(["agent-eval: backend scripted; arms with,without; *",
                                 "agent-eval: selected 2 agent item(s), arms with"])  # fmt: skip
    both = project.pytester.runpytest(*args("both", "-k", "express", "--collect-only"))
    assert "agent-eval: selected" not in both.stdout.str()


def test_the_stand_ins_call_count_holds_under_two_processes_at_once(tmp_path):
    """Two shards under xdist run two items of one question at the same moment: each stand-in counts its call in
    one file. Read-then-write without a lock let one process read the file the other had just truncated (the
    stand-in died on int(''), and shard 1/2 exited 1) or both take the same count."""
    script = tmp_path / "count.py"
    script.write_text(f"import fcntl, sys\nfrom pathlib import Path\n{NEXT_CALL}\n"
                      "for _ in range(1500):\n    next_call(Path(sys.argv[1]))\n")  # fmt: skip
    counter = tmp_path / "count-with-key"
    both = [subprocess.Popen([sys.executable, str(script), str(counter)], stderr=subprocess.PIPE) for _ in range(2)]
    errors = [process.communicate()[1].decode() for process in both]
    assert [process.returncode for process in both] == [0, 0], errors
    assert counter.read_text() == "3000"  # no call lost, none counted twice


@pytest.mark.slow
def test_a_mixed_campaign_resumed_sharded_and_merged_gives_the_records_of_one_run(project, capsys, monkeypatch):
    pytester = project.pytester
    collected = pytester.runpytest(*args("whole", "--agent-eval-agents", AGENTS, "--collect-only", "-q"))
    ids = re.findall(r"\[(.*?)\]", collected.stdout.str())
    assert ids[:4] == ["express-with-1", "express-with-2", "express-without-1", "express-without-2"]
    assert ids[4:8] == [f"express-{NEXT.name}-{arm}-{run}" for arm in ("with", "without") for run in (1, 2)]
    assert len(ids) == 16
    picked = pytester.runpytest(*args("whole", "--agent-eval-agents", AGENTS, "--collect-only", "-q", "-k",
                                      "claude-next and without"))  # fmt: skip
    assert sorted(re.findall(r"\[(.*?)\]", picked.stdout.str())) == [
        f"{e}-claude-next-without-{r}" for e in ("express", "gin") for r in (1, 2)]  # fmt: skip

    # one run: the agents side by side, each against the stand-in model
    whole = pytester.runpytest(*args("whole", "--agent-eval-agents", AGENTS))
    whole.assert_outcomes(passed=16)
    whole.stdout.fnmatch_lines([
        "agent-eval: backend scripted; arms with,without × agents Claude Code, Claude Next; corpus *",
        "*model backend: scripted*· agents Claude Code, claude-next*",
        # the stand-in CLI's without-arm prices 780 characters of Read at 0.82 chars/token, which no tokenizer
        # produces: occupancy prices it at the simple estimate's ratio and says the rest is unexplained
        "AVERAGE · claude-code: retrieval residual 229% HIGHER with the tool*",
        "AVERAGE · claude-next: retrieval residual 8% LOWER with the tool*",
        "AVERAGE · claude-code saved: *",
        "AVERAGE · claude-next saved: *",
        "agent-eval: agents on express: retrieval residual with vs without: Claude Code +229% worse (every run gave "
        "the same value, 2 pairs) · claude-next −8% better (every run gave the same value, 2 pairs)",
        "agent-eval: agents on gin: *Claude Code * · claude-next *",
    ])  # fmt: skip
    unsharded = only_campaign(project.path / "whole")
    records = comparable(unsharded)
    assert {r["agent"] for i, r in records.items() if NEXT.name in i} == {NEXT.name}
    assert {r["agent"] for i, r in records.items() if NEXT.name not in i} == {"claude-code"}
    summary = json.loads((unsharded / "summary.json").read_text())
    assert [on["entry"] for on in summary["agents"]] == ["express", "gin", "overall"]
    express = summary["agents"][0]["agents"]
    assert express["claude-code"]["title"] == "Claude Code"
    assert express["claude-code"]["change"] == pytest.approx(855 / 260 - 1)  # 780 chars at the simple ratio, 3.0
    assert express[NEXT.name]["change"] == pytest.approx(855 / 934 - 1)
    assert any("agents Claude Code, claude-next" in note for note in summary["model_notes"])
    page = (unsharded / "report.html").read_text()
    assert '<section id="agents">' in page and 'id="chart-agents"' in page
    assert re.search(r'id="backend-note">model backend: scripted[^<]* · agents Claude Code, claude-next</p>', page)
    assert re.search(r'<td data-agent="claude-next" class="agent-change">−8% better \(every run gave the same value, '
                     r'2 pairs\)</td>', page)  # fmt: skip
    if CHROMIUM is not None:  # the page's own script draws the agents' chart: a bar per agent and entry
        dom = chromium(project.path / "profile", "--dump-dom", (unsharded / "report.html").as_uri()).stdout
        assert 'data-charts-rendered="4"' in dom
        bars = re.findall(r'<rect [^>]*data-agent="([\w-]+)"', chart(dom, "chart-agents"))
        assert bars == ["claude-code", NEXT.name] * 3  # express, gin, overall
    manifest = json.loads((unsharded / "manifest.json").read_text())
    assert manifest["selection"]["options"]["agents"] == AGENTS
    assert manifest["config"]["agents"] == ["claude-code", NEXT.name]

    # interrupted: the second agent's without-arm failed on express; the resume runs those two items only
    folder = project.path / f"standin-{NEXT.name}"
    project.script("without", Q_EXPRESS, api_error(), folder=folder)
    first = pytester.runpytest(*args("resumed", "--agent-eval-agents", AGENTS))
    first.assert_outcomes(passed=14, errors=2)
    resumed = only_campaign(project.path / "resumed")
    project.script("without", Q_EXPRESS, without_reading(90), folder=folder)
    log = folder / "calls.jsonl"  # the second agent's stand-in's own log
    calls, next_calls = len(project.calls()), len(log.read_text().splitlines())
    again = pytester.runpytest("evals", "-p", "no:cacheprovider", "--agent-eval-resume", str(resumed))
    again.assert_outcomes(passed=16)
    assert len(project.calls()) == calls  # the stand-in claude ran nothing again: only the other agent's items ran
    assert len(log.read_text().splitlines()) == next_calls + 2
    assert comparable(resumed) == records

    # two shards side by side, under xdist, merged
    shards = [
        pytester.popen(
            [sys.executable, "-m", "pytest", *args(f"shard{i}", "--agent-eval-agents", AGENTS,
                                                   f"--agent-eval-shard={i}/2", "-n", "2")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        for i in (1, 2)
    ]  # fmt: skip
    outputs = [process.communicate(timeout=300)[0].decode() for process in shards]
    # each shard's last lines (pytest cuts a long message short, and the reason is at the end)
    assert [process.returncode for process in shards] == [0, 0], [output[-4000:] for output in outputs]
    folders = [only_campaign(project.path / f"shard{i}") for i in (1, 2)]
    for folder in folders:  # a repository's items, of every agent, on one shard
        assert len({r.entry for r in Campaign.open(folder).items()}) == 1
        assert {r.agent for r in Campaign.open(folder).items()} == {"claude-code", NEXT.name}
    monkeypatch.syspath_prepend(str(REPO / "tests"))
    assert agent_eval(["merge", "merged", *map(str, folders)]) == 0
    capsys.readouterr()
    merged = project.path / "merged"
    assert comparable(merged) == records
    assert [r.id for r in Campaign.open(merged).items()] == [r.id for r in Campaign.open(unsharded).items()]
    merged_summary = json.loads((merged / "summary.json").read_text())
    assert merged_summary["agents"] == summary["agents"]


@pytest.mark.slow
def test_a_one_agent_baseline_still_matches_the_sessions_own_agent_in_a_mixed_campaign(project):
    pytester = project.pytester
    pytester.runpytest(*args("out", "-k", "express", "--agent-eval-save-baseline", "before")).assert_outcomes(passed=4)
    result = pytester.runpytest(*args(
        "out", "-k", "express", "--agent-eval-agents", AGENTS, "--agent-eval-compare", "before",
        "--agent-eval-compare-fail", "residual_tokens:+1%",
    ))  # fmt: skip
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*gate: passed — 2 of 2 baseline (entry, arm) pair(s) compared*"])
    # the other agent's without-arm reads three times as much: compared with Claude Code's it would regress
    assert "REGRESSION" not in result.stdout.str()


@pytest.mark.slow
def test_the_marker_names_the_agents_of_one_test(project):
    (project.path / "evals" / "test_marked.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.agent_eval(entries=['express'], agents=['claude-code', '{REFERENCE}'], runs=1)\n"
        "def test_marked(agent_result):\n    pass\n"
    )
    result = project.run("--collect-only", "-q", "evals/test_marked.py")
    ids = re.findall(r"test_marked\[(.*?)\]", result.stdout.str())
    assert ids == ["express-with-1", "express-without-1", f"express-{NEXT.name}-with-1",
                   f"express-{NEXT.name}-without-1"]  # fmt: skip
    bad = project.run("--collect-only", "-q", "evals/test_marked.py", "--agent-eval-agents", "codex,codex")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agent-eval-agents: agent 'codex' given twice in 'codex,codex'" in bad.stderr.str()


# -- the same through the real CLIs ----------------------------------------------------------------------------
# The items of `-k express --agent-eval-agents claude-code,codex --arms with,without --agent-eval-runs 1`: agent, arm
REAL_ITEMS = {
    "express-with-1": ("claude-code", "with"), "express-without-1": ("claude-code", "without"),
    "express-codex-with-1": ("codex", "with"), "express-codex-without-1": ("codex", "without"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_real_claude_code_and_codex_campaign_sharded_merged_and_resumed(
    real_tools: RealTools, tag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pytest evals -k express --agent-eval-agents claude-code,codex --arms with,without`` with the real CLIs
    against the stand-in model, one run per arm and one turn: shard 1/2 holds every item (a repository's items, of
    every agent, stay on one shard) and shard 2/2 none; their merge is the whole campaign, each agent's with-arm
    paired with its own without-arm; a resume of the campaign after one item's record was lost runs that item
    alone and re-scores the others, Codex's among them, from their transcripts."""
    CODEX.provision(real_tools.cache, CODEX.version)  # into the shared cache once: the inner sessions find it
    env = inner_env(real_tools, tag)
    command = ["evals", "-k", "express", "--agent-eval-agents", "claude-code,codex", "--arms", "with,without",
               "--agent-eval-runs", "1", "--agent-eval-turns", "1", "--agent-eval-backend", "scripted",
               "--agent-eval-offline"]  # fmt: skip
    done = {i: run_pytest([*command, f"--agent-eval-shard={i}/2", f"--agent-eval-out={tmp_path / f'shard{i}'}"],
                          REPO, env, tmp_path / f"run{i}") for i in (1, 2)}  # fmt: skip
    assert done[1].returncode == 0 and re.search(r"\b4 passed\b", done[1].stdout), done[1].stdout[-3000:]
    side = r"[+−]\d+% \(n=1: too few pairs for an interval\)"
    assert re.search(rf"agent-eval: agents on express: retrieval residual with vs without: Claude Code {side} · "
                     rf"Codex CLI {side}\n", done[1].stdout)  # fmt: skip
    assert done[2].returncode == 0 and "agent-eval: shard 2/2 holds none of the 4 selected item(s)" in done[2].stdout
    assert not any(p.is_dir() for p in (tmp_path / "shard2").glob("*"))  # an empty shard writes no campaign
    shard = only_campaign(tmp_path / "shard1")
    records = {r.id: r for r in Campaign.open(shard).items()}
    assert {i: (r.agent, r.arm) for i, r in records.items()} == REAL_ITEMS
    assert {r.outcome for r in records.values()} == {"passed"}

    merged = tmp_path / "merged"
    assert agent_eval(["merge", str(merged), str(shard)]) == 0
    assert f"agent-eval: merged 1 shard(s), 4 run(s), into {merged}" in capsys.readouterr().out
    assert comparable(merged) == comparable(shard)
    assert json.loads((merged / "manifest.json").read_text())["shard"]["merged_from"] == [
        {"index": 1, "campaign": shard.name}]  # fmt: skip
    [on_express] = [on for on in json.loads((merged / "summary.json").read_text())["agents"]
                    if on["entry"] == "express"]  # fmt: skip
    assert (on_express["arm"], on_express["reference"]) == ("with", "without")
    residual = {i: r.figures["residual_tokens"] for i, r in records.items()}
    assert on_express["agents"] == {
        agent: {"title": title, "figure": "residual_tokens", "pairs": 1, "interval": None, "verdict": "no interval",
                "method": "too few", "note": "n=1: too few pairs for an interval", "sd": None,
                "pairs_to_decide": {"10%": None, "25%": None},
                "change": pytest.approx(residual[f"express{infix}-with-1"] / residual[f"express{infix}-without-1"] - 1)}
        for agent, title, infix in (("claude-code", "Claude Code", ""), ("codex", "Codex CLI", "-codex"))
    }  # fmt: skip

    # the campaign lost Codex's without-arm's record (an interrupt before it was written): the resume runs it alone
    lost = "express-codex-without-1"
    items = shard / "items.jsonl"
    kept = [line for line in items.read_text().splitlines() if json.loads(line)["id"] != lost]
    items.write_text("\n".join(kept) + "\n")
    kept_ids = [json.loads(line)["id"] for line in kept]
    again = run_pytest(["evals", f"--agent-eval-resume={shard}"], REPO, env, tmp_path / "resume")
    assert again.returncode == 0 and re.search(r"\b4 passed\b", again.stdout), again.stdout[-3000:]
    assert "4 run(s) (3 re-scored from the resumed campaign, not re-run)" in again.stdout
    after = summary(tmp_path / "shard1")  # the resumed session's records; items.jsonl got the lost one's alone
    assert {i: r["resumed"] for i, r in after.items()} == {i: i != lost for i in REAL_ITEMS}
    assert [json.loads(line)["id"] for line in items.read_text().splitlines()] == [*kept_ids, lost]
    ran_again = [i for i in REAL_ITEMS if (shard / "items" / i / "attempt-1").is_dir()]  # its first run set aside
    assert ran_again == [lost] and after[lost]["outcome"] == "passed" and after[lost]["agent"] == "codex"
    for item in REAL_ITEMS:  # re-scored from the transcripts they left: the same figures
        if item != lost:
            assert after[item]["segments"] == records[item].segments
            assert {k: v for k, v in after[item]["figures"].items() if k not in TIMES} == {
                k: v for k, v in records[item].figures.items() if k not in TIMES}  # fmt: skip
    assert leftovers(tag, tmp_path) == []
