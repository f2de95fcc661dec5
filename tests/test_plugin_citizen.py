"""The plugin as a guest in someone else's project (docs/usage.md): evals are opt-in, no side effects when no eval
runs, pytest's conventions. pytester sessions with the stand-in ``claude`` of :mod:`support.standin`."""

from __future__ import annotations

import importlib
import json
import re

import pytest
from support.sessions import with_clean
from support.standin import Q_EXPRESS, Q_GIN, Project, clean_scripts, entry

from pytest_agent_eval.harness import runtimes

pytestmark = pytest.mark.slow  # pytester sessions

UNRELATED = "def test_unrelated():\n    assert True\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    (project.path / "tests").mkdir()
    (project.path / "tests" / "test_unrelated.py").write_text(UNRELATED)
    return project


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line]


AGENT_ITEMS = ["evals/test_ab.py::test_ab[express-with-1]", "evals/test_ab.py::test_ab[express-without-1]"]


def test_a_plain_run_deselects_the_evals_and_says_how_to_run_them(project):
    clean_scripts(project)
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-runs", "1")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["agent-eval: 2 agent evaluation item(s) deselected: name their file or folder (pytest evals/)*--agent-eval*"]
    )
    assert project.calls() == []
    assert not (project.path / "agent-eval-out").exists()
    # -qq: the line is left out with the rest of the summary
    result = project.pytester.runpytest("-p", "no:cacheprovider", "-qq")
    assert "agent-eval:" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["evals"], AGENT_ITEMS),
        (["evals/test_ab.py"], AGENT_ITEMS),
        ([], ["tests/test_unrelated.py::test_unrelated"]),
        (["."], [*AGENT_ITEMS, "tests/test_unrelated.py::test_unrelated"]),
        (["--agent-eval"], [*AGENT_ITEMS, "tests/test_unrelated.py::test_unrelated"]),
        (["--agent-eval-only"], AGENT_ITEMS),
        (["evals", "--agent-eval-skip"], []),
        (["tests", "evals/test_ab.py::test_ab"], [*AGENT_ITEMS, "tests/test_unrelated.py::test_unrelated"]),
    ],
)
def test_evals_run_when_named_or_asked_for(project, args, expected):
    result = project.pytester.runpytest(
        "-p", "no:cacheprovider", "--collect-only", "-q", "--agent-eval-runs", "1", *args
    )
    assert sorted(collected(result)) == sorted(expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ["tests/test_unrelated.py::test_unrelated"]),
        (["evals"], [f"evals/test_ab.py::test_ab[express-{arm}-{n}]" for arm in ("with", "without") for n in (1, 2)]),
        (["tests", "--agent-eval-only"], []),
    ],
)  # fmt: skip
def test_without_a_setting_given_the_plugin_loads_late_and_selects_the_same(project, args, expected):
    # No option or ini key: the settings and the rest of the plugin load with the first agent item (or, for
    # --agent-eval-only, as the session starts), and select as they do when a setting is given.
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", *args)
    assert sorted(collected(result)) == sorted(expected)


def test_skip_and_only_each_say_what_they_left_out(project):
    result = project.pytester.runpytest("-p", "no:cacheprovider", "evals", "--agent-eval-skip")
    result.stdout.fnmatch_lines(["agent-eval: 4 agent evaluation item(s) deselected by --agent-eval-skip"])
    assert "--agent-eval to run them" not in result.stdout.str()
    result = project.pytester.runpytest("-p", "no:cacheprovider", "tests", "--agent-eval-only")
    result.stdout.fnmatch_lines(["agent-eval: --agent-eval-only, and no agent evaluation item ran"])


def test_skip_and_only_exclude_each_other(project):
    result = project.pytester.runpytest("--agent-eval-skip", "--agent-eval-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agent-eval-skip and --agent-eval-only exclude each other*"])


def test_under_xdist_the_line_is_printed_once_and_no_out_folder_is_made(project):
    result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--agent-eval-runs", "1")
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("agent evaluation item(s) deselected") == 1
    assert not (project.path / "agent-eval-out").exists()


def test_pyargs_names_the_packaged_evals(pytester):
    result = pytester.runpytest("--pyargs", "pytest_agent_eval.evals", "--collect-only", "-q", "--agent-eval-runs", "1")
    assert collected(result) and all("test_ab[" in line for line in collected(result))
    assert "deselected" not in result.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_an_unwritable_out_folder_is_no_error_when_no_eval_runs(project, xdist):
    blocker = project.path / "a-file"
    blocker.write_text("not a folder")
    args = ["-p", "no:cacheprovider", "--agent-eval-out", str(blocker / "out"), *xdist]
    result = project.pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["local", "xdist"])
def test_an_out_folder_that_cannot_be_made_is_one_line_when_an_eval_runs(project, xdist):
    clean_scripts(project)
    (project.path / "agent-eval-out").write_text("a file where the folder goes")
    args = ["evals", "-p", "no:cacheprovider", "--agent-eval-runs", "1", "-k", "express and without", *xdist]
    result = project.pytester.runpytest_subprocess(*args)
    output = result.stdout.str() + result.stderr.str()
    problem = f"--agent-eval-out {project.path / 'agent-eval-out'}: {project.path / 'agent-eval-out'} is not a folder"
    assert problem in output and "INTERNALERROR" not in output and "Traceback" not in output
    if xdist:  # a worker cannot stop the session: the item errors at setup, with that line alone
        result.assert_outcomes(errors=1)
        assert "ARM COMPARISON" not in output
    else:  # before anything runs
        assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert project.calls() == []  # no agent was started


def test_a_summary_json_path_that_cannot_be_written_is_a_usage_error(project):
    clean_scripts(project)
    (project.path / "a-file").write_text("")
    json_path = project.path / "a-file" / "summary.json"
    args = ["evals", "-p", "no:cacheprovider", "--agent-eval-runs", "1", "-k", "express and without"]
    result = project.pytester.runpytest_subprocess(*args, "--agent-eval-json", str(json_path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--agent-eval-json {json_path}: {project.path / 'a-file'} is not a folder" in result.stderr.str()
    result = project.pytester.runpytest_subprocess(*args, "--agent-eval-json", str(project.path))
    assert f"--agent-eval-json {project.path}: is a folder (give a file name)" in result.stderr.str()


def test_the_out_folder_carries_its_own_gitignore(project):
    clean_scripts(project)
    result = project.pytester.runpytest(
        "evals",
        "-p",
        "no:cacheprovider",
        "--agent-eval-backend",
        "scripted",
        "--agent-eval-runs",
        "1",
        "-k",
        "express and not without",
    )
    result.assert_outcomes(passed=1)
    assert (project.path / "agent-eval-out" / ".gitignore").read_text().splitlines()[-1] == "*"


# -- point 7: -k names an arm; resume matches the test ---------------------------------------------------------
@pytest.mark.parametrize(
    ("keyword", "arms"),
    [
        ("with", ["with"]),
        ("without", ["without"]),
        ("with and not without", ["with"]),
        ("not without", ["with"]),
        ("express and (with or without)", ["with", "without"]),
        ("WITHOUT", ["without"]),
    ],
)
def test_k_with_and_k_without_each_select_one_arm(project, keyword, arms):
    result = project.run("--collect-only", "-q", "--agent-eval-runs", "1", "-k", keyword)
    assert collected(result) == [f"evals/test_ab.py::test_ab[express-{arm}-1]" for arm in arms]


ONE_TEST = """
import pytest

@pytest.mark.agent_eval(arms="with", runs=1)
def {name}(agent_result):
    pass
"""


def test_resume_does_not_rescore_another_tests_run(project):
    clean_scripts(project)
    (project.path / "evals" / "test_ab.py").unlink()
    tests = project.path / "evals" / "test_two.py"
    tests.write_text(ONE_TEST.format(name="test_first"))
    project.run("--agent-eval-runs", "1").assert_outcomes(passed=1)
    campaign = project.campaign()
    assert len(project.calls()) == 1
    # The file now holds another test whose item has the same id (express-with-1): the campaign's record of it
    # belongs to test_first, so the resumed item runs instead of being re-scored from that transcript.
    tests.write_text(ONE_TEST.format(name="test_second"))
    result = project.run("--agent-eval-resume", str(campaign))
    result.assert_outcomes(passed=1)
    assert len(project.calls()) == 2  # run, not re-scored from test_first's transcript
    records = [json.loads(line) for line in (campaign / "items.jsonl").read_text().splitlines()]
    assert [r["nodeid"].split("::")[1].split("[")[0] for r in records] == ["test_first", "test_second"]
    assert not records[1]["resumed"]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["local", "xdist"])
def test_a_resume_given_only_the_folder_collects_the_paths_the_campaign_named(project, xdist, monkeypatch):
    clean_scripts(project)
    project.run("--agent-eval-runs", "1", "-k", "express and without").assert_outcomes(passed=1)
    campaign = project.campaign()
    assert json.loads((campaign / "manifest.json").read_text())["selection"]["args"] == [str(project.path / "evals")]
    # From another folder, no path given: the campaign's evals/ is collected again, its item re-scored, not run.
    (project.path / "elsewhere").mkdir()
    monkeypatch.chdir(project.path / "elsewhere")
    result = project.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--rootdir", str(project.path), "--agent-eval-resume", str(campaign), *xdist,
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    assert "agent evaluation item(s) deselected" not in result.stdout.str()
    assert len(project.calls()) == 1


# -- points 8 and 9: pytest-timeout and xdist groups -----------------------------------------------------------
SHOW_MARKS = """

def pytest_collection_finish(session):
    import json
    marks = {item.nodeid: {m.name: [*m.args, *m.kwargs.values()] for m in item.iter_markers()
                           if m.name in ("timeout", "xdist_group")} for item in session.items}
    (Path(__file__).parent / "marks.json").write_text(json.dumps(marks))
"""


def test_items_carry_their_own_timeout_and_an_xdist_group(project):
    with (project.path / "conftest.py").open("a") as conftest:
        conftest.write(SHOW_MARKS)
    (project.path / "pytest.ini").write_text("[pytest]\ntimeout = 60\n")
    args = ["--collect-only", "--agent-eval-runs", "1", "--agent-eval-timeout", "100", "--agent-eval-turns", "1"]
    project.run(*args, "--arms", "with,without,with@local:/src/cg", "tests")
    marks = json.loads((project.path / "marks.json").read_text())
    assert marks["tests/test_unrelated.py::test_unrelated"] == {}
    agent = {nodeid.split("[")[1].rstrip("]"): found for nodeid, found in marks.items() if "[" in nodeid}
    assert agent["express-with-1"]["xdist_group"] == agent["express-without-1"]["xdist_group"] == ["express@1.6.1"]
    assert agent["express-with:local:cg-1"]["xdist_group"] == ["express@local:/src/cg"]
    # the agent's own limit (100 s × 1 turn) and a margin for installs, clone and index: not the project's 60 s
    assert all(found["timeout"][0] >= 100 + 600 for found in agent.values())


def test_loadgroup_runs_one_repository_on_one_worker(pytester):
    # On pytest 9.2 xdist's own loadgroup loses every group (pytest-dev/pytest-xdist#1386): the plugin's scheduler
    # (pytest_agent_eval/plugin/loadgroup.py) keeps them.
    project = Project(pytester, [entry("express", Q_EXPRESS), entry("gin", Q_GIN, "Go")])
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "2", "-n", "2", "--dist", "loadgroup", "-v", in_subprocess=True)
    result.assert_outcomes(passed=8)
    for name in ("express", "gin"):
        workers = {line.split("]")[0] for line in result.stdout.lines if "PASSED" in line and f"[{name}-" in line}
        assert len(workers) == 1, (name, workers)


def test_thread_timeout_ends_the_agent_and_keeps_the_record(project):
    project.script("with", Q_EXPRESS, with_clean(), mode="stall")  # never sends its result
    (project.path / "evals" / "test_slow.py").write_text(
        "import pytest\n\n@pytest.mark.timeout(4)\n@pytest.mark.agent_eval(arms='with', runs=1)\n"
        "def test_slow(agent_result):\n    pass\n"
    )
    result = project.run("-k", "test_slow", "--timeout-method", "thread", in_subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    [record] = [json.loads(line) for line in (project.campaign() / "items.jsonl").read_text().splitlines()]
    assert record["id"] == "express-with-1" and record["outcome"] == "error"


# -- point 11: the marker alone --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("", "*test_x: @pytest.mark.agent_eval on a test that uses none of the agent fixtures: request agent_result*"),
        ("arms='with,wihtout'", "*@pytest.mark.agent_eval: unknown arm 'wihtout'*"),
        ("entries=['express', 'nope']", "*@pytest.mark.agent_eval: entries not in the corpus: nope*"),
    ],
)
def test_marker_mistakes_are_collection_errors(project, marker, message):
    uses = "agent_result" if marker else ""
    (project.path / "evals" / "test_mine.py").write_text(
        f"import pytest\n\n@pytest.mark.agent_eval({marker})\ndef test_x({uses}):\n    pass\n"
    )
    result = project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([message])


# -- point 6: pytest conventions -------------------------------------------------------------------------------
def test_drift_is_an_agent_eval_warning_that_w_error_turns_into_a_failure(project):
    clean_scripts(project)
    project.run("--agent-eval-runs", "1", "-k", "not without").assert_outcomes(passed=1)
    campaign = str(project.campaign())
    corpus = project.path / "corpus.json"  # edited since: the resumed campaign's configuration moved
    corpus.write_text(corpus.read_text().replace("Content-Type?", "Content-Type header?"))
    result = project.run("--agent-eval-resume", campaign)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*warnings summary*", "*AgentEvalWarning: agent-eval: warning: this session's*"])
    assert result.ret == pytest.ExitCode.OK
    result = project.run("--agent-eval-resume", campaign, *STRICT)
    result.stdout.fnmatch_lines(["*agent-eval: warning: this session's settings differ*(an error by -W error::*)"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    ignored = ["-W", "ignore::pytest_agent_eval.warnings.AgentEvalWarning"]
    result = project.run("--agent-eval-resume", campaign, *ignored)
    assert "settings differ" not in result.stdout.str()


STRICT = ["-W", "error::pytest_agent_eval.warnings.AgentEvalWarning"]
STAND_IN = "agent-eval: warning: model backend: scripted policy agent*measure the pipeline*not a model"
ONE_RUN = "agent-eval: warning: express / with: n=1: one run is no measurement (give --agent-eval-runs 2 or more)"


def test_stand_in_and_n1_notes_are_agent_eval_warnings(project):
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "1")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*warnings summary*", f"*AgentEvalWarning: {STAND_IN}*"])
    result.stdout.fnmatch_lines([f"*AgentEvalWarning: {ONE_RUN}"])
    out = result.stdout.str()
    # each points at the line of the campaign's summary.json it is about, not at line 0 of a folder
    summary = (project.campaign() / "summary.json").read_text().splitlines()
    located = re.findall(r"summary\.json:(\d+)", out)
    assert located and ":0\n" not in out
    assert any("express" in summary[int(n) - 1] for n in located)
    assert "express: medians over W n=1 / WO n=1 — one run is no measurement" in out
    # issued once each, in the warnings summary; the tables keep the stand-in note, not the caveats
    assert out.count("n=1: one run is no measurement") == 2  # with and without
    tables = out[out.index("= agent-eval =") :]
    assert "model backend: scripted policy agent" in tables and "one run is no measurement" not in tables


def test_w_error_makes_the_warnings_a_failed_session_naming_them(project):
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "1", *STRICT)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    by = f"(an error by -W {STRICT[1]})"
    result.stdout.fnmatch_lines([f"{STAND_IN}*{by}", f"{ONE_RUN} {by}"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_a_project_that_makes_every_warning_an_error_lists_these_without_failing(project):
    """``filterwarnings = error`` is about the project's own code: the stand-in and n=1 caveats of a campaign are
    listed as warnings, and fail the session only under a filter that names AgentEvalWarning, which is named."""
    clean_scripts(project)
    (project.path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    # each session in a process of its own, as a project's is: in this one, pytester's earlier in-process sessions
    # leave modules imported past the assertion rewriter, which `error` turns into a failure of pytest's own
    result = project.run("--agent-eval-runs", "1", in_subprocess=True)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*warnings summary*", f"*AgentEvalWarning: {STAND_IN}*"])
    assert "an error by" not in result.stdout.str()
    strict = "error::pytest_agent_eval.warnings.AgentEvalWarning"
    (project.path / "pytest.ini").write_text(f"[pytest]\nfilterwarnings =\n    error\n    {strict}\n")
    result = project.run("--agent-eval-runs", "1", in_subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"{STAND_IN}*(an error by filterwarnings = {strict} in pytest.ini)"])


def test_filterwarnings_hides_them_and_the_stand_in_is_still_named_in_every_report(project):
    clean_scripts(project)
    (project.path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings =\n    ignore::pytest_agent_eval.warnings.AgentEvalWarning\n"
    )
    result = project.run("--agent-eval-runs", "1", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert "AgentEvalWarning" not in out and "one run is no measurement" not in out
    assert "model backend: scripted policy agent" in out  # the terminal report
    campaign = project.campaign()
    assert "measure the pipeline" in (campaign / "report.html").read_text()
    summary = json.loads((campaign / "summary.json").read_text())
    assert all(r["backend"]["name"] == "scripted" for r in summary["records"])
    (note,) = summary["model_notes"]  # at the top, where a reader of the figures looks first
    assert note.startswith("model backend: scripted policy agent") and "not a model" in note
    assert summary["simulated_costs"] is True
    # what answered, and apart from it what the CLI was told: a stand-in is never called "sonnet"
    assert (summary["model"], summary["model_requested"]) == ("stand-in-scripted", "sonnet")
    assert (
        summary["model_note"] == "stand-in-scripted (a stand-in model) answered every request; sonnet is only "
        "what the CLI was told"
    )
    junit = (project.path / "junit.xml").read_text()
    assert junit.count('name="agent_eval.model_backend" value="model backend: scripted policy agent') == 2
    result = project.pytester.run("agent-eval", "compare", str(campaign), str(campaign))
    assert result.ret == 0
    assert [line for line in result.stdout.lines if "model backend" in line] == [
        f"baseline: {note}",
        f"current: {note}",
    ]


INDEXING = """

@pytest.fixture
def indexed_repo(tmp_path_factory):
    import sys

    from pytest_agent_eval.harness.provision import run_tool

    # the harness's own runner announces the work before and after, as it does for installs and index builds
    run_tool([sys.executable, "-c", "import time; time.sleep(0.3)"], what="indexing the stand-in repository")
    repo = tmp_path_factory.mktemp("repo")
    (repo / "lib").mkdir()
    (repo / "lib" / "response.js").write_text("function send() {}\\n")
    return repo
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["local", "xdist"])
def test_install_clone_and_index_progress_reaches_the_terminal(project, monkeypatch, workers):
    clean_scripts(project)
    with (project.path / "conftest.py").open("a") as conftest:
        conftest.write(INDEXING)
    scratch = project.path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the controller keeps the workers' progress file
    result = project.run("--agent-eval-runs", "1", *workers, in_subprocess=True)
    result.assert_outcomes(passed=2)
    worker = r"\[gw[01]\] " if workers else ""
    # a progress dot of xdist's may stand before a line the harness printed
    shown = [line.lstrip(".") for line in result.stdout.lines if "stand-in repository" in line]
    assert any(re.fullmatch(f"agent-eval: {worker}indexing the stand-in repository …", line) for line in shown), shown
    done = f"agent-eval: {worker}indexing the stand-in repository: done in [0-9.]+s"
    assert sum(1 for line in shown if re.fullmatch(done, line)) == 2, shown  # each item's index (per worker memo)
    out = result.stdout.str()
    assert out.rindex("stand-in repository") < out.index("= agent-eval =")  # during the run, not after it
    assert not list(scratch.glob("agent-eval-progress-*"))


# which bubblewrap and Node.js: the machine's or the bundled ones (tests/test_runtimes.py checks each case)
RUNTIMES = f"agent-eval: {runtimes.bwrap().describe()}; {runtimes.node().describe()}"


def test_report_header_names_backend_arms_corpus_and_out(project, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--arms", "with", "--agent-eval-out", "out")
    result.stdout.fnmatch_lines(
        [
            "agent-eval: backend auto → scripted stand-in model (no ANTHROPIC_API_KEY); arms with; "
            f"corpus {project.path / 'corpus.json'}; campaigns in {project.path / 'out'}",
            RUNTIMES,
        ]
    )


def test_a_kernel_whose_landlock_cannot_scope_signals_is_said_in_the_header(project, monkeypatch):
    """Below Landlock ABI 6 the agent's shells could signal the CLI, the relay and the sandbox's init: the header
    says so, as for any layer the kernel refuses; where it can (this kernel), no line."""
    # the module the session will import: an earlier in-process session may have imported it and pytester taken it
    # out of sys.modules after, leaving the package's attribute a stale copy
    jail = importlib.import_module("pytest_agent_eval.harness.jail")

    assert jail.landlock_abi() >= jail.SCOPED_ABI and jail.scoping_caveat() is None
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    # the session runs in this process: a kernel with Landlock ABI 5 for it alone (undone after the test, so no
    # later in-process session reads it)
    monkeypatch.setattr(jail, "landlock_abi", lambda: 5)
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--arms", "with", "--agent-eval-out", "out")
    result.stdout.fnmatch_lines([RUNTIMES, "agent-eval: landlock: signal scoping refused by this kernel (Landlock ABI"
                                 " 5, 6 needed: Linux 6.12+): the agent's shells can signal*"])  # fmt: skip


def test_without_settings_the_line_follows_the_collection_of_agent_items(project, monkeypatch):
    # Nothing given: the settings are resolved for the first agent item, and named once, after the collection.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    line = (
        "agent-eval: backend auto → scripted stand-in model (no ANTHROPIC_API_KEY); arms with,without; "
        f"corpus {project.path / 'corpus.json'}; campaigns in {project.path / 'agent-eval-out'}"
    )
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "evals")
    result.stdout.fnmatch_lines(["collected 4 items", line, RUNTIMES])
    assert result.stdout.lines.count(line) == 1
    unrelated = project.pytester.runpytest("-p", "no:cacheprovider", "tests")  # the agent items opted out
    assert not [text for text in unrelated.stdout.lines if text.startswith("agent-eval: backend")]
    quiet = project.pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "evals")
    assert line not in quiet.stdout.lines


def test_boolean_ini_keys_are_typed_bool(project):
    (project.path / "pytest.ini").write_text("[pytest]\nagent_eval_offline = yes\n")
    result = project.pytester.runpytest("-p", "no:cacheprovider", "--help")
    result.stdout.fnmatch_lines(["*agent_eval_offline (bool):*"])
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("A/B evaluation of a retrieval MCP server"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" "))
    ini = [line for line in lines if line.lstrip().startswith("agent_eval_")]
    assert lines[start + 1 : end] and ini
    assert not [line for line in [*lines[start + 1 : end], *ini] if "`" in line]  # plain text, not reST


def test_cli_version():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest_agent_eval.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("agent-eval ")


def test_a_conftest_adding_an_option_the_plugin_has_is_a_usage_error_saying_the_way_out(pytester):
    pytester.makeconftest('def pytest_addoption(parser):\n    parser.addoption("--arms", default="mine")\n')
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --arms: a conftest.py (or another plugin) adds this option*rename the project's own*-p no:agent_eval*"]
    )
    assert "Traceback" not in result.stderr.str()
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:agent_eval").ret == pytest.ExitCode.OK
