"""Codex CLI as a CodingAgent, without the real CLI: its config files, its driver around a scripted ``codex``, the
rollout copied out of the agent's HOME. (tests/test_codex_cli.py runs the real one.)"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from support.fake_agent import agent_setup, drive_fake, fake_cli

from pytest_agent_eval.agents.base import Drive, DriveOptions, McpServer, load_agent
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.config import KEY_VAR, exec_command
from pytest_agent_eval.agents.codex.driver import CodexOptions, find_rollout_in, run_codex
from pytest_agent_eval.agents.codex.stand_in import output_items, read_turn
from pytest_agent_eval.campaign.store import ends_with_result
from pytest_agent_eval.harness.drivers import TurnError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.untrusted import UntrustedFile
from pytest_agent_eval.model import ScriptedBackend
from pytest_agent_eval.model.probe import TurnProbe
from pytest_agent_eval.tool import CODEGRAPH

pytestmark = pytest.mark.timeout(60)
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

DATA = Path(__file__).parent / "data/codex"
THREAD = "01a23956-bb2a-7470-9784-36a5c6997edb"  # the with-arm's recorded session
# A stand-in `codex`: replays the recorded with-arm session's events for `exec`, writes its rollout where Codex
# would, and records its argv; CODEX_FAKE says how a turn goes ("ok", "fail", "hang", "silent").
FAKE = f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
data = Path({str(DATA / "with")!r})
home = Path(os.environ["CODEX_HOME"])
with open(home.parent / "argv.jsonl", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
how = os.environ.get("CODEX_FAKE", "ok")
if how == "silent":
    time.sleep(60)
events = (data / "events.jsonl").read_text().splitlines()
for line in events[:-1] if how != "ok" else events:
    print(line, flush=True)
sessions = home / "sessions" / "2026" / "12" / "03"
sessions.mkdir(parents=True, exist_ok=True)
rollout = next(data.glob("rollout-*.jsonl"))
(sessions / rollout.name).write_text(rollout.read_text())
if how == "fail":
    print(json.dumps({{"type": "turn.failed", "error": {{"message": "stream disconnected"}}}}), flush=True)
if how == "hang":
    print(events[-1], flush=True)
    time.sleep(60)
"""


def test_the_config_points_codex_at_the_harness_and_serves_the_tool_in_the_with_arm_only(tmp_path: Path) -> None:
    server = McpServer("codegraph", ("/opt/cg", "serve", "--mcp", "--path", "/r e/po"), {"DO_NOT_TRACK": "1"})
    with_arm = CODEX.configure(agent_setup(tmp_path / "with", (server,)))
    config = tomllib.loads(with_arm.files["config"].read_text(encoding="utf-8"))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:4321/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == KEY_VAR and provider["request_max_retries"] == provider["stream_max_retries"] == 0
    assert (config["approval_policy"], config["sandbox_mode"], config["web_search"]) == (
        "never", "danger-full-access", "disabled")  # fmt: skip
    assert config["analytics"]["enabled"] is False and config["features"]["plugins"] is False
    # one Codex has no metadata for (MCP tools offered up front), and the stand-in's name (the report says so)
    assert config["model"] == ScriptedBackend.stand_in_model
    served = {"command": "/opt/cg", "args": ["serve", "--mcp", "--path", "/r e/po"], "env": {"DO_NOT_TRACK": "1"}}
    assert config["mcp_servers"] == {"codegraph": {**served, "required": True}}
    assert with_arm.env == {"CODEX_HOME": str(tmp_path / "with" / "home" / ".codex")}
    without = CODEX.configure(agent_setup(tmp_path / "without"))
    assert "mcp_servers" not in tomllib.loads(without.files["config"].read_text(encoding="utf-8"))
    for arm in (with_arm, without):
        rules = arm.files["rules"].read_text(encoding="utf-8")
        assert (
            'pattern = ["codegraph"]' in rules and 'decision = "forbidden"' in rules and CODEGRAPH.deny_reason in rules
        )
        # the harness's files live outside HOME, bound over placeholders in CODEX_HOME; its user configuration empty
        home = Path(arm.env["CODEX_HOME"])
        assert not arm.files["config"].is_relative_to(home.parent) and arm.readable == ()
        shown = {dest.relative_to(home.parent): source for source, dest in arm.binds}
        assert shown[Path(".codex/config.toml")] == arm.files["config"]
        assert shown[Path(".codex/rules")] == arm.files["rules"].parent
        assert shown[Path(".codex/AGENTS.md")].read_text() == "" and not any(shown[Path(".codex/skills")].iterdir())
        assert Path(".agents/skills") in shown and all(dest.exists() for _, dest in arm.binds)  # the placeholders
    # written again (the block probe's, then each attempt's): never through a link the agent planted in HOME
    host = tmp_path / "host-file"
    host.write_text("the host's\n")
    placeholder = tmp_path / "without" / "home" / ".codex" / "config.toml"
    placeholder.unlink()
    placeholder.symlink_to(host)
    with pytest.raises(UntrustedFile, match=r"config\.toml: not a file the harness can bind over"):
        CODEX.configure(agent_setup(tmp_path / "without"))
    assert host.read_text() == "the host's\n"
    linked = tmp_path / "linked"
    (linked / "home").mkdir(parents=True)
    (linked / "home" / ".codex").symlink_to(tmp_path / "with" / "home" / ".codex")
    with pytest.raises(UntrustedFile, match="a link or a file on the way"):
        CODEX.configure(agent_setup(linked))
    assert CODEX.environment("http://x")[KEY_VAR].startswith("sk-agent-eval")  # a placeholder, never a real key


def test_codex_is_selected_by_its_module_and_name() -> None:
    assert load_agent("pytest_agent_eval.agents.codex:CODEX") is CODEX
    assert (CODEX.name, CODEX.api, CODEX.modes, CODEX.package, CODEX.version) == (
        "codex", "responses", ("headless",), "@openai/codex", "0.171.0")  # fmt: skip
    assert exec_command("codex", "Q?") == ["codex", "exec", "--json", "--skip-git-repo-check", "Q?"]
    assert exec_command("codex", "Q2", "T") == ["codex", "exec", "resume", "T", "--json", "--skip-git-repo-check", "Q2"]


def test_the_block_probe_asks_for_one_shell_call_then_ends() -> None:
    shell = {"type": "function", "name": "exec_command", "parameters": {}}
    question = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "probe"}]}
    request = {"tools": [shell], "input": [question]}
    model = TurnProbe("codegraph --version")
    [call] = output_items(request, model.decide(read_turn(request)))
    assert call["name"] == "exec_command" and json.loads(call["arguments"]) == {"cmd": "codegraph --version"}
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "rejected"}
    request["input"] += [call, result]
    [answer] = output_items(request, model.decide(read_turn(request)))
    assert answer["type"] == "message"


def test_the_stand_in_hands_the_question_to_codexs_subagent_and_waits_for_it() -> None:
    """``delegate``: Codex's ``spawn_agent`` is the policy's Task; the child runs on its own, so the stand-in waits for
    it next; the child's requests (``x-openai-subagent``) get the subagent's policy; Codex's notification of the
    child's end is no new question."""
    request = json.loads((DATA / "without/last-request.json").read_text(encoding="utf-8"))
    question = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is ETag set?"}]}
    request["input"] = [question]
    model = ScriptedBackend(delegate=True)
    [spawn] = output_items(request, model.decide(read_turn(request)))
    assert (spawn["namespace"], spawn["name"]) == ("multi_agent_v1", "spawn_agent")
    assert json.loads(spawn["arguments"]) == {"message": "Where is ETag set?"}
    started = {
        "type": "function_call_output",
        "call_id": spawn["call_id"],
        "output": '{"agent_id":"A1","nickname":"N"}',
    }
    request["input"] += [spawn, started]
    [wait] = output_items(request, model.decide(read_turn(request)))
    assert (wait["name"], json.loads(wait["arguments"])["targets"]) == ("wait_agent", ["A1"])
    ended = {"type": "function_call_output", "call_id": wait["call_id"], "output": '{"status":{}}'}
    notice = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<subagent_notification>"}]}
    request["input"] += [wait, ended, notice]
    turn = read_turn(request)
    assert turn.question == "Where is ETag set?" and not turn.steps and len(turn.delegated) == 2
    [grep] = output_items(request, model.decide(turn))
    assert json.loads(grep["arguments"])["cmd"].startswith("grep ")
    child = {**request, "input": [question], "client_metadata": {"x-openai-subagent": "collab_spawn"}}
    assert read_turn(child).subagent and not read_turn(request).subagent


def _drive(tmp_path: Path, how: str, questions: tuple[str, ...] = ("Q1?",)) -> tuple[object, Path]:
    return drive_fake(CODEX, FAKE, agent_setup(tmp_path), tmp_path, {"CODEX_FAKE": how}, questions)


def test_turns_are_driven_resumed_and_the_rollout_is_kept_beside_them(tmp_path: Path) -> None:
    run, out = _drive(tmp_path, "ok", ("Q1?", "Q2?"))
    assert not isinstance(run, Exception)
    assert [p.name for p in run.segments] == ["run-with-1.jsonl", "run-with-1.t2.jsonl"] and run.session_id == THREAD
    argv = [json.loads(line) for line in (tmp_path / "home" / "argv.jsonl").read_text().splitlines()]
    assert argv == [["exec", "--json", "--skip-git-repo-check", "Q1?"],
                    ["exec", "resume", THREAD, "--json", "--skip-git-repo-check", "Q2?"]]  # fmt: skip
    assert (out / "run-with-1.rollout").is_file() and not (out / "run-with-1.t2.rollout").exists()
    session = CODEX.read_transcript(run.segments)
    assert session.rollout_file == out / "run-with-1.rollout" and len(session.answer_texts()) == 2


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("fail", r"turn 1: codex reported turn\.failed: stream disconnected; turns 2-2 not run"),
        ("silent", r"turn 1: codex timed out after 3s without ending the turn"),
    ],
)
def test_a_turn_that_fails_or_never_ends_ends_the_run(tmp_path: Path, how: str, message: str) -> None:
    error, out = _drive(tmp_path, how, ("Q1?", "Q2?"))
    assert isinstance(error, TurnError) and error.run.segments == [out / "run-with-1.jsonl"]
    assert re.search(message, str(error)), error


def test_a_cli_lingering_after_its_turn_is_stopped_and_its_stream_kept(tmp_path: Path) -> None:
    fake = fake_cli(CODEX, FAKE, tmp_path)
    config = CODEX.configure(agent_setup(tmp_path))
    env = {**os.environ, "HOME": str(tmp_path / "home"), **config.env, "CODEX_FAKE": "hang"}
    options = CodexOptions(codex=str(fake), timeout_s=30.0, exit_grace_s=0.5)
    run = run_codex(["Q?"], label="with-1", out_dir=tmp_path / "out", cwd=tmp_path, env=env, options=options)
    assert run.hung_after_result == [True] and run.wall_s[0] < 10
    assert CODEX.read_transcript(run.segments).answer_texts()


def test_the_rollout_is_found_without_following_the_agents_links(tmp_path: Path) -> None:
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "12" / "03"
    day.mkdir(parents=True)
    secret = tmp_path / "secret.jsonl"
    secret.write_text("host file\n")
    (day / f"rollout-1-{THREAD}.jsonl").symlink_to(secret)  # a planted link is no rollout
    (home / ".codex" / "sessions" / "2027").symlink_to(tmp_path)  # nor is a linked folder walked
    assert find_rollout_in(home, THREAD) is None
    (day / f"rollout-2-{THREAD}.jsonl").write_text("{}\n")
    assert str(find_rollout_in(home, THREAD)) == f".codex/sessions/2026/12/03/rollout-2-{THREAD}.jsonl"
    (home / ".codex" / "sessions").rename(tmp_path / "moved")
    (home / ".codex" / "sessions").symlink_to(tmp_path / "moved")
    with pytest.raises(UntrustedFile, match="a link on the way"):
        find_rollout_in(home, THREAD)
    assert find_rollout_in(tmp_path / "nowhere", THREAD) is None


def test_codex_is_driven_headless_only_and_with_a_question(tmp_path: Path) -> None:
    config = CODEX.configure(agent_setup(tmp_path))
    build = Provisioned("codex", tmp_path / "codex", CODEX.version, CODEX.version)
    with pytest.raises(ValueError, match="driven headless only"):
        CODEX.drive(Drive(build, ["Q?"], mode="tmux", config=config, options=DriveOptions(), label="x",
                          out_dir=tmp_path, cwd=tmp_path, env={"HOME": str(tmp_path / "home")}))
    with pytest.raises(ValueError, match="no question"):
        run_codex([], label="x", out_dir=tmp_path, cwd=tmp_path, env={}, options=CodexOptions(codex="codex"))


def test_a_finished_codex_turn_counts_as_complete_for_a_resumed_campaign(tmp_path: Path) -> None:
    events = (DATA / "with" / "events.jsonl").read_text(encoding="utf-8")
    assert ends_with_result(DATA / "with" / "events.jsonl", CODEX)  # its last event: turn.completed
    cut = tmp_path / "run-with-1.jsonl"
    cut.write_text("\n".join(events.splitlines()[:-1]) + "\n", encoding="utf-8")
    assert not ends_with_result(cut, CODEX)
