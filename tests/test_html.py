import dataclasses
import re
from pathlib import Path

import pytest
from support.browser import CHROMIUM, chart, chromium
from support.synth import Transcript, explore_response, tool_use

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.metrics.format import tokens
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.report.html import backend_note, render_html, write_html
from pytest_agent_eval.report.occupancy_chart import SERIES
from pytest_agent_eval.tool import CODEGRAPH

EXPLORE = "mcp__codegraph__codegraph_explore"
QUESTION = "How does res.send pick <script>alert(1)</script> the Content-Type?"


def with_transcript(path: Path, read_after: bool) -> Path:
    t = Transcript()
    t.init(tools=["Read", EXPLORE])
    t.user(QUESTION)
    call = t.call(EXPLORE, query="res.send </script><b>Content-Type")
    t.reply(call, explore_response({"lib/response.js": "function send(body) {}\n" * 20, "lib/utils.js": "x;\n" * 30}))
    if read_after:
        read = t.call("Read", file_path="/repo/lib/utils.js")
        t.reply(read, "     1→x;\n" * 30)
    t.say("`lib/response.js` sets it.")
    t.result("`lib/response.js` sets it.")
    return t.write(path)


def without_transcript(path: Path) -> Path:
    t = Transcript()
    t.init()
    t.user(QUESTION)
    cli = t.call("Bash", command="codegraph explore send")  # the hook denies it: marked in the transcript
    t.reply(cli, f"{CODEGRAPH.deny_marker}: not in this arm")
    grep = t.call("Grep", pattern="send")
    t.reply(grep, "lib/response.js:1: function send")
    t.result("lib/response.js")
    return t.write(path)


@pytest.fixture
def campaign(tmp_path) -> Campaign:
    """express: 2 runs per arm; gin: 1 run per arm (n=1 must be flagged); one infrastructure error."""
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    for entry, runs in (("express", (1, 2)), ("gin", (1,))):
        for arm in ("with", "without"):
            for run in runs:
                item_id = f"{entry}-{arm}-{run}"
                path = campaign.item_dir(item_id) / f"run-{item_id}.jsonl"
                if arm == "with":
                    with_transcript(path, read_after=run == 2)
                else:
                    without_transcript(path)
                campaign.record(
                    {
                        "id": item_id,
                        "entry": entry,
                        "arm": arm,
                        "run": run,
                        "tool_version": "1.6.1",
                        "claude_version": "2.1.332",
                        "backend": "scripted",
                        "questions": [QUESTION],
                        "outcome": "passed",
                        "error": None,
                        "segments": [str(path.relative_to(campaign.path))],
                        "scores": score_session(read_segments([path]), tool=CODEGRAPH),
                        "wall_s": 12.3,
                        "agent_s": 11.0,
                    }
                )
    campaign.record(
        {"id": "gin-with-2", "entry": "gin", "arm": "with", "run": 2, "outcome": "error", "error": "rate_limit"}
    )
    return campaign


def run_section(page: str, item_id: str) -> str:
    match = re.search(
        rf'<details class="run" id="run-{re.escape(item_id)}">(.*?)</details>\s*(?=<details class="run"|</section>)',
        page,
        re.S,
    )
    assert match, item_id
    return match.group(1)


def test_report_layout_tables_and_warnings(campaign):
    page = render_html(campaign.items(), "express campaign", backend_note("scripted"), campaign.path)
    note = page.index("model backend: scripted — these figures measure the pipeline")
    assert note < page.index('<section id="tables">') < page.index('<section id="charts">') < page.index('id="runs"')
    warnings = re.search(r'<div class="warning" id="small-n">(.*?)</div>', page, re.S).group(1)
    assert "gin · with: n=1: one run is no measurement (give --agent-eval-runs 2 or more)" in warnings
    assert "gin · without: n=1" in warnings
    assert "express" not in warnings
    assert "1 run(s) ended in an infrastructure error" in warnings
    figures = re.search(r'<table class="figures">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td>(<td.*?</td>)(.*?)</tr>", figures)
    assert [(entry, arm) for entry, arm, _, _ in rows] == [
        ("express", "with"),
        ("express", "without"),
        ("gin", "with"),
        ("gin", "without"),
    ]
    express_with = rows[0]
    assert express_with[2] == "<td>2</td>"
    assert "small-n" in rows[2][2]  # gin · with scored one run (the other errored)
    # express · with: run 1 moved on, run 2 read a file it was given → sufficient median 50% over [0%–100%].
    assert '<td data-figure="sufficient_share">50.0% [0.0%–100.0%]</td>' in express_with[3]
    assert '<td data-figure="duration_s">11.0s [11.0s–11.0s]</td>' in express_with[3]  # the agent's time


def test_verdict_banner_says_which_arm_did_better(campaign):
    page = render_html(campaign.items(), "t", "note", campaign.path)
    banner = re.search(r'<section id="verdict" class="banner">(.*?)</section>', page, re.S).group(1)
    assert page.index('id="verdict"') < page.index('<section id="tables">')
    lines = dict(re.findall(r'<p class="verdict-line" data-entry="(\w+)">(.*?)</p>', banner))
    assert list(lines) == ["express", "gin", "overall"]
    # express: both runs of each arm alike, the tool's response larger than the grep: said so, never a point interval
    residual = re.search(r'<span class="change (\w+)" data-figure="residual_tokens">(.*?)</span>', lines["express"])
    assert residual.group(1) == "worse"
    assert residual.group(2).endswith(" worse (every run gave the same value, 2 pairs)")
    assert "[" not in residual.group(2)
    assert "with vs without, 2 paired runs" in lines["express"]
    assert 'class="change no-interval" data-figure="residual_tokens">retrieval residual +' in lines["gin"]
    assert "(n=1: too few pairs for an interval)" in lines["gin"]
    assert "with vs without, 2 entries, 3 paired runs" in lines["overall"]
    # on a stand-in, what running the campaign again repeats, and what a CLI's own bytes move (docs/report.md)
    assert '<p class="hint repeats">run again, a campaign on the stand-in gives these figures again' in banner
    real = [dataclasses.replace(record, backend={"name": "anthropic"}) for record in campaign.items()]
    assert 'class="hint repeats"' not in render_html(real, "t", "note", campaign.path)


def test_each_run_context_over_its_requests_stacked_by_family(campaign):
    records = campaign.items()
    page = render_html(records, "t", "note", campaign.path)
    section = re.search(r'<section id="occupancy">(.*?)</section>', page, re.S).group(1)
    assert page.index('<section id="charts">') < page.index('<section id="occupancy">') < page.index('id="runs"')
    entries = re.findall(r'<div class="entry-occupancy" data-entry="(\w+)"><h3>', section)
    assert entries == ["express", "gin"]
    figures = re.findall(r'<figure class="run-occupancy" data-run="([\w-]+)">(.*?)</figure>', section, re.S)
    scored = {r.id: r for r in records if r.scored}
    assert [run for run, _ in figures] == list(scored)  # the errored gin-with-2 has none
    for run, figure in figures:
        assert re.findall(r'<g class="series" data-family="(\w+)"', figure) == list(SERIES)
        # the last column is the run's end: the residual the tables show
        assert f"retrieval residual {tokens(scored[run].figures['residual_tokens'])}" in figure
        requests = scored[run].figures["turns"]
        assert f"{requests} requests · final context {tokens(scored[run].figures['ctx_final'])}" in figure
    # with and without side by side, on one scale
    express = section[section.index('data-entry="express"') : section.index('data-entry="gin"')]
    assert re.findall(r'<div class="arm"><h4>(\w+)</h4>', express) == ["with", "without"]
    assert len(set(re.findall(r'<text x="\d+" y="\d+" text-anchor="end">([\d.]+k?)</text>', express))) == 2


def test_paired_differences_with_bootstrap_interval(campaign):
    records = campaign.items()
    page = render_html(records, "t", "note", campaign.path)
    paired = re.search(r'<table class="figures paired"[^>]*>(.*?)</table>', page, re.S).group(1)
    rows = dict(re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", paired))
    by_id = {r.id: r.scores for r in records if r.scores}
    diffs = [
        by_id[f"express-with-{run}"]["occupancy"]["residual"]["tool"]
        - by_id[f"express-without-{run}"]["occupancy"]["file_access"]
        for run in (1, 2)
    ]
    assert diffs[0] == diffs[1] > 0  # both runs gave the same response: said so, not a point interval
    assert rows["express"].startswith(
        f'<td data-figure="residual_tokens">+{diffs[0]} (every run gave the same value, 2 pairs)</td>'
    )
    # gin has one pair: its mean, and why there is no interval
    assert rows["gin"].count("(n=1: too few pairs for an interval)</td>") == 3


def test_transcript_view_marks_buckets_and_cited_files(campaign):
    page = render_html(campaign.items(), "t", "note", campaign.path)
    moved_on = run_section(page, "express-with-1")
    assert 'data-bucket="sufficient"' in moved_on and "final answer" in moved_on
    read_again = run_section(page, "express-with-2")
    assert 'data-bucket="read_returned"' in read_again
    assert "Read a file we returned</span> → Read utils.js" in read_again
    cited = re.findall(r'<li class="(cited|unused)"><code>(.*?)</code> ([\d,]+) chars · (.*?)</li>', read_again)
    assert [(kind, path, via) for kind, path, _, via in cited] == [
        ("cited", "lib/response.js", "cited via path"),
        ("unused", "lib/utils.js", "not cited"),
    ]
    assert "<h4>Final answer</h4><pre>`lib/response.js` sets it.</pre>" in read_again
    without = run_section(page, "express-without-1")
    assert "data-bucket" not in without
    assert "no transcript segments recorded" in run_section(page, "gin-with-2")
    # the hook's denial is marked on the call; every run's blocks are there, folded, as -vv prints them
    denied = re.search(r'<div class="call" data-call="[^"]+"><code class="tool">Bash</code> (.*?)</div>', without)
    assert '<span class="denied">CLI call denied by the hook</span>' in denied.group(1)
    blocks = re.search(r'<details class="blocks">(.*?)</details>', read_again, re.S).group(1)
    assert "Residual context occupancy at end of run:" in blocks and "Explore allocation" in blocks
    without_blocks = re.search(r'<details class="blocks">(.*?)</details>', without, re.S).group(1)
    assert "CLI calls (command matcher)        1" in without_blocks


def test_report_escapes_and_is_self_contained(campaign):
    page = render_html(campaign.items(), "<b>title</b>", "note", campaign.path)
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>&lt;b&gt;title&lt;/b&gt;</title>" in page
    # A query holding "</script>" must not end the embedded chart data early.
    assert page.count("</script>") == 2
    assert "res.send \\u003c/script>\\u003cb>Content-Type" in page
    # Nothing is fetched: no external scripts, styles, images or fonts; the one URL is the SVG namespace.
    assert not re.search(r"<(link|img|iframe)\b|\b(src|href)=|@import|url\(", page)
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}
    assert "Content-Security-Policy" in page


def test_missing_segments_are_reported_not_fatal(campaign, tmp_path):
    records = campaign.items()
    page = render_html(records, "t", "note", tmp_path / "elsewhere")
    assert "segment not found: " in run_section(page, "express-with-1")


def test_backend_note():
    assert backend_note("cassette").endswith("not a model")
    assert backend_note({"name": "anthropic", "description": "Anthropic Messages API"}) == (
        "model backend: Anthropic Messages API"
    )
    assert backend_note(None) == "model backend: not recorded"


def test_write_html_into_the_campaign(campaign):
    path = write_html(campaign)
    assert path == campaign.path / "report.html"
    page = path.read_text(encoding="utf-8")
    assert f"<h1>agent-eval campaign {campaign.id}</h1>" in page
    assert "model backend: scripted — these figures measure the pipeline" in page


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install chromium)")
def test_charts_render_in_headless_chromium(campaign, tmp_path):
    contaminated_run(campaign, "express-without-3", 3)
    report = write_html(campaign)
    result = chromium(tmp_path / "profile", "--dump-dom", report.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert 'data-charts-rendered="3"' in dom
    # the transcript of the contaminated run, its leak marked
    leaked = run_section(dom, "express-without-3")
    assert "CONTAMINATED: 1 result(s) carried the tool's output" in leaked
    drawn = re.search(r'<figure class="run-occupancy" data-run="express-without-3">(.*?)</figure>', dom, re.S)
    assert "1 request · final context" in drawn.group(1) and "CONTAMINATED" in drawn.group(1)
    assert re.search(r'<details class="result leaked"><summary>result [\d,]+ chars <span class="error leak">', leaked)
    residual = chart(dom, "chart-residual")
    # One bar per (entry, arm): express and gin, with and without.
    assert len(re.findall(r'<rect [^>]*class="bar tool"', residual)) == 2
    assert len(re.findall(r'<rect [^>]*class="bar file-access"', residual)) == 2
    buckets = chart(dom, "chart-sufficiency")
    # The with-arm's 3 answered calls: 2 moved on, 1 read a returned file; the without-arm has none.
    assert re.search(r'class="bucket sufficient"><title>moved on / answered: 2 \(66.7%\)</title>', buckets)
    assert re.search(r'class="bucket read_returned"><title>Read a file we returned: 1 \(33.3%\)</title>', buckets)
    assert "no answered explore call" in buckets
    dots = chart(dom, "chart-allocation")
    assert len(re.findall(r"<circle ", dots)) == 3  # one per explore call that returned file sections

    # The occupancy charts are in the page as written: one SVG per scored run, a series per family.
    svgs = re.findall(r'<svg class="occupancy"[^>]*>(.*?)</svg>', dom, re.S)
    assert len(svgs) == 7
    assert all(re.findall(r'<g class="series" data-family="(\w+)"', svg) == list(SERIES) for svg in svgs)

    screenshot = tmp_path / "report.png"
    shot = chromium(tmp_path / "profile2", "--window-size=1400,1400", f"--screenshot={screenshot}", report.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 20_000  # a blank page compresses to a few KB


# Every run opened, then what scrolls sideways: the page, or any box of it (a table in its scroll box).
OVERFLOW_CHECK = """<script>
document.querySelectorAll("details").forEach(function (d) { d.open = true; });
var wide = [document.documentElement].concat(Array.prototype.slice.call(document.querySelectorAll("body *")))
  .filter(function (e) {
    var x = getComputedStyle(e).overflowX;
    return (e === document.documentElement || x === "auto" || x === "scroll") && e.scrollWidth > e.clientWidth + 1;
  })
  .map(function (e) { return (e.id || e.className || e.tagName) + ":" + e.scrollWidth + ">" + e.clientWidth; });
document.body.setAttribute("data-overflow", wide.join(" ") || "none");
</script></body>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install chromium)")
def test_nothing_scrolls_sideways_at_1400_px(campaign, tmp_path):
    contaminated_run(campaign, "express-without-3", 3)
    page = write_html(campaign).read_text(encoding="utf-8")
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", OVERFLOW_CHECK), encoding="utf-8")
    result = chromium(tmp_path / "profile", "--window-size=1400,1000", "--dump-dom", checked.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'data-charts-rendered="3"' in result.stdout  # the page's own script ran before the check
    assert re.search(r'<body[^>]* data-overflow="([^"]*)"', result.stdout).group(1) == "none"


def contaminated_run(campaign: Campaign, item_id: str, run: int) -> str:
    """A without-arm run of express whose Bash call carried the tool's output; returns that call's id."""
    path = campaign.item_dir(item_id) / "run.jsonl"
    t = Transcript()
    t.init()
    leaked = t.call("Bash", command="echo Y29kZWdyYXBoIGV4cGxvcmUgcQ== | base64 -d | sh")
    t.reply(leaked, explore_response({"lib/response.js": "function send(body) {}"}))
    t.result("lib/response.js")
    t.write(path)
    campaign.record(
        {
            "id": item_id,
            "entry": "express",
            "arm": "without",
            "run": run,
            "outcome": "failed",
            "segments": [str(path.relative_to(campaign.path))],
            "scores": score_session(read_segments([path]), tool=CODEGRAPH),
            "contaminated": True,
        }
    )
    return leaked


def test_a_contaminated_without_arm_shows_its_leaks(tmp_path):
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    leaked = contaminated_run(campaign, "express-without-1", 1)
    section = run_section(render_html(campaign.items(), "t", "note", campaign.path), "express-without-1")
    assert "CONTAMINATED: 1 result(s) carried the tool's output" in section
    assert (
        f"<li>Bash call {leaked} (thread main): explore heading — &quot;**Exploration: synthetic**&quot;</li>"
        in section
    )
    assert '<span class="error leak">tool output: explore heading</span>' in section
    assert re.search(r'<details class="result leaked"><summary>result [\d,]+ chars <span class="error leak">', section)


def parallel_reads(path: Path, finished: tuple[int, int]) -> Path:
    """A without-arm run that reads two files in one message; their results recorded in the order ``finished``
    (an agent runs parallel calls at once and records each result as it comes)."""
    t = Transcript()
    t.init()
    t.user(QUESTION)
    calls = t.calls(
        tool_use("Read", file_path="/repo/lib/response.js"), tool_use("Read", file_path="/repo/lib/utils.js")
    )
    contents = ["     1→function send(body) {}\n", "     1→exports.etag = etag;\n"]
    for index in finished:
        t.reply(calls[index], contents[index])
    t.say("lib/response.js")
    t.result("lib/response.js")
    return t.write(path)


def test_parallel_results_show_in_the_order_of_their_calls_whatever_order_they_finished_in(tmp_path):
    """Two runs of one campaign showed a message's parallel Reads' results in the order they finished: one order."""
    pages = []
    for finished in ((0, 1), (1, 0)):
        campaign = Campaign.create(tmp_path / f"out{finished[0]}", {"backend": "scripted"})
        path = parallel_reads(campaign.item_dir("express-without-1") / "run-express-without-1.jsonl", finished)
        scores = score_session(read_segments([path]), tool=CODEGRAPH)
        segments = [str(path.relative_to(campaign.path))]
        record = {"id": "express-without-1", "entry": "express", "arm": "without", "run": 1, "outcome": "passed",
                  "segments": segments, "scores": scores}  # fmt: skip
        campaign.record(record)
        pages.append(run_section(render_html(campaign.items(), "t", "note", campaign.path), "express-without-1"))
    shown = [re.findall(r"<pre>\s*1→([^\n<]*)", page) for page in pages]
    assert shown[0] == shown[1] == ["function send(body) {}", "exports.etag = etag;"]
