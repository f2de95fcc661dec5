"""Right pooling: two test functions over the same entry are two rows, never one larger n — in the terminal
tables, report.html, summary.json, compare and the replay's recording; one test function reads as before."""

from __future__ import annotations

import html
import re
import shutil

import pytest
from support.records import recorded_campaign, with_run, without_run
from support.standin import Q_EXPRESS, Q_GIN, Project, clean_scripts, entry

from pytest_agent_eval.campaign import baseline
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign, StoreError
from pytest_agent_eval.cli import main
from pytest_agent_eval.report.aggregate import Row, aggregate
from pytest_agent_eval.report.compare import gate, medians, render_gate
from pytest_agent_eval.report.html import render_html
from pytest_agent_eval.report.terminal import summary, terminal_report
from pytest_agent_eval.settings.parsers import parse_rules

ENTRY = "express"
TEST_X = "tests/evals/test_a.py::test_x"
TEST_Y = "tests/evals/test_a.py::test_y"


def of_test(record: dict, test: str | None) -> dict:
    """The record as ``test`` ran it: its nodeid, and the id the plugin gives a case two tests share."""
    if test is None:
        return record
    return {**record, "id": f"{test.rsplit('::', 1)[-1]}.{record['id']}", "nodeid": f"{test}[{record['id']}]"}


def two_tests(x_scale: int = 1, y_scale: int = 4) -> list[dict]:
    """test_x ran each arm three times, test_y twice, over the same entry; their responses differ in size."""
    x = [with_run(run, scale=x_scale) for run in (1, 2, 3)] + [without_run(run) for run in (1, 2, 3)]
    y = [with_run(run, scale=y_scale) for run in (1, 2)] + [without_run(run, lines=400) for run in (1, 2)]
    return [of_test(r, TEST_X) for r in x] + [of_test(r, TEST_Y) for r in y]


def comparison_blocks(text: str) -> dict[str, str]:
    """The terminal's ARM COMPARISON blocks by their title."""
    return {block.splitlines()[0]: block for block in text.split("ARM COMPARISON — ")[1:]}


def test_two_test_functions_are_two_rows_each_with_its_own_n():
    found = aggregate(two_tests())
    assert found.rows == [Row(ENTRY, TEST_X), Row(ENTRY, TEST_Y)]
    assert {(row.test, arm): len(g.runs) for (row, arm), g in found.groups.items()} == {
        (TEST_X, "with"): 3,
        (TEST_X, "without"): 3,
        (TEST_Y, "with"): 2,
        (TEST_Y, "without"): 2,
    }
    assert Row(ENTRY, TEST_X).label == "test_a.py::test_x · express"


def test_terminal_shows_one_arm_comparison_per_test_function():
    text = terminal_report(two_tests())
    blocks = comparison_blocks(text)
    assert set(blocks) == {"test_a.py::test_x · express", "test_a.py::test_y · express"}
    assert re.search(r"with \(n=3\)\s+without \(n=3\)", blocks["test_a.py::test_x · express"])
    assert re.search(r"with \(n=2\)\s+without \(n=2\)", blocks["test_a.py::test_y · express"])
    assert "n=5" not in text
    # the campaign table has a line per test function too
    campaign = text[text.index("CAMPAIGN — ") :]
    assert "test_a.py::test_x · express" in campaign and "test_a.py::test_y · express" in campaign


def test_html_has_a_row_per_test_function_and_arm():
    page = render_html(two_tests(), "t", "note")
    table = re.search(r'<table class="figures">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td[^>]*>(\d+)", table)
    assert [(html.unescape(e), a, int(n)) for e, a, n in rows] == [
        ("test_a.py::test_x · express", "with", 3),
        ("test_a.py::test_x · express", "without", 3),
        ("test_a.py::test_y · express", "with", 2),
        ("test_a.py::test_y · express", "without", 2),
    ]
    paired = re.search(r'<table class="figures paired" data-arms="with − without">(.*?)</table>', page, re.S)
    assert [html.unescape(e) for e in re.findall(r"<tr><td>(.*?)</td>", paired.group(1))] == [
        "test_a.py::test_x · express",
        "test_a.py::test_y · express",
    ]


def test_summary_json_keys_rows_by_label_and_says_entry_and_test():
    entries = summary(two_tests(), {})["entries"]
    assert set(entries) == {"test_a.py::test_x · express", "test_a.py::test_y · express"}
    y_with = entries["test_a.py::test_y · express"]["with"]
    assert (y_with["entry"], y_with["test"], y_with["runs"]) == (ENTRY, TEST_Y, 2)


def test_one_test_function_reads_exactly_as_records_without_nodeids():
    runs = [with_run(1), with_run(2), without_run(1), without_run(2)]
    plain = terminal_report(runs)
    named = terminal_report([of_test(r, TEST_X) for r in runs])
    # the same tables; only the run lines name the runs by their ids (test_x.express-with-1)
    assert re.sub(r"RUNS — .*?\n\n", "", named, flags=re.S) == re.sub(r"RUNS — .*?\n\n", "", plain, flags=re.S)
    assert "\n  test_x.express-with-1 passed · " in named and "\n  express-with-1 passed · " in plain
    assert "ARM COMPARISON — express\n" in plain
    assert summary([of_test(r, TEST_X) for r in runs], {})["entries"] == summary(runs, {})["entries"]


def test_records_without_nodeids_pool_by_entry_as_before():
    old = [r for r in two_tests() if r["nodeid"].startswith(TEST_X)] + [with_run(4), without_run(4)]
    found = aggregate(old)
    assert found.rows == [Row(ENTRY)]
    assert [len(found.group(Row(ENTRY), arm).runs) for arm in ("with", "without")] == [4, 4]


def test_compare_matches_and_gates_per_test_function():
    rules = parse_rules("residual_tokens:+20%")
    before = two_tests()
    after = two_tests(y_scale=8)  # only test_y's responses grew
    result = gate(before, after, rules)
    assert sorted((row.label, arm) for row, arm in result.matched) == [
        ("test_a.py::test_x · express", "with"),
        ("test_a.py::test_x · express", "without"),
        ("test_a.py::test_y · express", "with"),
        ("test_a.py::test_y · express", "without"),
    ]
    failed = [(r.test, r.arm, r.n_before, r.n_after) for r in result.regressions]
    assert failed == [(TEST_Y, "with", 2, 2)]
    text = render_gate(result)
    assert re.search(r"test_a\.py::test_y · express\s+with\s+residual_tokens.*2→2\s+FAILED", text)
    assert re.search(r"test_a\.py::test_x · express\s+with\s+residual_tokens.*3→3\s+ok", text)
    assert medians(after)["test_a.py::test_y · express", "with"]["n"] == 2


def test_compare_of_one_test_function_and_old_records_pools_as_before():
    runs = [with_run(1), with_run(2), without_run(1), without_run(2)]
    result = gate(runs, [of_test(r, TEST_X) for r in runs])
    assert result.matched == [(Row(ENTRY), "with"), (Row(ENTRY), "without")]
    assert all(row.test is None for row in result.rows)
    # an old baseline (no nodeids) against a campaign of two tests: rows cannot be told apart on one side
    assert gate(runs, two_tests()).matched == [(Row(ENTRY), "with"), (Row(ENTRY), "without")]
    # one test function a side is the same test, whatever path named it (pytest evals vs --pyargs)
    installed = "../venv/lib/python3.11/site-packages/pytest_agent_eval/evals/test_ab.py::test_ab"
    moved = gate([of_test(r, "evals/test_ab.py::test_ab") for r in runs], [of_test(r, installed) for r in runs])
    assert moved.matched == [(Row(ENTRY), "with"), (Row(ENTRY), "without")] and not moved.failed


def test_a_replay_finds_the_recording_of_its_own_test_function(tmp_path):
    source = recorded_campaign(tmp_path / "source")
    recorded = source.items()[0]
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    for test in (TEST_X, TEST_Y):
        item = f"{test.rsplit('::', 1)[-1]}.express-with-1"
        segment = campaign.item_dir(item) / "run-with-1.jsonl"
        shutil.copyfile(source.segments(recorded)[0], segment)
        data = {**recorded.to_dict(), "id": item, "nodeid": f"{test}[express-with-1]"}
        campaign.record(ItemRecord.from_dict({**data, "segments": [str(segment.relative_to(campaign.path))]}))
    y_segments = campaign.segments(next(r for r in campaign.items() if r.test == TEST_Y))
    # a pinned build's id matches no recorded id: the test function picks the run
    assert baseline.recording(campaign, "test_y.express-with:local:x-1", ENTRY, "with", 1, TEST_Y) == y_segments
    with pytest.raises(StoreError, match="no recording of express-with:local:x-1"):
        baseline.recording(campaign, "express-with:local:x-1", ENTRY, "with", 1, "tests/evals/test_b.py::test_z")


# -- end to end: two test functions through the plugin, with the stand-in claude ------------------------------
MINE = """
import pytest


@pytest.mark.agent_eval(entries=["express"])
def test_mine(agent_result):
    assert agent_result.figures["tool_calls"] >= 1
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    return Project(pytester, [entry("express", Q_EXPRESS), entry("gin", Q_GIN, "Go")])


@pytest.mark.slow
def test_two_test_functions_over_one_entry_stay_apart_end_to_end(project, capsys):
    clean_scripts(project)
    (project.path / "evals" / "test_mine.py").write_text(MINE)
    project.run("--agent-eval-runs", "2", "-k", "express").assert_outcomes(passed=8)
    text = capsys.readouterr().out
    blocks = comparison_blocks(text)
    assert set(blocks) == {"test_ab.py::test_ab · express", "test_mine.py::test_mine · express"}
    assert all(re.search(r"with \(n=2\)\s+without \(n=2\)", block) for block in blocks.values())
    assert set(project.summary()["entries"]) == set(blocks)
    page = (project.campaign() / "report.html").read_text()
    figures = re.sub(r'<section id="answers">.*?</section>', "", page, flags=re.S)  # the answers' own table aside
    assert figures.count("<td>test_mine.py::test_mine · express</td><td>with</td><td") == 1
    assert page.count("<td>test_mine.py::test_mine · express</td><td>with</td><td data-figure=") == 1  # and there

    assert main(["compare", str(project.campaign()), str(project.campaign())]) == 0
    rows = re.findall(
        r"^(test_\w+\.py::test_\w+ · express)\s+(with|without)\s+residual_tokens.*\s(\d→\d)",
        capsys.readouterr().out,
        re.M,
    )
    assert sorted(rows) == [
        ("test_ab.py::test_ab · express", "with", "2→2"),
        ("test_ab.py::test_ab · express", "without", "2→2"),
        ("test_mine.py::test_mine · express", "with", "2→2"),
        ("test_mine.py::test_mine · express", "without", "2→2"),
    ]
