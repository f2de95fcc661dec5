"""The contamination gate on synthetic and real transcripts, and the block it prints."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support.codegraph_outputs import EXPLORE, REAL, REAL_OUTPUTS, read_tool_view
from support.paths import DATA, REPO
from support.synth import Transcript, explore_response
from support.transcripts import transcripts

from pytest_agent_eval.agents.claude_code.transcript import read_lines, read_segments
from pytest_agent_eval.metrics.contamination import INJECTED, contamination, describe_leak, scan
from pytest_agent_eval.metrics.gates import contamination_verdict
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool, fingerprint
from pytest_agent_eval.tool.cli_matcher import invokes_cli

CCB = transcripts() / "ccb"
HDA = CCB / "linux-hda-intel-suspend-fault-001"
SOURCEGRAPH = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")


def test_exposed_tools_come_from_init_tools_and_servers():
    t = Transcript()
    t.init(
        tools=["Bash", "Read", "mcp__codegraph__codegraph_explore", "mcp__codegraph__codegraph_node", "mcp__x__y"],
        mcp_servers=[{"name": "codegraph", "status": "connected"}, {"name": "x", "status": "connected"}],
    )
    t.init(tools=["Bash", "mcp__codegraph__codegraph_explore"], mcp_servers=[{"name": "codegraph", "status": "failed"}])
    report = contamination(t.session(), tool=CODEGRAPH)
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
    assert contamination(t.session(), tool=CODEGRAPH).exposed_tools == [
        "mcp__cg__codegraph_explore",
        "server:cg (pending)",
    ]


def test_without_arm_exposes_nothing():
    t = Transcript()
    t.init()
    assert contamination(t.session(), tool=CODEGRAPH).to_dict()["exposed_tools"] == []


def test_cold_start_race():
    t = Transcript()
    t.init(tools=["mcp__codegraph__codegraph_explore"])
    early = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(
        early, "<tool_use_error>Error: No such tool available: mcp__codegraph__codegraph_explore</tool_use_error>", True
    )
    again = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(again, explore_response({"lib/router.js": "function route() {}"}))
    assert contamination(t.session(), tool=CODEGRAPH).cold_start_race is True

    clean = Transcript()
    call = clean.call("mcp__codegraph__codegraph_explore", query="router")
    clean.reply(call, explore_response({"lib/router.js": "function route() {}"}))
    assert contamination(clean.session(), tool=CODEGRAPH).cold_start_race is False


def test_a_call_claude_code_refused_for_want_of_the_tool_reached_nothing():
    refusal = "<tool_use_error>Error: No such tool available: mcp__codegraph__codegraph_explore</tool_use_error>"
    t = Transcript()
    t.init(tools=["Read", "Bash"])  # the without-arm: no codegraph tool, yet the model calls one
    tried = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(tried, refusal, True)
    t.say("lib/router.js routes.")
    report = contamination(t.session(), tool=CODEGRAPH)
    assert report.mcp_calls == [] and not report.contaminated
    assert contamination_verdict({"contamination": report.to_dict()}, arm_has_tool=False, tool=CODEGRAPH).passed
    # A call the server answered, even with an error of its own, did reach it.
    t = Transcript()
    t.init(tools=["Read", "Bash"])
    reached = t.call("mcp__codegraph__codegraph_explore", query="router")
    t.reply(reached, "Error: the index is being rebuilt", True)
    report = contamination(t.session(), tool=CODEGRAPH)
    assert report.mcp_calls == [reached]
    assert not contamination_verdict({"contamination": report.to_dict()}, arm_has_tool=False, tool=CODEGRAPH).passed


def test_a_cli_call_that_ran_unblocked_and_printed_is_not_cleared_though_no_fingerprint_survived():
    t = Transcript()
    t.init(tools=["Read", "Bash"])
    piped = t.call("Bash", command="codegraph explore 'res.send' | grep -o 'lib/[a-z/]*\\.js' | sort -u")
    t.reply(piped, "lib/response.js\nlib/utils.js\n")  # codegraph's answer, with none of its shape left
    sealed = t.call("Bash", command="codegraph status; true")
    t.reply(sealed, "bash: line 1: codegraph: command not found\n")  # a sealed arm: nothing ran
    t.say("lib/response.js")
    report = contamination(t.session(), tool=CODEGRAPH)
    assert report.leaks == [] and [c.call_id for c in report.printed] == [piped] and report.contaminated
    verdict = contamination_verdict(score_session(t.session(), tool=CODEGRAPH), arm_has_tool=False, tool=CODEGRAPH)
    assert not verdict.passed and "1 codegraph CLI call(s) ran unblocked and printed output" in verdict.message
    assert "  ran unblocked and printed          1   !! a without-arm with these is void" in render_contamination(
        report
    )


def test_a_without_arm_whose_transcript_has_an_unread_line_is_not_cleared():
    # A line the reader stepped over (torn, or over 64 MiB) may have carried the tool's output: fail safe.
    t = Transcript()
    t.init(tools=["Read", "Bash"])
    call = t.call("Bash", command="cat huge.log")
    t.reply(call, "ok")
    t.say("done")
    session = read_lines(
        [*t.lines()[:-1], '{"type": "user", "message": {"content": [{"type": "tool_res', t.lines()[-1]]
    )
    score = score_session(session, tool=CODEGRAPH)
    assert score["parse"]["bad_lines"] == 1 and not score["contamination"]["contaminated"]
    verdict = contamination_verdict(score, arm_has_tool=False, tool=CODEGRAPH)
    assert not verdict.passed
    assert verdict.message == (
        "without-arm contaminated: 1 transcript line(s) could not be read, so what they showed the agent is unknown"
    )
    assert contamination_verdict(score_session(t.session(), tool=CODEGRAPH), arm_has_tool=False, tool=CODEGRAPH).passed


@pytest.mark.parametrize(
    "output",
    [
        # what an agent's own scripts print, on express (the headings alone are codegraph's words)
        "Found 123 symbols across 11 files.\n  status  lib/response.js\n  send  lib/response.js\n",
        "Project Structure (11 files):\n./application.js\n./express.js\n./middleware/init.js\n",
        'Search Results for "send":\n\nlib/response.js:111:res.send = function send(body) {\n',
        'Callers of "send" (2):\n\n  lib/response.js:250 res.json\n  lib/response.js:369 res.sendStatus\n',
    ],
)
def test_a_heading_the_agents_own_script_prints_is_not_a_leak(output):
    t = Transcript()
    t.init(tools=["Bash"])
    call = t.call("Bash", command="python3 find_symbols.py lib")
    t.reply(call, output)
    assert contamination(t.session(), tool=CODEGRAPH).leaks == []


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
    report = contamination(t.session(), tool=CODEGRAPH).to_dict()
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
            "printed": False,
        },
        {
            "call_id": leaked,
            "tool": "Bash",
            "command": "ls .codegraph && codegraph explore routing",
            "blocked": False,
            "thread": task,
            "printed": True,
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
        session = read_segments([folder / "claude-code.txt"])
        report = contamination(session, tool=CODEGRAPH)
        assert (report.cli_calls, report.cli_blocked, report.leaks) == (0, 0, []), folder
        assert report.exposed_tools == [] and not report.cold_start_race and not report.contaminated


def test_ccb_sourcegraph_arm_exposes_its_server():
    mcp = contamination(read_segments([HDA / "mcp" / "claude-code.txt"]), SOURCEGRAPH)
    assert mcp.exposed_tools[-1] == "server:sourcegraph (connected)"
    assert len(mcp.exposed_tools) == 14  # 13 mcp__sourcegraph__sg_* tools + the server
    assert "mcp__sourcegraph__sg_keyword_search" in mcp.exposed_tools
    baseline = contamination(read_segments([HDA / "baseline" / "claude-code.txt"]), SOURCEGRAPH)
    assert baseline.exposed_tools == []


def test_real_bash_commands_are_classified_by_command_position():
    # The hda baseline arm ran git three times and `git log --grep=…` is not grep.
    session = read_segments([HDA / "baseline" / "claude-code.txt"])
    git = contamination(session, replace(CODEGRAPH, name="git", cli="git"))
    assert (git.cli_calls, git.cli_blocked) == (3, 0)
    grep = contamination(session, replace(CODEGRAPH, name="grep", cli="grep"))
    assert [c.command[:8] for c in grep.commands] == ["grep -n "]
    # `bash /tests/test.sh` failed: an error result proves no block (only the hook's own denial does).
    bash = contamination(session, replace(CODEGRAPH, name="test", cli="test.sh"))
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
    lines = render_contamination(contamination(t.session(), tool=CODEGRAPH)).splitlines()
    assert lines[0] == "Contamination (codegraph output the agent saw; codegraph CLI calls):"
    assert lines[1] == "  results carrying codegraph output   1   !! a without-arm with these is void"
    assert lines[2] == f'    Bash call {leaked} (thread main): explore heading — "**Exploration: x**"'
    assert lines[3:7] == [
        "  CLI calls (command matcher)        3",
        "  of those, denied by the hook       1",
        "  ran unblocked and printed          1   !! a without-arm with these is void",  # the leaked one
        "  exposed tools: mcp__codegraph__codegraph_explore, server:codegraph (connected)",
    ]
    assert lines[7].startswith("  cold-start race:")
    assert len(lines) == 8


def test_rendered_block_of_a_clean_arm():
    t = Transcript()
    t.init()
    text = render_contamination(contamination(t.session(), tool=CODEGRAPH))
    assert text.splitlines() == [
        "Contamination (codegraph output the agent saw; codegraph CLI calls):",
        "  results carrying codegraph output   0",
        "  CLI calls (command matcher)        0",
        "  of those, denied by the hook       0",
        "  exposed tools: none",
    ]


# -- detection per attack class (docs/metrics/contamination.md) ------------------------------------------------
SQLITE_ROWS = (REAL / "sqlite3-nodes.txt").read_text()
INSTALL = "/opt/cg/node_modules"

# (attack, the shell command, what the agent got back, does the command matcher see it, the fingerprint found)
ATTACKS = [
    ("quoted name", "code''graph explore res.send", EXPLORE, True, "explore heading"),
    ("glob", "c?degraph explore res.send", EXPLORE, True, "explore heading"),
    ("symlink", f"ln -s {INSTALL}/.bin/codegraph x; ./x explore res.send", EXPLORE, True, "explore heading"),
    ("cd + relative path", f"cd {INSTALL}/.bin && ./codegraph explore q", EXPLORE, True, "explore heading"),
    ("node on the shim", f"node {INSTALL}/@colbymchenry/codegraph/npm-shim.js query send", "", True, None),
    ("bundled runtime", f"{INSTALL}/@colbymchenry/codegraph-linux-x64/node x.js", "", True, None),
    ("perl subprocess", "perl -e 'system(\"codegraph explore q\")'", EXPLORE, True, "explore heading"),
    ("variables joined", "a=code; b=graph; $a$b status", (REAL / "status.txt").read_text(), True, "CLI status"),
    (
        "heading cut off by sed",
        "codegraph explore res.send | sed -n '40,90p'",
        "\n".join(EXPLORE.splitlines()[39:90]),
        True,
        "explore gap marker",
    ),
    (
        "call then false",
        "codegraph callers send; false",
        (REAL / "callers.txt").read_text(),
        True,
        "CLI callers heading",
    ),
    # Only the content detector can catch these: the name never appears whole in a command position.
    ("base64 piped to sh", "echo Y29kZWdyYXBoIGV4cGxvcmUgcQ== | base64 -d | sh", EXPLORE, False, "explore heading"),
    (
        "name split by expansion",
        "x=codegraphX; ${x%X} query send",
        (REAL / "query.txt").read_text(),
        False,
        "CLI query heading",
    ),
    (
        "python subprocess",
        "python3 -c \"import subprocess; subprocess.run(['code' + 'graph', 'node', 'send'])\"",
        (REAL / "node.txt").read_text(),
        False,
        "node location",
    ),
    (
        "sqlite3 rows of the index",
        "sqlite3 .codegraph/codegraph.db 'select * from nodes'",
        SQLITE_ROWS,
        False,
        "index row",
    ),
]


ATTACK_NAMES = [attack[0] for attack in ATTACKS]


@pytest.mark.parametrize(("attack", "command", "output", "matched", "fingerprint"), ATTACKS, ids=ATTACK_NAMES)
def test_each_attack_class_is_seen_by_the_matcher_or_the_content(attack, command, output, matched, fingerprint):
    t = Transcript()
    t.init()
    call = t.call("Bash", command=command)
    t.reply(call, output, is_error=attack == "call then false")
    t.result("done")
    report = contamination(t.session(), tool=CODEGRAPH)
    assert invokes_cli(command, cli=CODEGRAPH.cli) is matched
    assert [c.call_id for c in report.commands] == ([call] if matched else [])
    assert report.cli_blocked == 0  # no hook denial in any of them
    assert [(leak.call_id, leak.tool, leak.fingerprint) for leak in report.leaks] == (
        [(call, "Bash", fingerprint)] if output else []
    )
    assert report.contaminated is bool(output)


def test_a_task_subagent_leak_is_found_in_its_thread():
    t = Transcript()
    t.init()
    task = t.call("Task", prompt="find how res.send works, any way you can")
    inner = t.call("Bash", thread=task, command="echo Y29kZWdyYXBoIGV4cGxvcmUgcQ== | base64 -d | sh")
    t.reply(inner, EXPLORE, thread=task)
    t.reply(task, "res.send sets ETag in lib/response.js")  # the subagent's summary carries no fingerprint
    report = contamination(t.session(), tool=CODEGRAPH)
    assert [(leak.thread, leak.call_id, leak.tool) for leak in report.leaks] == [(task, inner, "Bash")]


def test_monitor_output_is_found_in_its_result_and_in_injected_events():
    t = Transcript()
    t.init()
    monitor = t.call("Monitor", command="tail -f /tmp/cg.log", description="watch")
    t.reply(monitor, (REAL / "files.txt").read_text())
    t.user("<task-notification>\n" + (REAL / "impact.txt").read_text() + "</task-notification>")
    report = contamination(t.session(), tool=CODEGRAPH)
    assert report.commands == []  # the command itself is innocent
    assert [(leak.call_id, leak.tool, leak.fingerprint) for leak in report.leaks] == [
        (monitor, "Monitor", "CLI files heading"),
        (None, INJECTED, "CLI impact heading"),
    ]


def test_monitor_running_the_cli_is_a_cli_call_too():
    t = Transcript()
    call = t.call("Monitor", command="codegraph status --watch")
    t.reply(call, CODEGRAPH.deny_reason, is_error=True)
    report = contamination(t.session(), tool=CODEGRAPH)
    assert [(c.call_id, c.tool, c.blocked) for c in report.commands] == [(call, "Monitor", True)]


@pytest.mark.parametrize("arrow", [False, True])
def test_read_of_a_file_the_agent_wrote_the_output_into(arrow):
    t = Transcript()
    t.init()
    write = t.call("Bash", command="codegraph explore res.send > /tmp/notes.md 2>&1")
    t.reply(write, "")  # redirected: the call itself showed nothing
    read = t.call("Read", file_path="/tmp/notes.md")
    t.reply(read, read_tool_view(EXPLORE, arrow))
    report = contamination(t.session(), tool=CODEGRAPH)
    assert [c.call_id for c in report.commands] == [write]
    assert [(leak.call_id, leak.tool, leak.fingerprint) for leak in report.leaks] == [(read, "Read", "explore heading")]
    assert report.leaks[0].excerpt == "1\t**Exploration: How does res.send decide the Content-Type and ETag**".replace(
        "\t", "\u2192" if arrow else "\t"
    )


def test_a_proven_hook_denial_is_blocked_and_no_leak():
    t = Transcript()
    call = t.call("Bash", command="c?degraph explore q")
    t.reply(call, "PreToolUse:Bash hook error: " + CODEGRAPH.deny_reason, is_error=True)
    report = contamination(t.session(), tool=CODEGRAPH)
    assert (report.cli_blocked, report.leaks, report.contaminated) == (1, [], False)


def test_a_denial_look_alike_with_output_is_still_a_leak():
    # The agent can print the hook's words itself; what decides is the output that came with them.
    t = Transcript()
    call = t.call("Bash", command=f"echo '{CODEGRAPH.deny_marker}'; code''graph explore q")
    t.reply(call, CODEGRAPH.deny_marker + "\n" + EXPLORE)
    report = contamination(t.session(), tool=CODEGRAPH)
    assert report.cli_blocked == 1 and [leak.call_id for leak in report.leaks] == [call] and report.contaminated


@pytest.mark.parametrize("name", sorted(REAL_OUTPUTS))
def test_every_real_output_carries_its_fingerprint_bare_and_through_read(name):
    text = (REAL / name).read_text()
    for seen in (text, read_tool_view(text)):
        hit = CODEGRAPH.first_fingerprint(seen)
        assert hit is not None and hit[0].name == REAL_OUTPUTS[name], name


def test_the_explore_fingerprints_all_fire_on_real_explore_output():
    names = {f.name for f in CODEGRAPH.fingerprints if f.search(EXPLORE)}
    assert names == {"explore heading", "explore symbol count", "explore file section", "explore gap marker"}


def test_fingerprints_stay_quiet_on_this_repository_read_or_grepped():
    # Source that talks about codegraph's output (this package, its tests, the README) is not the output.
    root = REPO
    files = [p for p in root.glob("**/*") if p.is_file() and p.suffix in (".py", ".md", ".json", ".yaml", ".toml")]
    files = [p for p in files if DATA not in p.parents and ".venv" not in p.parts and ".git" not in p.parts]
    assert len(files) > 40
    for path in files:
        text = path.read_text(errors="replace")
        assert CODEGRAPH.first_fingerprint(read_tool_view(text)) is None, path
        grepped = "\n".join(f"{path.name}:{n}:{line}" for n, line in enumerate(text.splitlines(), 1))
        assert CODEGRAPH.first_fingerprint(grepped) is None, path


def test_fingerprints_stay_quiet_on_every_shared_real_transcript():
    for path in sorted(CCB.parent.glob("**/*")):
        if path.is_file():
            assert CODEGRAPH.first_fingerprint(path.read_text(errors="replace")) is None, path


# -- the fingerprints against the real codegraph, live ------------------------------------------------------
LIVE_COMMANDS = {
    ("explore", "how does res.send set the ETag"): "explore heading",
    ("node", "send"): "node location",
    ("query", "send"): "CLI query heading",
    ("callers", "send"): "CLI callers heading",
    ("callees", "send"): "CLI callers heading",
    ("impact", "etag"): "CLI impact heading",
    ("files",): "CLI files heading",
    ("context", "how does send work"): "CLI context heading",
    ("status",): "CLI status",
    ("--help",): "CLI usage",
}


@pytest.mark.slow
def test_live_codegraph_output_carries_its_fingerprints_and_its_source_does_not(real_tools, tmp_path):
    repo = tmp_path / "express"
    shutil.copytree(real_tools.express, repo, symlinks=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1", "NO_COLOR": "1"}
    for args, name in LIVE_COMMANDS.items():
        done = subprocess.run(
            [str(real_tools.codegraph.bin), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (args, done.stderr)
        hit = CODEGRAPH.first_fingerprint(done.stdout)
        assert hit is not None and hit[0].name == name, (args, done.stdout[:300])
    if shutil.which("sqlite3"):
        rows = subprocess.run(
            ["sqlite3", str(repo / ".codegraph" / "codegraph.db"), "select * from nodes limit 3"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert CODEGRAPH.first_fingerprint(rows)[0].name == "index row"
    # The package's own source and docs name every heading inside string literals: Read or grep, never a leak.
    package = Path(real_tools.codegraph.bin).resolve().parent
    while package.name != "codegraph" and package != package.parent:
        package = package.parent
    sources = [p for p in package.parent.glob("codegraph*/**/*") if p.is_file() and p.suffix in (".js", ".md", ".ts")]
    assert len(sources) > 100
    for path in sources:
        text = path.read_text(errors="replace")
        assert CODEGRAPH.first_fingerprint(read_tool_view(text)) is None, path
        grepped = "\n".join(f"{path.name}:{n}:{line}" for n, line in enumerate(text.splitlines(), 1))
        assert CODEGRAPH.first_fingerprint(grepped) is None, path
    # Nor is express's own source, read through the Read tool.
    for path in repo.glob("lib/**/*.js"):
        assert CODEGRAPH.first_fingerprint(read_tool_view(path.read_text())) is None, path


@pytest.mark.parametrize("around", ["", "héllo wörld ✓\n", "\ud800 a lone surrogate\n", "🙂" * 40 + "\n"])
def test_the_literal_screen_reads_any_text_the_transcript_can_hold(around):
    """The screen searches UTF-8 bytes: non-ASCII text, astral characters and a lone surrogate (JSON allows one)
    neither hide a fingerprint nor raise."""
    heading = "**Exploration: how does send work**\n"
    hit = CODEGRAPH.first_fingerprint(around + heading + around)
    assert hit is not None and hit[0].name == "explore heading"
    assert CODEGRAPH.first_fingerprint(around + "Exploration: prose about it\n") is None


def _unscreened(tool: RetrievalTool, text: str) -> tuple[str, int] | None:
    """The first fingerprint as a search of every full pattern finds it, with no screen before it."""
    for fp in tool.fingerprints:
        match = fp.pattern.search(text)
        if match:
            return fp.name, match.start()
    return None


@pytest.mark.parametrize("around", ["", "héllo wörld ✓ 12:30 |1|\n", "\ud800 a lone surrogate\n", "🙂" * 40 + "\n"])
@pytest.mark.parametrize("name", ["sqlite3-nodes.txt", "sqlite3-nodes.json", "sqlite3-node-columns.txt"])
def test_a_probed_fingerprint_is_found_in_any_text_around_it(name, around):
    """The index rows have no literal of their own: their probes are tried where a lead (``:`` and a hex digit,
    ``|`` and a digit) occurs, or over the whole text where it is not ASCII; the screen finds what a search of
    every pattern finds, at the same place."""
    row = (REAL / name).read_text()
    for text in (around + row + around, around * 3 + read_tool_view(row), ":a |1 " + around + row):
        hit = CODEGRAPH.first_fingerprint(text)
        assert hit is not None and (hit[0].name, hit[1].start()) == _unscreened(CODEGRAPH, text), (name, around)


def test_the_screen_finds_what_every_pattern_finds_on_real_results():
    """On every tool result and injected message of the real transcripts (codegraph's own sessions among them),
    screened and unscreened searches agree; and on each real output of codegraph."""
    roots = [transcripts(), Path(__file__).parents[1] / "bench" / "data" / "transcripts"]
    files = [p for root in roots for p in sorted(root.rglob("*.jsonl"))]
    texts = [item.text for f in files for item in read_segments([f]).timeline if hasattr(item, "text")]
    texts += [(REAL / name).read_text() for name in REAL_OUTPUTS]
    assert len(texts) > 300
    for text in texts:
        hit = CODEGRAPH.first_fingerprint(text)
        assert (None if hit is None else (hit[0].name, hit[1].start())) == _unscreened(CODEGRAPH, text)


def test_a_lead_overlapped_by_another_is_still_tried():
    """Leads are searched with their overlaps: ``ab`` before ``bc`` in ``abc?`` must not hide ``bc``."""
    tool = replace(
        CODEGRAPH,
        name="overlap",
        package="overlap",
        fingerprints=(
            fingerprint("first", r"ab!", "ab", probe=r"ab!"),
            fingerprint("second", r"bc\?", "bc", probe=r"bc\?"),
        ),
    )
    hit = tool.first_fingerprint("xabc?")
    assert hit is not None and hit[0].name == "second"
    assert tool.first_fingerprint("xabc") is None


def test_a_fingerprint_needs_its_literals():
    with pytest.raises(ValueError, match="fingerprint 'bare'"):
        fingerprint("bare", r"[0-9a-f]{32}", probe=r"[0-9a-f]{32}")


def test_the_worked_example_of_the_docs_page():
    """docs/metrics/contamination.md, "A worked example"."""
    t = Transcript()
    t.init(tools=["Bash", "Read"])
    denied = t.call("Bash", command="codegraph explore 'res.send'")
    t.reply(denied, "PreToolUse:Bash hook error: " + CODEGRAPH.deny_reason, is_error=True)
    missing = t.call("Bash", command="codegraph status; true")
    t.reply(missing, "bash: line 1: codegraph: command not found\n")
    clean = score_session(t.session(), tool=CODEGRAPH)
    assert (clean["contamination"]["cli_calls"], clean["contamination"]["cli_blocked"]) == (2, 1)
    assert contamination_verdict(clean, arm_has_tool=False, tool=CODEGRAPH).passed
    hidden = t.call("Bash", command="python3 -c \"import subprocess; subprocess.run(['code' + 'graph', 'explore'])\"")
    t.reply(hidden, explore_response({"lib/response.js": "function send() {}\n"}))
    report = contamination(t.session(), tool=CODEGRAPH)
    assert [(c.call_id, c.blocked, c.printed) for c in report.commands] == [
        (denied, True, False),
        (missing, False, False),
    ]
    assert [(leak.call_id, leak.fingerprint) for leak in report.leaks] == [(hidden, "explore heading")]
    verdict = contamination_verdict(score_session(t.session(), tool=CODEGRAPH), arm_has_tool=False, tool=CODEGRAPH)
    assert not verdict.passed and hidden in verdict.message and "explore heading" in verdict.message


# -- edge inputs each rule must hold on (python bench/mutation.py metrics/contamination.py) -------------------------
TINYGREP = RetrievalTool(
    name="tinygrep", explore="tg_search", cli="tinygrep", package="tinygrep", version="0.1.0",
    index_args=("index",), serve_args=("serve",), state_dirs=(".tinygrep",),
    fingerprints=(fingerprint("tinygrep banner", r"=== tinygrep hits ===", "=== tinygrep"),),
)  # fmt: skip


def test_a_leak_after_the_arms_own_mcp_result_is_still_found():
    """The tool's own result is stepped over, not the end of the scan."""
    t = Transcript()
    t.reply(t.call("mcp__codegraph__codegraph_explore", query="q"), EXPLORE)
    bash = t.call("Bash", command="cat /tmp/notes.md")
    t.reply(bash, EXPLORE)
    assert [(leak.call_id, leak.tool) for leak in contamination(t.session(), tool=CODEGRAPH).leaks] == [(bash, "Bash")]


def test_a_tool_is_judged_by_its_own_fingerprints():
    t = Transcript()
    mine = t.call("Bash", command="cat a")
    t.reply(mine, "=== tinygrep hits ===\nsrc/a.py:1")
    other = t.call("Bash", command="cat b")
    t.reply(other, EXPLORE)  # codegraph's output is no leak of tinygrep's
    t.user("=== tinygrep hits === (from a monitor)")
    report = contamination(t.session(), TINYGREP)
    assert [(leak.call_id, leak.tool, leak.fingerprint) for leak in report.leaks] == [
        (mine, "Bash", "tinygrep banner"),
        (None, INJECTED, "tinygrep banner"),
    ]
    assert report.cli == "tinygrep"


BANNER = "=== tinygrep hits ==="


@pytest.mark.parametrize(
    ("text", "excerpt"),
    [
        (BANNER + "x" * 139, BANNER + "x" * 139),  # 160 characters: whole
        (BANNER + "x" * 140, BANNER + "x" * 138 + "…"),  # 161: cut to 160 with the ellipsis
        ("before\n  " + BANNER + " hit  \nafter", BANNER + " hit"),  # its own line, trimmed
        ("a\nb\n" + BANNER, BANNER),  # the last line, no line break after it
    ],
)
def test_a_leaks_excerpt_is_its_line_trimmed_and_shortened(text, excerpt):
    fingerprint_, found = scan(text, TINYGREP)
    assert (fingerprint_.name, found) == ("tinygrep banner", excerpt)


def test_malformed_offers_are_passed_over():
    """An init event whose tools or servers are not lists, a server that is not an object or has no name: skipped,
    and a server without a status is ``unknown``."""
    t = Transcript()
    t.events.append({"type": "system", "subtype": "init", "session_id": "s", "tools": "codegraph", "mcp_servers": 5})
    t.init(
        tools=["Bash", 7, "mcp__codegraph__codegraph_explore"],
        mcp_servers=["codegraph", {"status": "connected"}, {"name": 3}, {"name": "codegraph"}],
    )
    assert contamination(t.session(), tool=CODEGRAPH).exposed_tools == [
        "mcp__codegraph__codegraph_explore",
        "server:codegraph (unknown)",
    ]


def test_each_init_after_a_different_one_offers_its_own_tools():
    t = Transcript()
    t.init(tools=["mcp__codegraph__codegraph_explore"])
    t.init(tools=["mcp__codegraph__codegraph_explore"])  # a resumed segment repeats the list
    t.init(tools=["Bash", "mcp__codegraph__codegraph_node"])
    assert contamination(t.session(), tool=CODEGRAPH).exposed_tools == [
        "mcp__codegraph__codegraph_explore",
        "mcp__codegraph__codegraph_node",
    ]


def test_describe_leak_words_a_call_and_an_injected_message():
    leak = {"thread": "main", "call_id": "toolu_01", "tool": "Bash", "fingerprint": "explore heading", "excerpt": "**E"}
    assert describe_leak(leak) == 'Bash call toolu_01 (thread main): explore heading — "**E"'
    assert describe_leak({"call_id": None}) == 'an injected message (thread ?): ? — ""'
    assert describe_leak({"call_id": "c"}) == '? call c (thread ?): ? — ""'


def test_a_result_whose_call_the_transcript_lacks_is_still_scanned():
    """An orphan result (its call cut off the transcript) may carry the tool's output: a leak, of tool ``?``."""
    t = Transcript()
    t.reply("toolu_orphan", EXPLORE)
    [leak] = contamination(t.session(), tool=CODEGRAPH).leaks
    assert (leak.call_id, leak.tool, leak.fingerprint) == ("toolu_orphan", "?", "explore heading")


def test_an_injected_leak_keeps_its_thread_and_line():
    t = Transcript()
    task = t.call("Task", prompt="watch")
    t.say("starting", thread=task)
    t.events.append(
        {
            "type": "user",
            "parent_tool_use_id": task,
            "message": {"role": "user", "content": "<task-notification>\n" + BANNER + " found\n</task-notification>"},
        }
    )
    [leak] = contamination(t.session(), TINYGREP).leaks
    assert leak.to_dict() == {
        "thread": task,
        "call_id": None,
        "tool": INJECTED,
        "fingerprint": "tinygrep banner",
        "excerpt": BANNER + " found",
    }


def test_the_report_dict_names_the_cli_and_the_cold_start():
    data = contamination(Transcript().session(), tool=CODEGRAPH).to_dict()
    assert (data["cli"], data["cold_start_race"], data["contaminated"]) == ("codegraph", False, False)
