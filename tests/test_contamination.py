"""The contamination gate on synthetic and real transcripts, and the block it prints."""

from __future__ import annotations

from pathlib import Path

from synth import Transcript, explore_response

from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool
from pytest_agent_eval.transcript import Session

CCB = Path("/work/shared/transcripts/ccb")
HDA = CCB / "linux-hda-intel-suspend-fault-001"
SOURCEGRAPH = RetrievalTool(name="sourcegraph", explore="sg_keyword_search", cli="src")


def test_exposed_tools_come_from_init_tools_and_servers():
    t = Transcript()
    t.init(
        tools=["Bash", "Read", "mcp__codegraph__codegraph_explore", "mcp__codegraph__codegraph_node", "mcp__x__y"],
        mcp_servers=[{"name": "codegraph", "status": "connected"}, {"name": "x", "status": "connected"}],
    )
    t.init(tools=["Bash", "mcp__codegraph__codegraph_explore"], mcp_servers=[{"name": "codegraph", "status": "failed"}])
    report = contamination(t.session())
    assert report.exposed_tools == [
        "mcp__codegraph__codegraph_explore",
        "mcp__codegraph__codegraph_node",
        "server:codegraph (connected)",
        "server:codegraph (failed)",
    ]
    assert report.cli_calls == 0 and not report.contaminated


def test_a_server_under_another_name_counts_through_its_tools():
    t = Transcript()
    t.init(tools=["mcp__cg__codegraph_explore"], mcp_servers=[{"name": "cg", "status": "pending"}, {"name": "other"}])
    assert contamination(t.session()).exposed_tools == ["mcp__cg__codegraph_explore", "server:cg (pending)"]


def test_without_arm_exposes_nothing():
    t = Transcript()
    t.init()
    assert contamination(t.session()).to_dict()["exposed_tools"] == []


def test_cold_start_race():
    t = Transcript()
    t.init(tools=["mcp__codegraph__codegraph_explore"])
    early = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(
        early, "<tool_use_error>Error: No such tool available: mcp__codegraph__codegraph_explore</tool_use_error>", True
    )
    again = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(again, explore_response({"lib/router.js": "function route() {}"}))
    assert contamination(t.session()).cold_start_race is True

    clean = Transcript()
    call = clean.call("mcp__codegraph__codegraph_explore", query="router")
    clean.reply(call, explore_response({"lib/router.js": "function route() {}"}))
    assert contamination(clean.session()).cold_start_race is False


def test_counts_across_threads_and_keeps_the_thread():
    t = Transcript()
    t.init()
    blocked = t.call("Bash", command="/usr/local/bin/codegraph explore routing")
    t.reply(blocked, "PreToolUse:Bash hook denied this tool: " + CODEGRAPH.deny_reason, is_error=True)
    task = t.call("Task", prompt="look around")
    leaked = t.call("Bash", thread=task, command="ls .codegraph && codegraph explore routing")
    t.reply(leaked, explore_response({"lib/router.js": "x"}), thread=task)
    mention = t.call("Bash", command="grep -rn codegraph docs/")
    t.reply(mention, "docs/a.md: codegraph")
    report = contamination(t.session()).to_dict()
    assert report["cli_calls"] == 2
    assert report["cli_blocked"] == 1
    assert report["contaminated"] is True
    assert report["commands"] == [
        {
            "call_id": blocked,
            "tool": "Bash",
            "command": "/usr/local/bin/codegraph explore routing",
            "blocked": True,
            "thread": "main",
        },
        {
            "call_id": leaked,
            "tool": "Bash",
            "command": "ls .codegraph && codegraph explore routing",
            "blocked": False,
            "thread": task,
        },
    ]
    assert report["leaks"] == [
        {
            "thread": task,
            "call_id": leaked,
            "tool": "Bash",
            "fingerprint": "explore heading",
            "excerpt": "**Exploration: synthetic**",
        }
    ]


def test_ccb_transcripts_never_touch_codegraph():
    for folder in sorted(CCB.glob("*/*")):
        session = Session.from_files([folder / "claude-code.txt"])
        report = contamination(session)
        assert (report.cli_calls, report.cli_blocked, report.leaks) == (0, 0, []), folder
        assert report.exposed_tools == [] and not report.cold_start_race and not report.contaminated


def test_ccb_sourcegraph_arm_exposes_its_server():
    mcp = contamination(Session.from_files([HDA / "mcp" / "claude-code.txt"]), SOURCEGRAPH)
    assert mcp.exposed_tools[-1] == "server:sourcegraph (connected)"
    assert len(mcp.exposed_tools) == 14  # 13 mcp__sourcegraph__sg_* tools + the server
    assert "mcp__sourcegraph__sg_keyword_search" in mcp.exposed_tools
    baseline = contamination(Session.from_files([HDA / "baseline" / "claude-code.txt"]), SOURCEGRAPH)
    assert baseline.exposed_tools == []


def test_real_bash_commands_are_classified_by_command_position():
    # The hda baseline arm ran git three times and `git log --grep=…` is not grep.
    session = Session.from_files([HDA / "baseline" / "claude-code.txt"])
    git = contamination(session, RetrievalTool(name="git", cli="git"))
    assert (git.cli_calls, git.cli_blocked) == (3, 0)
    grep = contamination(session, RetrievalTool(name="grep", cli="grep"))
    assert [c.command[:8] for c in grep.commands] == ["grep -n "]
    # `bash /tests/test.sh` failed: an error result proves no block (only the hook's own denial does).
    bash = contamination(session, RetrievalTool(name="test", cli="test.sh"))
    assert (bash.cli_calls, bash.cli_blocked) == (1, 0)
    assert bash.commands[0].call_id in {c.id for c in session.calls if c.result and c.result.is_error}


def test_rendered_block():
    t = Transcript()
    t.init(
        tools=["Bash", "mcp__codegraph__codegraph_explore"], mcp_servers=[{"name": "codegraph", "status": "connected"}]
    )
    denied = t.call("Bash", command="codegraph explore x")
    t.reply(denied, CODEGRAPH.deny_reason, is_error=True)
    failed = t.call("Bash", command="codegraph explore x")
    t.reply(failed, "bash: codegraph: command not found", is_error=True)
    leaked = t.call("Bash", command="codegraph explore x")
    t.reply(leaked, "**Exploration: x**", is_error=False)
    race = t.call("mcp__codegraph__codegraph_explore", query="x")
    t.reply(race, "No such tool available: mcp__codegraph__codegraph_explore", is_error=True)
    lines = render_contamination(contamination(t.session())).splitlines()
    assert lines[0] == "Contamination (codegraph output the agent saw; codegraph CLI calls):"
    assert lines[1] == "  results carrying codegraph output   1   !! a without-arm with these is void"
    assert lines[2] == f'    Bash call {leaked} (thread main): explore heading — "**Exploration: x**"'
    assert lines[3:6] == [
        "  CLI calls (command matcher)        3",
        "  of those, denied by the hook       1",
        "  exposed tools: mcp__codegraph__codegraph_explore, server:codegraph (connected)",
    ]
    assert lines[6].startswith("  cold-start race:")
    assert len(lines) == 7


def test_rendered_block_of_a_clean_arm():
    t = Transcript()
    t.init()
    text = render_contamination(contamination(t.session()))
    assert text.splitlines() == [
        "Contamination (codegraph output the agent saw; codegraph CLI calls):",
        "  results carrying codegraph output   0",
        "  CLI calls (command matcher)        0",
        "  of those, denied by the hook       0",
        "  exposed tools: none",
    ]
