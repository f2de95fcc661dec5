"""The terminal tables and report.html are two views of one aggregation: the same campaign shows the same numbers."""

from __future__ import annotations

import html
import json
import re

import pytest
from support.browser import CHROMIUM, chromium
from support.records import with_run, without_run

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report.html import COLUMNS, PAIRED_COLUMNS, render_html
from pytest_agent_eval.report.terminal import terminal_report


def labelled(record: dict, label: str, agent_s: float) -> ItemRecord:
    return ItemRecord.from_dict({**record, "arm_label": label, "agent_s": agent_s, "id": f"{record['id']}-{label}"})


def ab_campaign() -> list[ItemRecord]:
    return [
        labelled(with_run(1), "with", 61.0),
        labelled(with_run(2, cite=False, scale=2), "with", 185.0),
        labelled(with_run(3, again=True), "with", 12.3),
        labelled(without_run(1), "without", 40.0),
        labelled(without_run(2, lines=300), "without", 95.5),
        labelled(without_run(3, lines=50), "without", 20.0),
        labelled(with_run(1, entry="gin"), "with", 30.0),
        labelled(without_run(1, entry="gin"), "without", 31.0),
    ]


def two_builds_campaign() -> list[ItemRecord]:
    """One arm at two builds (with@local:cg vs with@1.6.0): no without-arm, and still a paired comparison."""
    return [
        labelled(with_run(1), "with@local:cg", 50.0),
        labelled(with_run(2, scale=3), "with@local:cg", 70.0),
        labelled(with_run(1, cite=False), "with@1.6.0", 55.0),
        labelled(with_run(2, again=True), "with@1.6.0", 65.0),
    ]


def three_arms_campaign() -> list[ItemRecord]:
    """Two builds of the tool and no tool: report.html pairs each against without AND the builds together."""
    return [
        labelled(with_run(1), "with", 61.0),
        labelled(with_run(2, scale=2), "with", 75.0),
        labelled(with_run(1, cite=False), "with@1.5.0", 55.0),
        labelled(with_run(2, again=True), "with@1.5.0", 65.0),
        labelled(without_run(1), "without", 40.0),
        labelled(without_run(2, lines=300), "without", 95.5),
    ]


def two_tests_campaign() -> list[ItemRecord]:
    """Two test functions over one entry: each is its own row, in both views."""
    return [
        ItemRecord.from_dict({**r.to_dict(), "id": f"{test}.{r.id}", "nodeid": f"evals/test_ab.py::{test}[{r.id}]"})
        for test, campaign in (("test_ab", ab_campaign()[:6]), ("test_mine", three_arms_campaign()))
        for r in campaign
    ]


def row_label(record: ItemRecord, records: list[ItemRecord]) -> str:
    """The row a record is shown in: its entry, after its test function when the campaign ran several."""
    tests = {r.test for r in records}
    return f"{record.test.rsplit('/', 1)[-1]} · {record.entry}" if len(tests) > 1 else record.entry


def html_cells(page: str) -> dict[tuple[str, str, str], str]:
    """(entry, arm, figure) → the text of report.html's per entry × arm cell."""
    table = re.search(r'<table class="figures">(.*?)</table>', page, re.S).group(1)
    cells = {}
    for entry, arm, rest in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td[^>]*>.*?</td>(.*?)</tr>", table):
        for figure, text in re.findall(r'<td data-figure="(\w+)">(.*?)</td>', rest):
            cells[entry, arm, figure] = html.unescape(text)
    return cells


def html_paired(page: str) -> dict[tuple[str, str, str], str]:
    """(arms, entry, figure) → the text of a paired cell, ``arms`` as ``with − without``."""
    cells = {}
    for arms, body in re.findall(r'<table class="figures paired" data-arms="(.*?)">(.*?)</table>', page, re.S):
        for entry, rest in re.findall(r"<tr><td>(.*?)</td>(.*?)</tr>", body):
            for figure, text in re.findall(r'<td data-figure="(\w+)"[^>]*>(.*?)</td>', rest):
                cells[html.unescape(arms), entry, figure] = html.unescape(text)
    return cells


def html_pair_rows(page: str) -> set[tuple[str, str]]:
    """(arms, entry) of every row of a paired table, small-n rows (no figures to read) included."""
    found = re.findall(r'<table class="figures paired" data-arms="(.*?)">(.*?)</table>', page, re.S)
    return {(html.unescape(arms), entry) for arms, body in found for entry in re.findall(r"<tr><td>(.*?)</td>", body)}


def terminal_cells(text: str) -> dict[tuple[str, str, str], str]:
    """(entry, arm, figure label) → the ARM COMPARISON's cell, and (arms, entry, label) → its paired line."""
    cells: dict[tuple[str, str, str], str] = {}
    for block in text.split("ARM COMPARISON — ")[1:]:
        lines = block.splitlines()
        entry = lines[0].strip()
        arms = [re.sub(r" \(n=\d+\)$", "", a) for a in re.split(r"\s{2,}", lines[1].strip())]
        pairs = None
        for line in lines[3:]:
            if line.startswith("paired "):
                pairs = re.match(r"paired (.*?), run against run", line).group(1)
                continue
            if pairs is not None and line.startswith("  "):
                label, value = re.match(r"  (.+?)\s{2,}(.+)$", line).groups()
                cells[pairs, entry, label] = value
            elif line.startswith("  "):
                label, *values = re.split(r"\s{2,}", line.strip())
                cells.update({(entry, arm, label): value for arm, value in zip(arms, values, strict=True)})
    return cells


@pytest.mark.parametrize(
    "records",
    [ab_campaign(), two_builds_campaign(), three_arms_campaign(), two_tests_campaign()],
    ids=["with-without", "two-builds", "three-arms", "two-tests"],
)
def test_terminal_tables_and_html_show_the_same_numbers(records):
    page = render_html(records, "t", "note")
    text = terminal_report(records)
    in_html, in_terminal = html_cells(page), terminal_cells(text)
    assert {(e, a) for e, a, _ in in_html} == {(row_label(r, records), r.arm_label) for r in records}
    for (entry, arm, figure), value in in_html.items():
        assert in_terminal[entry, arm, FIGURES[figure].title("codegraph")] == value, (entry, arm, figure)
    paired = html_paired(page)
    assert paired, "report.html has a paired table for the arms that ran"
    for (arms, entry, figure), value in paired.items():
        assert in_terminal[arms, entry, FIGURES[figure].title("codegraph")] == value, (arms, entry, figure)
    assert {f for _, _, f in paired} == set(PAIRED_COLUMNS)
    terminal_pairs = {(arms, entry) for arms, entry, _ in in_terminal if " − " in arms}
    assert terminal_pairs == html_pair_rows(page), "the terminal pairs the arms report.html pairs"
    assert len(in_html) == len({(row_label(r, records), r.arm_label) for r in records}) * len(COLUMNS)


def test_three_arms_pair_each_against_without_and_the_two_builds_together():
    text = terminal_report(three_arms_campaign())
    pairs = re.findall(r"^paired (.*?), run against run", text, re.M)
    assert pairs == ["with − without", "with@1.5.0 − without", "with − with@1.5.0"]
    page = render_html(three_arms_campaign(), "t", "note")
    assert re.findall(r'data-arms="(.*?)"', page) == [html.escape(p) for p in pairs]


def four_agents_campaign() -> list[ItemRecord]:
    """Two entries, two agents, both arms, two runs: what a campaign of several agents records."""
    records = []
    for entry in ("express", "gin"):
        for agent in ("claude-code", "codex"):
            for run, (make, label) in enumerate([(with_run, "with"), (without_run, "without")] * 2):
                data = dict(make(run // 2 + 1, entry=entry))
                data.update(arm_label=label, agent=agent, id=f"{entry}-{agent}-{label}-{run // 2 + 1}")
                if agent == "codex":
                    # Codex's records give no cost, and it reads through its shell
                    data["scores"] = {**data["scores"], "cost_usd": None, "tool_counts": {"Bash": 3}}
                records.append(ItemRecord.from_dict(data))
    return records


def test_every_report_reads_one_order_whatever_order_the_runs_finished_in():
    """report.html once listed agents, arms and runs as they finished: Claude Code first in one run, Codex in the
    next; run 2 before run 1. The terminal, summary.json and report.html now read one order."""
    import json
    import random

    from pytest_agent_eval.report.terminal import summary

    records = four_agents_campaign()
    shuffled = records[:]
    random.Random(3).shuffle(shuffled)
    assert shuffled != records
    order = ["gin", "express"]  # the corpus's order, not the alphabet's
    pages = [re.sub(r"generated \S+", "", render_html(r, "t", "note", entry_order=order)) for r in (records, shuffled)]
    assert pages[0] == pages[1]
    texts = [terminal_report(r, entry_order=order) for r in (records, shuffled)]
    assert texts[0] == texts[1]
    summaries = [json.dumps(summary(r, {}, entry_order=order), indent=2) for r in (records, shuffled)]
    assert summaries[0] == summaries[1]
    runs = re.findall(r'<details class="run"[^>]*data-item="([^"]+)"', pages[0]) or re.findall(
        r"<summary>.*?(\b(?:gin|express)-[\w-]+-\d)\b", pages[0])  # fmt: skip
    ids = [r["id"] for r in json.loads(summaries[0])["records"]]
    assert ids[:8] == [f"gin-{agent}-{arm}-{n}" for agent in ("claude-code", "codex") for arm in ("with", "without")
                       for n in (1, 2)]  # fmt: skip
    assert runs[:8] == ids[:8]
    assert list(json.loads(summaries[0])["entries"]) == ["gin · claude-code", "gin · codex", "express · claude-code",
                                                         "express · codex"]  # fmt: skip


def test_a_figure_an_agent_does_not_give_reads_not_available_never_a_warning():
    page = render_html(four_agents_campaign(), "t", "note")
    paired = html_paired(page)
    assert paired["with − without", "express · codex", "cost_usd"] == "not available (Codex CLI's records give no cost)"
    assert "0 pair(s) ⚠" not in page and "n=0: no scored run" not in page
    cells = html_cells(page)
    assert cells["express · codex", "with", "cost_usd"] == "not available (Codex CLI's records give no cost)"
    text = terminal_report(four_agents_campaign())
    assert "not available (Codex CLI's records give no cost)" in text
    codex = text.split("ARM COMPARISON — express · codex")[1].split("ARM COMPARISON")[0]
    read = next(line for line in codex.splitlines() if line.strip().startswith("Read "))
    assert read.count("not available (Codex CLI read through its shell: Read counts a Read tool only)") == 2
    claude = text.split("ARM COMPARISON — express · claude-code")[1].split("ARM COMPARISON")[0]
    assert "not available" not in claude  # its Read tool's count is a real one


# After the charts: every label's box as drawn, against its chart's width (a label that runs off either edge is cut).
CUT_LABELS = """<script>
document.body.setAttribute("data-cut", JSON.stringify([].slice.call(document.querySelectorAll("svg text"))
  .filter(function (t) { var box = t.getBBox(), width = +t.ownerSVGElement.getAttribute("width");
                         return box.width && (box.x < -0.5 || box.x + box.width > width + 0.5); })
  .map(function (t) { return t.textContent; })));
</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium to draw the charts")
def test_no_chart_label_is_cut(tmp_path):
    """The allocation chart once read ``press · claude-code``: its labels were drawn right-aligned at a fixed
    margin, and a long entry · agent · arm ran off the left edge; the agents chart's values ran off the right."""
    page = render_html(four_agents_campaign(), "t", "note").replace("</body>", CUT_LABELS)
    (tmp_path / "report.html").write_text(page)
    dom = chromium(tmp_path / "profile", "--dump-dom", (tmp_path / "report.html").as_uri()).stdout
    assert 'data-charts-rendered="4"' in dom
    cut = json.loads(html.unescape(re.search(r'data-cut="([^"]*)"', dom).group(1)))
    assert cut == []
