"""The plugin as a guest in someone else's project (issue 10): evals are opt-in, no side effects when no eval
runs, pytest's conventions. pytester sessions with the stand-in ``claude`` of :mod:`test_plugin`."""

from __future__ import annotations

import pytest
from test_plugin import Q_EXPRESS, Project, clean_scripts, entry

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
