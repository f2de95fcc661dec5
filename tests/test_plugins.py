"""A plug-in agent and tool are first-class: found by name through the entry points of an installed distribution
(tests/data/plugins/, outside the package) or by MODULE:ATTR, recorded with where they came from, and read back
with them by rescore, report.html, a baseline and ``agent-eval score`` (docs/extending.md, "Read back")."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.paths import REPO
from support.sessions import without_contaminated
from support.standin import Q_EXPRESS, Project, entry
from support.synth import Transcript

from pytest_agent_eval.agents.registry import origin_of, recorded_agent, recorded_tool, resolve_agent, resolve_tool
from pytest_agent_eval.campaign.made_by import agent_of, tool_of
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.cli import main
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.tool import CODEGRAPH

PLUGINS = REPO / "tests" / "data" / "plugins"
DIST = "agent-eval-example-plugins"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example distribution installed: its folder on sys.path, where importlib.metadata finds its .dist-info."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    return PLUGINS


def test_names_resolve_to_built_in_entry_point_and_module_attr_objects_with_their_origin(installed: Path) -> None:
    from example_plugins import EXAMPLE_AGENT, GREPPER

    assert resolve_agent("example-agent") is EXAMPLE_AGENT and resolve_tool("grepper") is GREPPER
    assert origin_of(EXAMPLE_AGENT) == {
        "from": "entry-point",
        "reference": "example_plugins:EXAMPLE_AGENT",
        "group": "pytest_agent_eval.agents",
        "dist": DIST,
        "version": "0.1.0",
    }
    assert resolve_tool("codegraph") is CODEGRAPH and origin_of(CODEGRAPH) == {"from": "built-in"}
    assert origin_of(resolve_agent("example_plugins:EXAMPLE_AGENT"))["from"] in ("entry-point", "reference")
    with pytest.raises(ValueError, match=r"installed entry points .*: example-agent"):
        resolve_agent("no-such-agent")


def test_a_record_whose_plugin_is_missing_says_which_distribution_to_install_or_which_reference() -> None:
    point = {"from": "entry-point", "reference": "gone_plugins:AGENT", "dist": "gone-plugins", "version": "2.0"}
    with pytest.raises(ValueError, match=r"not installed: pip install 'gone-plugins==2.0'"):
        recorded_agent("gone-agent", point)
    with pytest.raises(ValueError, match=r"was loaded from gone_plugins:TOOL \(MODULE:ATTR\), which is missing here"):
        recorded_tool("gone", {"from": "reference", "reference": "gone_plugins:TOOL"})
    with pytest.raises(ValueError, match="unknown tool 'gone'"):
        recorded_tool("gone")  # an old record: only its name


def test_an_old_record_is_read_with_what_ran_before_records_named_their_agent_and_tool() -> None:
    record = ItemRecord.from_dict({"id": "e-with-1", "entry": "e", "arm": "with", "arm_label": "with"})
    assert agent_of(record).name == "claude-code" and tool_of(record) is CODEGRAPH


def _leaky() -> Transcript:
    """A run that read grepper's output through its shell: a leak only grepper's fingerprints see."""
    return without_contaminated("cat notes.txt", '### grepper: 2 sections for "send"\n**`lib/response.js`** send\n')


def test_every_agent_the_registry_knows_is_asked_whose_record_a_file_is(installed: Path, tmp_path: Path) -> None:
    from example_plugins import EXAMPLE_AGENT

    from pytest_agent_eval.agents.recognition import agents, recognise

    asked = agents()
    assert [a.name for a in asked[:4]] == ["claude-code", "codex", "gemini", "opencode"]
    assert any(agent is EXAMPLE_AGENT for agent in asked)  # an installed distribution's, beside the built-in ones
    # example-agent is Claude Code under another name: it reads the file alike, so it makes no second claim
    recording = _leaky().write(tmp_path / "run-with-1.jsonl")
    found = recognise(recording)
    assert (found.agent.name, found.kind, found.claimed) == ("claude-code", "stream-json", True)


@pytest.mark.slow
def test_a_plugin_agent_and_tool_run_the_main_job_and_everything_reads_back_what_they_made(
    pytester: pytest.Pytester, installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    for arm in ("with", "without"):  # the stand-in tells the arms by codegraph's config name: grepper's is neither
        project.script(arm, Q_EXPRESS, _leaky())
    pytester.makeini(f"[pytest]\npythonpath = {PLUGINS}\n")
    project.run("--agent-eval-agent", "example-agent", "--agent-eval-tool", "grepper", "--agent-eval-runs", "1")

    campaign = Campaign.open(project.campaign())
    manifest = campaign.manifest
    assert manifest["plugins"]["agents"]["example-agent"]["dist"] == DIST
    assert manifest["plugins"]["tool"]["name"] == "grepper" and manifest["plugins"]["tool"]["from"]["dist"] == DIST
    records = {r.arm: r for r in campaign.items()}
    without = records["without"]
    assert (without.agent, without.tool, without.agent_from["dist"]) == ("example-agent", "grepper", DIST)
    recorded_leaks = len(without.scores["contamination"]["leaks"])
    assert recorded_leaks == 1 and without.outcome == "failed"  # the contamination gate followed grepper

    # report.html: read with the plug-in agent, scored again with grepper's fingerprints
    page = (project.campaign() / "report.html").read_text()
    assert "unknown agent" not in page and "unreadable transcript" not in page
    assert re.search(r"results carrying grepper output +1 ", page)  # not 0, as codegraph's fingerprints say

    # agent-eval rescore: the campaign's own agent and tool
    capsys.readouterr()  # the session's own output
    assert main(["rescore", str(project.campaign()), "--json"]) == 0
    rescored = {r["arm"]: r for r in json.loads(capsys.readouterr().out)}
    assert len(rescored["without"]["scores"]["contamination"]["leaks"]) == recorded_leaks

    # agent-eval score: the agent and tool by name
    segment = project.campaign() / without.segments[0]
    assert main(["score", str(segment), "--agent", "example-agent", "--tool", "grepper", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["contamination"]["leaks"]) == recorded_leaks
    assert main(["score", str(segment), "--json"]) == 0  # in its campaign: the agent and tool its record names
    assert len(json.loads(capsys.readouterr().out)["contamination"]["leaks"]) == recorded_leaks


def test_the_stand_in_refuses_an_agent_whose_tools_it_does_not_speak() -> None:
    """A without-arm request offering none of the stand-in's tools is an error naming them, not an answer
    without a tool call."""
    from pytest_agent_eval.model.scripted import ScriptedBackend, StandInError
    from pytest_agent_eval.model.server import serve

    request = {
        "messages": [{"role": "user", "content": "Where is res.send?"}],
        "tools": [{"name": "shell_exec", "input_schema": {}}, {"name": "open_file", "input_schema": {}}],
    }
    with pytest.raises(StandInError, match=r"offered none of them \(open_file, shell_exec\)"):
        ScriptedBackend(explore=CODEGRAPH.explore, cli=CODEGRAPH.cli).respond(request)
    with serve(ScriptedBackend(explore=CODEGRAPH.explore, cli=CODEGRAPH.cli)) as server:  # said to the agent
        asked = urllib.request.Request(server.url + "/v1/messages", data=json.dumps(request).encode(), method="POST",
                                       headers={"content-type": "application/json"})  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(asked, timeout=10)
    assert refused.value.code == 400 and b"offered none of them (open_file, shell_exec)" in refused.value.read()
    request["tools"].append({"name": "Grep", "input_schema": {}})
    assert ScriptedBackend(explore=CODEGRAPH.explore, cli=CODEGRAPH.cli).respond(request).blocks[0]["name"] == "Grep"


def test_the_stand_in_asks_an_agent_for_its_tools_in_the_names_it_declares() -> None:
    """Its calls in the agent's names and arguments (those its schema lacks left out), its results heard back."""
    from pytest_agent_eval.model.scripted import ScriptedBackend, SpokenTool

    speaks = (SpokenTool("Grep", "search_text", (("pattern", "query"),)), SpokenTool("Read", "open_file"))
    backend = ScriptedBackend(explore=CODEGRAPH.explore, cli=CODEGRAPH.cli, speaks=speaks)
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    request = {
        "system": "Working directory: /repo",
        "messages": [{"role": "user", "content": "How does send work?"}],
        "tools": [{"name": "search_text", "input_schema": schema}, {"name": "open_file", "input_schema": {}}],
    }
    (call,) = backend.respond(request).blocks
    assert (call["name"], call["input"]) == ("search_text", {"query": "send"})  # "-i" is no property of its schema
    request["messages"] += [
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": "Found 1 file\n/repo/lib/response.js"}
            ],
        },
    ]
    (read,) = backend.respond(request).blocks
    assert (read["name"], read["input"]) == ("open_file", {"file_path": "/repo/lib/response.js"})


# The conftest's CLI per agent: OwnCLI for the agent of its own tool names, the stand-in claude for any other.
OWN_BUILD = """

@pytest.fixture
def agent_build(coding_agent):
    if coding_agent.executable == "owncli":
        from example_plugins.own_tools import OWNCLI

        return Provisioned("owncli", OWNCLI, "1", "1")
    return Provisioned("claude", HERE / "standin" / "claude", "standin", "standin")
"""


@pytest.mark.slow
def test_a_plugin_agent_with_tools_of_its_own_names_is_asked_for_them_and_its_without_arm_makes_calls(
    pytester: pytest.Pytester, installed: Path
) -> None:
    """OwnCLI (example_plugins/owncli) offers shell_exec, open_file and search_text, and declares them as Bash, Read
    and Grep: the scripted stand-in asks for them in its names, against the real model server, and the without-arm
    reads code (a residual), where without the declaration the stand-in refuses its requests."""
    from example_plugins.own_tools import OWN_TOOLS_AGENT

    project = Project(pytester, [entry("express", "How does send work?")])  # its one file defines send
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + OWN_BUILD)
    pytester.makeini(f"[pytest]\npythonpath = {PLUGINS}\n")
    args = ("--agent-eval-arms", "without", "--agent-eval-runs", "1")
    project.run("--agent-eval-agent", "example_plugins.own_tools:OWN_TOOLS_AGENT", *args)

    (without,) = Campaign.open(project.campaign()).items()
    assert without.error is None and without.agent == "own-tools-agent", without.error
    session = OWN_TOOLS_AGENT.read_transcript([project.campaign() / s for s in without.segments])
    asked = [(call.sent_as[0], call.name) for call in session.calls if call.sent_as]
    assert {"search_text", "open_file", "shell_exec"} <= {sent for sent, _ in asked}, asked  # its own names
    assert {("search_text", "Grep"), ("open_file", "Read"), ("shell_exec", "Bash")} >= set(asked), asked
    assert all(call.result is not None and call.result.text for call in session.calls)  # each one ran
    assert without.figures["residual_tokens"] > 0, without.figures

    project.run("--agent-eval-agent", "example_plugins.own_tools:UNDECLARED", *args)
    (undeclared,) = Campaign.open(project.campaign()).items()
    assert "offered none of them (open_file, search_text, shell_exec)" in str(undeclared.error), undeclared.error


def test_a_replay_takes_the_cassette_of_the_agent_that_recorded_it(tmp_path: Path) -> None:
    from dataclasses import replace

    from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
    from pytest_agent_eval.model import CassetteBackend
    from pytest_agent_eval.run.backends import cassette_backend

    recording = _leaky().write(tmp_path / "run-with-1.jsonl")
    assert isinstance(cassette_backend([recording], resolve_agent("claude-code")), CassetteBackend)
    with pytest.raises(ValueError, match=r"no cassette replays a recording of Fifth: .* declares no stand_in"):
        cassette_backend([recording], replace(CLAUDE_CODE, name="fifth", title="Fifth", stand_in=None))


def test_an_agent_with_no_cassette_of_its_own_replays_as_the_dialect_its_stand_in_declares(tmp_path: Path) -> None:
    """A ``StandIn`` (its own tool names) names its dialect: the cassette is that built-in agent's."""
    from dataclasses import dataclass

    from pytest_agent_eval.agents.base import StandIn
    from pytest_agent_eval.agents.claude_code.agent import ClaudeCode
    from pytest_agent_eval.model import CassetteBackend
    from pytest_agent_eval.run.backends import cassette_backend

    @dataclass(frozen=True)
    class NoCassette(ClaudeCode):
        def cassette(self, segments: object) -> None:
            return None

    renamed = NoCassette(name="renamed", title="Renamed", stand_in=StandIn("claude-code"))
    recording = _leaky().write(tmp_path / "run-with-1.jsonl")
    assert isinstance(cassette_backend([recording], renamed), CassetteBackend)


def test_check_agent_fails_an_agent_naming_what_it_must_declare(
    installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-agent", "example_plugins:FIFTH_AGENT"]) == 1
    out = capsys.readouterr().out
    assert "FAIL stand-in dialect: Fifth Agent (fifth-agent) declares no stand_in" in out
    assert "FAIL jail: it declares neither shell_prefix_var nor shell_from" in out
    assert "FAIL run: not driven" in out
    assert out.endswith("agent-eval: fifth-agent: FAILED (stand-in dialect, jail, run)\n")


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.skipif(runtimes.node() is None, reason="Node.js with npm is needed")
def test_check_agent_passes_a_plugin_agent_through_a_real_run(
    installed: Path, real_tools: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """One without-arm item of the example agent (Claude Code's CLI under its own name) against the stand-in."""
    assert main(["check-agent", "example-agent"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    checks = ("stand-in dialect", "jail", "deny proven", "stdout not reopenable", "calls",
              "stand-in spoken in its tools", "deny in the run")  # fmt: skip
    for check in checks:
        assert f"PASS {check}: " in out, out
    assert "none of it was recorded (No such device or address)" in out, out  # sockets: ENXIO
    assert "read back as Grep, Read, Bash" in out and out.endswith("agent-eval: example-agent: conforms\n")


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.skipif(runtimes.node() is None, reason="Node.js with npm is needed")
def test_check_agent_fails_a_plugin_driver_that_bypasses_the_turn_runner_naming_why(
    installed: Path, real_tools: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same CLI, its stdout a file the driver opened itself: the agent's shell reopens it and forges a line."""
    assert main(["check-agent", "example_plugins.bypass:BYPASSING_AGENT"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"FAIL stdout not reopenable: a line the agent's shell wrote into /proc/\d+/fd/1 \(claude\) was "
                     r"recorded in run-stdout-probe\.jsonl: .* shared turn runner", out), out  # fmt: skip
    assert out.endswith("agent-eval: bypassing-agent: FAILED (stdout not reopenable)\n"), out
