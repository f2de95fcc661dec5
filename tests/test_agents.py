"""The agent boundary: a CodingAgent is selected by MODULE:ATTR, Claude Code's implementation writes its own config
and checks its own deny, records name the agent (older ones upgrade), and an item's life runs as plain Python
with any agent that keeps the protocol (a stub here, whose CLI is a script that writes a transcript)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from support.synth import Transcript
from support.tinygrep_tool import TINYGREP

from pytest_agent_eval.agents import agent_named
from pytest_agent_eval.agents.base import (
    AgentConfig,
    AgentSetup,
    CodingAgent,
    Drive,
    DriveOptions,
    McpServer,
    load_agent,
)
from pytest_agent_eval.agents.claude_code import CLAUDE_CODE, STANDIN_API_KEY, ClaudeCode
from pytest_agent_eval.agents.claude_code.deny import hook_command
from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.campaign.record import SCHEMA, ItemRecord
from pytest_agent_eval.corpus.cases import Arm, EvalCase
from pytest_agent_eval.corpus.load import CorpusEntry
from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord, segment_name
from pytest_agent_eval.harness.failures import FailureMemo
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.sandbox import DISABLE_VAR
from pytest_agent_eval.model.probe import MessagesProbe
from pytest_agent_eval.run.item import ItemLife
from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError
from pytest_agent_eval.settings.parsers import parse_agent
from pytest_agent_eval.transcript import Session


def test_load_agent_names_the_object_and_says_what_is_wrong() -> None:
    assert load_agent("pytest_agent_eval.agents.claude_code:CLAUDE_CODE") is CLAUDE_CODE
    assert AgentEvalConfig().agent is CLAUDE_CODE
    for reference, message in (
        ("pytest_agent_eval.agents.claude_code", "MODULE:ATTR naming a CodingAgent"),
        ("no_such_module_xyz:A", "cannot import 'no_such_module_xyz'"),
        ("pytest_agent_eval.agents.claude_code:MISSING", "has no attribute 'MISSING'"),
        ("pytest_agent_eval.agents.claude_code:STANDIN_API_KEY", "is a str, not a CodingAgent"),
    ):
        with pytest.raises(OptionError, match=re.escape(message)):
            parse_agent(reference)


def test_a_record_names_its_agent_and_an_older_one_is_read_as_claude_codes() -> None:
    old = {"schema": 2, "id": "e-with-1", "entry": "e", "arm": "with", "arm_label": "with", "run": 1,
           "claude_version": "2.1.332", "claude_provision": {"kind": "npm", "version": "2.1.332"}}  # fmt: skip
    record = ItemRecord.from_dict(old)
    assert (record.agent, record.agent_version, record.agent_provision) == (
        "claude-code",
        "2.1.332",
        old["claude_provision"],
    )
    assert record.schema == SCHEMA and "claude_version" not in record.to_dict()
    assert ItemRecord.from_dict(record.to_dict()) == record
    never_ran = ItemRecord.from_dict({"schema": 2, "id": "e-with-1", "entry": "e", "arm": "with", "arm_label": "with"})
    assert never_ran.agent is None  # no agent ran it: none is made up
    assert agent_named(None) is agent_named("claude-code") is CLAUDE_CODE
    with pytest.raises(ValueError, match="unknown agent 'no-such-agent'"):
        agent_named("no-such-agent")


def _setup(tmp_path: Path, servers: tuple[McpServer, ...] = ()) -> AgentSetup:
    return AgentSetup(tmp_path / "run", tmp_path / "home", "http://127.0.0.1:9", servers, "codegraph", "no codegraph")


def test_claude_code_writes_its_mcp_config_and_hook_settings_into_the_run_folder(tmp_path: Path) -> None:
    server = McpServer("codegraph", ("/b/codegraph", "serve", "--mcp"), {"DO_NOT_TRACK": "1"})
    config = CLAUDE_CODE.configure(_setup(tmp_path, (server,)))
    assert config.files["mcp"] == tmp_path / "run" / "mcp-codegraph.json" and config.env == {}
    assert json.loads(config.files["mcp"].read_text()) == {
        "mcpServers": {
            "codegraph": {
                "type": "stdio",
                "command": "/b/codegraph",
                "args": ["serve", "--mcp"],
                "env": {"DO_NOT_TRACK": "1"},
            }
        }
    }
    hooks = json.loads(config.files["settings"].read_text())["hooks"]["PreToolUse"]
    assert hooks == [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook_command("codegraph")}]}]
    assert set(config.readable) == {config.files["mcp"], config.files["settings"]}
    empty = CLAUDE_CODE.configure(_setup(tmp_path))
    assert (
        json.loads(empty.files["mcp"].read_text()) == {"mcpServers": {}} and empty.files["mcp"].name == "mcp-empty.json"
    )


def test_claude_codes_deny_check_runs_its_hook_once_per_command(tmp_path: Path) -> None:
    config = CLAUDE_CODE.configure(_setup(tmp_path))
    proven: set[str] = set()
    assert CLAUDE_CODE.check_deny(config, "codegraph", {"PATH": "/usr/bin:/bin"}, proven) == []
    assert proven == {hook_command("codegraph")}
    leaky = tmp_path / "leaky.json"
    group = {"matcher": "Bash", "hooks": [{"type": "command", "command": "cat >/dev/null"}]}
    leaky.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    problems = CLAUDE_CODE.check_deny(
        AgentConfig(files={"settings": leaky}), "codegraph", {"PATH": "/usr/bin:/bin"}, proven
    )
    assert problems and all("allowed" in p for p in problems[:2])


def test_claude_codes_environment_passes_no_credential() -> None:
    base = {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-ant-api03-real", "CLAUDE_CONFIG_DIR": "/root/.claude",
            "CLAUDE_CODE_MAX_RETRIES": "2", "LC_ALL": "C"}  # fmt: skip
    env = CLAUDE_CODE.process_environment(base, "http://127.0.0.1:5")
    assert env["ANTHROPIC_API_KEY"] == STANDIN_API_KEY and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5"
    assert "CLAUDE_CONFIG_DIR" not in env and env["CLAUDE_CODE_MAX_RETRIES"] == "2" and env["LC_ALL"] == "C"


def test_no_agent_retries_the_model_on_its_own_but_opencode_which_has_no_setting_for_it() -> None:
    """What the harness's model server cannot retry (its port unreachable, a request unanswered, a stream cut after
    it reached the agent) ends the turn the same way for every agent that can be told so: no retry of the CLI's own
    (docs/model-boundary.md, "What each CLI retries by itself")."""
    import tomllib

    from pytest_agent_eval.agents.codex.config import PROVIDER, config_toml
    from pytest_agent_eval.agents.gemini.config import settings_json
    from pytest_agent_eval.agents.opencode import OPENCODE
    from pytest_agent_eval.agents.opencode.config import config_json

    url = "http://127.0.0.1:5"
    assert CLAUDE_CODE.process_environment({"PATH": "/bin"}, url)["CLAUDE_CODE_MAX_RETRIES"] == "0"
    provider = tomllib.loads(config_toml(url, "m", []))["model_providers"][PROVIDER]
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (0, 0)
    general = json.loads(settings_json([]))["general"]
    assert (general["maxAttempts"], general["retryFetchErrors"]) == (1, False)
    # OpenCode 1.18.33's own retries (5, waiting 2 s doubling to 30 s) are constants of its bundle: nothing is set
    said = json.dumps([config_json(url, [], "cg", "denied"), OPENCODE.process_environment({"PATH": "/bin"}, url)])
    assert "retr" not in said.lower()


# -- an item's life without pytest, with an agent of a project's own ------------------------------------------
STUB_CLI = f"#!{sys.executable}\nprint('stub 1.0.0')\n"


@dataclass(frozen=True)
class StubAgent(CodingAgent):
    """An agent whose "CLI" only reports its version; driving it writes a transcript in Claude Code's format (so
    Claude Code's reader reads it): the probe's shell call comes back with the deny it was configured with; the
    run's first attempt fails, the second answers."""

    cli: Path = Path("/nonexistent")
    calls: list[str] = field(default_factory=list, compare=False, hash=False)
    name: str = "stub"
    title: str = "Stub"
    package: str = "stub-agent"
    version: str = "1.0.0"
    executable: str = "stub"
    api: Any = "messages"
    modes: tuple[str, ...] = ("headless",)
    runtimes: tuple[str, ...] = ()
    passed_env: frozenset[str] = frozenset()
    shell_prefix_var: str | None = None
    managed_paths: tuple[Path, ...] = ()
    stand_in: str | None = "claude-code"  # its transcript is Claude Code's, its tools Claude Code's

    def provision(self, cache: Path, spec: str | None = None) -> Provisioned:
        return Provisioned("stub", self.cli, "1.0.0", "PATH", {"kind": "path", "path": str(self.cli)})

    def environment(self, model_url: str) -> dict[str, str]:
        return {"STUB_MODEL_URL": model_url}

    def configure(self, setup: AgentSetup) -> AgentConfig:
        setup.config_dir.mkdir(parents=True, exist_ok=True)
        path = setup.config_dir / "stub.json"
        servers = {s.name: list(s.command) for s in setup.mcp_servers}
        path.write_text(json.dumps({"servers": servers, "deny": setup.denied_cli, "reason": setup.deny_reason}))
        self.calls.append(f"configure {setup.config_dir.name} {sorted(servers)}")
        return AgentConfig(files={"config": path}, env={"STUB_CONFIG": str(path)}, readable=(path,))

    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        self.calls.append(f"check {cli} on a PATH without it: {cli not in env['PATH']}")
        return []

    def block_probe(self, command: str) -> Any:
        return MessagesProbe(command)

    def run_session(self, run: Drive) -> RunRecord:
        label, env = run.label, run.env
        settings = json.loads(run.config.files["config"].read_text())
        self.calls.append(f"drive {label} {run.mode} model={env['STUB_MODEL_URL'] != ''} config={env['STUB_CONFIG']}")
        t = Transcript()
        if label == "block-probe":
            t.reply(t.call("Bash", command=f"{settings['deny']} --version"), settings["reason"], is_error=True)
            t.result("probe done")
        elif not any(c.startswith("drive with") for c in self.calls[:-1]):
            raise AgentInfraError("the stub's first attempt fails")
        else:
            t.say(f"{run.questions[0]}: in lib/a.js")
            t.result("in lib/a.js")
        run.out_dir.mkdir(parents=True, exist_ok=True)
        segment = t.write(run.out_dir / segment_name(label, 1))
        return RunRecord(label=label, segments=[segment], wall_s=[0.5], exit_codes=[0])

    def read_transcript(self, segments: Sequence[Path]) -> Session:
        return read_segments(segments)


def test_an_items_life_runs_without_pytest_with_any_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_VAR, "1")  # the stub's transcript is written by this process, not in a sandbox
    monkeypatch.setenv("AGENT_EVAL_CACHE", str(tmp_path / "cache"))
    cli = tmp_path / "bin" / "stub"
    cli.parent.mkdir()
    cli.write_text(STUB_CLI)
    cli.chmod(0o755)
    corpus = tmp_path / "corpus"
    (corpus / "demo" / "lib").mkdir(parents=True)
    (corpus / "demo" / "lib" / "a.js").write_text("function a() {}\n")
    entry = CorpusEntry("demo", "JavaScript", "https://example.invalid/demo.git", "small", 1, ["where is a?"])
    case = EvalCase(entry, Arm("with"), 1, ("where is a?",))
    cfg = AgentEvalConfig(backend="scripted", offline=True, retries=1, corpus_dir=corpus, tool=TINYGREP)
    agent = StubAgent(cli=cli)
    life = ItemLife(case, cfg, agent, TINYGREP, FailureMemo(cfg.cache, "test"))
    record = ItemRecord(id=case.id, entry="demo", arm="with", arm_label="with", run=1)

    run = life.live(tmp_path / "items" / case.id, tmp_path / "scratch", record)

    run_dir = tmp_path / "items" / case.id
    assert run.segments == [run_dir / "run-with-1.jsonl"] and agent.read_transcript(run.segments).answer_texts()
    assert (record.agent, record.agent_version, record.agent_provision["kind"]) == ("stub", "1.0.0", "path")
    assert record.tool_version == "0.1.0" and record.backend["name"] == "scripted" and record.mode == "headless"
    # the failed attempt's files (the model's request record) set aside, never mixed into the next
    assert record.attempts == [{"error": "the stub's first attempt fails", "folder": "attempt-1"}]
    assert (run_dir / "attempt-1").is_dir() and not (run_dir / "attempt-1" / "run-with-1.jsonl").exists()
    assert json.loads((run_dir / "run.json").read_text())["label"] == "with-1"
    assert agent.calls == [
        "configure demo-with-1 ['tinygrep']",  # the with-arm's MCP server is the tool's
        "check tinygrep on a PATH without it: True",
        "configure block-probe []",  # the probe's own config: no MCP server, its own folder
        f"drive block-probe headless model=True config={run_dir / 'block-probe' / 'stub.json'}",
        "configure demo-with-1 ['tinygrep']",  # each attempt writes the config again (a renewed HOME)
        f"drive with-1 headless model=True config={run_dir / 'stub.json'}",
        "configure demo-with-1 ['tinygrep']",
        f"drive with-1 headless model=True config={run_dir / 'stub.json'}",
    ]
    server = json.loads((run_dir / "stub.json").read_text())["servers"]["tinygrep"]
    assert server[1:] == ["serve", str(tmp_path / "scratch" / "workspace" / "repo")]


def test_an_agent_that_has_no_interactive_mode_is_not_driven_in_one(tmp_path: Path) -> None:
    entry = CorpusEntry("demo", "JavaScript", "https://example.invalid/demo.git", "small", 1, ["q"])
    life = ItemLife(
        EvalCase(entry, Arm("without"), 1, ("q",), driver="tmux"), AgentEvalConfig(), StubAgent(), TINYGREP,
        FailureMemo(tmp_path, "t"),
    )  # fmt: skip
    record = ItemRecord(id="x", entry="demo", arm="without", arm_label="without")
    with pytest.raises(AgentInfraError, match=r"Stub cannot be driven tmux \(it has \('headless',\)\)"):
        life.run(None, _setup(tmp_path), DriveOptions(), None, tmp_path, {}, None, record)  # type: ignore[arg-type]


def test_an_agent_the_stand_in_cannot_speak_to_is_an_error_naming_what_to_declare(tmp_path: Path) -> None:
    """Not a run without tool calls that passes: the stand-in asks in a built-in agent's tools, and an agent that
    shares none of them says so before it is driven."""
    from pytest_agent_eval.model.server import ModelEndpoint

    entry = CorpusEntry("demo", "JavaScript", "https://example.invalid/demo.git", "small", 1, ["q"])
    fifth = replace(StubAgent(), stand_in=None)
    life = ItemLife(EvalCase(entry, Arm("without"), 1, ("q",)), AgentEvalConfig(), fifth, TINYGREP,
                    FailureMemo(tmp_path, "t"))  # fmt: skip
    record = ItemRecord(id="x", entry="demo", arm="without", arm_label="without")
    scripted = ModelEndpoint("scripted", "stand-in", "http://127.0.0.1:9")
    with pytest.raises(AgentInfraError, match=r"Stub \(stub\) declares no stand_in: .* declare the dialect"):
        life.run(None, _setup(tmp_path), DriveOptions(), None, tmp_path, {}, scripted, record)  # type: ignore[arg-type]
    assert StubAgent().stand_in_problem() is None and CLAUDE_CODE.stand_in_problem() is None
    assert "declares stand_in='aider'" in str(replace(CLAUDE_CODE, stand_in="aider").stand_in_problem())


def test_claude_code_is_a_frozen_description_a_project_can_vary() -> None:
    mine = ClaudeCode(name="claude-next", version="2.2.0")
    assert (mine.package, mine.api, mine.modes) == (CLAUDE_CODE.package, "messages", ("headless", "tmux"))
    assert shlex.split(hook_command("x"))[-2:] == ["--cli", "x"]


def test_the_options_help_names_every_built_in_agent() -> None:
    """The option table cannot import the agents (it loads in every pytest session): its list is checked here."""
    from pytest_agent_eval.agents.built_in import BUILT_IN_AGENTS
    from pytest_agent_eval.settings.options import OPTIONS

    [agent_option] = [option for option in OPTIONS if option.flag == "--agent-eval-agent"]
    assert f"a built-in agent's name ({', '.join(sorted(BUILT_IN_AGENTS))})" in agent_option.help
