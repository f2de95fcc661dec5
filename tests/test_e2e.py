"""End to end: ``pytest evals`` with the REAL Claude Code CLI and the REAL codegraph, only the model stood in.

The session fixture ``real_tools`` (tests/conftest.py) provisions Claude Code 2.1.332 and codegraph 1.6.1
from npm, express 4.21.2 from its npm tarball and its index, through the package's own provisioning into the
plugin's default cache (``~/.cache/pytest-agent-eval`` or ``$AGENT_EVAL_CACHE``), so CI installs once and the
runs below find everything warm. Each test runs pytest in a subprocess against the repository's real ``evals/`` and
``corpus.json`` (or, to inject model-server faults, a copy of them with a conftest that overrides the
model server), and then checks that no ``claude``/``codegraph`` process it started is left.

Deselect with ``-m "not e2e"``; skipped only when npm/node are not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.e2e import RealTools, inner_env, leftovers, run_pytest, summary
from support.sameness import differences, masked

from pytest_agent_eval.agents.claude_code import STANDIN_API_KEY
from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.harness.provision import (
    read_builds,
)
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.explore_answer import file_sections
from pytest_agent_eval.transcript import Session

REPO = Path(__file__).resolve().parents[1]
HANG_TIMEOUT_S = 20  # --agent-eval-timeout for the hang: several times a normal turn (~3 s), far below the API's 600 s
# Figures each metric and the contamination gate put in a record (see pytest_agent_eval.metrics.figures).
OCCUPANCY = ("ctx_final", "tool_residual", "file_access_residual", "residual_tokens", "residual_share")
SUFFICIENCY = ("explore_calls", "explore_again_share", "read_returned_share", "sufficient_share")
ALLOCATION = ("allocation", "path_allocation")
CONTAMINATION = ("leaks", "cli_calls", "cli_blocked")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.skipif(runtimes.node() is None, reason="Node.js with npm is needed to provision"),
]


def _session(record: dict) -> Session:
    return read_segments([Path(p) for p in record["driver"]["segments"]])


def _explores(session: Session) -> list:
    return [c for c in session.calls if CODEGRAPH.is_explore(c.name)]


def _index_builds(cache: Path) -> list[dict]:
    return [b for b in read_builds(cache) if b["kind"] == "index" and Path(b["repo"]).name == "express"]


def _project(tmp_path: Path, faults: dict[int, dict]) -> Path:
    """A copy of the real evals and thresholds with a conftest whose model server misbehaves per run number."""
    project = tmp_path / "project"
    (project / "evals").mkdir(parents=True)
    shutil.copy(REPO / "evals" / "test_ab.py", project / "evals" / "test_ab.py")
    shutil.copy(REPO / "agent-eval.yaml", project / "agent-eval.yaml")
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "conftest.py").write_text(CONFTEST.format(faults=faults), encoding="utf-8")
    return project


CONFTEST = '''
import json
from urllib.parse import urlsplit

import pytest

from pytest_agent_eval.model import ModelEndpoint
from pytest_agent_eval.model import Faults, serve
from pytest_agent_eval.run.backends import make_backend

FAULTS = {faults!r}  # run number -> Faults(**kwargs)


@pytest.fixture
def agent_model_server(agent_case, agent_run_dir):
    """The scripted model behind a server that injects this run's faults; what it saw goes to model-hits.json."""
    backend = make_backend("scripted")
    server = serve(backend, faults=Faults(**FAULTS.get(agent_case.run, {{}})))
    try:
        yield ModelEndpoint("scripted", backend.describe(), server.url)
    finally:
        server.stop()
        hits = [[h.status, h.fault] for h in server.hits if urlsplit(h.path).path == "/v1/messages"]
        (agent_run_dir / "model-hits.json").write_text(json.dumps(hits))
'''


# -- a. the campaign ------------------------------------------------------------------------------------------
def test_both_arms_two_runs_three_turns_under_xdist(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    builds_before = len(_index_builds(real_tools.cache))
    args = [
        "evals",
        "-k",
        "express",
        "-n",
        "2",
        "--agent-eval-runs",
        "2",
        "--agent-eval-backend",
        "scripted",
        "--agent-eval-offline",
    ]
    done = run_pytest([*args, f"--agent-eval-out={out}"], REPO, inner_env(real_tools, tag), tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b4 passed\b", done.stdout)
    assert "ARM COMPARISON — express" in done.stdout and "CAMPAIGN" in done.stdout
    assert done.stdout.count("ARM COMPARISON — express") == 1  # printed by the controller only
    records = summary(out)
    assert sorted(records) == ["express-with-1", "express-with-2", "express-without-1", "express-without-2"]

    for record in records.values():
        assert record["outcome"] == "passed" and record["turns"] == 3 and record["backend"]["name"] == "scripted"
        assert len(record["driver"]["segments"]) == 3 and record["driver"]["exit_codes"] == [0, 0, 0]
        figures = record["figures"]
        for name in (*OCCUPANCY, *SUFFICIENCY, *ALLOCATION, *CONTAMINATION):
            assert name in figures, f"{record['id']}: no {name}"
        assert figures["residual_tokens"] > 0 and figures["ctx_final"] > figures["residual_tokens"]
        assert {"occupancy", "sufficiency", "allocation", "contamination"} <= record["scores"].keys()
        # express has an answer key: each arm's answers are graded against it, turn by turn (metrics/answers.py)
        assert record["scores"]["answers"]["graded"] and len(record["scores"]["answers"]["turns"]) == 3
        assert figures["key_recall"] is not None and figures["key_seen"] is not None
        gates = {g["gate"]: g["passed"] for g in record["gates"]}
        assert gates["contamination"] is True and record["contaminated"] is False

    for run in (1, 2):
        with_arm, without = records[f"express-with-{run}"], records[f"express-without-{run}"]
        # the with-arm explored once per turn and got file sections of express's lib/
        explores = _explores(_session(with_arm))
        assert len(explores) == 3 and "**`lib/response.js`**" in explores[0].result.text
        for call in explores:
            assert call.result is not None and not call.result.is_error
            paths = [s.path for s in file_sections(call.result.text)]
            assert paths and all(p.startswith("lib/") for p in paths)
            assert all(f"**`{p}`**" in call.result.text for p in paths)
        figures = with_arm["figures"]
        assert figures["retrieval_calls"] == 3 and figures["explore_calls"] == 3 and figures["allocation"] == 1.0
        assert figures["tool_residual"] > 0 and figures["sufficient_share"] is not None
        # the without-arm tried the codegraph CLI once per turn; the hook denied it and nothing came back
        session = _session(without)
        bash = [c for c in session.calls if c.name == "Bash"]
        assert len(bash) == 3 and all(c.input["command"].startswith("codegraph explore ") for c in bash)
        for call in bash:
            assert call.result is not None and call.result.is_error
            assert "agent-eval: the `codegraph` CLI is not available in this evaluation arm" in call.result.text
            assert not file_sections(call.result.text)
        assert not _explores(session)
        figures = without["figures"]
        assert (figures["cli_calls"], figures["cli_blocked"], figures["leaks"]) == (3, 3, 0)
        assert figures["retrieval_calls"] == 0 and figures["allocation"] is None

    # the verdict carries each arm's grade, and says the grades are the stand-in's (docs/metrics/answers.md)
    verdict = re.search(r"agent-eval: verdict express .*", done.stdout)
    assert verdict is not None, done.stdout[-3000:]
    assert re.search(r"answer key recall with \S+ \[\S+\] · without \S+ \[\S+\] \(grades the stand-in's", verdict[0])
    report = next(out.glob("*/report.html")).read_text(encoding="utf-8")
    assert '<section id="answers">' in report and '<p class="judge" id="judge">no judge ran</p>' in report
    # the placeholder key went to the CLI's environment only: no transcript, record, config or HOME holds it
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert STANDIN_API_KEY.encode() not in data and STANDIN_API_KEY[-20:].encode() not in data, path
    # the session fixture built express's index; two workers and four items built none
    assert len(_index_builds(real_tools.cache)) == builds_before
    assert leftovers(tag, tmp_path) == []


def test_two_runs_of_the_main_job_give_the_same_summary_and_report(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """README's main job twice: summary.json and report.html byte for byte the same but for what no two runs share
    (support/sameness.py; docs/report.md, "Two runs of one campaign"). The stand-in's call ids were random and moved
    the token counts of every prompt that repeats them, and a run's parallel results showed in the order they
    finished."""
    args = ["evals", "-k", "express", "--agent-eval-backend", "scripted", "--agent-eval-offline"]
    found = []
    for name in ("run1", "run2"):  # names alike in length and letters: the workspace path the agent sees counts alike
        out = tmp_path / name / "out"
        done = run_pytest([*args, f"--agent-eval-out={out}"], REPO, inner_env(real_tools, tag), tmp_path / name)
        assert done.returncode == 0, done.stdout[-3000:]
        (campaign,) = [path for path in out.iterdir() if path.is_dir()]
        texts = [(campaign / name).read_text(encoding="utf-8") for name in ("summary.json", "report.html")]
        found.append([masked(text, campaign, tmp_path / name) for text in texts])
    for first, second in zip(*found, strict=True):
        assert first == second, differences(first, second)


# -- b. a hanging API request ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("policy", "recall"), [("key", 1.0), ("wrong", 0.0), ("none", 0.0)])
def test_the_stand_in_answers_well_or_badly_on_purpose_and_the_grade_tells(
    real_tools: RealTools, tag: str, tmp_path: Path, policy: str, recall: float
) -> None:
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-runs", "1", "--agent-eval-turns", "1", "--arms", "with"]
    args += ["--agent-eval-backend", "scripted", "--agent-eval-offline", f"--agent-eval-stand-in-answers={policy}"]
    run_pytest([*args, f"--agent-eval-out={out}"], REPO, inner_env(real_tools, tag), tmp_path)
    (record,) = summary(out).values()  # scored, whether or not agent-eval.yaml's allocation bound passed it
    assert record["figures"]["key_recall"] == recall and len(record["scores"]["answers"]["turns"]) == 1
    assert f"answers={policy}" in record["backend"]["description"]
    assert leftovers(tag, tmp_path) == []


JUDGE = """
from pathlib import Path
from pytest_agent_eval.metrics.judge import Judgement

class Judge:
    name = "counting"

    def judge(self, question, answer, key):
        with open(Path(__file__).with_name("asked"), "a") as asked:
            asked.write(question + "\\n")
        named = key and key["files"][0] in answer
        return Judgement(1.0 if named else 0.0, "names the first key file", question, answer)

JUDGE = Judge()
"""


def test_a_judge_is_asked_once_per_turn_and_a_rescore_replays_it(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    plugin = tmp_path / "judges"
    plugin.mkdir()
    (plugin / "my_judge.py").write_text(JUDGE, encoding="utf-8")
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-runs", "1", "--agent-eval-turns", "2", "--arms", "with"]
    args += ["--agent-eval-backend", "scripted", "--agent-eval-offline", "--agent-eval-stand-in-answers=key"]
    args += ["--agent-eval-judge", "my_judge:JUDGE", f"--agent-eval-out={out}"]
    env = {**inner_env(real_tools, tag), "PYTHONPATH": str(plugin)}
    done = run_pytest(args, REPO, env, tmp_path)
    (record,) = summary(out).values()
    judged = record["scores"]["judge"]
    assert judged["judge"] == "counting" and judged["grade"] == 1.0 and len(judged["turns"]) == 2, done.stdout[-2000:]
    assert record["figures"]["judge_grade"] == 1.0
    asked = (plugin / "asked").read_text(encoding="utf-8")
    assert asked.count("\n") == 2
    (campaign,) = out.glob("*/summary.json")
    assert "judge counting: 1 run(s) graded" in (campaign.parent / "report.html").read_text(encoding="utf-8")
    rescored = subprocess.run(
        [sys.executable, "-m", "pytest_agent_eval.cli", "rescore", str(campaign.parent)], env=env, capture_output=True
    )
    assert rescored.returncode == 0, rescored.stderr
    assert (plugin / "asked").read_text(encoding="utf-8") == asked  # replayed from the record: not asked again
    assert leftovers(tag, tmp_path) == []


def test_a_hanging_model_is_an_infrastructure_error_with_the_partial_transcript_kept(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    # request 1 (the explore call) is answered, request 2 never is
    project = _project(tmp_path, {1: {"plan": {2: "hang"}}})
    out = tmp_path / "out"
    args = [
        "evals",
        "-k",
        "express",
        "--arms",
        "with",
        "--agent-eval-runs",
        "1",
        "--agent-eval-turns",
        "1",
        "--agent-eval-offline",
    ]
    args += [
        f"--agent-eval-timeout={HANG_TIMEOUT_S}",
        f"--agent-eval-corpus={REPO / 'corpus.json'}",
        f"--agent-eval-out={out}",
    ]
    done = run_pytest(args, project, inner_env(real_tools, tag), tmp_path)
    assert done.returncode == 1
    assert re.search(r"\b1 error\b", done.stdout) and not re.search(r"\bfailed\b", done.stdout)
    record = summary(out)["express-with-1"]
    segment = Path(record["run_dir"]) / "run-with-1.jsonl"
    message = (
        f"turn 1: claude timed out after {HANG_TIMEOUT_S}s without a result event (partial segment kept: {segment})"
    )
    assert f"agent-eval infrastructure error in express-with-1: {message}" in done.stdout
    assert record["outcome"] == "error" and record["infra_error"].startswith(message) and not record["figures"]
    hits = json.loads((segment.parent / "model-hits.json").read_text())
    assert hits == [[200, None], [0, "hang"]]  # 0: never answered
    # what happened before the hang is on disk: the init, the explore call and its real answer, no result
    session = read_segments([segment])
    assert session.inits and not session.results
    (explore,) = _explores(session)
    assert explore.result is not None and "**`lib/response.js`**" in explore.result.text
    assert leftovers(tag, tmp_path) == []


# -- c. HTTP 500 from the API ---------------------------------------------------------------------------------
def test_a_single_500_is_retried_and_a_persistent_500_is_an_infrastructure_error(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    # run 1: the first request fails once; run 2: every request fails and the CLI gives up after one retry
    project = _project(tmp_path, {1: {"plan": {1: "500"}}, 2: {"default": "500"}})
    out = tmp_path / "out"
    args = [
        "evals",
        "-k",
        "express",
        "--arms",
        "with",
        "--agent-eval-runs",
        "2",
        "--agent-eval-turns",
        "1",
        "--agent-eval-offline",
    ]
    args += [f"--agent-eval-corpus={REPO / 'corpus.json'}", f"--agent-eval-out={out}"]
    done = run_pytest(args, project, inner_env(real_tools, tag, CLAUDE_CODE_MAX_RETRIES="1"), tmp_path)
    assert done.returncode == 1
    assert re.search(r"\b1 passed\b", done.stdout) and re.search(r"\b1 error\b", done.stdout)
    assert not re.search(r"\bfailed\b", done.stdout)
    records = summary(out)

    retried = records["express-with-1"]
    assert retried["outcome"] == "passed" and retried["figures"]["retrieval_calls"] == 1
    statuses = [h[0] for h in json.loads((Path(retried["run_dir"]) / "model-hits.json").read_text())]
    assert statuses[:2] == [500, 200] and 500 not in statuses[1:]
    events = [json.loads(line) for line in Path(retried["driver"]["segments"][0]).read_text().splitlines()]
    retries = [e for e in events if e.get("type") == "system" and e.get("subtype") == "api_retry"]
    assert [(r["attempt"], r["error_status"]) for r in retries] == [(1, 500)]

    failed = records["express-with-2"]
    assert failed["outcome"] == "error" and not failed["figures"]  # no figures: not scored
    assert "API error" in failed["infra_error"] and "server_error" in failed["infra_error"]  # the API's 500 type
    assert f"agent-eval infrastructure error in express-with-2: {failed['infra_error']}" in done.stdout
    assert failed["infra_error"].startswith("turn 1: API error") and failed["driver"]["api_retries"] == [1]
    # where the code under test and the tool came from, on every record and gathered in the manifest
    assert failed["source"] == {"kind": "npm", "spec": "npm:express@4.21.2", "version": "4.21.2"}
    assert failed["tool_provision"]["kind"] == "npm" and failed["tool_provision"]["version"] == failed["tool_version"]
    (campaign,) = (p for p in out.iterdir() if p.is_dir())  # beside it: the out folder's own .gitignore
    manifest = json.loads((campaign / "manifest.json").read_text())
    assert manifest["provenance"]["sources"] == {"express": [failed["source"]]}
    assert manifest["provenance"]["tools"] == {"with": [failed["tool_provision"]]}
    statuses = [h[0] for h in json.loads((Path(failed["run_dir"]) / "model-hits.json").read_text())]
    assert statuses == [500, 500]  # the first try and the one retry CLAUDE_CODE_MAX_RETRIES allows
    assert leftovers(tag, tmp_path) == []


# -- d. record, then replay ----------------------------------------------------------------------------------
def test_a_cassette_replays_a_recorded_run_against_the_same_codegraph(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    common = ["evals", "-k", "express", "--arms", "with", "--agent-eval-runs", "1", "--agent-eval-offline"]
    recorded_out, replay_out = tmp_path / "recorded", tmp_path / "replay"
    env = inner_env(real_tools, tag)
    done = run_pytest(
        [*common, "--agent-eval-backend", "scripted", f"--agent-eval-out={recorded_out}"], REPO, env, tmp_path
    )
    assert done.returncode == 0, done.stdout[-3000:]
    recorded = summary(recorded_out)["express-with-1"]
    cassette = ",".join(recorded["driver"]["segments"])
    replay_args = [*common, "--agent-eval-backend", "cassette", f"--agent-eval-cassette={cassette}"]
    done = run_pytest([*replay_args, f"--agent-eval-out={replay_out}"], REPO, env, tmp_path / "again")
    assert done.returncode == 0, done.stdout[-3000:]
    replayed = summary(replay_out)["express-with-1"]
    assert replayed["backend"]["name"] == "cassette" and len(replayed["driver"]["segments"]) == 3

    before, after = _session(recorded), _session(replayed)
    # the replay runs in a workspace of its own: recorded paths are moved there, so its tools read today's copy
    old_cwd, new_cwd = before.inits[0]["cwd"], after.inits[0]["cwd"]
    assert old_cwd != new_cwd
    moved = [(c.id, c.name, json.loads(json.dumps(c.input).replace(old_cwd, new_cwd))) for c in before.calls]
    assert [(c.id, c.name, c.input) for c in after.calls] == moved
    reads = [c.input["file_path"] for c in after.calls if c.name == "Read"]
    assert reads and all(path.startswith(new_cwd + "/") for path in reads)
    recorded_texts = [c.result.text for c in _explores(before)]
    replayed_texts = [c.result.text for c in _explores(after)]
    assert len(recorded_texts) == 3 and all(file_sections(t) for t in recorded_texts)
    assert replayed_texts == recorded_texts  # the same codegraph on the same index answers byte for byte
    assert after.answer_texts() == before.answer_texts()
    chars = [r["scores"]["occupancy"]["residual_chars"]["tool"] for r in (recorded, replayed)]
    assert chars[0] == chars[1] > 0
    assert leftovers(tag, tmp_path) == []
