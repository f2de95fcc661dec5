"""OpenCode as a CodingAgent, without the real CLI: its config, its transcript reader over recorded real runs
(tests/data/opencode), the evidence and the stand-in's counts held against them, the stand-in's policy in OpenCode's
tools, its driver around a scripted ``opencode``. (tests/test_opencode_cli.py runs the real one.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest
from support.fake_agent import agent_setup, drive_fake

from pytest_agent_eval.agents import agent_named
from pytest_agent_eval.agents.base import AgentSetup, Drive, DriveOptions, McpServer, load_agent
from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.agents.opencode.agent import bash_action, wildcard
from pytest_agent_eval.agents.opencode.config import AGENT_ENV, run_command
from pytest_agent_eval.agents.opencode.driver import OpenCodeOptions, run_opencode
from pytest_agent_eval.agents.opencode.probe import ProbeModel
from pytest_agent_eval.agents.opencode.stand_in import is_opencode_request, read_turn, render, unquoted
from pytest_agent_eval.agents.opencode.subagents import SubagentsError, keep_subagents
from pytest_agent_eval.agents.opencode.transcript import (
    OpenCodeSession,
    is_opencode_events,
    kept_config,
    kept_subagents,
    read_opencode,
)
from pytest_agent_eval.campaign.store import ends_with_result
from pytest_agent_eval.cli import main as cli_main
from pytest_agent_eval.harness.drivers import TurnError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.untrusted import UntrustedFile
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import evidence, paired_responses
from pytest_agent_eval.metrics.occupancy import FAMILIES, occupancy
from pytest_agent_eval.metrics.truth import read_truth_log, resident_truth
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN, Message, ToolCall, TranscriptError

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/opencode"
ARMS = ("with", "without", "two-turns", "delegated")
EXPLORE = f"mcp__{CODEGRAPH.name}__{CODEGRAPH.explore}"
# A stand-in `opencode`: replays the recorded with-arm's stream (or OPENCODE_FAKE_EVENTS) for `run`, and records its
# argv; OPENCODE_FAKE says how a turn goes ("ok", "error", "hang", "silent", "crash").
FAKE = f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
with open(Path(os.environ["HOME"]) / "argv.jsonl", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
how = os.environ.get("OPENCODE_FAKE", "ok")
if how == "silent":
    time.sleep(60)
events = Path(os.environ.get("OPENCODE_FAKE_EVENTS", {str(DATA / "with" / "events.jsonl")!r})).read_text().splitlines()
for line in events if how in ("ok", "hang") else events[:-1]:
    print(line, flush=True)
if how == "error":
    session = json.loads(events[0])["sessionID"]
    error = {{"name": "APIError", "data": {{"message": "Cannot connect to API"}}}}
    print(json.dumps({{"type": "error", "sessionID": session, "error": error}}), flush=True)
    sys.exit(1)
if how == "crash":
    sys.exit(1)
if how == "hang":
    time.sleep(60)
"""


def _segments(arm: str) -> list[Path]:
    return sorted((DATA / arm).glob("events*.jsonl"))


def _setup(tmp_path: Path, mcp: tuple[McpServer, ...] = ()) -> AgentSetup:
    return agent_setup(tmp_path, mcp, config_dir=tmp_path / "config")


# -- the config ---------------------------------------------------------------------------------
def test_the_config_points_opencode_at_the_harness_and_serves_the_tool_in_the_with_arm_only(tmp_path: Path) -> None:
    server = McpServer("codegraph", ("/opt/cg", "serve", "--mcp", "--path", "/r e/po"), {"DO_NOT_TRACK": "1"})
    with_arm = OPENCODE.configure(_setup(tmp_path / "with", (server,)))
    config = json.loads(with_arm.files["config"].read_text(encoding="utf-8"))
    assert config["provider"]["anthropic"]["options"]["baseURL"] == "http://127.0.0.1:4321/v1"
    assert config["provider"]["anthropic"]["options"]["apiKey"].startswith("sk-ant-agent-eval")  # a placeholder
    assert (config["model"], config["autoupdate"], config["share"]) == (
        "anthropic/claude-sonnet-4-5", False, "disabled")  # fmt: skip
    served = {"type": "local", "command": ["/opt/cg", "serve", "--mcp", "--path", "/r e/po"],
              "environment": {"DO_NOT_TRACK": "1"}, "enabled": True}  # fmt: skip
    assert config["mcp"] == {"codegraph": served}
    without = OPENCODE.configure(_setup(tmp_path / "without"))
    assert json.loads(without.files["config"].read_text(encoding="utf-8"))["mcp"] == {}
    home = tmp_path / "without" / "home"
    for arm in (with_arm, without):
        assert arm.readable == (arm.files["config"],) and arm.env["OPENCODE_CONFIG"] == str(arm.files["config"])
        assert json.loads(arm.env["OPENCODE_PERMISSION"])["bash"][f"{CODEGRAPH.cli}*"] == "deny"  # repeated, last
    assert without.env["XDG_CONFIG_HOME"] == str(home / ".config") and (home / ".local" / "share").is_dir()
    env = OPENCODE.environment("http://x")
    assert env == AGENT_ENV and env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"


def test_the_permission_denies_the_cli_as_opencode_resolves_rules(tmp_path: Path) -> None:
    """OpenCode's rules apply last match first; its own defaults (``*``: allow) come before the config's."""
    config = json.loads(OPENCODE.configure(_setup(tmp_path)).files["config"].read_text(encoding="utf-8"))
    rules = [{"permission": "*", "pattern": "*", "action": "allow"}]
    rules += [{"permission": "bash", "pattern": p, "action": a} for p, a in config["permission"]["bash"].items()]
    assert bash_action(rules, "codegraph --version") == bash_action(rules, "codegraph") == "deny"
    assert bash_action(rules, "ls -la") == bash_action(rules, "env codegraph --version") == "allow"  # the seal's
    assert bash_action(rules, CODEGRAPH.deny_reason) == "deny" and bash_action([], "ls") == "ask"
    assert wildcard("ls *", "ls") and wildcard("ls *", "ls -la") and not wildcard("ls *", "lsof")
    assert wildcard("a?c", "abc") and not wildcard("a.c", "abc") and wildcard("x (y)", "x (y)")


def test_check_deny_says_when_opencode_is_not_there_to_ask(tmp_path: Path) -> None:
    config = OPENCODE.configure(_setup(tmp_path))
    [problem] = OPENCODE.check_deny(config, CODEGRAPH.cli, {"PATH": str(tmp_path)}, set())
    assert "opencode is not on the agent's PATH" in problem


def test_opencode_is_selected_by_its_module_and_name() -> None:
    assert load_agent("pytest_agent_eval.agents.opencode:OPENCODE") is OPENCODE is agent_named("opencode")
    assert (OPENCODE.name, OPENCODE.api, OPENCODE.modes, OPENCODE.package, OPENCODE.version) == (
        "opencode", "messages", ("headless",), "opencode-ai", "1.18.33")  # fmt: skip
    assert run_command("oc", "Q 1?") == ["oc", "run", "--format", "json", "--pure", "--", "Q 1?"]
    assert run_command("oc", "-Q", "ses_1") == ["oc", "run", "--format", "json", "--pure", "--session", "ses_1", "--",
                                                "-Q"]  # fmt: skip


# -- the transcript -----------------------------------------------------------------------------
def test_the_with_arms_stream_reads_into_the_common_session() -> None:
    session = read_opencode(_segments("with"))
    assert session.session_id.startswith("ses_") and session.mcp_servers == ("codegraph",)
    assert [c.name for c in session.calls] == [EXPLORE, "Bash"]
    explore, read = session.calls
    assert explore.input == {"query": "How does res.send decide the Content-Type and ETag?"}
    assert explore.result is not None and explore.result.text.startswith("**Exploration:")
    assert read.input["command"].startswith("cat -n ") and read.result is not None and not read.result.is_error
    messages = session.messages()
    assert len(messages) == 3 and all(m.usage is not None and m.usage.ctx > 0 for m in messages)
    lines = _segments("with")[0].read_text().splitlines()
    assert [m.id for m in messages] == [json.loads(line)["part"]["messageID"] for line in lines if "step_start" in line]
    assert messages[1].usage.cache_read > 0  # tokens.cache.read: the first request's prompt, cached
    assert session.answer_texts()[0].startswith("Answer to: How does res.send")
    assert [r.subtype for r in session.results] == ["stop"] and not session.ends_mid_turn
    assert "response_ids" in session.unread and session.own_message_ids


def test_calls_that_finished_out_of_order_are_read_in_the_order_the_model_sent_them(tmp_path: Path) -> None:
    """OpenCode writes a step's calls as each finishes; the reader orders them by part id, the order the model sent them
    and the next request carries them in (the request record says so)."""
    lines = _segments("without")[0].read_text().splitlines()
    parallel = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "tool_use"][1:3]
    assert parallel == [4, 5]
    lines[4], lines[5] = lines[5], lines[4]  # the second call finished first
    swapped = tmp_path / "events.jsonl"
    swapped.write_text("\n".join(lines) + "\n")
    requests = read_requests(DATA / "without/requests.jsonl")
    sent = [b["id"] for m in requests[-1]["request"]["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert [c.id for c in read_opencode([swapped]).calls] == sent
    assert [c.id for c in read_opencode(_segments("without")).calls] == sent


def test_the_without_arms_denied_cli_call_carries_the_mark() -> None:
    session = read_opencode(_segments("without"))
    [cli] = [c for c in session.calls if c.input["command"].startswith(f"{CODEGRAPH.cli} ")]
    assert cli.result is not None and cli.result.is_error and CODEGRAPH.deny_marker in cli.result.text
    report = contamination(session, tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)
    assert not report.mcp_calls and session.mcp_servers == ()


def test_a_task_calls_child_session_is_read_into_the_calls_thread() -> None:
    """tests/data/opencode/delegated: each question handed to OpenCode's ``explore`` subagent first; the child
    sessions' steps, which the stream leaves out, kept by the driver beside it and read in the task call's thread,
    right after the call (before its result), as the model was asked."""
    session = read_opencode(_segments("delegated"))
    tasks = [c for c in session.calls if c.name == "Task"]
    assert len(tasks) == 2 and all(t.thread == MAIN and t.sent_as[0] == "task" for t in tasks)
    assert session.threads == [MAIN, tasks[0].id, tasks[1].id] and "subagents" not in session.unread
    streams = "".join(path.read_text() for path in _segments("delegated"))
    for task in tasks:
        [grep] = session.calls_in(task.id)
        assert grep.name == "Bash" and grep.input["command"].startswith("grep -rliE") and grep.id not in streams
        steps = session.messages(task.id)
        assert len(steps) == 2 and all(m.usage is not None and m.usage.ctx > 0 for m in steps)
        assert steps[-1].text in task.result.text  # the subagent's answer is the task's result
        timeline = session.timeline
        start = timeline.index(next(m for m in session.messages() if task in m.calls))
        assert timeline[start + 1] is steps[0] and timeline.index(task.result) > timeline.index(steps[-1])
    assert [c.name for c in session.calls_in(MAIN)] == ["Task", EXPLORE, "Bash"] * 2
    assert contamination(session, tool=CODEGRAPH).mcp_calls and len(session.answer_texts()) == 2


def test_a_child_session_not_kept_is_said_and_fails_the_evidence(tmp_path: Path) -> None:
    for segment in _segments("delegated"):
        shutil.copyfile(segment, tmp_path / segment.name)
    session = read_opencode(sorted(tmp_path.glob("events*.jsonl")), ("codegraph",))
    children = [c.result.text.split('"')[1] for c in session.calls if c.name == "Task"]
    assert children[0].startswith("ses_") and all(child in session.unread["subagents"] for child in children)
    assert session.threads == [MAIN]
    problems = evidence(session, read_requests(DATA / "delegated" / "requests.jsonl"), tool=CODEGRAPH).problems
    assert len([p for p in problems if "reached the model in request" in p]) == 4, problems  # 2 calls, 2 results


def test_a_tool_result_cut_down_in_a_subagents_database_is_named(tmp_path: Path) -> None:
    """The subagents' steps come out of OpenCode's database in the attempt's HOME, which the agent's shells can
    write: a result shown there with less than the model received is a forgery, not a match."""
    for path in (DATA / "delegated").iterdir():
        shutil.copyfile(path, tmp_path / path.name)
    whole = "./lib/response.js\\n./lib/router/index.js\\n./lib/router/route.js\\n./Readme.md\\n./History.md\\n"
    kept = (tmp_path / "events.subagents").read_text(encoding="utf-8")
    assert whole in kept
    (tmp_path / "events.subagents").write_text(kept.replace(whole, "./lib/router/index.js\\n"), encoding="utf-8")
    session = read_opencode(sorted(tmp_path.glob("events*.jsonl")), ("codegraph",))
    cut = [c for c in session.calls if c.thread != MAIN and c.result and c.result.text == "./lib/router/index.js\n"]
    assert len(cut) == 2  # each subagent's search
    problems = evidence(session, read_requests(DATA / "delegated" / "requests.jsonl"), tool=CODEGRAPH).problems
    assert problems == [
        f"tool result for {call.id} (Bash, thread {call.thread}) differs from what the model received: "
        '"./lib/router/index.js"'
        for call in cut
    ]


def test_without_the_kept_config_mcp_tools_keep_opencodes_names(tmp_path: Path) -> None:
    shutil.copyfile(_segments("with")[0], tmp_path / "events.jsonl")
    session = read_opencode([tmp_path / "events.jsonl"])
    assert session.calls[0].name == f"{CODEGRAPH.name}_{CODEGRAPH.explore}" and "mcp_servers" in session.unread
    assert read_opencode([tmp_path / "events.jsonl"], ["codegraph"]).calls[0].name == EXPLORE


def test_two_turns_are_one_session_and_a_stream_of_another_is_refused(tmp_path: Path) -> None:
    session = read_opencode(_segments("two-turns"))
    assert len(session.answer_texts()) == 2 and session.answer_texts()[1].startswith("Answer to: Where is the ETag")
    assert [m.segment for m in session.messages()] == [0, 0, 0, 1, 1, 1]
    with pytest.raises(TranscriptError, match="session ses_"):
        read_opencode([_segments("two-turns")[0], _segments("with")[0]])
    cut = tmp_path / "run.jsonl"
    cut.write_text("\n".join(_segments("with")[0].read_text().splitlines()[:-1]) + "\nnot json\n", encoding="utf-8")
    cut_session = read_opencode([cut])
    assert cut_session.ends_mid_turn and cut_session.parse.bad_lines == 1 and not cut_session.results


def test_only_opencodes_streams_are_taken_for_them(tmp_path: Path) -> None:
    assert all(is_opencode_events(p) for arm in ARMS for p in _segments(arm))
    codex = Path(__file__).parent / "data/codex/with/events.jsonl"
    claude = next((Path(__file__).parent / "data/transcripts").rglob("*.jsonl"))
    assert not is_opencode_events(codex) and not is_opencode_events(claude) and not is_opencode_events(tmp_path)
    with pytest.raises(TranscriptError, match="not an opencode run --format json stream"):
        read_opencode([codex])


def test_agent_eval_score_reads_an_opencode_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["score", str(_segments("two-turns")[0]), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["contamination"]["mcp_calls"] and card["occupancy"]["residual"]["tool"] > 0


# -- held to the model's side -------------------------------------------------------------------
@pytest.mark.parametrize("arm", ARMS)
def test_the_recorded_sessions_agree_with_the_request_records(arm: str) -> None:
    session, entries = read_opencode(_segments(arm)), read_requests(DATA / arm / "requests.jsonl")
    report = evidence(session, entries, tool=CODEGRAPH)
    assert report.intact and report.requests == len(entries), report.problems
    paired = paired_responses(session, entries)
    assert list(paired) == [m.id for m in session.messages(None)] and len(set(paired.values())) == len(paired)


def test_a_stream_that_was_changed_or_cut_short_disagrees(tmp_path: Path) -> None:
    entries = read_requests(DATA / "without" / "requests.jsonl")
    stream = _segments("without")[0].read_text(encoding="utf-8")
    forged = tmp_path / "forged" / "events.jsonl"
    forged.parent.mkdir()
    forged.write_text(stream.replace(json.dumps(CODEGRAPH.deny_reason)[1:-1], "**Exploration: res.send**"))
    problems = evidence(read_opencode([forged], ()), entries, tool=CODEGRAPH).problems
    assert any("differs from what the model received" in p for p in problems), problems
    lines = stream.splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if '"type":"step_finish"' in line)
    dropped = tmp_path / "dropped.jsonl"
    dropped.write_text("".join(lines[first_end + 1 :]))
    problems = evidence(read_opencode([dropped], ()), entries, tool=CODEGRAPH).problems
    first_call = json.loads(lines[first_end - 1])["part"]["callID"]
    assert any(f"tool call {first_call} (bash) reached the model in request" in p for p in problems), problems
    answer = json.loads(next(line for line in lines if '"type":"text"' in line))
    answer["part"]["text"] = "Answer to: something else"
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(json.dumps(answer) + "\n" if '"type":"text"' in line else line for line in lines))
    problems = evidence(read_opencode([changed], ()), entries, tool=CODEGRAPH).problems
    assert any("is in the transcript, but the model sent no such message" in p for p in problems), problems


@pytest.mark.parametrize("arm", ARMS)
def test_occupancy_of_the_recorded_sessions_matches_the_stand_ins_own_counts(arm: str) -> None:
    """bench/occupancy_accuracy.py's measure: Σ|estimate − truth| / Σ truth over the families, ≤ 1%."""
    session = read_opencode(_segments(arm))
    counts = read_truth_log(DATA / arm / "truth.jsonl")
    paired = paired_responses(session, read_requests(DATA / arm / "requests.jsonl"))
    assert len(counts) == len(paired) + 1  # OpenCode's title request, answered, is in no step
    truth = resident_truth(session, {message: counts[response] for message, response in paired.items()}, tool=CODEGRAPH)
    assert truth is not None
    estimate = occupancy(session, tool=CODEGRAPH).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


# -- the stand-in in OpenCode's tools -----------------------------------------------------------
def _requests(arm: str) -> list[dict]:
    return [e["request"] for e in read_requests(DATA / arm / "requests.jsonl")]


def test_the_stand_in_reads_opencodes_requests_in_the_common_vocabulary() -> None:
    title, *steps = sorted(_requests("with"), key=lambda r: bool(r.get("tools")))
    assert not is_opencode_request(title) and all(is_opencode_request(r) for r in steps)
    assert ScriptedBackend().respond(title).blocks == [{"type": "text", "text": "OK."}]  # the title: text, no tool
    last = max(steps, key=lambda r: len(r["messages"]))
    turn = read_turn(last, CODEGRAPH.explore)
    assert turn.question == "How does res.send decide the Content-Type and ETag?"
    assert [s.name for s in turn.steps] == [EXPLORE, "Read"] and turn.steps[1].result.lstrip().startswith("1\t")
    assert {"Read", "Grep", "Bash", EXPLORE} <= set(turn.tools) and turn.cwd.endswith("/with/repo")
    assert not is_opencode_request({"tools": [{"name": "Bash", "input_schema": {"properties": {"command": {}}}}]})
    assert unquoted('"say \\"hi\\" now"') == 'say "hi" now' and unquoted("plain") == "plain"


def test_the_policys_reply_goes_out_in_opencodes_tools() -> None:
    first = min((r for r in _requests("with") if r.get("tools")), key=lambda r: len(r["messages"]))
    [explore] = ScriptedBackend().decide(read_turn(first, CODEGRAPH.explore)).blocks
    [call] = render(first, ScriptedBackend().decide(read_turn(first, CODEGRAPH.explore)), CODEGRAPH.explore).blocks
    assert explore["name"] == EXPLORE and call["name"] == f"{CODEGRAPH.name}_{CODEGRAPH.explore}"
    without = min((r for r in _requests("without") if r.get("tools")), key=lambda r: len(r["messages"]))
    [grep] = render(without, ScriptedBackend().decide(read_turn(without, CODEGRAPH.explore)), CODEGRAPH.explore).blocks
    assert grep["name"] == "bash" and grep["input"]["command"].startswith("grep -rliE ")
    assert grep["input"]["description"]


def test_the_model_server_answers_opencode_through_the_policy() -> None:
    request = min((r for r in _requests("without") if r.get("tools")), key=lambda r: len(r["messages"]))
    with serve(ScriptedBackend()) as server:
        body = json.dumps({**request, "stream": False}).encode()
        sent = urllib.request.Request(f"{server.url}/v1/messages", data=body,
                                      headers={"content-type": "application/json"}, method="POST")  # fmt: skip
        with urllib.request.urlopen(sent, timeout=30) as answer:
            message = json.loads(answer.read())
    [call] = message["content"]
    assert call["type"] == "tool_use" and call["name"] == "bash" and "grep -rliE" in call["input"]["command"]


def test_the_block_probe_asks_for_one_bash_call_then_ends() -> None:
    model = ProbeModel("codegraph --version")
    assert model.respond({"messages": []}).blocks[0]["type"] == "text"  # the title request
    shell = {"name": "bash", "input_schema": {"properties": {"command": {}}}}
    request = {"tools": [shell], "messages": [{"role": "user", "content": "probe"}]}
    [call] = model.respond(request).blocks
    assert call["name"] == "bash" and call["input"]["command"] == "codegraph --version"
    result = {"type": "tool_result", "tool_use_id": call["id"]}
    request["messages"] += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    assert model.respond(request).blocks[0]["type"] == "text"


def test_the_policy_delegates_through_opencodes_task_and_its_explore_subagent_searches() -> None:
    requests = [r for r in _requests("delegated") if r.get("tools")]
    first = min(requests, key=lambda r: len(r["messages"]))
    turn = read_turn(first, CODEGRAPH.explore)
    assert "Task" in turn.tools and "task" not in turn.tools and not turn.subagent
    [call] = render(first, ScriptedBackend(delegate=True).decide(turn), CODEGRAPH.explore).blocks
    assert call["name"] == "task" and call["input"]["subagent_type"] == "explore"  # OpenCode's types: lower case
    [task] = [t for t in first["tools"] if t["name"] == "task"]
    assert set(call["input"]) <= set(task["input_schema"]["properties"])
    child = next(r for r in requests if "You are a file search specialist" in json.dumps(r["system"]))
    assert "task" not in {t["name"] for t in child["tools"]}
    sub = read_turn(child, CODEGRAPH.explore)
    assert sub.subagent and sub.question == "How does res.send decide the Content-Type and ETag?"
    [grep] = render(child, ScriptedBackend(delegate=True).decide(sub), CODEGRAPH.explore).blocks
    assert grep["name"] == "bash" and grep["input"]["command"].startswith("grep -rliE ")
    after = next(r for r in requests if '"name": "task"' in json.dumps(r["messages"]) and r is not child)
    going_on = read_turn(after, CODEGRAPH.explore)
    assert [s.name for s in going_on.delegated] == ["Task"] and not going_on.steps
    [explore] = render(after, ScriptedBackend(delegate=True).decide(going_on), CODEGRAPH.explore).blocks
    assert explore["name"] == f"{CODEGRAPH.name}_{CODEGRAPH.explore}"  # delegated once, then on as usual


# -- the subagents' steps, out of OpenCode's database -------------------------------------------
_SCHEMA = (
    "CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT)",
    "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT)",
    "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, data TEXT)",
)


def _database(home: Path, part_table: str = _SCHEMA[2], run: str = "ses_a") -> Path:
    """An OpenCode database in ``home``'s data folder, in write-ahead-log mode, its last writes left in the log: the
    run's session ``run``, its child ``ses_b`` (a user prompt, a step with a bash call), ``ses_b``'s own child
    ``ses_c``, and an unrelated session ``ses_x``."""
    import sqlite3

    folder = home / ".local/share/opencode"
    folder.mkdir(parents=True)
    connection = sqlite3.connect(folder / "opencode.db")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    for statement in (*_SCHEMA[:2], part_table):
        connection.execute(statement)
    connection.executemany("INSERT INTO session VALUES (?, ?)",
                           [(run, None), ("ses_b", run), ("ses_c", "ses_b"), ("ses_x", None)])  # fmt: skip
    user, assistant = json.dumps({"role": "user"}), json.dumps({"role": "assistant"})
    messages = [("m1", "ses_b", user), ("m2", "ses_b", assistant), ("m3", "ses_c", assistant),
                ("m4", "ses_x", assistant)]  # fmt: skip
    connection.executemany("INSERT INTO message VALUES (?, ?, ?)", messages)
    bash = {"type": "tool", "tool": "bash", "callID": "toolu_1", "state": {"status": "completed", "output": "ok"}}
    parts = [("p1", "m1", "ses_b", 1, {"type": "text", "text": "the prompt"}),
             ("p2", "m2", "ses_b", 2, {"type": "step-start"}), ("p3", "m2", "ses_b", 3, bash),
             ("p4", "m2", "ses_b", 4, {"type": "step-finish", "reason": "tool-calls"}),
             ("p5", "m3", "ses_c", 5, {"type": "snapshot"}),
             ("p6", "m4", "ses_x", 6, {"type": "step-start"})]  # fmt: skip
    if part_table == _SCHEMA[2]:
        connection.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?)", [(*p[:4], json.dumps(p[4])) for p in parts])
    connection.commit()
    shutil.copyfile(folder / "opencode.db-wal", home / "wal")  # the log as it stood before the connection closed
    connection.close()
    shutil.copyfile(home / "wal", folder / "opencode.db-wal")
    return folder / "opencode.db"


def test_the_subagents_steps_are_read_out_of_opencodes_database_as_stream_events(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _database(home)
    dest = tmp_path / "run-x.subagents"
    assert keep_subagents(home, home / ".local/share", "ses_a", dest) == 2  # its child and the child's child
    events = [json.loads(line) for line in dest.read_text().splitlines()]
    assert [(e["type"], e["sessionID"], e["part"]["id"], e["timestamp"]) for e in events] == [
        ("step_start", "ses_b", "p2", 2), ("tool_use", "ses_b", "p3", 3), ("step_finish", "ses_b", "p4", 4)
    ]  # fmt: skip  # the user's prompt, parts the stream never carries, and other sessions left out
    assert events[1]["part"]["messageID"] == "m2" and events[1]["part"]["callID"] == "toolu_1"
    assert kept_subagents(tmp_path / "run-x.jsonl") == dest


def test_the_database_is_read_without_following_a_link_or_trusting_its_schema(tmp_path: Path) -> None:
    home = tmp_path / "home"
    database = _database(home)
    database.rename(tmp_path / "elsewhere.db")
    database.symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(UntrustedFile, match=r"opencode\.db"):
        keep_subagents(home, home / ".local/share", "ses_a", tmp_path / "out")
    viewed = tmp_path / "viewed"
    _database(viewed, "CREATE VIEW part AS SELECT 'p' AS id, 'm2' AS message_id, 'ses_b' AS session_id, "
                      "0 AS time_created, '{}' AS data")  # fmt: skip
    with pytest.raises(SubagentsError, match="not OpenCode's session database"):
        keep_subagents(viewed, viewed / ".local/share", "ses_a", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- the driver ---------------------------------------------------------------------------------
def test_a_turn_that_ran_a_subagent_has_its_steps_kept_and_a_link_in_the_databases_place_ends_the_run(
    tmp_path: Path,
) -> None:
    recorded = DATA / "delegated" / "events.jsonl"
    run_session = json.loads(recorded.read_text().splitlines()[0])["sessionID"]
    fake = {"OPENCODE_FAKE_EVENTS": str(recorded)}
    setup = _setup(tmp_path / "kept")
    _database(setup.home, run=run_session)
    run, _ = drive_fake(OPENCODE, FAKE, setup, tmp_path / "kept", fake)
    assert not isinstance(run, Exception), run
    kept = [json.loads(line) for line in kept_subagents(run.segments[0]).read_text().splitlines()]
    assert {e["sessionID"] for e in kept} == {"ses_b"} and len(kept) == 3
    assert not kept_subagents(_drive(tmp_path / "none", "ok")[0].segments[0]).exists()  # no task call: nothing read
    setup = _setup(tmp_path / "linked")
    database = _database(setup.home, run=run_session)
    database.rename(tmp_path / "elsewhere.db")
    database.symlink_to(tmp_path / "elsewhere.db")
    error, _ = drive_fake(OPENCODE, FAKE, setup, tmp_path / "linked", fake)
    assert isinstance(error, TurnError), error
    assert re.search(r"turn 1: the subagents' steps \(task\) could not be read out of OpenCode's database: .*"
                     r"opencode\.db: a link", str(error)), error  # fmt: skip


def _drive(tmp_path: Path, how: str, questions: tuple[str, ...] = ("Q1?",), timeout_s: float = 5.0) -> tuple:
    return drive_fake(OPENCODE, FAKE, _setup(tmp_path), tmp_path, {"OPENCODE_FAKE": how}, questions, timeout_s)


def test_turns_are_driven_continued_and_the_config_kept_beside_them(tmp_path: Path) -> None:
    run, _ = _drive(tmp_path, "ok", ("Q1?", "Q 2?"))
    assert not isinstance(run, Exception), run
    session_id = json.loads(_segments("with")[0].read_text().splitlines()[0])["sessionID"]
    assert [p.name for p in run.segments] == ["run-with-1.jsonl", "run-with-1.t2.jsonl"]
    assert run.session_id == session_id
    argv = [json.loads(line) for line in (tmp_path / "home" / "argv.jsonl").read_text().splitlines()]
    assert argv == [["run", "--format", "json", "--pure", "--", "Q1?"],
                    ["run", "--format", "json", "--pure", "--session", session_id, "--", "Q 2?"]]  # fmt: skip
    assert kept_config(run.segments[0]).read_bytes() == (tmp_path / "config" / "opencode.json").read_bytes()
    assert not kept_config(run.segments[1]).exists()
    session = OPENCODE.read_transcript(run.segments)
    assert session.mcp_servers == () and len(session.answer_texts()) == 2


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("error", r"turn 1: opencode reported an error: Cannot connect to API.*; turns 2-2 not run"),
        ("crash", r"turn 1: opencode exited 1 without ending the turn"),
        ("silent", r"turn 1: opencode timed out after 3s without ending the turn"),
    ],
)
def test_a_turn_that_fails_or_never_ends_ends_the_run(tmp_path: Path, how: str, message: str) -> None:
    error, out = _drive(tmp_path, how, ("Q1?", "Q2?"), timeout_s=3.0)
    assert isinstance(error, TurnError) and error.run.segments == [out / "run-with-1.jsonl"]
    assert re.search(message, str(error)), error


def test_a_cli_lingering_after_its_answer_is_stopped_and_its_stream_kept(tmp_path: Path) -> None:
    fake = tmp_path / "opencode"
    fake.write_text(FAKE, encoding="utf-8")
    fake.chmod(0o755)
    config = OPENCODE.configure(_setup(tmp_path))
    env = {**os.environ, "HOME": str(tmp_path / "home"), **config.env, "OPENCODE_FAKE": "hang"}
    options = OpenCodeOptions(opencode=str(fake), config=config.files["config"], timeout_s=30.0, exit_grace_s=0.5)
    run = run_opencode(["Q?"], label="with-1", out_dir=tmp_path / "out", cwd=tmp_path, env=env, options=options)
    assert run.hung_after_result == [True] and run.wall_s[0] < 10
    assert OPENCODE.read_transcript(run.segments).answer_texts()


def test_opencode_is_driven_headless_only_in_its_configured_environment(tmp_path: Path) -> None:
    config = OPENCODE.configure(_setup(tmp_path))
    build = Provisioned("opencode", tmp_path / "opencode", OPENCODE.version, OPENCODE.version)
    drive = {"config": config, "options": DriveOptions(), "label": "x", "out_dir": tmp_path, "cwd": tmp_path}
    with pytest.raises(ValueError, match="driven headless only"):
        OPENCODE.drive(Drive(build, ["Q?"], mode="tmux", env=dict(config.env), **drive))
    with pytest.raises(ValueError, match=r"does not set XDG_CONFIG_HOME as its config does"):
        OPENCODE.drive(Drive(build, ["Q?"], mode="headless", env={}, **drive))
    with pytest.raises(ValueError, match="no question"):
        run_opencode([], label="x", out_dir=tmp_path, cwd=tmp_path, env={},
                     options=OpenCodeOptions(opencode="opencode", config=config.files["config"]))  # fmt: skip


def test_claude_codes_reader_refuses_opencodes_streams() -> None:
    """The formats do not overlap: Claude Code's reader names the file it cannot read, rather than reading nothing."""
    with pytest.raises(TranscriptError, match="not a Claude Code transcript"):
        read_segments(_segments("with"))


def test_a_finished_opencode_turn_counts_as_complete_for_a_resumed_campaign(tmp_path: Path) -> None:
    events = _segments("with")[0].read_text(encoding="utf-8").splitlines()
    assert ends_with_result(_segments("with")[0], OPENCODE)  # its last event: the answer's step_finish
    cut = tmp_path / "run-with-1.jsonl"
    cut.write_text("\n".join(events[:3]) + "\n", encoding="utf-8")  # ends with a step_finish for tool calls
    assert '"tool-calls"' in events[2] and not ends_with_result(cut, OPENCODE)


def test_a_response_opencode_never_kept_is_passed_over_in_the_pairing() -> None:
    """A stream cut off mid-response is retried by OpenCode without a trace in its own stream: the record holds a
    response no step is (seen with the stand-in's ``break`` fault); the steps pair with the responses after it."""
    session, entries = read_opencode(_segments("with")), read_requests(DATA / "with" / "requests.jsonl")
    first = next(i for i, e in enumerate(entries) if e["request"].get("tools"))
    cut = json.loads(json.dumps(entries[first]))
    cut["response"]["id"] = "msg_cut_off"
    for block in cut["response"]["content"]:
        block["id"] = "toolu_cut_off"
    retried = [*entries[:first], cut, *entries[first:]]
    assert evidence(session, retried, tool=CODEGRAPH).intact
    assert "msg_cut_off" not in paired_responses(session, retried).values()
    assert paired_responses(session, retried) == paired_responses(session, entries)


def test_subagents_run_side_by_side_pair_with_their_own_responses() -> None:
    """Two ``task`` calls in one step run their subagents at once: their requests interleave at the model, while the
    reader lays each child's steps after its call. Each thread is paired in its own order."""
    session = OpenCodeSession()

    def step(message_id: str, thread: str, calls: tuple[str, ...] = (), text: str = "") -> None:
        message = Message(message_id, thread, None, 0, blocks=[{"type": "text", "text": text}] if text else [])
        message.calls = [ToolCall(call, "Bash", {}, thread, message_id) for call in calls]
        session.timeline.append(message)
        session.calls.extend(message.calls)

    step("m1", MAIN, ("toolu_A", "toolu_B"))
    step("a1", "toolu_A", ("toolu_a1",))
    step("a2", "toolu_A", text="A found it")
    step("b1", "toolu_B", ("toolu_b1",))
    step("b2", "toolu_B", text="B found it")
    step("m2", MAIN, text="The answer")

    def answered(response: str, calls: tuple[str, ...] = (), text: str = "") -> dict:
        content = [{"type": "tool_use", "id": c, "name": "bash", "input": {}} for c in calls]
        content += [{"type": "text", "text": text}] if text else []
        return {"method": "POST", "path": "/v1/messages", "request": {"tools": [{"name": "bash"}], "messages": []},
                "response": {"id": response, "content": content}}  # fmt: skip

    entries = [answered("r_m1", ("toolu_A", "toolu_B")), answered("r_a1", ("toolu_a1",)),
               answered("r_b1", ("toolu_b1",)), answered("r_b2", text="B found it"),
               answered("r_a2", text="A found it"), answered("r_m2", text="The answer")]  # fmt: skip
    paired = paired_responses(session, entries)
    assert paired == {"m1": "r_m1", "a1": "r_a1", "a2": "r_a2", "b1": "r_b1", "b2": "r_b2", "m2": "r_m2"}
    assert not [p for p in evidence(session, entries, tool=CODEGRAPH).problems if "the model sent no such message" in p]
