import json
from pathlib import Path

import pytest
from support.synth import Transcript, explore_response

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.campaign.rescore import find_sessions, parse_label, rescore
from pytest_agent_eval.campaign.store import Campaign, load_records, point_latest
from pytest_agent_eval.cli import main
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.report.terminal import render_rescore
from pytest_agent_eval.tool import CODEGRAPH

EXPLORE = "mcp__codegraph__codegraph_explore"
SOURCES = {"lib/response.js": "function send(body) {}\n" * 20, "lib/utils.js": "exports.etag = etag;\n" * 8}


def turn_one(path: Path) -> Path:
    """explore → Read of a returned file (read_returned) → answer."""
    t = Transcript()
    t.init(tools=["Read", EXPLORE])
    call = t.call(EXPLORE, query="res.send")
    t.reply(call, explore_response(SOURCES))
    read = t.call("Read", file_path="/repo/lib/utils.js")
    t.reply(read, "     1→exports.etag = etag;\n" * 8)
    t.say("`lib/response.js` sends.")
    t.result("`lib/response.js` sends.")
    return t.write(path)


def turn_two(path: Path) -> Path:
    """A resumed turn: explore → answer straight away (sufficient)."""
    t = Transcript()
    t.init(tools=["Read", EXPLORE])
    call = t.call(EXPLORE, query="404 handler")
    t.reply(call, explore_response({"lib/router/index.js": "function handle() {}\n" * 10}))
    t.say("`lib/router/index.js` handles it.")
    t.result("`lib/router/index.js` handles it.")
    return t.write(path)


def without(path: Path) -> Path:
    t = Transcript()
    t.init()
    grep = t.call("Grep", pattern="res.send")
    t.reply(grep, "lib/response.js:10: res.send = function")
    t.result("lib/response.js")
    return t.write(path)


def rate_limited(path: Path) -> Path:
    t = Transcript()
    t.init()
    t.message(ctx=0, error="rate_limit")
    t.result("API Error: rate limit", is_error=True)
    return t.write(path)


@pytest.fixture
def harness_folder(tmp_path) -> Path:
    """A folder as the original harness left it: run-<label>.jsonl, later turns as .tN.jsonl, one folder per repo."""
    turn_one(tmp_path / "run-express-with-1.jsonl")
    turn_two(tmp_path / "run-express-with-1.t2.jsonl")
    without(tmp_path / "run-express-without-1.jsonl")
    turn_two(tmp_path / "run-headless-with.jsonl")
    (tmp_path / "excalidraw").mkdir()
    turn_one(tmp_path / "excalidraw" / "run-with-2.jsonl")
    (tmp_path / "mcp-codegraph.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a transcript")
    return tmp_path


def test_find_sessions_groups_segments(harness_folder):
    sessions = [[p.relative_to(harness_folder).as_posix() for p in files] for files in find_sessions(harness_folder)]
    assert sessions == [
        ["excalidraw/run-with-2.jsonl"],
        ["run-express-with-1.jsonl", "run-express-with-1.t2.jsonl"],
        ["run-express-without-1.jsonl"],
        ["run-headless-with.jsonl"],
    ]


@pytest.mark.parametrize(
    ("label", "entry", "arm", "run"),
    [
        ("run-express-with-1", "express", "with", 1),
        ("run-express-without-2", "express", "without", 2),
        ("run-react-native-with-3", "react-native", "with", 3),
        ("run-with-1", None, "with", 1),
        ("run-baseline-1", None, "baseline", 1),
        ("run-new-2", None, "new", 2),
        ("run-headless-with", None, "with", None),
        ("run2", None, None, None),
    ],
)
def test_parse_label(label, entry, arm, run):
    assert parse_label(label) == {"entry": entry, "arm": arm, "run": run}


def test_rescore_a_harness_folder(harness_folder):
    records = {r.id: r for r in rescore(harness_folder)}
    assert list(records) == [
        "excalidraw/run-with-2",
        "run-express-with-1",
        "run-express-without-1",
        "run-headless-with",
    ]
    two_turns = records["run-express-with-1"]
    assert (two_turns.entry, two_turns.arm, two_turns.run) == ("express", "with", 1)
    assert two_turns.segments == ["run-express-with-1.jsonl", "run-express-with-1.t2.jsonl"]
    assert two_turns.outcome == "passed"
    # Both turns are one session: turn 1's explore was followed by a Read of a file it returned, turn 2's by the answer.
    counts = two_turns.scores["sufficiency"]["counts"]
    assert counts == {"explore_again": 0, "read_returned": 1, "read_missed": 0, "search": 0, "sufficient": 1}
    assert two_turns.scores["results"] == 2
    expected = score_session(read_segments([harness_folder / s for s in two_turns.segments]), tool=CODEGRAPH)
    assert two_turns.scores == expected
    assert (records["excalidraw/run-with-2"].entry, records["excalidraw/run-with-2"].run) == ("excalidraw", 2)
    assert records["run-express-without-1"].arm == "without"
    assert records["run-express-without-1"].scores["sufficiency"]["answered"] == 0
    headless = records["run-headless-with"]
    assert (headless.entry, headless.arm, headless.run) == ("run-headless-with", "with", None)


def test_rescore_marks_infrastructure_errors(tmp_path):
    rate_limited(tmp_path / "run-bustub-with-1.jsonl")
    (record,) = rescore(tmp_path)
    assert record.outcome == "error"
    assert "rate_limit" in record.error


def test_rescore_a_campaign_replaces_scores_and_keeps_the_record(tmp_path):
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    first = turn_one(campaign.item_dir("express-with-1") / "run-express-with-1.jsonl")
    stale = {
        "id": "express-with-1",
        "entry": "express",
        "arm": "with",
        "run": 1,
        "outcome": "failed",
        "tool_version": "1.6.1",
        "segments": [str(first.relative_to(campaign.path))],
        "scores": {"stale": True},
    }
    campaign.record(stale)
    campaign.record(
        {
            "id": "gone",
            "entry": "express",
            "arm": "with",
            "run": 2,
            "outcome": "passed",
            "segments": ["items/gone/run-gone.jsonl"],
            "scores": {"stale": True},
        }
    )
    assert [[p.name for p in s] for s in find_sessions(campaign.path)] == [
        ["run-express-with-1.jsonl"],
        ["run-gone.jsonl"],
    ]
    fresh, gone = rescore(campaign.path)
    assert fresh.scores == score_session(read_segments([first]), tool=CODEGRAPH)
    assert (fresh.outcome, fresh.tool_version, fresh.segments) == ("failed", "1.6.1", stale["segments"])
    assert gone.outcome == "error"
    assert "run-gone.jsonl" in gone.error
    assert gone.scores is None


def test_render_rescore_table_and_pooled_buckets(harness_folder):
    text = render_rescore(rescore(harness_folder))
    header, _, *rows = text.splitlines()
    assert header.split()[:5] == ["label", "agent", "arm", "turns", "residual"]
    row = next(r for r in rows if r.startswith("run-express-with-1 "))
    assert row.split()[1:4] == ["Claude", "Code", "with"]  # which agent and arm each session was
    assert next(r for r in rows if r.startswith("run-express-without-1 ")).split()[1:4] == ["Claude", "Code", "without"]
    assert " 0 / 1 / 0 / 0 / 1 " in row
    assert "codegraph" in row
    assert "file-access" in next(r for r in rows if r.startswith("run-express-without-1 "))
    assert text.rstrip().splitlines()[-1] == (
        "pooled over 4 session(s), 4 answered explore calls: explore again 0 (0%) · Read a file we returned 2 (50%) · "
        "Read a file we did not return 0 (0%) · Grep/Glob 0 (0%) · moved on / answered 2 (50%)"
    )


def test_cli_rescore(harness_folder, tmp_path, capsys):
    assert main(["rescore", str(harness_folder)]) == 0
    out = capsys.readouterr().out
    assert "run-express-with-1" in out and "pooled over 4 session(s)" in out
    out_file = tmp_path / "rescored.json"
    assert main(["rescore", str(harness_folder), "--json", "--out", str(out_file)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in printed] == [r.id for r in load_records(out_file)]
    # A rescored folder is a baseline compare can read.
    assert main(["compare", str(out_file), str(out_file), "--compare-fail", "allocation:-5pt"]) == 0


def test_cli_rescore_bad_input(tmp_path, capsys):
    assert main(["rescore", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such file or folder" in capsys.readouterr().err
    assert main(["rescore", str(tmp_path)]) == 2
    assert "no run-*.jsonl transcripts" in capsys.readouterr().err


def test_cli_rescore_refuses_an_out_it_cannot_or_must_not_write_before_scoring(harness_folder, tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    campaign = harness_folder / "campaign"  # refused before it is read: a manifest is all it takes
    campaign.mkdir()
    (campaign / "manifest.json").write_text("{}")
    before = {path: path.read_bytes() for path in harness_folder.rglob("*") if path.is_file()}
    for folder, out, why in [
        (
            harness_folder,
            harness_folder / "run-express-with-1.jsonl",
            f"lies inside {harness_folder} and would overwrite",
        ),
        (harness_folder, harness_folder / "run-express-with-9.jsonl", "lies inside"),  # it would be read next time
        (campaign, campaign / "summary.json", f"lies inside {campaign} and would overwrite"),
        (harness_folder / "run-express-with-1.jsonl", harness_folder / "run-express-with-1.jsonl", "is the input"),
        (harness_folder, tmp_path, "is a folder"),
        (harness_folder, tmp_path / "missing" / "out.json", f"no folder {tmp_path / 'missing'}"),
        (harness_folder, tmp_path / "a-file" / "out.json", "no folder"),
    ]:
        assert main(["rescore", str(folder), "--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert f"agent-eval: error: --out {out}: {why}" in captured.err
        assert captured.out == ""  # refused before any scoring
    assert {path: path.read_bytes() for path in harness_folder.rglob("*") if path.is_file()} == before


def test_cli_rescore_of_sessions_none_of_which_scores_exits_2(tmp_path, capsys):
    (tmp_path / "run-express-with-1.jsonl").write_text('{"type": "system"\n')  # torn: no event at all
    assert main(["rescore", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "run-express-with-1" in captured.out  # the table still shows why
    assert f"{tmp_path}: none of its 1 session(s) could be scored" in captured.err


def test_a_campaign_without_its_manifest_is_rescored_as_a_folder_saying_so(harness_folder, capsys):
    probe = harness_folder / "items" / "express-with-1" / "block-probe"
    probe.mkdir(parents=True)
    turn_two(probe / "run-block-probe.jsonl")  # the harness's own check, not an eval session
    (harness_folder / "items.jsonl").write_text("")
    assert main(["rescore", str(harness_folder), "--json"]) == 0
    captured = capsys.readouterr()
    assert "run-block-probe" not in {r["id"].rsplit("/", 1)[-1] for r in json.loads(captured.out)}
    assert f"agent-eval: warning: {harness_folder}: a campaign's items.jsonl without its manifest.json" in captured.err


def test_rescore_of_the_latest_pointer_rescores_the_campaign_it_names(tmp_path, capsys):
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    first = turn_one(campaign.item_dir("express-with-1") / "run-express-with-1.jsonl")
    record = {"id": "express-with-1", "entry": "express", "arm": "with", "run": 1, "outcome": "passed"}
    campaign.record({**record, "segments": [str(first.relative_to(campaign.path))]})
    point_latest(campaign.path)
    assert main(["rescore", str(tmp_path / "out" / "latest")]) == 0
    captured = capsys.readouterr()
    assert "express-with-1" in captured.out and "pooled over 1 session(s)" in captured.out, captured.err
    (tmp_path / "out" / "latest").write_text("gone\n")
    assert main(["rescore", str(tmp_path / "out" / "latest")]) == 2
    assert f"{tmp_path / 'out' / 'latest'}: names no campaign in {tmp_path / 'out'}" in capsys.readouterr().err


@pytest.mark.parametrize("name, label", [("a.txt", "a"), ("t1", "t1"), ("rs_probe.txt", "rs_probe")])
def test_a_transcript_file_of_any_name_is_rescored_under_its_whole_name(tmp_path, capsys, name, label):
    turn_one(tmp_path / "t.jsonl").rename(tmp_path / name)
    (record,) = rescore(tmp_path / name)
    assert record.id == label and record.outcome == "passed"
    assert main(["rescore", str(tmp_path / name)]) == 0
    assert label in capsys.readouterr().out
