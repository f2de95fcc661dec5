"""The interactive driver: the REAL Claude Code TUI in a private tmux server, offline against the stand-in model.

The end-to-end tests run ``run_tmux`` in a temp copy of express 4.21.2 with an isolated HOME/TMPDIR and score
the session file it copies out. ``run_tmux`` kills its tmux server and every process under the pane; each
test checks that nothing of its run is left. They skip only when tmux or the claude binary is missing (and
the express source or codegraph, as tests/test_claude_cli.py does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.e2e import RealTools
from support.synth import Transcript, explore_response, tool_use

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.deny import write_hook_settings
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions
from pytest_agent_eval.agents.claude_code.tmux import (
    SessionLine,
    SessionTail,
    TmuxOptions,
    TmuxRunRecord,
    TurnWatch,
    _Driver,
    _Tmux,
    build_command,
    conversation,
    copy_session,
    dialog_choice,
    escape_cwd,
    find_session_source,
    input_text,
    mcp_server_names,
    mcp_states,
    run_tmux,
)
from pytest_agent_eval.agents.claude_code.transcript import read_session_file
from pytest_agent_eval.harness.drivers import AgentInfraError, TurnError
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model import Faults, RunningServer, serve
from pytest_agent_eval.report.blocks import render_scorecard, verdict_lines
from pytest_agent_eval.run.backends import make_backend
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Session, UserText

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How does res.send decide the Content-Type and ETag?"
SECOND = "Where is the router's next() function that walks the middleware stack?"
TURN_TIMEOUT = 180.0
RULE = "─" * 80


TMUX = shutil.which("tmux")

needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux not found (CI: apt-get install -y tmux)")
slow = pytest.mark.slow  # a real tmux server

# -- screens as this CLI (2.1.332) draws them in a 230×60 pane, rules shortened --------------------------------
TRUST = f"""
{RULE}
 Accessing workspace:

 /tmp/x/express

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source \
project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
"""
API_KEY = f"""
{RULE}
  Detected a custom API key in your environment

  ANTHROPIC_API_KEY: sk-ant-...sk-stand-in

  Do you want to use this API key?

    Yes
  ❯ No (recommended)

  Enter to confirm · Esc to cancel
"""
BYPASS = f"""
{RULE}
  WARNING: Claude Code running in Bypass Permissions mode

  In Bypass Permissions mode, Claude Code will not ask for your approval before running potentially dangerous commands.

  By proceeding, you accept all responsibility for actions taken while running in Bypass Permissions mode.

  https://code.claude.com/docs/en/security

  ❯ No, exit
    Yes, I accept

  Enter to confirm · Esc to cancel
"""
DONE = f"""
 ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Sonnet 5.5 with high effort · API Usage Billing
 ▝▝   ▝▝   /tmp/x/express

❯ {QUESTION}

  Searched for 1 pattern, read 2 files, ran 1 shell command · 1 failed

● Answer to: {QUESTION}

✻ Churned for 0s · done 10:01 PM

{RULE}
❯\u00a0
{RULE}
  ⏵⏵ bypass permissions on (shift+tab to cycle)
"""


# -- reading screens -----------------------------------------------------------------------------------------
def test_input_text_reads_only_the_box_under_a_rule() -> None:
    assert input_text(DONE) == ""  # the history's "❯ question" line is not the box
    typed = DONE.replace("❯\u00a0\n", f"❯\u00a0{SECOND}\n")
    assert input_text(typed) == SECOND
    menu = DONE.replace(f"\n{RULE}\n❯\u00a0", f"\n  ❯ /exit     Exit the CLI\n{RULE}\n❯\u00a0/exit")
    assert input_text(menu) == "/exit"  # the completion menu's cursor is not the box either
    boxed = f"╭{RULE}╮\n│ > hello                 │\n╰{RULE}╯"  # the older bordered box
    assert input_text(boxed) == "hello"
    for dialog in (TRUST, API_KEY, BYPASS):
        assert input_text(dialog) is None


def test_conversation_leaves_out_the_status_line_and_trailing_blanks() -> None:
    later = DONE.replace("\n\n" + RULE, "\n" + " " * 200 + "● high · /effort\n" + RULE, 1).replace(
        "(shift+tab to cycle)", "(shift+tab to cycle) · ← for agents"
    )
    assert later != DONE and conversation(later) == conversation(DONE)
    assert conversation(DONE).endswith(f"{RULE}\n❯\n{RULE}")
    assert conversation(DONE.replace("Churned", "Baked")) != conversation(DONE)
    assert conversation(TRUST) == "\n".join(line.rstrip() for line in TRUST.splitlines())  # no box: all of it


def test_dialog_choice_moves_the_cursor_to_the_yes_option() -> None:
    assert dialog_choice(TRUST) == ("Accessing workspace:", "Yes, I trust this folder", 1)
    assert dialog_choice(API_KEY) == ("Detected a custom API key in your environment", "Yes", -1)
    assert dialog_choice(BYPASS) == ("WARNING: Claude Code running in Bypass Permissions mode", "Yes, I accept", 1)
    on_yes = TRUST.replace(" ❯ No, exit\n   Yes", "   No, exit\n ❯ Yes")
    assert dialog_choice(on_yes) == ("Accessing workspace:", "Yes, I trust this folder", 0)
    numbered = TRUST.replace(" ❯ No, exit\n   Yes", " ❯ 1. No, exit\n   2. Yes")
    assert dialog_choice(numbered) == ("Accessing workspace:", "Yes, I trust this folder", 1)
    assert dialog_choice(DONE) is None
    with pytest.raises(AgentInfraError, match="cannot answer"):
        dialog_choice(BYPASS.replace("Yes, I accept", "Maybe later"))


def _mcp_panel(row: str) -> str:
    return f"""
{"▔" * 80}
  MCP servers
  1 server

    Other MCPs
  ❯ {row}

  Learn more: https://code.claude.com/docs/en/mcp

  Enter to view · Esc to close
"""


def test_mcp_states_read_the_mcp_panel(tmp_path: Path) -> None:
    assert mcp_states(_mcp_panel("… codegraph"), ["codegraph"]) == {"codegraph": "pending"}
    assert mcp_states(_mcp_panel("✔ codegraph   1 tool"), ["codegraph"]) == {"codegraph": "connected"}
    assert mcp_states(_mcp_panel("✘ codegraph"), ["codegraph", "other"]) == {"codegraph": "failed", "other": "pending"}
    assert mcp_states(_mcp_panel("✔ codegraph-old   1 tool"), ["codegraph"]) == {"codegraph": "pending"}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"codegraph": {"command": "x"}, "b": {}}}))
    assert mcp_server_names(config) == ["codegraph", "b"]
    config.write_text(json.dumps({"mcpServers": {}}))
    assert mcp_server_names(config) == []
    assert mcp_server_names(tmp_path / "missing.json") == []


def test_escape_cwd_replaces_every_non_alphanumeric_character() -> None:
    assert escape_cwd("/tmp/pytest-of-root/pytest-3/test_a0/express") == "-tmp-pytest-of-root-pytest-3-test-a0-express"
    assert escape_cwd(Path("/home/me/my.repo v2")) == "-home-me-my-repo-v2"


def test_the_command_is_headless_less_the_print_only_flags() -> None:
    headless = HeadlessOptions(claude="/bin/claude", mcp_config=Path("/m.json"), settings=Path("/s.json"), effort="max")
    options = TmuxOptions(run=headless, poll_s=0.25)
    settings = (options.run.effort, options.poll_s, options.width, options.height, options.stable_polls)
    assert settings == ("max", 0.25, 230, 60, 16)
    assert build_command(options, "11111111-2222-3333-4444-555555555555") == [
        "/bin/claude", "--permission-mode", "bypassPermissions", "--model", "sonnet", "--effort", "max",
        "--setting-sources", "", "--strict-mcp-config", "--mcp-config", "/m.json", "--settings", "/s.json",
        "--disallowedTools", "WebSearch,WebFetch", "--allowedTools", "Grep,Glob,TodoWrite",
        "--session-id", "11111111-2222-3333-4444-555555555555",
    ]  # fmt: skip


# -- the verdict -----------------------------------------------------------------------------------------------
def test_verdict_lines_count_every_thread_and_each_request_once() -> None:
    t = Transcript()
    e = t.call("mcp__codegraph__codegraph_explore", ctx=20_000, query="res.send")
    t.reply(e, explore_response({"lib/response.js": "res.send = function send(body) {}"}))
    reads = t.calls(tool_use("Read", file_path="/r/a.js"), tool_use("Read", file_path="/r/b.js"), ctx=21_000)
    for call_id in reads:
        t.reply(call_id, "1\tx")
    agent = t.call("Agent", ctx=22_000, prompt="look")
    grep = t.call("Grep", ctx=5_000, thread=agent, pattern="send")
    t.reply(grep, "Found 1 file\nlib/response.js", thread=agent)
    t.reply(agent, "found it")
    t.say("`lib/response.js` does it", ctx=23_000)
    verdict, tokens = verdict_lines(t.session(), tool=CODEGRAPH).splitlines()
    assert verdict == "VERDICT: codegraph_explore used 1x | Read 2 | Grep/Bash 1"
    # 5 requests (the two-Read message once): input 3 each, output 2 each, cache creation 100 each,
    # cache read ctx - 103 each: 19,897 + 20,897 + 21,897 + 4,897 + 22,897
    assert tokens == "TOKENS: in 15 | out 10 | cache read 90,485 | cache write 500 | 5 requests"


# -- the session file ------------------------------------------------------------------------------------------
def _event(kind: str, session_id: str, **fields: object) -> str:
    return json.dumps({"type": kind, "sessionId": session_id, **fields})


def _session_files(folder: Path, session_id: str, nested: bool) -> Path:
    """A session file whose Task call spawned agent ``a1``, and the agent's file in either layout."""
    project = folder / "projects" / escape_cwd("/r/x")
    project.mkdir(parents=True)
    call = {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "find"}}
    main = [
        _event("user", session_id, message={"role": "user", "content": "q"}),
        _event("assistant", session_id, message={"id": "m1", "role": "assistant", "content": [call]}),
        _event("user", session_id, message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_task", "content": "done"}]}, toolUseResult={"agentId": "a1"}),
    ]  # fmt: skip
    source = project / f"{session_id}.jsonl"
    source.write_text("\n".join(main) + "\n")
    grep = {"type": "tool_use", "id": "toolu_grep", "name": "Grep", "input": {"pattern": "x"}}
    agent_lines = [_event("assistant", session_id, message={"id": "s1", "role": "assistant", "content": [grep]})]
    agents = project / session_id / "subagents" if nested else project
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "agent-a1.jsonl").write_text("\n".join(agent_lines) + "\n")
    (agents / "agent-a1.meta.json").write_text(json.dumps({"toolUseId": "toolu_task"}))
    if not nested:  # another session's agent in the same flat folder must stay behind
        (agents / "agent-zz.jsonl").write_text(_event("assistant", "other", message={"id": "z", "content": []}) + "\n")
    return source


# -- the session file as it grows (lines as 2.1.332 writes them, trimmed) --------------------------------------
def _request_line(digest: str, at: str = "08:35:50.979") -> dict:
    return {"type": "api-request", "timestamp": f"2026-12-01T{at}Z", "querySource": "repl_main_thread",
            "requestDigest": digest}  # fmt: skip


def _attachment_line(at: str) -> dict:
    return {"type": "attachment", "timestamp": f"2026-12-01T{at}Z", "attachment": {"type": "date"}}


API_ERROR_LINE = {
    "type": "assistant",
    "isSidechain": False,
    "message": {"id": "91da0100", "model": "<synthetic>", "role": "assistant", "stop_reason": "stop_sequence",
                "content": [{"type": "text", "text": "API Error: 500 Injected fault. This is a server-side issue"}],
                "usage": {"input_tokens": 0, "output_tokens": 0}},
    "error": "server_error",
    "isApiErrorMessage": True,
    "apiErrorStatus": 500,
    "apiErrorType": "api_error",
}  # fmt: skip
TURN_DURATION_LINE = {"type": "system", "subtype": "turn_duration", "durationMs": 5200}


def _line(event: dict, main: bool = True, retry: bool = False) -> SessionLine:
    return SessionLine(main, json.dumps(event).encode(), event, retry)


def test_the_session_tail_returns_whole_lines_as_they_come_and_marks_a_request_sent_again(tmp_path: Path) -> None:
    config, cwd, session_id = tmp_path / ".claude", tmp_path / "repo", "5e55"
    tail = SessionTail(config, cwd, session_id)
    assert tail.poll() == []  # no session file before the first question
    folder = config / "projects" / escape_cwd(cwd)
    folder.mkdir(parents=True)
    request = json.dumps(_request_line("d1"))
    session = folder / f"{session_id}.jsonl"
    session.write_text(json.dumps({"type": "user", "message": {"content": QUESTION}}) + "\n" + request[:20])
    (first,) = tail.poll()  # the half-written line waits for its end
    assert first.main and first.event["type"] == "user" and not first.retry
    with session.open("a") as handle:
        handle.write(request[20:] + "\n" + request + "\n" + json.dumps(_request_line("d2")) + "\n")
    assert [(line.event["requestDigest"], line.retry) for line in tail.poll()] == [
        ("d1", False), ("d1", True), ("d2", False)
    ]  # fmt: skip
    subagents = folder / session_id / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-a1.jsonl").write_text(json.dumps(_request_line("d2")) + "\n")
    (line,) = tail.poll()
    assert not line.main and not line.retry  # the same digest in another file is another request
    assert tail.poll() == []


def test_a_turn_watch_times_silences_counts_retries_and_names_the_api_error() -> None:
    turn = TurnWatch(started=100.0)
    turn.see([_line({"type": "user", "message": {"content": QUESTION}})], 100.5)
    turn.see([_line(_request_line("d1")), _line({"type": "atis-latch"})], 101.0)  # bookkeeping names no wait
    turn.see([_line(_attachment_line("08:35:50.741"))], 101.1)  # appended late, but done before the request
    turn.see([_line(_request_line("d1", at="08:35:57.533"), retry=True)], 106.0)
    assert turn.api_error is None and turn.api_retries == 1
    assert (round(turn.silences.longest_s, 3), turn.silences.after) == (4.9, "api-request")  # waiting on the model
    turn.see([_line(API_ERROR_LINE)], 106.2)
    assert turn.api_error == "API error in assistant message: server_error"


def test_a_turn_watch_ends_at_the_turn_duration_line_and_ignores_the_subagents_errors() -> None:
    turn = TurnWatch(started=0.0)
    turn.see([_line(API_ERROR_LINE, main=False), _line(_request_line("d1"))], 3.0)
    assert turn.api_error is None  # a subagent's failed request is the main agent's tool result, not the end
    turn.see([_line(TURN_DURATION_LINE)], 4.0)
    turn.see([_line({"type": "cost-state"})], 40.0)  # written while the screen settles: the turn was over
    assert turn.over and turn.silences.longest_s == 3.0 and turn.silences.after == "start"


@pytest.mark.parametrize("nested", [True, False], ids=["subagents-folder", "flat-agent-files"])
def test_copy_session_keeps_the_subagents_where_the_reader_finds_them(tmp_path: Path, nested: bool) -> None:
    config = tmp_path / "config"
    source = _session_files(config, "sess-1", nested)
    assert find_session_source(config, Path("/r/x"), "sess-1") == source
    assert find_session_source(config, Path("/elsewhere"), "sess-1") == source  # found in any project folder
    assert find_session_source(config, Path("/r/x"), "sess-2") is None
    out = tmp_path / "out"
    out.mkdir()
    copied = copy_session(source, out, "with-1", config)
    assert copied == out / "run-with-1.session.jsonl"
    assert sorted(p.name for p in (out / "run-with-1.session" / "subagents").iterdir()) == [
        "agent-a1.jsonl",
        "agent-a1.meta.json",
    ]
    session = read_session_file(copied)
    assert [(c.name, c.thread) for c in session.calls] == [("Task", "main"), ("Grep", "toolu_task")]


# -- the tmux server -------------------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] != "Z"


@slow
@needs_tmux
def test_the_pane_gets_the_env_without_it_on_a_command_line_and_close_kills_everything(tmp_path: Path) -> None:
    secret = "sk-ant-api03-not-a-real-key-0123456789"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "ANTHROPIC_API_KEY": secret, "LANG": "C.UTF-8"}
    tmux = _Tmux(env)
    try:
        # a child that leaves the pane's process group must die too
        script = 'echo "$ANTHROPIC_API_KEY" > key.txt; setsid sleep 300 & echo $! > orphan.txt; sleep 300'
        tmux.start(["sh", "-c", script], tmp_path, 230, 60)
        orphan_file = tmp_path / "orphan.txt"
        deadline = time.monotonic() + 10
        while not (orphan_file.exists() and orphan_file.read_text().strip()):
            assert time.monotonic() < deadline, "the pane never ran its command"
            time.sleep(0.1)
        assert (tmp_path / "key.txt").read_text().strip() == secret
        server = int(tmux.call("display-message", "-p", "#{pid}").strip())
        assert secret not in Path(f"/proc/{server}/cmdline").read_text()
        assert tmux.call("display-message", "-p", "-t", "agent", "#{window_width}x#{window_height}").strip() == "230x60"
        pane, orphan = tmux.pane_pid, int(orphan_file.read_text())
        assert pane is not None and _alive(pane) and _alive(orphan)
    finally:
        tmux.close()
    assert not _alive(pane) and not _alive(orphan) and not _alive(server)
    listed = subprocess.run([TMUX, "-L", tmux.socket, "list-sessions"], capture_output=True, text=True)  # type: ignore[list-item]
    assert listed.returncode != 0 and "no server running" in listed.stderr


# A TUI that loses the keys of its first second, as the CLI's welcome screen and MCP start-up redraws do.
EATING_TUI = r"""
import os, sys, time, tty
tty.setraw(0)
rule, text, history, first = "─" * 40, "", [], None
def draw():
    box = "\r\n".join(history + [rule, "❯ " + text, rule])
    sys.stdout.write("\x1b[2J\x1b[H" + box + "\r\n")
    sys.stdout.flush()
draw()
while True:
    keys = os.read(0, 4096).decode()
    first = first or time.monotonic()
    if time.monotonic() - first < 1.0:
        continue
    for key in keys:
        if key == "\x15":
            text = ""
        elif key == "\r":
            history, text = history + ["❯ " + text], ""
        else:
            text += key
    draw()
"""


@slow
@needs_tmux
def test_typing_is_retried_until_the_question_shows_then_sent(tmp_path: Path) -> None:
    tmux = _Tmux({"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"})
    run = HeadlessOptions(claude="-", mcp_config=tmp_path, settings=tmp_path)
    options = TmuxOptions(run=run, poll_s=0.1, type_check_s=1.5)
    record = TmuxRunRecord(label="t")
    driver = _Driver(tmux, options, record, SessionTail(tmp_path, tmp_path, "no-session"))
    try:
        tmux.start([sys.executable, "-c", EATING_TUI], tmp_path, 230, 60)
        assert driver.type_question(QUESTION) == 2  # the first try went into the void
        assert input_text(driver.last_screen) == QUESTION
        driver.submit(QUESTION)
        assert input_text(driver.last_screen) == "" and f"❯ {QUESTION}" in driver.last_screen
    finally:
        tmux.close()


# -- the real CLI, end to end ----------------------------------------------------------------------------------
@dataclass
class Sandbox:
    root: Path
    repo: Path
    tools: RealTools

    def mcp_config(self, with_codegraph: bool, delay_s: int = 0) -> Path:
        servers = {}
        if with_codegraph:
            env = {"HOME": str(self.root / "cg-home"), "DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1"}
            command = [str(self.tools.codegraph.bin), "serve", "--mcp", "--path", str(self.repo)]
            if delay_s:  # a server slow to come up, as a large index or a cold disk makes it
                command = ["sh", "-c", f'sleep {delay_s}; exec "$@"', "sh", *command]
            servers["codegraph"] = {"command": command[0], "args": command[1:], "env": env}
        path = self.root / ("mcp-codegraph.json" if with_codegraph else "mcp-empty.json")
        path.write_text(json.dumps({"mcpServers": servers}))
        return path

    def env(self, server: RunningServer) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}
        base.update(HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"))
        return CLAUDE_CODE.process_environment(base, server.url)

    def run(self, server: RunningServer, questions: list[str], with_codegraph: bool = False,
            label: str = "t", hook: bool = False, mcp_delay_s: int = 0,
            timeout_s: float = TURN_TIMEOUT, stall_s: float = 30.0, **cli_env: str) -> TmuxRunRecord:  # fmt: skip
        settings = self.root / "settings.json"
        if hook:
            write_hook_settings(settings, "codegraph")
        else:
            settings.write_text("{}")
        mcp = self.mcp_config(with_codegraph, mcp_delay_s)
        run = HeadlessOptions(claude=str(self.tools.claude.bin), mcp_config=mcp, settings=settings,
                              timeout_s=timeout_s, stall_s=stall_s)  # fmt: skip
        opts = TmuxOptions(run=run)
        started = time.monotonic()
        try:
            return run_tmux(questions, label=label, out_dir=self.root / "out", cwd=self.repo,
                            env={**self.env(server), **cli_env}, options=opts)  # fmt: skip
        finally:
            print(f"tmux run {label}: {time.monotonic() - started:.1f}s")


@pytest.fixture
def sandbox(tmp_path: Path, real_tools: RealTools) -> Iterator[Sandbox]:
    repo = tmp_path / "express"
    shutil.copytree(real_tools.express, repo, symlinks=True)  # indexed by the codegraph that serves it
    for folder in ("home", "tmp", "cg-home"):
        (tmp_path / folder).mkdir()
    yield Sandbox(tmp_path, repo, real_tools)
    # nothing of the run may outlive it: no CLI, no MCP server started for this repo
    leftovers = subprocess.run(["ps", "-A", "-o", "pid=,args="], capture_output=True, text=True).stdout
    assert str(tmp_path) not in leftovers, leftovers


def _usage_from_file(path: Path) -> tuple[int, int, int, int, int]:
    """(in, out, cache read, cache write, requests) straight from the lines of the session copy and its
    subagent files, once per message id."""
    seen: dict[str, dict] = {}
    agents = sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    for line in (line for file in (path, *agents) for line in file.read_text().splitlines()):
        event = json.loads(line)
        message = event.get("message") or {}
        if event.get("type") == "assistant" and message.get("usage"):
            seen.setdefault(message["id"], message["usage"])
    u = seen.values()
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    n_in, n_out, n_read, n_write = (sum(x[k] for x in u) for k in keys)
    return n_in, n_out, n_read, n_write, len(u)


def _check_scored(record: TmuxRunRecord, sandbox: Sandbox, server: RunningServer) -> Session:
    """What every run must leave: a scoreable session copy, the pane text, a clean exit, no key on disk."""
    assert record.exit_codes == [0] and record.hung_after_result == [False]
    chosen = [d.split(" → ")[1] for d in record.dialogs]  # 2.1.332: trust, API key, bypass warning
    assert all(c.startswith("Yes") for c in chosen) and any("trust" in c for c in chosen), record.dialogs
    # the CLI wrote the session where the driver looked first: the escaped cwd under the isolated HOME
    original = sandbox.root / "home/.claude/projects" / escape_cwd(sandbox.repo) / f"{record.session_id}.jsonl"
    assert original.is_file() and record.segments == [sandbox.root / "out/run-t.session.jsonl"]
    assert record.segments[0].read_bytes() == original.read_bytes()
    assert "sk-ant-agent-eval-local-stand-in"[-20:] not in (sandbox.root / "home/.claude.json").read_text()
    session = read_session_file(record.segments[0])
    assert session.infra_error is None
    verdict, tokens = verdict_lines(session, tool=CODEGRAPH).splitlines()
    n_in, n_out, n_read, n_write, requests = _usage_from_file(record.segments[0])
    assert tokens == f"TOKENS: in {n_in:,} | out {n_out:,} | cache read {n_read:,} | cache write {n_write:,} | " \
                     f"{requests} requests"  # fmt: skip
    assert requests == len(server.requests) and n_write > 20_000  # the CLI's own prompt is big
    blocks = render_scorecard(score(session, tool=CODEGRAPH))
    assert verdict in blocks
    for heading in ("Residual context occupancy at end of run:", "Explore sufficiency", "Explore allocation"):
        assert heading in blocks
    assert len(record.wall_s) == len(record.turn_s) == len(record.typing_attempts) == len(record.settle_s)
    assert all(s >= 16 * 0.5 for s in record.settle_s)  # 16 unchanged polls before a turn counts as done
    print(json.dumps(record.to_dict(), indent=1))
    print(verdict_lines(session, tool=CODEGRAPH))
    return session


class TestRealCliInTmux:
    pytestmark = [  # noqa: RUF012
        slow,
        needs_tmux,
        pytest.mark.timeout(int(TURN_TIMEOUT * 3)),
    ]

    def test_without_arm_greps_reads_and_is_scored(self, sandbox: Sandbox) -> None:
        with serve(make_backend("scripted")) as server:
            record = sandbox.run(server, [QUESTION], hook=True)
        session = _check_scored(record, sandbox, server)
        assert [c.name for c in session.calls] == ["Grep", "Read", "Read", "Bash"]
        # the PreToolUse hook of --settings runs in the TUI as in -p: the CLI attempt is denied, so counted blocked
        assert "the `codegraph` CLI is not available in this evaluation arm" in session.calls[3].result.text
        assert score(session, tool=CODEGRAPH).contamination.cli_blocked == 1
        assert session.calls[1].input["file_path"] == str(sandbox.repo / "lib/response.js")
        assert "res.send = function send(body)" in session.calls[1].result.text  # the CLI really read the file
        assert (
            verdict_lines(session, tool=CODEGRAPH).splitlines()[0]
            == "VERDICT: codegraph_explore used 0x | Read 2 | Grep/Bash 2"
        )
        pane = record.pane.read_text()
        assert pane.startswith("===== turn 1 =====") and f"● Answer to: {QUESTION}" in pane
        assert session.answer_texts()[0].startswith(f"Answer to: {QUESTION}")
        assert "Explore sufficiency: no answered codegraph_explore calls" in render_scorecard(
            score(session, tool=CODEGRAPH)
        )

    def test_with_arm_in_tmux_explores_through_the_real_codegraph_mcp_server(self, sandbox: Sandbox) -> None:
        with serve(make_backend("scripted")) as server:
            record = sandbox.run(server, [QUESTION], with_codegraph=True)
        assert "mcp__codegraph__codegraph_explore" in {t["name"] for t in server.requests[0]["tools"]}
        session = _check_scored(record, sandbox, server)
        assert [c.name for c in session.calls] == ["mcp__codegraph__codegraph_explore", "Read"]
        explore = session.calls[0]
        assert explore.input == {"query": QUESTION} and "**`lib/response.js`**" in explore.result.text
        assert (
            verdict_lines(session, tool=CODEGRAPH).splitlines()[0]
            == "VERDICT: codegraph_explore used 1x | Read 1 | Grep/Bash 0"
        )
        blocks = render_scorecard(score(session, tool=CODEGRAPH))
        assert "Explore sufficiency — what the agent did NEXT (1 answered call)" in blocks
        assert "Explore allocation — share of returned bytes the answer used (1 call" in blocks

    def test_the_question_waits_for_a_slow_mcp_server(self, sandbox: Sandbox) -> None:
        # typed any earlier, the question goes out without the MCP tools and the with-arm runs as a without-arm
        with serve(make_backend("scripted")) as server:
            record = sandbox.run(server, [QUESTION], with_codegraph=True, mcp_delay_s=15)
        assert record.mcp_s > 3  # the panel showed "… codegraph" (starting) before "✔"
        assert "mcp__codegraph__codegraph_explore" in {t["name"] for t in server.requests[0]["tools"]}
        session = _check_scored(record, sandbox, server)
        assert session.calls[0].name == "mcp__codegraph__codegraph_explore"

    def test_a_failed_mcp_server_stops_the_run_before_the_question(self, sandbox: Sandbox) -> None:
        config = sandbox.root / "mcp-broken.json"
        config.write_text(json.dumps({"mcpServers": {"codegraph": {"command": "sh", "args": ["-c", "exit 1"]}}}))
        with serve(make_backend("scripted")) as server:
            settings = sandbox.root / "settings.json"
            settings.write_text("{}")
            run = HeadlessOptions(claude=str(sandbox.tools.claude.bin), mcp_config=config, settings=settings)
            opts = TmuxOptions(run=run)
            with pytest.raises(AgentInfraError, match=r"MCP server\(s\) codegraph failed to connect"):
                run_tmux([QUESTION], label="t", out_dir=sandbox.root / "out", cwd=sandbox.repo,
                         env=sandbox.env(server), options=opts)  # fmt: skip
        assert server.requests == []  # the question was never sent
        assert "✘ codegraph" in (sandbox.root / "out/run-t.pane.txt").read_text()

    def test_two_turns_are_typed_into_the_same_session(self, sandbox: Sandbox) -> None:
        with serve(make_backend("scripted")) as server:
            record = sandbox.run(server, [QUESTION, SECOND])
        session = _check_scored(record, sandbox, server)
        asked = [item.text for item in session.timeline if isinstance(item, UserText)]
        assert [q for q in (QUESTION, SECOND) if q in asked] == [QUESTION, SECOND]
        names = [c.name for c in session.calls]
        assert names == ["Grep", "Read", "Read", "Bash", "Grep", "Read", "Read", "Bash"]
        assert session.calls[4].input["pattern"] == "middleware"  # turn 2 starts over on the new question
        first_of_two = next(m for m in session.messages() if session.calls[4] in m.calls)
        assert first_of_two.usage.ctx > session.messages()[3].usage.ctx  # turn 1 is still in the window
        pane = record.pane.read_text()
        assert pane.index("===== turn 1 =====") < pane.index("===== turn 2 =====")
        assert f"● Answer to: {SECOND}" in pane.split("===== turn 2 =====")[1]

    def test_a_subagent_file_is_copied_and_stitched_in(self, sandbox: Sandbox) -> None:
        with serve(make_backend("scripted", delegate=True)) as server:
            record = sandbox.run(server, [QUESTION])
        session = _check_scored(record, sandbox, server)
        agents = sorted((sandbox.root / "out/run-t.session/subagents").glob("agent-*.jsonl"))
        assert len(agents) == 1
        agent = session.calls[0]
        assert agent.name in ("Agent", "Task") and [c.name for c in session.calls_in(agent.id)] == ["Grep"]
        assert [c.name for c in session.calls_in("main")] == ["Agent", "Grep", "Read", "Read", "Bash"]
        # the subagent's Grep counts: the interactive arm is run to see what subagents do
        assert (
            verdict_lines(session, tool=CODEGRAPH).splitlines()[0]
            == "VERDICT: codegraph_explore used 0x | Read 2 | Grep/Bash 3"
        )

    def test_a_hung_request_times_out_with_the_last_screen_kept(self, sandbox: Sandbox) -> None:
        with serve(make_backend("scripted"), faults={1: "hang"}) as server:
            started = time.monotonic()
            with pytest.raises(AgentInfraError, match=r"turn 1: timed out after 20s") as caught:
                sandbox.run(server, [QUESTION], timeout_s=20)
            took = time.monotonic() - started
        print(caught.value)
        assert took < 60
        pane = (sandbox.root / "out/run-t.pane.txt").read_text()
        assert pane.startswith("===== last screen (turn 1) =====") and f"❯ {QUESTION}" in pane
        assert "partial transcript kept" in str(caught.value)
        assert QUESTION in (sandbox.root / "out/run-t.session.jsonl").read_text()

    def test_a_turn_ending_in_an_api_error_ends_the_run_at_once(self, sandbox: Sandbox) -> None:
        # every request fails; the CLI tries once more (CLAUDE_CODE_MAX_RETRIES), gives up, and offers "Resend"
        with serve(make_backend("scripted"), faults=Faults(default="500")) as server:
            started = time.monotonic()
            with pytest.raises(TurnError) as caught:
                sandbox.run(server, [QUESTION, SECOND], CLAUDE_CODE_MAX_RETRIES="1")
            took = time.monotonic() - started
            requests = len(server.requests)
        print(f"API error: the run ended after {took:.1f}s: {caught.value}")
        message = str(caught.value)
        assert message.startswith("turn 1: API error in assistant message: server_error after 1 API retries; ")
        assert "turns 2-2 not run" in message and "partial transcript kept" in message
        assert requests == 2  # turn 1's try and its one retry; turn 2 was never typed
        assert took < TURN_TIMEOUT / 3  # not the turn timeout: the screen never shows an empty input box again
        run = caught.value.run
        assert isinstance(run, TmuxRunRecord) and run.api_retries == [1] and run.stalled_turns == []
        assert len(run.wall_s) == len(run.longest_silence_s) == 1
        pane = run.pane.read_text()
        assert "API Error: 500 Injected fault" in pane and SECOND not in pane

    def test_a_request_never_answered_is_retried_and_the_turn_flagged_stalled(self, sandbox: Sandbox) -> None:
        """The 280 s stall, in small: a request the server never answers costs the CLI its request timeout
        (API_TIMEOUT_MS; 6 s here) before it sends it again, and then the turn succeeds. Without API_TIMEOUT_MS,
        2.1.332 gives up on a request that never answers after 360 s, and on a stream that stops arriving after
        300 s (its stream idle floor) — then retrying without an api_retry event in stream-json."""
        with serve(make_backend("scripted"), faults={1: "hang"}) as server:
            record = sandbox.run(server, [QUESTION], stall_s=4.0, API_TIMEOUT_MS="6000", CLAUDE_CODE_MAX_RETRIES="2")
        print(f"hanging request: silent {record.longest_silence_s[0]:.1f}s after {record.silence_after[0]}")
        assert [h.fault for h in server.hits][:2] == ["hang", None]
        assert record.api_retries == [1] and record.silence_after == ["api-request"]  # waiting on the model
        assert 6.0 <= record.longest_silence_s[0] < 15 and record.stalled_turns == [1]
        assert record.to_dict()["stalled_turns"] == [1] and record.to_dict()["stall_s"] == 4.0
        assert record.wall_s[0] > record.longest_silence_s[0]  # the wait is in the turn's time
        assert read_session_file(record.segments[0]).infra_error is None  # the turn itself succeeded


# -- through the plugin: a stalled tmux run is flagged, has no duration, and the report names it --------------
STALL_CONFTEST = """
import pytest

from pytest_agent_eval.model import ModelEndpoint
from pytest_agent_eval.model import Faults, serve
from pytest_agent_eval.run.backends import make_backend


@pytest.fixture(autouse=True)
def quick_stall(monkeypatch):
    import pytest_agent_eval.harness.drivers.watch as watch  # the fixtures read it when an item runs

    monkeypatch.setattr(watch, "STALL_S_STAND_IN", 10.0)  # above a tool call under load


@pytest.fixture
def agent_model_server(agent_case):
    \"\"\"The scripted model; the without-arm's second reply stops arriving for 20 s after its first delta.\"\"\"
    backend = make_backend("scripted")
    faults = Faults({2: "stall"}, stall_s=20.0) if agent_case.arm.name == "without" else Faults()
    server = serve(backend, faults=faults)
    try:
        yield ModelEndpoint("scripted", backend.describe(), server.url)
    finally:
        server.stop()
"""


@slow
@needs_tmux
@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_a_stalled_tmux_run_is_flagged_timed_out_of_the_tables_and_named_in_the_report(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """The 280 s "time saved 94%", in small: the without-arm's reply stalls, its turn succeeds with the wait in
    its time, and the time comparison must not take that time for the with-arm's saving."""
    from support.e2e import inner_env, leftovers, run_pytest, summary

    project = tmp_path / "project"
    (project / "evals").mkdir(parents=True)
    shutil.copy(REPO / "evals" / "test_ab.py", project / "evals" / "test_ab.py")
    shutil.copy(REPO / "agent-eval.yaml", project / "agent-eval.yaml")
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "conftest.py").write_text(STALL_CONFTEST, encoding="utf-8")
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-mode", "tmux", "--agent-eval-runs", "1", "--agent-eval-turns", "1"]
    args += ["--agent-eval-offline", f"--agent-eval-corpus={REPO / 'corpus.json'}", f"--agent-eval-out={out}", "-v"]
    done = run_pytest(args, project, inner_env(real_tools, tag), tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    records = summary(out)
    stalled, clean = records["express-without-tmux-1"], records["express-with-tmux-1"]
    assert stalled["stalled"] is True and clean["stalled"] is False
    driver = stalled["driver"]
    assert driver["driver"] == "tmux" and driver["stalled_turns"] == [1] and driver["stall_s"] == 10.0
    # About the 20 s stall, read off the CLI's own timestamps: under load they can fall a little short of it.
    assert 18.0 <= driver["longest_silence_s"][0] < 30 and driver["silence_after"] == ["api-request"]
    assert driver["api_retries"] == [0]  # the reply came in the end: nothing was sent again
    # (a) flagged on the item's line and at the end; (b) no duration, so no time saved; (c) named in the report
    assert re.search(r"express-without-tmux-1\] PASSED \(stalled: turn 1 silent (?:1[89]|2\d)\.\ds after api-request "
                     r"\(threshold 10s\)\)", done.stdout)  # fmt: skip
    assert "agent-eval: express-without-tmux-1 stalled: turn 1 silent" in done.stdout
    assert stalled["figures"]["duration_s"] is None and clean["figures"]["duration_s"] is not None
    saved = next(line for line in done.stdout.splitlines() if line.startswith("AVERAGE saved:"))
    assert "tokens" in saved and "time" not in saved
    html = next(out.glob("*/report.html")).read_text(encoding="utf-8")
    assert "stalled: turn 1 silent" in html and "its time is no measurement" in html
    assert leftovers(tag, tmp_path) == []
