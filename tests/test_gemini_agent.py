"""Gemini CLI as a CodingAgent, without the real CLI: its config and deny policy, the stand-in of the Gemini API, the
reader over recorded real sessions (tests/data/gemini), its driver around a scripted ``gemini``.
(tests/test_gemini_cli.py runs the real one.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.fake_agent import agent_setup

from pytest_agent_eval.agents import agent_named
from pytest_agent_eval.agents.base import Drive, DriveOptions, McpServer, load_agent
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.agent import read_rules
from pytest_agent_eval.agents.gemini.cassette import sent_call
from pytest_agent_eval.agents.gemini.config import BASE_URL_VAR, KEY_VAR, TRUSTED_FOLDERS_VAR, turn_command
from pytest_agent_eval.agents.gemini.driver import find_chat_in
from pytest_agent_eval.agents.gemini.stand_in import gemini_name, read_turn, reply_parts
from pytest_agent_eval.agents.gemini.transcript import (
    common_call,
    common_name,
    find_chat,
    is_gemini_events,
    read_gemini,
)
from pytest_agent_eval.campaign.store import ends_with_result
from pytest_agent_eval.harness.drivers import TurnError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.untrusted import UntrustedFile
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.metrics.occupancy import FAMILIES, family, occupancy
from pytest_agent_eval.metrics.truth import read_truth_log, resident_truth
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.gemini import assemble, stream_frames, usage_metadata
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.model.sse import Reply
from pytest_agent_eval.model.usage import MESSAGE_FRAME_TOKENS, UsageModel, count_tokens, text_tokens
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Compaction, Message, ToolResult, UserText

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/gemini"
ARMS = ("with", "without", "three-turns")
QUESTION = "How does res.send decide the Content-Type and ETag?"
SECOND = "Where is the ETag function configured, and how does the app setting reach res.send?"
THIRD = "What would I change to make res.send skip the ETag for bodies larger than 1 MB?"


def _segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("events*.jsonl"), key=lambda p: (len(p.name), p.name))


def _session(arm: str):
    return read_gemini(_segments(DATA / arm))


# -- config and deny ------------------------------------------------------------------------------
def test_the_config_points_gemini_at_the_harness_and_serves_the_tool_in_the_with_arm_only(tmp_path: Path) -> None:
    server = McpServer("codegraph", ("/opt/cg", "serve", "--mcp", "--path", "/r e/po"), {"DO_NOT_TRACK": "1"})
    with_arm = GEMINI.configure(agent_setup(tmp_path / "with", (server,)))
    settings = json.loads(with_arm.files["settings"].read_text(encoding="utf-8"))
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False and settings["general"]["maxAttempts"] == 1
    served = {"command": "/opt/cg", "args": ["serve", "--mcp", "--path", "/r e/po"], "env": {"DO_NOT_TRACK": "1"}}
    assert settings["mcpServers"] == {"codegraph": {**served, "trust": True}}
    without = GEMINI.configure(agent_setup(tmp_path / "without"))
    assert "mcpServers" not in json.loads(without.files["settings"].read_text(encoding="utf-8"))
    for arm in (with_arm, without):
        [rule] = read_rules(arm.files["policy"].read_text(encoding="utf-8"))
        assert rule == {"toolName": "run_shell_command", "commandPrefix": "codegraph", "decision": "deny",
                        "priority": 900, "denyMessage": CODEGRAPH.deny_reason}  # fmt: skip
        assert arm.readable == (arm.files["policy"], arm.files["trusted_folders"])
        # the harness's files live outside HOME: the settings bound over a placeholder, the user configuration empty
        home = arm.files["gemini_dir"].parent
        assert not any(arm.files[k].is_relative_to(home) for k in ("settings", "policy", "trusted_folders"))
        shown = {dest.relative_to(home): source for source, dest in arm.binds}
        assert shown[Path(".gemini/settings.json")] == arm.files["settings"]
        assert shown[Path(".gemini/GEMINI.md")].read_text() == "" and not any(shown[Path(".gemini/policies")].iterdir())
        assert Path(".agents/skills") in shown and all(dest.exists() for _, dest in arm.binds)  # the placeholders
        # not in policies/: given as an admin policy (turn_command), not read again as a user one
        assert arm.files["policy"].parent != arm.files["gemini_dir"] / "policies"
    env = GEMINI.environment("http://127.0.0.1:4321/")
    assert env[BASE_URL_VAR] == "http://127.0.0.1:4321" and env[KEY_VAR] == "agent-eval-local-stand-in"
    # written again (the block probe's, then each attempt's): never through a link the agent planted in HOME
    host = tmp_path / "host-file"
    host.write_text("the host's\n")
    placeholder = without.files["gemini_dir"] / "settings.json"
    placeholder.unlink()
    placeholder.symlink_to(host)
    with pytest.raises(UntrustedFile, match=r"settings\.json: not a file the harness can bind over"):
        GEMINI.configure(agent_setup(tmp_path / "without"))
    assert host.read_text() == "the host's\n"
    linked = tmp_path / "linked"
    (linked / "home").mkdir(parents=True)
    (linked / "home" / ".gemini").symlink_to(tmp_path / "with" / "home" / ".gemini")
    with pytest.raises(UntrustedFile, match="a link or a file on the way"):
        GEMINI.configure(agent_setup(linked))


def test_the_config_trusts_no_folder_by_file_and_names_the_attempts_files_in_the_environment(tmp_path: Path) -> None:
    """The settings load before ``--skip-trust`` must see the workspace untrusted, whatever folder it is in
    (config.py): folder trust on, a trusted-folders file of the harness's trusting none, named by the environment,
    as is Gemini CLI's home; the variables a repository's ``.env`` would set are the harness's."""
    config = GEMINI.configure(agent_setup(tmp_path))
    settings = json.loads(config.files["settings"].read_text(encoding="utf-8"))
    assert settings["security"]["folderTrust"] == {"enabled": True}
    assert json.loads(config.files["trusted_folders"].read_text(encoding="utf-8")) == {"/": "DO_NOT_TRUST"}
    home = config.files["gemini_dir"].parent
    assert config.env == {TRUSTED_FOLDERS_VAR: str(config.files["trusted_folders"]), "GEMINI_CLI_HOME": str(home)}
    env = GEMINI.process_environment({"HTTPS_PROXY": "http://proxy.host:3128", "PATH": "/bin"}, "http://127.0.0.1:1")
    assert env["GEMINI_SYSTEM_MD"] == "false" and env["GEMINI_RESTRICTED_MODE"] == "false"
    assert all(env[v] == "" for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"))


def test_the_deny_policy_is_checked_as_gemini_matches_it(tmp_path: Path) -> None:
    config = GEMINI.configure(agent_setup(tmp_path))
    assert GEMINI.check_deny(config, CODEGRAPH.cli, {}, set()) == []
    policy = config.files["policy"]
    text = policy.read_text(encoding="utf-8")
    for broken, said in [
        (text.replace('"deny"', '"allow"'), "`codegraph --version` is allow"),
        (text.replace('commandPrefix = "codegraph"', 'commandPrefix = "codegraphx"'), "is allow"),
        (text.replace('commandPrefix = "codegraph"', 'commandPrefix = ["codegraph", "ls"]'), "`ls` is deny"),
        (text.replace(json.dumps(CODEGRAPH.deny_reason), '"no"'), "denied without the mark"),
        (text.replace("[[rule]]", "[rule]"), "not a policy file"),
    ]:
        policy.write_text(broken, encoding="utf-8")
        problems = GEMINI.check_deny(config, CODEGRAPH.cli, {}, set())
        assert any(said in p for p in problems), (said, problems)


def test_gemini_is_selected_by_its_module_and_by_its_name_in_records() -> None:
    assert load_agent("pytest_agent_eval.agents.gemini:GEMINI") is GEMINI and agent_named("gemini") is GEMINI
    assert (GEMINI.name, GEMINI.api, GEMINI.modes, GEMINI.package, GEMINI.version) == (
        "gemini", "gemini", ("headless",), "@google/gemini-cli", "0.61.0")  # fmt: skip
    policy = Path("/run/home-files/agent-eval/deny.toml")
    assert turn_command("gemini", "m", "Q?", "S", resume=False, policy=policy) == [
        "gemini", "-m", "m", "-p", "Q?", "--output-format", "stream-json", "--yolo", "--skip-trust",
        "--extensions", "none", "--admin-policy", str(policy), "--session-id", "S"]  # fmt: skip
    assert turn_command("gemini", "m", "Q2", "S", resume=True, policy=policy)[-2:] == ["--resume", "S"]


# -- the stand-in of the Gemini API ---------------------------------------------------------------------
def _last_request(arm: str) -> dict:
    return [e for e in read_requests(DATA / arm / "requests.jsonl") if "stream" in e["path"]][-1]["request"]


def test_the_stand_in_reads_a_recorded_request_in_the_common_vocabulary() -> None:
    request = _last_request("without")
    turn = read_turn(request)
    assert turn.question == QUESTION and turn.cwd.endswith("/without/repo")
    assert {"Read", "Grep", "Bash"} <= set(turn.tools)
    assert [s.name for s in turn.steps] == ["Grep", "Read", "Read", "Bash"]
    assert turn.steps[0].result.splitlines()[0] == "lib/response.js" or "response.js" in turn.steps[0].result
    assert turn.steps[-1].result.startswith("Tool execution denied by policy.") and turn.steps[-1].is_error
    with_turn = read_turn(_last_request("with"))
    assert "mcp__codegraph__codegraph_explore" in with_turn.tools
    assert with_turn.steps[0].name == "mcp__codegraph__codegraph_explore"
    assert with_turn.steps[0].result.startswith("**Exploration:")
    assert common_name("mcp_codegraph_codegraph_explore") == "mcp__codegraph__codegraph_explore"
    assert gemini_name("mcp__codegraph__codegraph_explore") == "mcp_codegraph_codegraph_explore"


def test_the_policy_reply_is_rendered_in_geminis_tools() -> None:
    request = _last_request("with")
    request = {**request, "contents": request["contents"][:1]}  # the question alone: explore first
    [part] = reply_parts(request, ScriptedBackend().decide(read_turn(request)))
    assert part["functionCall"]["name"] == "mcp_codegraph_codegraph_explore"
    assert part["functionCall"]["args"] == {"query": QUESTION} and part["functionCall"]["id"]
    request = _last_request("without")
    request = {**request, "contents": request["contents"][:1]}
    [part] = reply_parts(request, ScriptedBackend().decide(read_turn(request)))
    assert part["functionCall"]["name"] == "run_shell_command"
    assert part["functionCall"]["args"]["command"].startswith("grep -rliE 'res\\.send' ")


THINKS = {"hidden_thinking": (0, 3_000), "summarised": True, "visible_thinking": (600,)}


def _thinking_request(include: bool) -> dict:
    request = _last_request("without")
    config = {"thinkingConfig": {"includeThoughts": True}} if include else {}
    return {**request, "contents": request["contents"][:1], "generationConfig": config}  # the question alone


def test_the_stand_ins_thinking_is_thought_parts_as_asked_counted_apart_and_signed_on_its_call() -> None:
    request = _thinking_request(include=True)  # Gemini CLI 0.61.0 asks includeThoughts
    reply = ScriptedBackend(**THINKS).decide(read_turn(request))
    thought, call = reply_parts(request, reply)
    assert thought == {"text": reply.blocks[0]["thinking"], "thought": True} and len(thought["text"]) == 600
    assert call["functionCall"]["name"] == "run_shell_command" and call["thoughtSignature"]
    usage = usage_metadata(100, 0, [thought, call])
    assert usage["thoughtsTokenCount"] == text_tokens(thought["text"])  # nothing hidden at step 0
    answer = {"functionCall": call["functionCall"]}
    assert usage["candidatesTokenCount"] == count_tokens([answer])  # the thinking is not the answer's
    assert usage["totalTokenCount"] == 100 + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    # not asked: no thought part; the signature declares what the parts do not show, all of it counted
    [unasked] = reply_parts(_thinking_request(include=False), reply)
    assert usage_metadata(100, 0, [unasked])["thoughtsTokenCount"] == usage["thoughtsTokenCount"]
    # streamed: the thought in chunks flagged as thought, the signature on its call, read back whole
    frames = b"".join(stream_frames([thought, call], "m", usage, "r"))
    chunks = [json.loads(line[6:])["candidates"][0]["content"]["parts"][0] for line in frames.decode().splitlines()
              if line.startswith("data: ")]  # fmt: skip
    assert len(chunks) > 2 and all(c.get("thought") for c in chunks[:-1]) and "thoughtSignature" in chunks[-1]
    assert assemble(frames)["candidates"][0]["content"]["parts"] == [thought, call]
    assert reply_parts(request, Reply.text("OK.")) == [{"text": "OK."}]  # no thinking, no signature


def test_thinking_the_cli_does_not_send_back_is_in_no_prompt_but_its_signature_is() -> None:
    request = _thinking_request(include=True)
    with serve(ScriptedBackend(**THINKS)) as server:
        base = f"{server.url}/v1beta/models/stand-in-scripted:generateContent"
        ask = urllib.request.Request(base, json.dumps(request).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(ask, timeout=10) as answer:
            response = json.loads(answer.read())
    parts = response["candidates"][0]["content"]["parts"]
    assert response["usageMetadata"]["thoughtsTokenCount"] >= 600 // 6
    sent_back = [p for p in parts if not p.get("thought")]  # as Gemini CLI 0.61.0 keeps the turn in its history
    later = {**request, "contents": [*request["contents"], {"role": "model", "parts": sent_back}]}
    count = UsageModel().count_prompt(later)
    assert count.hidden == 0  # the API carries no thinking in a later prompt, only the signature's text
    added = MESSAGE_FRAME_TOKENS + sum(map(count_tokens, sent_back))
    assert count.tokens - UsageModel().count_prompt(request).tokens == added


def test_the_server_answers_the_gemini_routes_with_honest_counts() -> None:
    request = _last_request("with")
    with serve(ScriptedBackend()) as server:
        base = f"{server.url}/v1beta/models/stand-in-scripted"

        def post(method: str, body: dict) -> bytes:
            data = json.dumps(body).encode()
            ask = urllib.request.Request(f"{base}:{method}", data, {"Content-Type": "application/json"})
            with urllib.request.urlopen(ask, timeout=10) as answer:
                return answer.read()

        frames = [json.loads(line[6:]) for line in post("streamGenerateContent?alt=sse", request).decode().splitlines()
                  if line.startswith("data: ")]  # fmt: skip
        whole = json.loads(post("generateContent", request))
        counted = json.loads(post("countTokens", {"contents": request["contents"]}))
        [truth, _] = server.truth
    text = "".join(p.get("text", "") for f in frames for p in f["candidates"][0]["content"]["parts"])
    assert text.startswith(f"Answer to: {QUESTION}") and frames[-1]["candidates"][0]["finishReason"] == "STOP"
    usage = frames[-1]["usageMetadata"]
    assert usage["promptTokenCount"] == truth.count.tokens == UsageModel().count_prompt(request).tokens
    assert frames[-1]["responseId"] == truth.message_id and {f["responseId"] for f in frames} == {truth.message_id}
    assert whole["candidates"][0]["content"]["parts"][0]["text"] == text
    assert whole["usageMetadata"]["cachedContentTokenCount"] == usage["promptTokenCount"]  # the same prompt again
    assert counted["totalTokens"] == UsageModel().count({"contents": request["contents"]})
    # each functionResponse part's tokens are kept by its call id, as a tool_result's are
    results = [p["functionResponse"]["id"] for c in request["contents"] for p in c["parts"] if "functionResponse" in p]
    assert sorted(truth.count.results) == sorted(results)


# -- the reader, over recorded real sessions --------------------------------------------------------------
def test_a_recorded_with_arm_reads_into_the_common_session() -> None:
    session = _session("with")
    assert is_gemini_events(DATA / "with" / "events.jsonl") and not is_gemini_events(DATA / "with" / "truth.jsonl")
    assert find_chat(DATA / "with" / "events.jsonl").name.startswith("session-")
    assert [m.id for m in session.messages()] == ["gemini-response-1", "gemini-response-2", "gemini-response-3"]
    assert [c.name for c in session.calls] == ["mcp__codegraph__codegraph_explore", "Bash"]
    explore, read = session.calls
    assert explore.result.text.startswith("**Exploration:") and not explore.result.is_error
    assert read.input["command"].startswith("cat -n ") and read.result.text.lstrip().startswith("1\t")
    assert session.answer_texts()[0].startswith(f"Answer to: {QUESTION}")
    assert session.messages()[-1].usage.ctx == json.loads((DATA / "with/truth.jsonl").read_text().splitlines()[-1])[
        "tokens"]  # fmt: skip
    assert "response_ids" in session.unread and session.stand_in == "stand-in-scripted"
    report = contamination(session, tool=CODEGRAPH)
    assert report.mcp_calls and not report.contaminated


def test_a_responses_thinking_is_output_of_its_message_and_no_block_of_it(tmp_path: Path) -> None:
    """tokens.thoughts (the API's thoughtsTokenCount, apart from candidatesTokenCount) is output, as a Messages API's
    output_tokens counts thinking; the thoughts the record keeps never went back to the model: no block."""
    chat = next((DATA / "with").glob("session-*.jsonl"))
    lines = []
    for line in chat.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini" and isinstance(record.get("tokens"), dict):
            record["tokens"]["thoughts"] = 1_000
            record["thoughts"] = [{"subject": "Planning", "description": "look at res.send", "timestamp": "t"}]
        lines.append(json.dumps(record))
    (tmp_path / chat.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain, thinking = _session("with"), read_gemini(_segments(DATA / "with"), tmp_path / chat.name)
    assert [m.usage.output for m in thinking.messages()] == [m.usage.output + 1_000 for m in plain.messages()]
    assert [m.blocks for m in thinking.messages()] == [m.blocks for m in plain.messages()]
    assert occupancy(thinking, tool=CODEGRAPH).residual == occupancy(plain, tool=CODEGRAPH).residual


def test_a_recorded_without_arm_shows_the_denied_cli_call() -> None:
    session = _session("without")
    [cli] = [c for c in session.calls if c.input["command"].startswith(f"{CODEGRAPH.cli} ")]
    assert cli.result.is_error and CODEGRAPH.deny_marker in cli.result.text
    report = contamination(session, tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked) == (1, 1)
    assert [r.is_error for r in session.results] == [False]


def test_a_resumed_session_reads_each_request_once_though_the_cli_writes_its_history_again() -> None:
    session = _session("three-turns")
    counts = read_truth_log(DATA / "three-turns" / "truth.jsonl")
    assert len(session.messages()) == len(counts) == 12 and len(session.results) == 3
    called = [json.loads(line)["tool_id"].split("__", 1)[1] for path in _segments(DATA / "three-turns")
              for line in path.read_text().splitlines() if '"type":"tool_use"' in line]  # fmt: skip
    assert [c.id for c in session.calls] == called  # each call once, in order
    assert all(c.result is not None for c in session.calls)
    # the third turn's history, written again with the first turn's reads shortened, is a compaction: what stays
    [boundary] = [i for i, t in enumerate(session.timeline) if isinstance(t, Compaction)]
    before, after = session.timeline[:boundary], session.timeline[boundary:]
    assert [t.text for t in before if isinstance(t, UserText)][1:] == [QUESTION, SECOND, THIRD]
    assert before[0].text.startswith("<session_context>")  # the CLI's context, sent as the first user part
    assert isinstance(after[-1], Message) and after[-1].id == "gemini-response-12"
    reads = {c.id for c in session.calls[:3] if c.input["command"].startswith("cat -n")}
    kept = [t for t in after if isinstance(t, ToolResult) and t.call_id in reads]
    assert kept and all(t.chars < 2000 for t in kept)  # shortened
    assert contamination(session, tool=CODEGRAPH).cli_blocked == 3


@pytest.mark.parametrize("arm", ARMS)
def test_occupancy_of_a_gemini_session_matches_the_stand_ins_own_counts(arm: str) -> None:
    """Σ|estimate − truth| / Σ truth over the families ≤ 1%; the truth of a response is matched by its place (Gemini
    CLI's records keep no response id)."""
    session = _session(arm)
    counts = read_truth_log(DATA / arm / "truth.jsonl")
    by_id = dict(zip([m.id for m in session.messages()], counts.values(), strict=True))
    truth = resident_truth(session, by_id, tool=CODEGRAPH)
    assert truth is not None and sum(truth.values()) > 0
    estimate = occupancy(session, tool=CODEGRAPH).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


@pytest.mark.parametrize("arm", ["with", "without"])
def test_the_session_agrees_with_what_the_model_received(arm: str) -> None:
    entries = read_requests(DATA / arm / "requests.jsonl")
    report = evidence(_session(arm), entries, tool=CODEGRAPH)
    assert report.intact and report.requests == len(read_truth_log(DATA / arm / "truth.jsonl")), report.problems


def test_a_forged_chat_record_disagrees_with_what_the_model_received(tmp_path: Path) -> None:
    source = DATA / "without"
    for path in source.iterdir():
        shutil.copyfile(path, tmp_path / path.name)
    [chat] = tmp_path.glob("session-*.jsonl")
    text = chat.read_text(encoding="utf-8")
    assert CODEGRAPH.deny_reason in text
    chat.write_text(text.replace(CODEGRAPH.deny_reason, "**Exploration: res.send**"), encoding="utf-8")
    entries = read_requests(source / "requests.jsonl")
    problems = evidence(read_gemini(tmp_path / "events.jsonl"), entries, tool=CODEGRAPH).problems
    assert any("differs from what the model received" in p for p in problems), problems


def test_agent_eval_score_recognises_a_gemini_run(tmp_path: Path) -> None:
    events = DATA / "without" / "events.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest_agent_eval.cli", "score", str(events), "--json"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    card = json.loads(done.stdout)
    assert card["contamination"]["cli_blocked"] == 1
    shutil.copyfile(events, tmp_path / "events.jsonl")  # alone: the chat record is not beside it
    done = subprocess.run([sys.executable, "-m", "pytest_agent_eval.cli", "score", str(tmp_path / "events.jsonl")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    # alone: read as far as it goes, saying what the chat record would add
    assert done.returncode == 0 and "with --chat" in done.stdout and "not in this record (requests)" in done.stdout
    [chat] = (DATA / "without").glob("session-*.jsonl")
    done = subprocess.run([sys.executable, "-m", "pytest_agent_eval.cli", "score", str(tmp_path / "events.jsonl"),
                           "--chat", str(chat), "--brief"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "1 CLI calls, 1 denied" in done.stdout, done.stderr


def test_a_finished_gemini_turn_counts_as_complete_for_a_resumed_campaign(tmp_path: Path) -> None:
    assert ends_with_result(DATA / "with" / "events.jsonl", GEMINI)  # its last event: result
    cut = tmp_path / "run-with-1.jsonl"
    cut.write_text("\n".join((DATA / "with" / "events.jsonl").read_text().splitlines()[:-1]) + "\n")
    assert not ends_with_result(cut, GEMINI)


# -- the driver, around a scripted gemini -------------------------------------------------------------------
# A stand-in `gemini`: replays the recorded with-arm's events under the session id it was given, writes the chat
# record where Gemini CLI would, and records its argv; GEMINI_FAKE says how a turn goes ("ok", "error", "silent").
FAKE = f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
data = Path({str(DATA / "with")!r})
home = Path(os.environ["HOME"])
with open(home / "argv.jsonl", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
how = os.environ.get("GEMINI_FAKE", "ok")
if how == "silent":
    time.sleep(60)
session = sys.argv[sys.argv.index("--session-id" if "--session-id" in sys.argv else "--resume") + 1]
recorded = json.loads((data / "events.jsonl").read_text().splitlines()[0])["session_id"]
events = (data / "events.jsonl").read_text().replace(recorded, session).splitlines()
chats = home / ".gemini" / "tmp" / "repo" / "chats"
chats.mkdir(parents=True, exist_ok=True)
chat = next(data.glob("session-*.jsonl"))
(chats / f"session-2026-12-03T00-00-{{session[:8]}}.jsonl").write_text(chat.read_text().replace(recorded, session))
for line in events[:-1]:
    print(line, flush=True)
if how == "error":
    print(json.dumps({{"type": "result", "status": "error", "error": {{"type": "Error", "message": "fetch failed"}}}}))
else:
    print(events[-1], flush=True)
"""


def _drive(tmp_path: Path, how: str, questions: tuple[str, ...] = ("Q1?",), url: str | None = None):
    fake = tmp_path / "gemini"
    fake.write_text(FAKE, encoding="utf-8")
    fake.chmod(0o755)
    config = GEMINI.configure(agent_setup(tmp_path))
    with serve(ScriptedBackend()) as server:
        env = {**os.environ, **GEMINI.environment(url or server.url), "HOME": str(tmp_path / "home"),
               "GEMINI_FAKE": how}  # fmt: skip
        build = Provisioned("gemini", fake, GEMINI.version, GEMINI.version)
        options = DriveOptions(timeout_s=3.0, stall_s=30.0, sandbox=None)
        try:
            return GEMINI.drive(Drive(build, questions, mode="headless", config=config, options=options,
                                      label="with-1", out_dir=tmp_path / "out", cwd=tmp_path, env=env))
        except TurnError as error:
            return error


def test_turns_are_driven_resumed_and_the_chat_record_is_kept_beside_them(tmp_path: Path) -> None:
    run = _drive(tmp_path, "ok", ("Q1?", "Q2?"))
    assert not isinstance(run, Exception), run
    assert [p.name for p in run.segments] == ["run-with-1.jsonl", "run-with-1.t2.jsonl"] and run.exit_codes == [0, 0]
    argv = [json.loads(line) for line in (tmp_path / "home" / "argv.jsonl").read_text().splitlines()]
    assert argv[0][-2:] == ["--session-id", run.session_id] and argv[1][-2:] == ["--resume", run.session_id]
    assert argv[0][:5] == ["-m", "stand-in-scripted", "-p", "Q1?", "--output-format"]
    session = GEMINI.read_transcript(run.segments)
    assert session.chat_file == tmp_path / "out" / "run-with-1.chat" and session.session_id == run.session_id


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("error", r"turn 1: gemini reported error: fetch failed.*; turns 2-2 not run"),
        ("silent", r"turn 1: gemini timed out after 3s without ending the turn"),
    ],
)
def test_a_turn_that_fails_or_never_ends_ends_the_run(tmp_path: Path, how: str, message: str) -> None:
    error = _drive(tmp_path, how, ("Q1?", "Q2?"))
    assert isinstance(error, TurnError) and [p.name for p in error.run.segments] == ["run-with-1.jsonl"]
    assert re.search(message, str(error), re.S), error


def test_an_unreachable_model_fails_the_turn_at_once_saying_so(tmp_path: Path) -> None:
    """Gemini CLI would retry an unreachable model for minutes: the driver fails the turn within seconds."""
    with serve(ScriptedBackend()) as gone:
        url = gone.url
    started = time.monotonic()
    error = _drive(tmp_path, "ok", ("Q1?",), url=url)
    assert isinstance(error, TurnError) and time.monotonic() - started < 10
    assert re.search(rf"turn 1: the model at {re.escape(url)} is unreachable \(.*refused.*\)", str(error)), error
    assert not (tmp_path / "home" / "argv.jsonl").exists()  # gemini was never started


def test_the_chat_record_is_found_without_following_the_agents_links(tmp_path: Path) -> None:
    home, session = tmp_path / "home", "602d0540-aaaa-bbbb-cccc-000000000000"
    chats = home / ".gemini" / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    secret = tmp_path / "secret.jsonl"
    secret.write_text("host file\n")
    (chats / "session-1-602d0540.jsonl").symlink_to(secret)  # a planted link is no chat record
    (home / ".gemini" / "tmp" / "elsewhere").symlink_to(tmp_path)  # nor is a linked folder walked
    assert find_chat_in(home, session) is None
    (chats / "session-2-602d0540.jsonl").write_text("{}\n")
    (chats / "session-3-602d0540.jsonl").write_text("{}\n")  # a resumed turn's own, a minute later
    assert str(find_chat_in(home, session)) == ".gemini/tmp/repo/chats/session-2-602d0540.jsonl"
    (home / ".gemini" / "tmp").rename(tmp_path / "moved")
    (home / ".gemini" / "tmp").symlink_to(tmp_path / "moved")
    with pytest.raises(UntrustedFile, match="a link on the way"):
        find_chat_in(home, session)
    assert find_chat_in(tmp_path / "nowhere", session) is None


def test_gemini_is_driven_headless_only(tmp_path: Path) -> None:
    config = GEMINI.configure(agent_setup(tmp_path))
    build = Provisioned("gemini", tmp_path / "gemini", GEMINI.version, GEMINI.version)
    with pytest.raises(ValueError, match="driven headless only"):
        GEMINI.drive(Drive(build, ["Q?"], mode="tmux", config=config, options=DriveOptions(), label="x",
                           out_dir=tmp_path, cwd=tmp_path, env={"HOME": str(tmp_path / "home")}))


def test_a_backend_without_a_policy_refuses_the_gemini_routes_saying_so() -> None:
    class Relayed:  # as the forwarding and cassette backends: Messages API only
        def respond(self, request: dict, headers: object = None) -> None:
            raise AssertionError("not asked")

        def describe(self) -> str:
            return "a Messages-only backend"

    with serve(Relayed()) as server:
        ask = urllib.request.Request(f"{server.url}/v1beta/models/m:streamGenerateContent?alt=sse",
                                     json.dumps({"contents": []}).encode())  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(ask, timeout=10)
        assert refused.value.code == 400
        assert "does not answer the Gemini API: a Messages-only backend" in refused.value.read().decode()
        assert server.requests == []  # refused before it was counted


def test_the_forwarder_adds_the_real_key_outside_the_sandbox_and_records_what_it_relayed(tmp_path: Path) -> None:
    """The real Gemini API through the harness's forwarder: the agent's placeholder key never leaves, the harness's
    key is added, the answer is relayed byte for byte and kept in the request record as the response it was."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from pytest_agent_eval.model.google import GeminiForwarder

    seen: list[tuple[str, dict]] = []
    parts = [{"functionCall": {"id": "call-1", "name": "run_shell_command", "args": {"command": "ls"}}}]
    frames = b"".join(stream_frames(parts, "gemini-real", {"promptTokenCount": 7}, "resp-1"))

    class Upstream(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(frames)))
            self.end_headers()
            self.wfile.write(frames)

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    Thread(target=upstream.serve_forever, daemon=True).start()
    with pytest.raises(ValueError, match="needs a real GEMINI_API_KEY"):
        GeminiForwarder(api_key="agent-eval-local-stand-in")
    forwarder = GeminiForwarder(api_key="the-harness-key", base_url=f"http://127.0.0.1:{upstream.server_port}")
    try:
        with serve(forwarder) as server, server.log.into(tmp_path / "requests.jsonl"):
            path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
            ask = urllib.request.Request(
                f"{server.url}{path}",
                json.dumps({"contents": []}).encode(),
                {"x-goog-api-key": "agent-eval-local-stand-in", "User-Agent": "GeminiCLI"},
            )
            with urllib.request.urlopen(ask, timeout=10) as answer:
                assert answer.read() == frames
    finally:
        upstream.shutdown()
    [(upstream_path, headers)] = seen
    assert upstream_path == path and headers["x-goog-api-key"] == "the-harness-key"
    assert headers["user-agent"] == "GeminiCLI"
    [entry] = read_requests(tmp_path / "requests.jsonl")
    assert entry["response"]["responseId"] == "resp-1"
    assert entry["response"]["candidates"][0]["content"]["parts"] == parts


def test_the_gemini_backend_is_the_forwarder_and_needs_the_harnesss_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agent_eval.model import GeminiForwarder
    from pytest_agent_eval.run.backends import make_backend, resolve_backend
    from pytest_agent_eval.settings.config import AgentEvalConfig

    real_key = "AIza" + "Sy9fQ2mLk7VbX3nR8tWcJ4hP6dGzE1aYu0o"  # the shape of a key Google issues
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert "needs a real GEMINI_API_KEY" in str(AgentEvalConfig(backend="gemini", agent=GEMINI).model_problem())
    with pytest.raises(ValueError, match="needs a real GEMINI_API_KEY"):
        make_backend("gemini")
    assert resolve_backend("auto", "gemini") == "scripted"  # no key: auto is the stand-in
    monkeypatch.setenv("GEMINI_API_KEY", "the-harness-key")  # not a key Google issues: still the stand-in
    assert resolve_backend("auto", "gemini") == "scripted"
    assert "needs a real GEMINI_API_KEY" in str(AgentEvalConfig(backend="gemini", agent=GEMINI).model_problem())
    monkeypatch.setenv("GEMINI_API_KEY", real_key)
    assert resolve_backend("auto", "gemini") == "gemini"
    assert AgentEvalConfig(backend="gemini", agent=GEMINI).model_problem() is None
    # the Gemini forwarder serves an agent speaking the Gemini API only
    assert "Claude Code speaks the messages API" in str(AgentEvalConfig(backend="gemini").model_problem())
    assert isinstance(make_backend("gemini"), GeminiForwarder)
    # the agent never gets it: its environment holds the placeholder
    env = GEMINI.process_environment(dict(os.environ), "http://127.0.0.1:1")
    assert env[KEY_VAR] == "agent-eval-local-stand-in" and real_key not in env.values()


def test_a_result_the_request_carries_twice_counts_twice_in_the_truth() -> None:
    """Gemini CLI 0.61.0 repeats each result in history it rewrote (tests/data/gemini/three-turns): the prompt holds
    it twice, and so does the stand-in's count of it."""
    answer = {"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "x " * 500}}}
    once = {"contents": [{"role": "user", "parts": [answer]}]}
    twice = {"contents": [{"role": "user", "parts": [answer, answer]}]}
    single = UsageModel().count_prompt(once).results["c1"]
    assert single > 500 and UsageModel().count_prompt(twice).results == {"c1": 2 * single}


# -- Gemini CLI's own tools in the common vocabulary --------------------------------------------------------------
def test_gemini_clis_own_file_tools_are_file_access_in_the_common_vocabulary() -> None:
    """A real model reads and searches with Gemini CLI's own tools as much as with the shell (and
    codebase_investigator has no shell): the metrics count them as file access only under the common names."""
    assert common_call({"name": "read_file", "args": {"file_path": "lib/a.js"}}) == ("Read", {"file_path": "lib/a.js"})
    grep = {"name": "grep_search", "args": {"pattern": "res\\.send", "dir_path": "lib", "include_pattern": "*.js"}}
    assert common_call(grep) == ("Grep", {"pattern": "res\\.send", "path": "lib", "glob": "*.js"})
    assert common_call({"name": "list_directory", "args": {"dir_path": "lib"}}) == ("LS", {"path": "lib"})
    names = ("read_file", "grep_search", "glob")
    assert [family(common_call({"name": name, "args": {}})[0], tool=CODEGRAPH) for name in names] == [
        "read", "search", "search"]  # fmt: skip
    assert common_call({"name": "run_shell_command", "args": {"command": "ls"}}) == ("Bash", {"command": "ls"})
    mcp = {"name": "mcp_codegraph_codegraph_explore", "args": {"query": "q"}}
    assert common_call(mcp) == ("mcp__codegraph__codegraph_explore", {"query": "q"})


def test_every_recorded_call_is_sent_again_as_the_model_sent_it() -> None:
    """The cassette renders a Session's calls back into Gemini's names and keys: over every call the recordings'
    models sent, the round trip gives the call as it was sent."""
    sent = [part["functionCall"] for path in sorted(DATA.glob("*/requests.jsonl")) for entry in read_requests(path)
            for candidate in (entry.get("response") or {}).get("candidates") or []
            for part in candidate.get("content", {}).get("parts") or [] if "functionCall" in part]  # fmt: skip
    assert {call["name"] for call in sent} >= {"run_shell_command", "grep_search", "invoke_agent", "complete_task"}
    for call in sent:
        assert sent_call(*common_call(call)) == {"name": call["name"], "args": call.get("args") or {}}
