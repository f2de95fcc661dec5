"""The two decodings of a transcript (msgspec for large inputs, the standard library for a quick start) read the
same: every real transcript scores the same either way, and so does every line one of them finds odd."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.synth import Transcript, tool_use
from support.transcripts import transcripts

from pytest_agent_eval import cli, transcript
from pytest_agent_eval.agents.claude_code import transcript as claude_transcript
from pytest_agent_eval.agents.claude_code.transcript import read_lines, read_segments, read_session_file
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import is_later_segment, segment_files

BENCH = Path(__file__).resolve().parent.parent / "bench" / "data" / "transcripts"


def _sessions(root: Path) -> list[list[Path]]:
    firsts = sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".txt") and not is_later_segment(p))
    return [segment_files(p) if p.suffix == ".jsonl" else [p] for p in firsts if not p.name.startswith("agent-")]


SESSIONS = [*_sessions(transcripts()), *_sessions(BENCH)]


def _both(read) -> tuple[dict, dict]:
    """A session's figures and text blocks, read with msgspec and with the standard library."""
    cards = [score(read(fast), tool=CODEGRAPH) for fast in (True, False)]
    return tuple(card.to_dict() | {"text": render_scorecard(card)} for card in cards)


@pytest.mark.parametrize("segments", SESSIONS, ids=[str(s[0].name) for s in SESSIONS])
def test_every_real_transcript_scores_the_same_with_either_decoding(segments: list[Path]) -> None:
    with_msgspec, with_stdlib = _both(lambda fast: read_segments(segments, fast=fast))
    assert with_msgspec == with_stdlib


def test_the_corpora_are_there():
    # A missing folder would leave the test above with less to check than it says.
    assert len(_sessions(transcripts())) >= 5 and len(_sessions(BENCH)) >= 20


ODD_LINES = [
    '{"type":"result","result":"NaN","total_cost_usd":NaN}',  # not JSON to msgspec
    '{"type":"result","result":"big","total_cost_usd":1e999}',  # out of msgspec's range
    '\ufeff{"type":"result","result":"bom"}',
    '{"type":"result","result":"\\ud800 lone surrogate"}',
    '   {"type":"result","result":"indented"}  \x0c',
    '{"type":"result"} trailing garbage',
    '{"type":"result","result":"first","result":"last wins"}',
    '{"type":"result","num_turns":123456789012345678901234567890}',
    "[1, 2]",
    '"a string"',
    "not json",
    '{"type":"assistant"',  # cut off
    "[" * 100_000 + "]" * 100_000,  # deeper than either reads
    '{"type":"user","sessionId":null,"message":{"content":"present as null"}}',
]


@pytest.mark.parametrize("line", ODD_LINES, ids=range(len(ODD_LINES)))
def test_an_odd_line_reads_the_same_with_either_decoding(line: str, tmp_path: Path) -> None:
    t = Transcript()
    t.reply(t.call("Read", file_path="a.js"), "x = 1")
    lines = [*t.lines(), line]
    path = tmp_path / "run.jsonl"
    # The line among ordinary ones, as bytes read from a file (with a line of invalid UTF-8) and as text.
    path.write_bytes("\n".join(lines).encode("utf-8") + b"\n{\xff\xfe}\n")
    with_msgspec, with_stdlib = _both(lambda fast: read_segments([path], fast=fast))
    assert with_msgspec == with_stdlib
    with_msgspec, with_stdlib = _both(lambda fast: read_lines(lines, fast=fast))
    assert with_msgspec == with_stdlib


def test_a_session_files_subagent_is_linked_with_either_decoding(tmp_path: Path) -> None:
    """The Task result's structured copy, which msgspec leaves undecoded, names the agent either way."""
    task = tool_use("Task", call_id="toolu_task", prompt="find it")
    grep = tool_use("Grep", call_id="toolu_g", pattern="x")
    events = [
        {"type": "assistant", "sessionId": "s1", "message": {"id": "m1", "content": [task]}},
        {
            "type": "user",
            "sessionId": "s1",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "done"}]},
            "toolUseResult": {"agentId": "a1", "content": [{"type": "text", "text": "done"}]},
        },
    ]
    (tmp_path / "s1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    agent = {"type": "assistant", "sessionId": "s1", "message": {"id": "m2", "content": [grep]}}
    (tmp_path / "agent-a1.jsonl").write_text(json.dumps(agent) + "\n")
    for fast in (True, False):
        session = read_session_file(tmp_path / "s1.jsonl", fast=fast)
        assert [c.name for c in session.calls_in("toolu_task")] == ["Grep"], fast


def test_the_fast_decoding_pays_only_for_a_large_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text("{}\n")
    assert not transcript.fast_decoding_pays([small, tmp_path / "missing.jsonl"])
    monkeypatch.setattr(transcript, "FAST_DECODING_MIN_BYTES", small.stat().st_size)
    assert transcript.fast_decoding_pays([small])


def test_scoring_a_small_session_does_not_import_msgspec(tmp_path: Path) -> None:
    """msgspec takes longer to import than a small session takes to read: ``agent-eval score`` leaves it alone."""
    t = Transcript()
    t.call("Read", file_path="a.js")
    t.result("done")
    path = t.write(tmp_path / "run.jsonl")
    probe = (
        "import sys\nfrom pytest_agent_eval.cli import main\n"
        f"assert main(['score', {str(path)!r}]) == 0\nprint(sorted(m for m in sys.modules if 'msgspec' in m))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"


def test_scoring_a_large_input_decodes_with_msgspec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    t = Transcript()
    t.call("Read", file_path="a.js")
    t.result("done")
    path = t.write(tmp_path / "run.jsonl")
    chosen: list[bool] = []
    monkeypatch.setattr(transcript, "FAST_DECODING_MIN_BYTES", 1)
    read = read_segments
    # Claude Code's reader, as its agent reads a record it recognises for agent-eval score
    spy = lambda files, fast=True: chosen.append(fast) or read(files, fast)  # noqa: E731
    monkeypatch.setattr(claude_transcript, "read_segments", spy)
    assert cli.main(["score", str(path)]) == 0
    assert chosen == [True]
    assert "Explore sufficiency" in capsys.readouterr().out
