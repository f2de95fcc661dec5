"""Records other people's runs of Codex CLI, Gemini CLI, OpenCode and Claude Code left (tests/data/agent-records),
given to ``agent-eval score`` and ``rescore`` as a user has them: each recognised by its own agent from its content,
each version read as it is, with its README's counts, and what a record does not hold said, never scored as zero."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.paths import DATA
from support.transcripts import agent_records

from pytest_agent_eval.agents.recognition import read_given, recognise
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.rescore import rescore
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.cli import main
from pytest_agent_eval.transcript import TranscriptError

ROOT = agent_records()
CODEX_040 = "codex/agentcmd__rollout-2025-09-24T20-12-23-01997ea4-a70d-7da3-8c20-c736db82a7c5.jsonl"
CODEX_104 = "codex/localpush__rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
CODEX_104_SHORT = "codex/localpush__rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
KUBERNETES = "opencode/repo-explainer__kubernetes.log.txt"
OUTPUT = "opencode/repo-explainer__output.txt"
MEMEX = "claude-code/memex_cli__claude_out.txt"
# The README's mixed MCP tools of CODEX_104, redacted or not: counted together.
MCP = "MCP calls"

# file: (agent, tool calls by name in the common vocabulary, input tokens summed over its requests, sessions) from the
# README. Codex's and Gemini CLI's input is the whole prompt (Usage.ctx); OpenCode's tokens.input the uncached part.
# Common names: shell/exec_command/command_execution → Bash, web_search_call → WebSearch, file_change → apply_patch
# (the rollout's own name for it), Gemini CLI's list_directory → LS, read_file → Read, write_file → Write, replace →
# Edit, google_web_search → WebSearch; OpenCode's bash → Bash, read → Read…
COUNTS: dict[str, tuple[str, dict[str, int], int | None, int]] = {
    CODEX_040: ("codex", {"Bash": 16}, 149449, 1),
    "codex/agentcmd__rollout-2025-09-25T15-12-14-019982b8-3422-79e0-8b3b-05abaf4f3c3e.jsonl": (
        "codex", {"Bash": 34}, 536834, 1),
    "codex/agentcmd__stream-output-2.jsonl": ("codex", {"Bash": 1}, 6040, 1),
    "codex/agentcmd__stream-output-3.jsonl": ("codex", {"apply_patch": 1}, 6008, 1),
    "codex/agentcmd__stream-output-4.jsonl": ("codex", {"Bash": 1}, 6087, 1),
    "codex/agentcmd__stream-output-5.jsonl": ("codex", {"Bash": 1}, 6086, 1),
    "codex/localpush__rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl": (
        "codex", {"Bash": 116, "write_stdin": 2}, 1751428, 1),
    # The README lists 31 MCP calls, which with the others make 373, one more than its own total of 372: the file
    # holds 30 calls of MCP tools (the total is what is checked, with every other name).
    CODEX_104: ("codex", {"Bash": 212, "write_stdin": 70, "apply_patch": 49, MCP: 30, "WebSearch": 7, "update_plan": 2,
                          "list_mcp_resources": 1, "list_mcp_resource_templates": 1}, 33810485, 1),
    CODEX_104_SHORT: ("codex", {"Bash": 1}, 34469, 1),
    "gemini/agentcmd__session-2025-10-27T19-55-981c87cb.json": (
        "gemini", {"Bash": 5, "LS": 3, "Write": 2, "Read": 2, "WebSearch": 1}, 102805, 1),
    "gemini/agentcmd__session-2025-10-29T10-36-453aa339.json": ("gemini", {"Read": 2, "Edit": 1}, 21694, 1),
    "gemini/agentcmd__session-2025-10-29T10-40-359abdd0.json": ("gemini", {"Write": 1}, 10312, 1),
    "opencode/repo-explainer__example-opencode-md_src_logs_analysis_20260117_125610.txt": (
        "opencode", {"Read": 13, "Write": 4, "Bash": 1}, 231149, 1),
    KUBERNETES: ("opencode", {"Task": 12, "Write": 2, "Bash": 1, "Read": 1, "Glob": 1}, 84838, 3),
    "opencode/repo-explainer__mydocs_src_logs_analysis_20260117_152236.txt": (
        "opencode", {"Bash": 23, "Read": 9, "Edit": 7, "TodoWrite": 2, "Glob": 2, "Grep": 1}, 238250, 1),
    "opencode/repo-explainer__mydocs_src_logs_analysis_20260117_153428.txt": (
        "opencode", {"Read": 6, "Edit": 3, "Glob": 2, "Bash": 2, "TodoWrite": 1}, 76834, 1),
    OUTPUT: ("opencode", {"Bash": 4, "Read": 3}, 82010, 1),
    MEMEX: ("claude-code", {"TodoWrite": 5, "Read": 2, "Glob": 1, "Edit": 1}, None, 1),
}  # fmt: skip


def _named(counts: dict[str, int]) -> dict[str, int]:
    """Tool counts with every MCP tool's (``mcp__…``, or a name the record redacted) under one name."""
    out: dict[str, int] = {}
    for name, count in counts.items():
        key = MCP if name.startswith(("mcp__", "[REDACTED")) else name
        out[key] = out.get(key, 0) + count
    return out


def _score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """``agent-eval score ARGS --json``: its exit code, its JSON (a card, or a list of them) and its stderr."""
    code = main(["score", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_every_record_has_its_counts() -> None:
    assert sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()) == sorted(COUNTS)


@pytest.mark.parametrize("relpath", sorted(COUNTS))
def test_readme_counts(relpath: str, capsys: pytest.CaptureFixture[str]) -> None:
    agent, tools, tokens, runs = COUNTS[relpath]
    found, sessions = read_given([ROOT / relpath])
    assert found.claimed and found.agent.name == agent and len(sessions) == runs
    counts: dict[str, int] = {}
    for session in sessions:
        for name, count in _named(session.tool_counts()).items():
            counts[name] = counts.get(name, 0) + count
    assert counts == tools
    messages = [m for s in sessions for m in s.messages(None)]
    figure = (lambda u: u.input) if agent == "opencode" else (lambda u: u.ctx)
    if tokens is None:  # a proxy that reported zero usage: said, not scored as zero
        assert all(not m.usage or not m.usage.ctx for m in messages) and "usage" in sessions[0].missing
    else:
        assert sum(figure(m.usage) for m in messages if m.usage) == tokens
    code, cards, err = _score(capsys, str(ROOT / relpath))  # the command reads it as the reader does
    assert code == 0, err
    cards = cards if isinstance(cards, list) else [cards]
    assert sum(sum(c["tool_counts"].values()) for c in cards) == sum(tools.values())


# -- 1. a Codex rollout alone, a bare stream -------------------------------------------------------------------------
def test_a_codex_rollout_given_alone_is_read_as_codex(capsys: pytest.CaptureFixture[str]) -> None:
    code, card, err = _score(capsys, str(ROOT / CODEX_104_SHORT))
    assert code == 0, err
    assert card["tool_counts"] == {"Bash": 1} and "turn_ends" in card["missing"]


def test_a_bare_codex_stream_is_read_and_says_what_its_rollout_would_add(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(ROOT / "codex/agentcmd__stream-output-2.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "tools: Bash 1" in out and "not in this record (requests)" in out
    assert "rollout-…-019a2d7a-6455-7170-a661-c6d8b94c630a.jsonl) would add each model request" in out


def test_a_rollout_given_with_its_events_is_read_with_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollout = ROOT / CODEX_104_SHORT
    events = tmp_path / "events.jsonl"  # the one line a stream of its thread begins with
    events.write_text(json.dumps({"type": "thread.started", "thread_id": "019c8a70-dda7-7f33-98ea-f30553347322"}))
    code, card, err = _score(capsys, str(events), "--rollout", str(rollout))
    assert code == 0, err
    assert card["tool_counts"] == {"Bash": 1} and card["occupancy"]["tokens_processed"] == 34469


# -- 2. Gemini CLI's one-object chat record ------------------------------------------------------------------------
def test_a_gemini_one_object_chat_record_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, card, err = _score(capsys, str(ROOT / "gemini/agentcmd__session-2025-10-29T10-36-453aa339.json"))
    assert code == 0, err
    assert card["tool_counts"] == {"Read": 2, "Edit": 1} and card["occupancy"]["tokens_processed"] == 21694


def test_a_gemini_one_object_chat_record_gives_its_results(capsys: pytest.CaptureFixture[str]) -> None:
    _, [session] = read_given([ROOT / "gemini/agentcmd__session-2025-10-27T19-55-981c87cb.json"])
    assert all(call.result is not None for call in session.calls)  # the results inside toolCalls[].result
    assert session.answer_texts()[0].startswith("I've updated `main.py`")


# -- 3. a capture with noise -----------------------------------------------------------------------------------------
def _noisy_gemini(folder: Path, chat: bool) -> Path:
    source = DATA / "gemini" / "without"
    capture = folder / "capture.txt"
    prompt = "user@host:~/express$ gemini -p 'How does res.send decide?' --output-format stream-json\n"
    capture.write_text(prompt + "Loaded cached credentials.\n" + (source / "events.jsonl").read_text())
    if chat:
        [record] = source.glob("session-*.jsonl")
        shutil.copyfile(record, folder / record.name)
    return capture


@pytest.mark.parametrize("chat", [True, False], ids=["with-its-chat-record", "alone"])
def test_a_gemini_capture_behind_a_shell_prompt_is_read_as_gemini(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chat: bool
) -> None:
    capture = _noisy_gemini(tmp_path, chat)
    code, card, err = _score(capsys, str(capture))
    assert code == 0, err
    assert card["tool_counts"] == {"Bash": 4} and card["contamination"]["cli_blocked"] == 1
    assert card["occupancy"]["tokens_processed"] > 0
    assert "capture.txt:1: not a JSON object: skipped" in err
    assert ("missing" in card) != chat  # alone, it says what the chat record would add
    assert recognise(capture).agent.name == "gemini"


def test_a_record_two_agents_could_claim_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "both.jsonl"
    codex = {"type": "thread.started", "thread_id": "019a2d7a-6455-7170-a661-c6d8b94c630a"}
    claude = {"type": "system", "subtype": "init", "session_id": "163b92e3", "tools": ["Read"]}
    both.write_text(json.dumps(claude) + "\n" + json.dumps(codex) + "\n")
    assert main(["score", str(both)]) == 2
    assert "could be Claude Code's stream-json and Codex CLI's exec --json stream" in capsys.readouterr().err
    with pytest.raises(TranscriptError, match=r"could be Claude Code's stream-json and Codex CLI's exec --json stream"):
        recognise(both)


# -- 4. older Codex versions -----------------------------------------------------------------------------------------
def _events_for(rollout: Path, folder: Path) -> Path:
    """The one line a ``codex exec --json`` stream of the rollout's thread begins with, in a file of its own: with
    ``--rollout``, the way the rollout is read with its stream."""
    meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
    events = folder / "events.jsonl"
    events.write_text(json.dumps({"type": "thread.started", "thread_id": meta["id"]}) + "\n")
    return events


def test_codex_0_40_shell_is_bash_and_each_usage_lies_on_its_own_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rollout = ROOT / CODEX_040
    for given in ([str(rollout)], [str(_events_for(rollout, tmp_path)), "--rollout", str(rollout)]):
        code, card, err = _score(capsys, *given)
        assert code == 0, err
        # 0.40 writes a request's token_count before its output: each usage on its own request, the first's kept
        assert card["occupancy"]["tokens_processed"] == 149449 and card["tool_counts"] == {"Bash": 16}
        residual = card["occupancy"]["residual_results"]
        assert residual["bash"] == 16 and residual["other"] == 0 and card["occupancy"]["file_access"] > 0
    _, [session] = read_given([rollout])
    messages = session.messages()
    assert [m.usage.ctx for m in messages[:3]] == [3587, 3984, 4213]
    first = messages[0].calls[0]
    assert first.name == "Bash" and first.input["command"].startswith("cd /Users/jnarowski") and first.result.is_error


# -- 5. smaller ------------------------------------------------------------------------------------------------------
def _rollout(folder: Path, items: list[dict[str, Any]]) -> Path:
    thread = "01a23956-bb2a-7470-9784-36a5c6997edb"
    records = [{"type": "session_meta", "payload": {"id": thread, "cli_version": "0.135.0"}},
               {"type": "event_msg", "payload": {"type": "task_started"}}]  # fmt: skip
    records += [{"type": "response_item", "payload": item} for item in items]
    path = folder / f"rollout-2026-12-03T00-00-00-{thread}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_a_codex_mcp_call_in_a_namespace_reads_as_one_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollout = _rollout(tmp_path, [
        {"type": "function_call", "namespace": "mcp__node_repl__", "name": "js", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call", "namespace": "mcp__codegraph", "name": "codegraph_explore", "arguments": "{}",
         "call_id": "c2"},
    ])  # fmt: skip
    code, card, err = _score(capsys, str(_events_for(rollout, tmp_path)), "--rollout", str(rollout))
    assert code == 0, err
    assert card["tool_counts"] == {"mcp__node_repl__js": 1, "mcp__codegraph__codegraph_explore": 1}


def test_web_search_calls_are_counted_and_their_missing_ids_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rollout = ROOT / CODEX_104
    code, card, err = _score(capsys, str(_events_for(rollout, tmp_path)), "--rollout", str(rollout))
    assert code == 0, err
    assert card["tool_counts"]["WebSearch"] == 7 and sum(card["tool_counts"].values()) == 372
    assert "7 web_search_call" in card["missing"]["call_ids"]
    assert card["occupancy"]["compactions"] == 1  # its one `compacted` record: the history before it left


def test_a_rollout_without_token_count_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = (ROOT / CODEX_104_SHORT).read_text().splitlines()
    stripped = tmp_path / (ROOT / CODEX_104_SHORT).name
    stripped.write_text("\n".join(line for line in lines if '"token_count"' not in line) + "\n")
    for given in ([str(_events_for(stripped, tmp_path)), "--rollout", str(stripped)], [str(stripped)]):
        code, card, err = _score(capsys, *given)
        assert code == 0, err
        assert "every request's usage is unknown (not 0)" in card["missing"]["usage"]
    assert main(["score", str(stripped), "--brief"]) == 0
    assert "not in this record (usage): Codex 0.104.0-alpha.1 wrote no token_count" in capsys.readouterr().out


def test_an_opencode_log_of_three_runs_is_three_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    code, cards, err = _score(capsys, str(ROOT / KUBERNETES))
    assert code == 0, err
    assert [sum(c["tool_counts"].values()) for c in cards] == [2, 12, 3]
    assert "subagents" in cards[1]["missing"]  # the task calls' child sessions are not in the stream
    assert main(["score", str(ROOT / KUBERNETES), "--brief"]) == 0
    assert "== session 2 of 3" in capsys.readouterr().out


def test_an_opencode_export_is_read_as_its_stream_is(capsys: pytest.CaptureFixture[str]) -> None:
    """tests/data/opencode/export: a two-turn session's streams, and ``opencode export`` of it from the database."""
    folder = DATA / "opencode" / "export"
    code, card, err = _score(capsys, str(folder / "export.json.gz"))
    assert code == 0, err
    _, stream_card, _ = _score(capsys, str(folder / "events.jsonl"))
    assert card["tool_counts"] == {"codegraph_codegraph_explore": 2, "Bash": 2}  # no config beside it names codegraph
    assert stream_card["tool_counts"] == {"mcp__codegraph__codegraph_explore": 2, "Bash": 2}
    assert card["occupancy"]["tokens_processed"] == stream_card["occupancy"]["tokens_processed"] > 0
    assert card["results"] == stream_card["results"] == 2
    _, [export] = read_given([folder / "export.json.gz"])
    _, [stream] = read_given([folder / "events.jsonl", folder / "events.t2.jsonl"])
    assert [(m.id, m.segment, m.usage) for m in export.messages()] == [
        (m.id, m.segment, m.usage) for m in stream.messages()
    ]
    assert [(c.id, c.result.text) for c in export.calls] == [(c.id, c.result.text) for c in stream.calls]
    assert export.answer_texts() == stream.answer_texts()


def test_zero_usage_is_said_not_scored_as_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, card, err = _score(capsys, str(ROOT / MEMEX))
    assert code == 0, err
    assert "unknown, not 0" in card["missing"]["usage"]


# -- rescore --------------------------------------------------------------------------------------------------------
def test_rescore_of_a_campaign_built_from_the_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = Campaign.create(tmp_path / "out", {"backend": "recorded"})
    for number, relpath in enumerate(sorted(COUNTS), start=1):
        agent = COUNTS[relpath][0]
        item_id = f"{agent}-with-{number}"
        target = campaign.item_dir(item_id) / Path(relpath).name
        shutil.copyfile(ROOT / relpath, target)
        segments = [str(target.relative_to(campaign.path))]
        campaign.record(ItemRecord(id=item_id, entry=Path(relpath).stem, arm="with", arm_label="with", run=number,
                                   outcome="passed", agent=agent, segments=segments))  # fmt: skip
    problems: list[str] = []
    records = rescore(campaign.path, problems=problems)
    assert all(r.outcome == "passed" for r in records), [(r.id, r.error) for r in records if r.outcome != "passed"]
    by_file: dict[str, int] = {}
    for record in records:
        name = Path(record.segments[0]).name
        by_file[name] = by_file.get(name, 0) + sum(record.scores["tool_counts"].values())
    assert by_file == {Path(p).name: sum(tools.values()) for p, (_, tools, _, _) in COUNTS.items()}
    assert len(records) == len(COUNTS) + 2  # the log of three runs is three records, <id>#1 … #3
    assert any("not in its record (usage)" in p for p in problems)
    assert main(["rescore", str(campaign.path)]) == 0
    capsys.readouterr()


def test_rescore_of_a_plain_folder_reads_each_file_as_its_agents(tmp_path: Path) -> None:
    shutil.copyfile(ROOT / CODEX_040, tmp_path / "run-with-1.jsonl")
    shutil.copyfile(ROOT / KUBERNETES, tmp_path / "run-with-2.jsonl")
    problems: list[str] = []
    records = rescore(tmp_path, problems=problems)
    assert [(r.id, r.agent, r.outcome) for r in records] == [
        ("run-with-1", "codex", "passed"),
        ("run-with-2#1", "opencode", "passed"),
        ("run-with-2#2", "opencode", "passed"),
        ("run-with-2#3", "opencode", "passed"),
    ]
    assert records[0].scores["tool_counts"] == {"Bash": 16}
    assert any(p.startswith("run-with-2#2: not in its record (subagents)") for p in problems)


def test_one_sessions_files_are_one_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    shutil.copyfile(ROOT / "codex/agentcmd__stream-output-2.jsonl", first)
    shutil.copyfile(ROOT / OUTPUT, second)
    assert main(["score", str(first), str(second)]) == 2
    assert "b.jsonl: OpenCode run --format json stream, while" in capsys.readouterr().err


def test_a_gemini_stream_with_its_one_object_chat_record_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = ROOT / "gemini/agentcmd__session-2025-10-29T10-36-453aa339.json"
    session_id = json.loads(record.read_text())["sessionId"]
    shutil.copyfile(record, tmp_path / "session-2025-10-29T10-36-453aa339.json")
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"type": "init", "session_id": session_id, "model": "gemini-2.5-pro"}) + "\n"
                      + json.dumps({"type": "result", "status": "success", "stats": {}}) + "\n")  # fmt: skip
    code, card, err = _score(capsys, str(events))
    assert code == 0, err
    assert card["tool_counts"] == {"Read": 2, "Edit": 1} and "missing" not in card
    with pytest.raises(SystemExit):  # --chat goes with a Gemini CLI record only
        main(["score", str(ROOT / CODEX_040), "--chat", str(record)])
    assert "--chat goes with Gemini CLI stream-json events FILEs" in capsys.readouterr().err
