"""Fail fast on infrastructure, provenance, a safe Ctrl-C (docs/usage.md, "When something goes wrong").

The driver pieces run a tiny stand-in ``claude`` script; the plugin pieces reuse the pytester project of
``support/standin.py`` (its stand-in claude prints recorded transcripts); the real-CLI pieces run Claude Code against
the package's model server with injected faults.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from support.sessions import api_error, with_clean, without_clean
from support.standin import CONFTEST, Q_EXPRESS, Project, entry

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, run_headless
from pytest_agent_eval.campaign.resume_command import resume_command
from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord, TurnError
from pytest_agent_eval.harness.failures import EARLIER, FailureMemo

# -- the driver: API errors end the run at once, stalls are measured ---------------------------------------------
SCRIPTED_CLAUDE = """#!{python}
import json, sys, time
from pathlib import Path
here = Path(__file__).parent
calls = here / "calls"
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
for line in (here / "turn{{}}.jsonl".format(n)).read_text().splitlines():
    if line.startswith("#sleep "):
        time.sleep(float(line.split()[1]))
    else:
        print(line, flush=True)
"""


def scripted_claude(tmp_path: Path, *turns: list[str]) -> HeadlessOptions:
    """A claude that prints ``turns[n-1]`` on its n-th call (``#sleep S`` lines pause)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    claude = folder / "claude"
    claude.write_text(SCRIPTED_CLAUDE.format(python=sys.executable))
    claude.chmod(0o755)
    for n, lines in enumerate(turns, start=1):
        (folder / f"turn{n}.jsonl").write_text("\n".join(lines) + "\n")
    return HeadlessOptions(claude=str(claude), mcp_config=tmp_path / "m.json", settings=tmp_path / "s.json")


def drive(tmp_path: Path, options: HeadlessOptions, questions: list[str]):
    out = tmp_path / "out"
    return run_headless(questions, label="without-1", out_dir=out, cwd=tmp_path, env=dict(os.environ), options=options)


def test_a_turn_ending_in_an_api_error_ends_the_run_before_the_next_turn(tmp_path: Path) -> None:
    retry = json.dumps({"type": "system", "subtype": "api_retry", "attempt": 1, "error_status": 500, "error": "x"})
    failed = api_error().lines()
    options = scripted_claude(tmp_path, [failed[0], retry, retry, *failed[1:]], with_clean().lines())
    with pytest.raises(TurnError) as info:
        drive(tmp_path, options, ["Q1", "Q2", "Q3"])
    message = str(info.value)
    assert message.startswith("turn 1: API error in assistant message: rate_limit")
    assert "after 2 API retries" in message and "turns 2-3 not run" in message
    assert (tmp_path / "bin" / "calls").read_text() == "1"  # turn 2 was never started
    run = info.value.run
    assert [p.name for p in run.segments] == ["run-without-1.jsonl"] and run.api_retries == [2]
    assert isinstance(info.value, AgentInfraError)  # the plugin reports it as an infrastructure error


def test_a_silent_turn_is_flagged_stalled_by_its_longest_silence(tmp_path: Path) -> None:
    lines = with_clean().lines()
    paused = [*lines[:-1], "#sleep 1.5", lines[-1]]
    options = scripted_claude(tmp_path, paused, lines)
    run = drive(tmp_path, HeadlessOptions(**{**options.__dict__, "stall_s": 1.0}), ["Q1", "Q2"])
    assert run.longest_silence_s[0] >= 1.4 and run.longest_silence_s[1] < 1.0
    assert run.stalled_turns == [1] and run.silence_after[0] == "assistant text"  # then the result came
    driver = run.to_dict()
    assert driver["stalled_turns"] == [1] and driver["stall_s"] == 1.0 and driver["api_retries"] == [0, 0]


def test_the_agent_time_is_its_kept_turn_times_added_up() -> None:
    # The figure and a rescore of the record (which adds the kept, rounded times) agree to the ms.
    run = RunRecord(label="without-1", stall_s=None)
    run.wall_s = [9.2704, 0.0004, 0.0004]
    assert run.agent_s == round(sum(run.to_dict()["wall_s"]), 3) == 9.27  # not 9.271, the unrounded sum


def test_a_run_leaves_no_pipe_open_for_the_garbage_collector(tmp_path: Path) -> None:
    # An unclosed pipe warns (ResourceWarning) when collected: a project with filterwarnings = error then errors
    # every agent item.
    lines = with_clean().lines()
    options = scripted_claude(tmp_path, lines, lines)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drive(tmp_path, options, ["Q1", "Q2"])
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_turn_that_times_out_counts_its_silence_to_the_kill(tmp_path: Path) -> None:
    lines = with_clean().lines()
    options = scripted_claude(tmp_path, [lines[0], "#sleep 30", *lines[1:]])
    options = HeadlessOptions(**{**options.__dict__, "timeout_s": 1.5, "stall_s": 1.0})
    with pytest.raises(TurnError, match=r"timed out after 1\.5s") as info:
        drive(tmp_path, options, ["Q1"])
    assert info.value.run.stalled_turns == [1] and info.value.run.longest_silence_s[0] >= 1.0


# -- provisioning failures: once per session ---------------------------------------------------------------------
def test_a_failed_step_is_not_tried_again_in_the_session(tmp_path: Path) -> None:
    memo = FailureMemo(tmp_path / "cache", "session-a")
    tries: list[str] = []

    def fail() -> None:
        tries.append("x")
        raise AgentInfraError("provisioning codegraph 9.9.9: npm install failed (exit 1)")

    with pytest.raises(AgentInfraError, match=r"^provisioning codegraph 9\.9\.9: npm install failed \(exit 1\)$"):
        memo.attempt("codegraph 9.9.9", fail)
    # Another worker of the same session (its own memo object) sees it; nothing runs again.
    other_worker = FailureMemo(tmp_path / "cache", "session-a")
    with pytest.raises(AgentInfraError) as info:
        other_worker.attempt("codegraph 9.9.9", fail)
    assert str(info.value) == f"provisioning codegraph 9.9.9: npm install failed (exit 1) {EARLIER}"
    assert tries == ["x"]
    # Another key, and the next session, try again; a success is never remembered as a failure.
    assert memo.attempt("codegraph 1.6.1", lambda: "ok") == "ok"
    with pytest.raises(AgentInfraError, match="npm install failed"):
        FailureMemo(tmp_path / "cache", "session-b").attempt("codegraph 9.9.9", fail)
    assert tries == ["x", "x"]
    # An interrupt is not a failure of the step.
    with pytest.raises(KeyboardInterrupt):
        memo.attempt("claude", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert memo.failure("claude") is None
    memo.clear()
    assert not memo.root.exists() and memo.failure("codegraph 9.9.9") is None


FAILING_CODEGRAPH_CONFTEST = CONFTEST.replace(
    """@pytest.fixture
def tool_build(agent_case):
    # Never started: the stand-in claude does not launch MCP servers, and tool_warm skips the warm-up.
    return Provisioned("codegraph", Path("/opt/codegraph-not-here/bin/codegraph"), "1.6.1", "1.6.1")
""",
    "",
)


@pytest.mark.slow
def test_a_failing_install_errors_every_item_but_is_tried_once_per_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert FAILING_CODEGRAPH_CONFTEST != CONFTEST
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("gin", "How does gin route?")])
    pytester.makeconftest(FAILING_CODEGRAPH_CONFTEST)
    not_a_checkout = project.path / "not-a-checkout"
    not_a_checkout.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(project.path / "xdg"))  # a provisioning cache of its own
    args = ["--arms", f"with@local:{not_a_checkout}", "--agent-eval-runs", "2"]
    result = project.run(*args, "-n", "2", in_subprocess=True)
    result.assert_outcomes(errors=4)
    out = result.stdout.str()
    errors = [line for line in out.splitlines() if line.startswith("agent-eval infrastructure error in")]
    assert len(errors) == 4 and all("is not a codegraph checkout (no package.json)" in e for e in errors)
    assert sum(EARLIER in e for e in errors) == 3  # one item tried it; the other three, on both workers, did not
    assert not (project.path / "cache" / "failures").exists() or not any(
        (project.path / "cache" / "failures").iterdir()
    )


# -- stalls reach the record and the item's line -----------------------------------------------------------------
STALL_CONFTEST = (
    CONFTEST
    + """

@pytest.fixture(autouse=True)
def quick_stall(monkeypatch):
    import pytest_agent_eval.harness.drivers.watch as watch  # the fixtures read it when an item runs
    monkeypatch.setattr(watch, "STALL_S_STAND_IN", 0.5)
"""
)


@pytest.mark.slow
def test_a_stalled_turn_is_in_the_record_and_on_the_items_line(pytester: pytest.Pytester) -> None:
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    pytester.makeconftest(STALL_CONFTEST)
    project.script("without", Q_EXPRESS, without_clean(), mode="pause1.5")
    project.script("with", Q_EXPRESS, with_clean())
    result = project.run("--agent-eval-runs", "1", "-v")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*express-without-1] PASSED (stalled: turn 1 silent 1.[5-9]s after assistant text (threshold 0.5s))*"]
    )
    assert "agent-eval: express-without-1 stalled: turn 1 silent" in out
    records = {r["id"]: r for r in project.summary()["records"]}
    assert records["express-without-1"]["stalled"] is True
    assert records["express-without-1"]["driver"]["stalled_turns"] == [1]
    assert records["express-with-1"]["stalled"] is False
    # the stall's time is no duration in any table, and report.html says why
    assert records["express-without-1"]["figures"]["duration_s"] is None
    assert records["express-with-1"]["figures"]["duration_s"] is not None
    html = (project.campaign() / "report.html").read_text()
    assert "stalled: turn 1 silent" in html and "its time is no measurement" in html


# -- provenance --------------------------------------------------------------------------------------------------
FETCHING_CONFTEST = CONFTEST.replace(
    """@pytest.fixture
def indexed_repo(tmp_path_factory):""",
    """@pytest.fixture
def indexed_repo(corpus_repo):
    return corpus_repo  # fetched for real; the stand-in claude needs no index


@pytest.fixture
def unused_repo(tmp_path_factory):""",
).replace(
    """"1.6.1", "1.6.1")""",
    """"1.6.1", "1.6.1", {"kind": "npm", "spec": "codegraph@1.6.1", "version": "1.6.1", "path": "/opt"})""",
)


@pytest.mark.slow
def test_records_and_manifest_say_where_the_code_came_from_and_warn_of_a_fallback(pytester: pytest.Pytester) -> None:
    assert FETCHING_CONFTEST != CONFTEST
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    pytester.makeconftest(FETCHING_CONFTEST)
    source = project.path / "express-src"
    (source / "lib").mkdir(parents=True)
    (source / "lib" / "response.js").write_text("function send() {}\n")
    corpus = json.loads((project.path / "corpus.json").read_text())
    corpus["JavaScript"][0].update(repo=f"file://{project.path}/no-such.git", source=str(source))
    (project.path / "corpus.json").write_text(json.dumps(corpus))
    project.script("without", Q_EXPRESS, without_clean())
    result = project.run("--agent-eval-runs", "1", "--arms", "without", "--agent-eval-corpus-dir", "corpus")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "AgentEvalWarning: express: the code under test is the offline source" in out
    [record] = project.summary()["records"]
    assert record["source"]["kind"] == "local" and record["source"]["path"] == str(source)
    assert record["source"]["git_state"] is None and "no-such.git" in record["source"]["fallback"]
    assert record["tool_provision"] == {"kind": "npm", "spec": "codegraph@1.6.1", "version": "1.6.1", "path": "/opt"}
    assert len(record["warnings"]) == 1 and "not a clone" in record["warnings"][0]
    manifest = json.loads((project.campaign() / "manifest.json").read_text())
    assert manifest["provenance"]["sources"] == {"express": [record["source"]]}
    assert manifest["provenance"]["tools"] == {"without": [record["tool_provision"]]}
    assert manifest["provenance"]["warnings"] == record["warnings"]


# -- Ctrl-C ------------------------------------------------------------------------------------------------------
def test_resume_command_is_the_original_one_plus_the_flag() -> None:
    folder = Path("/out/2026 x")
    assert resume_command("/usr/bin/pytest", ["evals", "-k", "a and b"], folder) == (
        "pytest evals -k 'a and b' --agent-eval-resume '/out/2026 x'"
    )
    old = ["evals", "--agent-eval-resume", "/old", "-x", "--agent-eval-resume=/old2"]
    assert resume_command("/x/pytest/__main__.py", old, folder) == (
        "python -m pytest evals -x --agent-eval-resume '/out/2026 x'"
    )


def _running(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker``."""
    found = []
    for entry_ in Path("/proc").iterdir():
        if entry_.name.isdigit():
            try:
                if marker.encode() in (entry_ / "cmdline").read_bytes():
                    found.append(int(entry_.name))
            except OSError:
                continue
    return found


def _interrupted_run(project: Project, args: list[str], group: bool, wait_s: float) -> tuple[str, int]:
    """``python -m pytest ARGS`` in the project, Ctrl-C'd once two stand-in agents have started: what it printed
    and its exit code. ``group``: the signal goes to its whole process group, as a terminal's Ctrl-C does."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=group,  # its own group, as a terminal's foreground job is
    )
    try:
        deadline = time.monotonic() + wait_s
        while len(project.calls()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(project.calls()) == 2, "the agents never started"
        time.sleep(0.5)  # they have printed what they print before their long sleep
        if group:
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
        print(out)  # what the user sees after Ctrl-C
    finally:
        process.kill()
    return out, process.returncode


@pytest.mark.slow
def test_ctrl_c_stops_the_agent_keeps_the_campaign_and_says_how_to_resume(pytester: pytest.Pytester) -> None:
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("gin", "How does gin route?")])
    project.script("without", Q_EXPRESS, without_clean())
    project.script("without", "How does gin route?", without_clean(), mode="stall")  # sleeps before its result
    args = ["evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-out", "out"]
    args += ["--agent-eval-runs", "1", "--arms", "without"]
    out, returncode = _interrupted_run(project, args, group=False, wait_s=60)
    assert returncode == 2, out  # pytest's "interrupted"
    assert "Traceback" not in out and "KeyError" not in out and "INTERNALERROR" not in out, out
    campaign = project.campaign()
    assert (
        f"agent-eval: interrupted — resume with: python -m pytest {' '.join(args)} --agent-eval-resume {campaign}"
        in out
    )
    assert "agent-eval: interrupted the agent's run of gin-without-1; the agent was stopped" in out
    assert not _running(str(project.standin)), "the stand-in agent outlived the interrupt"
    # What was recorded stays: the finished item, and the interrupted one's partial segment (no record: re-run).
    records = [json.loads(line) for line in (campaign / "items.jsonl").read_text().splitlines()]
    assert [(r["id"], r["outcome"]) for r in records] == [("express-without-1", "passed")]
    partial = campaign / "items" / "gin-without-1" / "run-without-1.jsonl"
    assert partial.read_text().count("\n") == len(without_clean().lines()) - 1
    # And the printed command finishes it: only the interrupted item runs again.
    project.script("without", "How does gin route?", without_clean())
    resumed = project.pytester.runpytest(*args, "--agent-eval-resume", str(campaign))
    resumed.assert_outcomes(passed=2)
    assert len(project.calls()) == 3


@pytest.mark.slow
def test_ctrl_c_under_xdist_stops_every_agent_and_says_how_to_resume(pytester: pytest.Pytester) -> None:
    """A terminal's Ctrl-C reaches the controller and its workers (one process group)."""
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("gin", "How does gin route?")])
    for question in (Q_EXPRESS, "How does gin route?"):
        project.script("without", question, without_clean(), mode="stall")
    args = ["evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-out", "out"]
    args += ["--agent-eval-runs", "1", "--arms", "without", "-n", "2"]
    out, _ = _interrupted_run(project, args, group=True, wait_s=90)
    assert "Traceback" not in out and "KeyError" not in out and "INTERNALERROR" not in out, out
    campaign = project.campaign()
    assert (
        f"agent-eval: interrupted — resume with: python -m pytest {' '.join(args)} --agent-eval-resume {campaign}"
        in out
    )
    assert not _running(str(project.standin)), "a stand-in agent outlived the interrupt"
    assert not (campaign / "items.jsonl").exists() or not (campaign / "items.jsonl").read_text().strip()


# -- the real CLI against the stand-in server with injected faults -----------------------------------------------
@pytest.fixture
def real_cli_options(tmp_path: Path, real_tools) -> tuple[HeadlessOptions, dict[str, str]]:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    (tmp_path / "settings.json").write_text("{}")
    for folder in ("home", "tmp"):
        (tmp_path / folder).mkdir()
    options = HeadlessOptions(
        claude=str(real_tools.claude.bin), mcp_config=tmp_path / "mcp.json", settings=tmp_path / "settings.json"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}
    base.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    return options, base


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_cli_an_unreachable_api_ends_the_item_after_turn_one(tmp_path: Path, real_cli_options) -> None:
    from pytest_agent_eval.model import Faults, serve
    from pytest_agent_eval.run.backends import make_backend

    options, base = real_cli_options
    with serve(make_backend("scripted"), faults=Faults(default="500")) as server:
        env = CLAUDE_CODE.process_environment(base, server.url)
        env["CLAUDE_CODE_MAX_RETRIES"] = "2"  # the CLI's own retries; the default 10 take minutes of backoff
        started = time.monotonic()
        with pytest.raises(TurnError) as info:
            run_headless(["Q1?", "Q2?"], label="w-1", out_dir=tmp_path / "out", cwd=tmp_path, env=env, options=options)
        seconds = time.monotonic() - started
        requests = len(server.requests)
    print(f"unreachable API: item ended after {seconds:.1f}s, {requests} requests")
    assert requests == 3  # turn 1's try and two retries; no turn 2
    assert str(info.value).startswith("turn 1: API error") and "turns 2-2 not run" in str(info.value)
    assert info.value.run.api_retries == [2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_cli_a_hanging_request_is_retried_and_the_turn_flagged_stalled(tmp_path: Path, real_cli_options) -> None:
    """The 280 s "saving": a request the server never answers costs the CLI its request timeout (API_TIMEOUT_MS;
    8 s here, longer than the CLI's start under load; 360 s without it in 2.1.332) before it retries, and then the
    turn succeeds with that wait in its wall time."""
    from pytest_agent_eval.model import serve
    from pytest_agent_eval.run.backends import make_backend

    options, base = real_cli_options
    options = HeadlessOptions(**{**options.__dict__, "stall_s": 5.0})
    with serve(make_backend("scripted"), faults={1: "hang"}) as server:
        env = CLAUDE_CODE.process_environment(base, server.url)
        env["API_TIMEOUT_MS"] = "8000"
        env["CLAUDE_CODE_MAX_RETRIES"] = "2"  # the CLI's own retries, which the harness sets to 0
        run = run_headless(
            ["How does res.send work?"], label="w-1", out_dir=tmp_path / "out", cwd=tmp_path, env=env, options=options
        )
    print(f"hanging request: silent {run.longest_silence_s[0]:.1f}s after {run.silence_after[0]}, {run.api_retries}")
    assert run.api_retries[0] >= 1
    assert run.longest_silence_s[0] >= 7.9 and run.stalled_turns == [1]
    assert run.silence_after[0] == "system init"  # waiting on the model, not on a tool
