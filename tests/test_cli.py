"""`agent-eval score` over transcripts on disk: the blocks, the JSON, segments, sessions and errors."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from support.sessions import two_turn_run
from support.synth import Transcript, write_grep_session

from pytest_agent_eval.agents.claude_code import transcript as claude_transcript
from pytest_agent_eval.cli import main

EXPLORE = "mcp__codegraph__codegraph_explore"


def test_json_has_every_documented_key(tmp_path, capsys):
    first = two_turn_run(tmp_path)
    assert main(["score", str(first), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    occ = data["occupancy"]
    for key in (
        "ctx_final",
        "ctx_base",
        "chars_per_token",
        "calibrated",
        "dispersion",
        "residual",
        "contributed",
        "evicted",
        "compactions",
        "turns",
    ):
        assert key in occ
    assert set(occ["residual"]) == {"tool", "read", "search", "bash", "other"}
    assert set(data["sufficiency"]["counts"]) == {
        "explore_again",
        "read_returned",
        "read_missed",
        "search",
        "sufficient",
    }
    assert {"query", "files", "bucket", "reaction"} <= set(data["sufficiency"]["calls"][0])
    for key in ("efficiency", "path_efficiency", "used_chars", "envelope_chars", "files", "calls"):
        assert key in data["allocation"]
    assert {"path", "chars", "via", "symbol"} <= set(data["allocation"]["files"][0])
    for key in ("cli_calls", "cli_blocked", "commands", "leaks", "cold_start_race", "exposed_tools", "contaminated"):
        assert key in data["contamination"]
    assert data["tool_counts"] == {EXPLORE: 1, "Read": 1}
    assert data["parse"] == {"events": 9, "bad_lines": 0}
    # both segments were found from the first file, and both answers pooled
    assert len(data["files"]) == 2
    assert data["allocation"]["efficiency"] == 1.0
    # the explore's verdict is the final answer of turn 1, not turn 2's Read
    assert data["sufficiency"]["counts"]["sufficient"] == 1


def test_segments_given_explicitly_are_read_in_order(tmp_path, capsys):
    first = two_turn_run(tmp_path)
    assert main(["score", str(first), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert main(["score", str(first), str(tmp_path / "run-with-1.t2.jsonl"), "--json"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert explicit["occupancy"] == found["occupancy"]
    assert main(["score", str(tmp_path / "run-with-1.t2.jsonl"), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["tool_counts"] == {"Read": 1}


def three_turn_run(folder: Path) -> list[Path]:
    """run-with-1.jsonl, .t2 and .t3: one session (one id), resumed twice."""
    paths = [folder / name for name in ("run-with-1.jsonl", "run-with-1.t2.jsonl", "run-with-1.t3.jsonl")]
    for turn, path in enumerate(paths, start=1):
        t = Transcript()
        t.init(tools=["Read"])
        t.ctx = 1000 * turn
        read = t.call("Read", file_path=f"/repo/lib/turn{turn}.js")
        t.reply(read, "     1→x = 1\n" * 50 * turn)
        t.say(f"lib/turn{turn}.js.")
        t.result(f"lib/turn{turn}.js.")
        t.write(path)
    return paths


def test_segments_out_of_order_or_twice_are_refused_naming_the_order(tmp_path, capsys):
    first, second, third = map(str, three_turn_run(tmp_path))
    assert main(["score", third, first, second]) == 2
    err = capsys.readouterr().err
    assert f"agent-eval: error: {first}: (turn 1) given after {third} (turn 3): give one run's segments once" in err
    assert err.rstrip().endswith(f"in order: {first} {second} {third}")
    assert main(["score", first, second, second]) == 2
    assert f"{second}: given twice: give one run's segments once each, in order: {first} {second}\n" in (
        capsys.readouterr().err
    )
    assert main(["score", first, second, third, "--brief"]) == 0  # in order: read, and no word about it
    assert capsys.readouterr().err == ""


def test_a_missing_turn_or_a_second_session_among_segments_is_named(tmp_path, capsys):
    first, _, third = map(str, three_turn_run(tmp_path))
    assert main(["score", first, third, "--brief"]) == 0
    assert f"agent-eval: warning: {first}: no segment for turn(s) .t2: the figures leave those turns out" in (
        capsys.readouterr().err
    )
    assert main(["score", third, "--brief"]) == 0  # a later turn alone is just that turn
    assert capsys.readouterr().err == ""
    other = Path(third).read_text().replace('"session_id": "s-1"', '"session_id": "s-2"')
    Path(third).write_text(other)
    assert main(["score", first, str(tmp_path / "run-with-1.t2.jsonl"), third, "--brief"]) == 0
    assert "the segments name 2 sessions (s-1, s-2): scored as one, though they may not be one session's turns" in (
        capsys.readouterr().err
    )


def test_text_blocks(tmp_path, capsys):
    assert main(["score", str(two_turn_run(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "Residual context occupancy at end of run:" in out
    assert "Explore sufficiency — what the agent did NEXT (1 answered call):" in out
    assert "Explore allocation — share of returned bytes the answer used (1 call, 2 files):" in out
    assert "Contamination" in out
    assert "VERDICT: codegraph_explore used 1x | Read 1 | Grep/Bash 0" in out


def test_brief_envelope_answer_and_window(tmp_path, capsys):
    first = str(two_turn_run(tmp_path))
    assert main(["score", first, "--brief"]) == 0
    brief = capsys.readouterr().out
    assert "allocation: efficiency 100.0%" in brief
    assert "Residual context occupancy" not in brief
    assert main(["score", first, "--answer", "lib/express.js", "--json"]) == 0
    captured = capsys.readouterr()
    used = {f["path"] for f in json.loads(captured.out)["allocation"]["files"] if f["via"]}
    assert used == {"lib/express.js"} and captured.err == ""
    assert main(["score", first, "--answer", "lib/express.js", "--answer", "lib/expres.js", "--brief"]) == 0
    assert (
        capsys.readouterr().err == "agent-eval: warning: --answer 'lib/expres.js' matches no file the tool returned\n"
    )
    assert main(["score", first, "--window", "100000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["occupancy"]["window"] == 100_000
    assert main(["score", first, "--envelope"]) == 0
    assert "lib/express.js" in capsys.readouterr().out


def test_score_usage_mistakes_are_told_with_scores_own_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["score"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: agent-eval score ") and "score takes FILE… or --session FILE_OR_DIR" in err
    with pytest.raises(SystemExit):
        main(["score", "run.jsonl", "--tool", ""])
    assert "argument --tool: empty: give the tool's MCP server name, or MODULE:ATTR" in capsys.readouterr().err


def test_interactive_session_folder(tmp_path, capsys):
    project = tmp_path / "projects" / "-tmp-express"
    project.mkdir(parents=True)
    write_grep_session(project / "0b7c.jsonl")
    assert main(["score", "--session", str(project), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tool_counts"] == {"Grep": 1}


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.jsonl", None, "missing.jsonl: no such file"),
        ("notes.md", "# just prose\n", "notes.md: not a Claude Code transcript"),
        ("array.jsonl", "[1, 2]\n", "array.jsonl: not a Claude Code transcript (no line is a JSON object)"),
        (
            "object.json",
            '{"a":1}\n{"type": "note"}\n',
            'object.json: not a Claude Code transcript: 2 JSON object(s), none with a "type" of '
            "assistant/result/system/user",
        ),
    ],
)
def test_bad_files_are_one_line_errors_with_exit_2(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    assert main(["score", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["score", "x.jsonl", "--window", "lots"])
    assert "--window" in capsys.readouterr().err


def test_a_stand_in_model_says_so_in_the_report(tmp_path, capsys):
    t = Transcript()
    t.say("answer")
    t.result("answer")
    for event in t.events:
        if event["type"] == "assistant":
            event["message"]["model"] = "stand-in-scripted"
    path = t.write(tmp_path / "run.jsonl")
    assert main(["score", str(path)]) == 0
    assert "STAND-IN MODEL (stand-in-scripted): these figures measure the pipeline" in capsys.readouterr().out
    assert main(["score", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stand_in"] == "stand-in-scripted"


# -- robustness: `agent-eval score` never hangs, never prints NaN, survives nesting, says when a run was cut off --
def one_turn(path: Path, finished: bool = True) -> Path:
    t = Transcript()
    t.init(tools=["Read"])
    read = t.call("Read", file_path="/repo/lib/a.js")
    t.reply(read, "     1→x = 1\n")
    t.say("lib/a.js")
    if finished:
        t.result("lib/a.js")
    return t.write(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_file_that_never_ends_is_refused_not_waited_on(tmp_path, capsys, kind):
    if kind == "fifo":
        path = tmp_path / "run.jsonl"
        os.mkfifo(path)  # nobody ever writes to it: opening it for reading would block forever
    else:
        path = Path("/dev/zero")  # endless, and one line with no newline in it
    assert main(["score", str(path)]) == 2
    assert main(["score", "--session", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert (
        err
        == [
            f"agent-eval: error: {path}: not a regular file (a pipe, socket or device may never end); "
            "save the transcript to a file first"
        ]
        * 2
    )


def test_a_folder_is_a_one_line_error(tmp_path, capsys):
    assert main(["score", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"agent-eval: error: {tmp_path}: is a folder, not a transcript file\n"


def test_an_unreadable_file_is_a_one_line_error(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads it all the same
        pytest.skip("this user can read a file whatever its mode")
    assert main(["score", str(path)]) == 2
    assert capsys.readouterr().err == f"agent-eval: error: {path}: cannot read (Permission denied)\n"


def test_a_file_that_grows_while_read_is_read_to_its_end(tmp_path, monkeypatch):
    path = one_turn(tmp_path / "run.jsonl")
    expected = claude_transcript.read_segments([path])
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:  # the size as it was before the last lines were written
        info = real_fstat(fd)
        return os.stat_result((*info[:6], info.st_size // 3, *info[7:]))

    monkeypatch.setattr(claude_transcript.os, "fstat", stale_fstat)
    grown = claude_transcript.read_segments([path])
    assert grown.parse.events == expected.parse.events > 3
    assert grown.answer_texts() == ["lib/a.js"]


def test_a_line_over_the_limit_is_a_bad_line_read_past(tmp_path, capsys):
    good = one_turn(tmp_path / "good.jsonl").read_bytes()
    path = tmp_path / "run.jsonl"
    with path.open("wb") as handle:
        handle.write(good[: good.index(b"\n") + 1])  # the init event
        handle.write(b"x" * (claude_transcript.MAX_LINE_BYTES + 1) + b"\n")  # a runaway line, one byte over
        handle.write(good[good.index(b"\n") + 1 :])
    assert main(["score", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["parse"]["bad_lines"] == 1
    assert data["tool_counts"] == {"Read": 1} and data["results"] == 1
    assert captured.err == f"agent-eval: warning: {path}:2: longer than 64 MiB: skipped\n"


def test_bad_lines_are_named_by_place_the_first_few_of_them(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "{torn\n" * 7 + "".join(lines[1:]))
    assert main(["score", str(path), "--brief"]) == 0
    captured = capsys.readouterr()
    assert "(7 bad lines skipped)" in captured.out
    assert captured.err.splitlines() == [
        *(f"agent-eval: warning: {path}:{n}: not a JSON object: skipped" for n in range(2, 7)),
        "agent-eval: warning: … 2 more bad line(s) skipped",
    ]


@pytest.mark.parametrize("count", ["1" + "0" * 400, "-1000", '"999"'])
def test_a_token_count_no_api_gives_counts_as_none(tmp_path, capsys, count):
    path = one_turn(tmp_path / "run.jsonl")
    text = path.read_text()
    assert text.count('"input_tokens": 3,') == 2
    path.write_text(text.replace('"input_tokens": 3,', '"input_tokens": 0,', 1))
    assert main(["score", str(path), "--json"]) == 0
    as_none = json.loads(capsys.readouterr().out)
    path.write_text(text.replace('"input_tokens": 3,', f'"input_tokens": {count},', 1))
    assert main(["score", str(path)]) == 0  # the text blocks too: a 400-digit count overflowed their formatting
    capsys.readouterr()
    assert main(["score", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == as_none


def test_a_gzipped_transcript_is_read_as_it_is_and_a_broken_one_is_one_line(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    assert main(["score", str(path), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    packed = tmp_path / "archived.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert main(["score", str(packed), "--json"]) == 0
    assert {k: v for k, v in json.loads(capsys.readouterr().out).items() if k != "files"} == {
        k: v for k, v in plain.items() if k != "files"
    }
    packed.write_bytes(packed.read_bytes()[:40])  # cut off mid-stream
    assert main(["score", str(packed)]) == 2
    assert f"agent-eval: error: {packed}: a gzip file that cannot be decompressed" in capsys.readouterr().err


def test_a_byte_order_mark_does_not_cost_the_first_event(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    plain = path.read_bytes()
    assert main(["score", str(path), "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    path.write_bytes(b"\xef\xbb\xbf" + plain)  # as an editor on Windows saves it
    assert main(["score", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["contamination"] == expected["contamination"]
    assert json.loads(captured.out)["parse"] == expected["parse"] and captured.err == ""


def test_json_never_carries_nan_or_infinity(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    text = path.read_text().replace('"total_cost_usd": 0.01', '"total_cost_usd": NaN, "x": 1e999')
    path.write_text(text.replace('"usage": {"input_tokens": 999999}', '"usage": {"input_tokens": -Infinity}'))
    assert "NaN" in path.read_text()
    assert main(["score", str(path), "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in --json output")

    data = json.loads(out, parse_constant=refuse)
    assert data["cost_usd"] is None


def test_deeply_nested_json_is_a_bad_line_not_a_crash(tmp_path, capsys):
    path = one_turn(tmp_path / "run.jsonl")
    deep = '{"type": "user", "message": {"content": ' + "[" * 100_000 + "]" * 100_000 + "}}\n"
    path.write_text(path.read_text() + deep)
    assert main(["score", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parse"]["bad_lines"] == 1 and data["tool_counts"] == {"Read": 1}


def test_a_run_cut_off_mid_turn_says_so(tmp_path, capsys):
    cut = one_turn(tmp_path / "cut.jsonl", finished=False)
    assert main(["score", str(cut)]) == 0
    assert f"NOTICE: {cut} ends mid-turn (no result event): cut off; the figures cover what was written" in (
        capsys.readouterr().out
    )
    assert main(["score", str(cut), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["ends_mid_turn"], data["unfinished_segments"]) == (True, [str(cut)])

    done = one_turn(tmp_path / "done.jsonl")
    assert main(["score", str(done), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["ends_mid_turn"], data["unfinished_segments"]) == (False, [])
    assert main(["score", str(done)]) == 0
    assert "NOTICE" not in capsys.readouterr().out


def test_help_reads_as_text_not_rest(capsys):
    """``agent-eval --help`` showed its docstring's reST (````agent-eval````) and none of its examples."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out
    assert "agent-eval: score transcripts that already exist, without pytest." in out
    assert "examples:\nagent-eval score run-with-1.jsonl" in out and "agent-eval plan latest --change 10%" in out
