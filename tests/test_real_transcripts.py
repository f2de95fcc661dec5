"""Transcripts nobody here wrote (tests/data/transcripts): every file reads, and its README's facts come out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.transcripts import transcripts

from pytest_agent_eval.agents.claude_code.transcript import read_lines, read_segments, read_session_file
from pytest_agent_eval.agents.recognition import recognise
from pytest_agent_eval.cli import main
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.tool import CODEGRAPH

ROOT = transcripts()

SOURCEGRAPH = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")
HDA = "ccb/linux-hda-intel-suspend-fault-001"
BUSTUB = "ccb/bustub-hyperloglog-impl-001"
SJ = "sjarmak/dependency_recognition-java-unkn__pshKMge"
SPOTTER = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"

# file: (lines, assistant events, distinct ids, tool_use by name, (subtype, is_error, num_turns) or None, compactions)
FACTS = {
    f"{HDA}/baseline/claude-code.txt": (
        82,
        54,
        24,
        {"Grep": 9, "Bash": 8, "Read": 6, "Glob": 1, "Write": 1},
        ("success", False, 26),
        0,
    ),
    f"{HDA}/mcp/claude-code.txt": (
        108,
        73,
        33,
        {
            "mcp__sourcegraph__sg_keyword_search": 12,
            "mcp__sourcegraph__sg_read_file": 12,
            "mcp__sourcegraph__sg_commit_search": 2,
            "mcp__sourcegraph__sg_list_files": 1,
            "Bash": 3,
            "Read": 1,
            "Write": 1,
        },
        ("success", False, 33),
        0,
    ),
    f"{BUSTUB}/baseline/claude-code.txt": (4, 1, 1, {}, ("success", True, 1), 0),
    f"{BUSTUB}/mcp/claude-code.txt": (4, 1, 1, {}, ("success", True, 1), 0),
    f"{SJ}/claude-code.txt": (8, 4, 3, {"Read": 1, "Write": 1}, ("success", False, 3), 0),
    f"{SJ}/sessions/projects/-workspace/8bed4027-e09a-4363-8fa7-0565effb22ea.jsonl": (
        8,
        4,
        3,
        {"Read": 1, "Write": 1},
        None,
        0,
    ),
    SPOTTER: (
        1512,
        254,
        139,
        {"Bash": 67, "Edit": 32, "Read": 31, "Grep": 10, "Write": 7, "Task": 1, "TaskOutput": 1, "AskUserQuestion": 1},
        None,
        1,
    ),
    "spotter/subagents/agent-a2898e3.jsonl": (144, 40, 12, {"Read": 16, "Glob": 10, "Bash": 5, "Grep": 2}, None, 0),
    "gleam/basic_query.ndjson": (3, 1, 1, {}, ("success", False, 1), 0),
}


def _short(name: str) -> str:
    return name.split("__")[-1] if name.startswith("mcp__") else name


@pytest.mark.parametrize("relpath", sorted(FACTS))
def test_readme_facts(relpath: str) -> None:
    lines, events, ids, tools, result, compactions = FACTS[relpath]
    # the file's own facts: read alone, with no subagent file stitched in
    session = read_lines((ROOT / relpath).read_text(encoding="utf-8").splitlines())
    assert session.parse.events + session.parse.bad_lines == lines
    assert session.parse.event_types["assistant"] == events
    assert len(session.messages(thread=None)) == ids
    assert session.tool_counts() == tools
    if result is None:
        assert session.results == []
    else:
        [got] = session.results
        assert (got.subtype, got.is_error, got.num_turns) == result
    assert sum(type(i).__name__ == "Compaction" for i in session.timeline) == compactions


@pytest.mark.parametrize("relpath", sorted(FACTS))
def test_agent_eval_score_recognises_each_as_claude_codes_with_its_readme_counts(
    relpath: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given alone to ``agent-eval score``, as a user gives it: Claude Code's own reader, the README's tool counts."""
    lines, _, _, tools, result, _ = FACTS[relpath]
    alone = tmp_path / Path(relpath).name
    shutil.copyfile(ROOT / relpath, alone)
    found = recognise(alone)
    assert found.claimed and found.agent.name == "claude-code"
    assert found.kind == ("stream-json" if result is not None else "session file")
    assert main(["score", str(alone), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["tool_counts"] == tools and card["parse"]["events"] + card["parse"]["bad_lines"] == lines


@pytest.mark.parametrize(
    "path",
    sorted(
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*")
        if p.is_file() and p.suffix in (".txt", ".jsonl", ".ndjson")
    ),
)
def test_every_transcript_scores_without_error(path: str) -> None:
    session = read_segments([ROOT / path])
    for tool in (CODEGRAPH, SOURCEGRAPH):
        card = score(session, tool)
        data = card.to_dict()
        assert data["parse"]["events"] > 0
        assert render_scorecard(card)
        if data["allocation"]["efficiency"] is not None:
            assert 0.0 <= data["allocation"]["efficiency"] <= 1.0


def test_a_score_reads_the_same_whatever_the_hash_seed() -> None:
    """Python orders a set by its members' hashes, which change from process to process: nothing a score prints may
    follow that order (spotter's two denser families came out in either order)."""
    command = [sys.executable, "-m", "pytest_agent_eval.cli", "score", "--json", str(ROOT / SPOTTER)]
    outputs = {
        subprocess.run(
            command, env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True
        ).stdout
        for seed in ("0", "1", "2", "3")
    }
    assert len(outputs) == 1 and json.loads(outputs.pop())["occupancy"]["denser"]


def test_rate_limited_run_is_an_infrastructure_failure() -> None:
    session = read_segments([ROOT / BUSTUB / "mcp/claude-code.txt"])
    assert session.infra_error is not None
    assert "rate_limit" in session.infra_error
    assert session.answer_texts() == []


def test_interactive_and_stream_json_copies_of_one_run_agree() -> None:
    stream = read_segments([ROOT / SJ / "claude-code.txt"])
    interactive = read_session_file(ROOT / SJ / "sessions/projects/-workspace")
    assert stream.tool_counts() == interactive.tool_counts()
    assert [m.usage for m in stream.messages()] == [m.usage for m in interactive.messages()]
    assert interactive.answer_texts() == [interactive.messages()[-1].text]


def test_sourcegraph_arm_is_scored_as_the_retrieval_tool() -> None:
    data = score(read_segments([ROOT / HDA / "mcp/claude-code.txt"]), SOURCEGRAPH).to_dict()
    assert sum(data["sufficiency"]["counts"].values()) + data["sufficiency"]["errors"] == 12
    assert data["occupancy"]["residual"]["tool"] > 0  # the retrieval tool's family, whatever its name


@pytest.mark.parametrize("layout", ["nested", "flat"])
def test_subagent_file_is_stitched_in_through_the_task_result(tmp_path: Path, layout: str) -> None:
    """spotter has no agent-*.meta.json: the Task result's agentId links the subagent file to its call."""
    session_file = tmp_path / Path(SPOTTER).name
    shutil.copy(ROOT / SPOTTER, session_file)
    agents = tmp_path / session_file.stem / "subagents" if layout == "nested" else tmp_path
    agents.mkdir(parents=True, exist_ok=True)
    for agent in (ROOT / "spotter/subagents").glob("agent-*.jsonl"):
        shutil.copy(agent, agents / agent.name)
    session = read_session_file(session_file)
    [task] = [c for c in session.calls if c.name == "Task"]
    assert {c.name for c in session.calls_in(task.id)} == {"Read", "Glob", "Bash", "Grep"}
    assert len(session.calls_in(task.id)) == 33
    # the compaction agent belongs to no call: a thread of its own, never the main thread
    assert session.tool_counts()["Read"] == 31 + 16 + sum(
        1 for c in session.calls if c.name == "Read" and c.thread.startswith("agent:")
    )
    assert len(session.calls_in("main")) == 150


def test_meta_file_links_a_subagent(tmp_path: Path) -> None:
    session_file = tmp_path / Path(SPOTTER).name
    shutil.copy(ROOT / SPOTTER, session_file)
    agents = tmp_path / session_file.stem / "subagents"
    agents.mkdir(parents=True)
    shutil.copy(ROOT / "spotter/subagents/agent-a2898e3.jsonl", agents / "agent-zzz.jsonl")
    (agents / "agent-zzz.meta.json").write_text('{"toolUseId": "toolu_from_meta"}')
    session = read_session_file(session_file)
    assert len(session.calls_in("toolu_from_meta")) == 33


def test_shared_copy_with_a_bare_subagents_folder_is_stitched() -> None:
    session = read_segments([ROOT / SPOTTER])  # an interactive file is recognised as one
    [task] = [c for c in session.calls if c.name == "Task"]
    assert len(session.calls_in(task.id)) == 33
