"""The contamination gate on synthetic and real transcripts, and the block it prints."""

from __future__ import annotations

from synth import Transcript, explore_response
from transcripts import transcripts

from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import Session

CCB = transcripts() / "ccb"
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
    t.reply(blocked, "Hook PreToolUse:Bash denied this tool", is_error=True)
    task = t.call("Task", prompt="look around")
    leaked = t.call("Bash", thread=task, command="ls .codegraph && codegraph explore routing")
    t.reply(leaked, explore_response({"lib/router.js": "x"}), thread=task)
    mention = t.call("Bash", command="grep -rn codegraph docs/")
    t.reply(mention, "docs/a.md: codegraph")
    report = contamination(t.session()).to_dict()
    assert report["cli_calls"] == 2
    assert report["cli_blocked"] == 1
    assert report["cli_returned_output"] == 1
    assert report["contaminated"] is True
    assert report["commands"] == [
        {"command": "/usr/local/bin/codegraph explore routing", "blocked": True, "thread": "main"},
        {"command": "ls .codegraph && codegraph explore routing", "blocked": False, "thread": task},
    ]


def test_ccb_transcripts_never_touch_codegraph():
    for folder in sorted(CCB.glob("*/*")):
        session = Session.from_files([folder / "claude-code.txt"])
        report = contamination(session)
        assert (report.cli_calls, report.cli_blocked, report.cli_returned_output) == (0, 0, 0), folder
        assert report.exposed_tools == [] and not report.cold_start_race and not report.contaminated


def test_ccb_sourcegraph_arm_exposes_its_server():
    mcp = contamination(Session.from_files([HDA / "mcp" / "claude-code.txt"]), SOURCEGRAPH)
    assert mcp.exposed_tools[-1] == "server:sourcegraph (connected)"
    assert len(mcp.exposed_tools) == 14  # 13 mcp__sourcegraph__sg_* tools + the server
    assert "mcp__sourcegraph__sg_keyword_search" in mcp.exposed_tools
    baseline = contamination(Session.from_files([HDA / "baseline" / "claude-code.txt"]), SOURCEGRAPH)
    assert baseline.exposed_tools == []


def test_real_bash_commands_are_classified_by_command_position():
    # The hda baseline arm ran git three times (one result empty) and `git log --grep=…` is not grep.
    session = Session.from_files([HDA / "baseline" / "claude-code.txt"])
    git = contamination(session, RetrievalTool(name="git", cli="git"))
    assert (git.cli_calls, git.cli_blocked, git.cli_returned_output) == (3, 0, 2)
    grep = contamination(session, RetrievalTool(name="grep", cli="grep"))
    assert [c.command[:8] for c in grep.commands] == ["grep -n "]
    # `bash /tests/test.sh` failed: an error result is a blocked attempt, not output.
    bash = contamination(session, RetrievalTool(name="test", cli="test.sh"))
    assert (bash.cli_calls, bash.cli_blocked, bash.cli_returned_output) == (1, 1, 0)


def test_rendered_block():
    t = Transcript()
    t.init(
        tools=["Bash", "mcp__codegraph__codegraph_explore"], mcp_servers=[{"name": "codegraph", "status": "connected"}]
    )
    for status in (True, True, False):
        call = t.call("Bash", command="codegraph explore x")
        t.reply(call, "bash: codegraph: command not found" if status else "**Exploration: x**", is_error=status)
    race = t.call("mcp__codegraph__codegraph_explore", query="x")
    t.reply(race, "No such tool available: mcp__codegraph__codegraph_explore", is_error=True)
    text = render_contamination(contamination(t.session()))
    lines = text.splitlines()
    assert lines[0] == "Contamination (codegraph CLI through Bash):"
    assert lines[1].startswith("  CLI calls that RETURNED output    1")
    assert "numbers are void" in lines[1]
    assert lines[2] == "  CLI attempts blocked              2"
    assert lines[3] == "  exposed tools: mcp__codegraph__codegraph_explore, server:codegraph (connected)"
    assert lines[4].startswith("  cold-start race:")
    assert len(lines) == 5


def test_rendered_block_of_a_clean_arm():
    t = Transcript()
    t.init()
    text = render_contamination(contamination(t.session()))
    assert text.splitlines() == [
        "Contamination (codegraph CLI through Bash):",
        "  CLI calls that RETURNED output    0",
        "  CLI attempts blocked              0",
        "  exposed tools: none",
    ]
