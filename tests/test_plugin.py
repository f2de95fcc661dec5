"""The pytest layer end to end, with pytester.

The only stand-in is the model side: a tiny ``claude`` executable (tests/support/standin.py) that prints
transcripts written with ``support.synth`` (keyed by arm and question) and logs how it was called. Everything
between — options, items, the workspace, the CLI block and its self-check, the model server, the headless driver
and its watchdog, scoring, gates, reports — is the real code. Provisioning, cloning and indexing (npm, network)
are replaced in the pytester conftest only.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.sessions import api_error, no_result, with_clean, without_clean, without_contaminated
from support.standin import Q_EXPRESS, Q_GIN, SECRET_KEY, Project, clean_scripts, entry

from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, build_command, run_headless
from pytest_agent_eval.harness.drivers import AgentInfraError, segment_name, warm_mcp_server
from pytest_agent_eval.metrics import gates
from pytest_agent_eval.metrics.figures import figures_of
from pytest_agent_eval.metrics.format import median_range, percent
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.report import terminal as tables
from pytest_agent_eval.settings.options import OPTIONS
from pytest_agent_eval.tool import CODEGRAPH

pytestmark = pytest.mark.slow  # pytester sessions, several in subprocesses, that run the stand-in claude


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    return Project(pytester, [entry("express", Q_EXPRESS), entry("gin", Q_GIN, "Go")])


def test_items_get_readable_ids(project):
    result = project.run("--collect-only", "-q", "--agent-eval-runs", "2")
    result.stdout.fnmatch_lines(
        [
            "evals/test_ab.py::test_ab[[]express-with-1]",
            "evals/test_ab.py::test_ab[[]express-with-2]",
            "evals/test_ab.py::test_ab[[]express-without-1]",
            "evals/test_ab.py::test_ab[[]express-without-2]",
            "evals/test_ab.py::test_ab[[]gin-with-1]",
            "*8 tests collected*",
        ]
    )


def test_agent_mode_all_adds_tmux_items(project):
    result = project.run("--collect-only", "-q", "--agent-eval-runs", "1", "--agent-eval-mode", "all", "-k", "express")
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines == [
        "evals/test_ab.py::test_ab[express-with-1]",
        "evals/test_ab.py::test_ab[express-with-tmux-1]",
        "evals/test_ab.py::test_ab[express-without-1]",
        "evals/test_ab.py::test_ab[express-without-tmux-1]",
    ]
    result = project.run(
        "--collect-only", "-q", "--agent-eval-runs", "1", "--agent-eval-mode", "all", "-k", "tmux and not without"
    )
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines == ["evals/test_ab.py::test_ab[express-with-tmux-1]", "evals/test_ab.py::test_ab[gin-with-tmux-1]"]


def test_k_selects_entries_and_arms(project):
    result = project.run("--collect-only", "-q", "--agent-eval-runs", "1", "-k", "express")
    result.stdout.fnmatch_lines(["*test_ab[[]express-with-1]", "*test_ab[[]express-without-1]", "*2/4 tests*"])
    result = project.run("--collect-only", "-q", "--agent-eval-runs", "1", "-k", "with and not without")
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines == ["evals/test_ab.py::test_ab[express-with-1]", "evals/test_ab.py::test_ab[gin-with-1]"]


def test_pinned_arms_and_marker_selection(project):
    result = project.run(
        "--collect-only",
        "-q",
        "--agent-eval-runs",
        "1",
        "--arms",
        "with@1.6.1,with@local:/src/codegraph",
        "-m",
        "agent_eval",
    )
    lines = [line for line in result.stdout.lines if "::" in line]
    # `@` is written `:` in ids: pytest -k cannot parse `@`, and can parse the arm as written here.
    assert lines == [
        "evals/test_ab.py::test_ab[express-with:1.6.1-1]",
        "evals/test_ab.py::test_ab[express-with:local:codegraph-1]",
        "evals/test_ab.py::test_ab[gin-with:1.6.1-1]",
        "evals/test_ab.py::test_ab[gin-with:local:codegraph-1]",
    ]
    result = project.run(
        "--collect-only",
        "-q",
        "--agent-eval-runs",
        "1",
        "--arms",
        "with@1.6.1,with@local:/src/codegraph",
        "-k",
        "with:1.6.1",
    )
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines == ["evals/test_ab.py::test_ab[express-with:1.6.1-1]", "evals/test_ab.py::test_ab[gin-with:1.6.1-1]"]


DUMP_CONFIG = """
import dataclasses, json
from pytest_agent_eval.settings.options import OPTIONS

def plain(value):  # a rule (a named tuple) as its fields; a shard (a dataclass) as the text of its fields
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "_asdict"):
        return value._asdict()
    if dataclasses.is_dataclass(value):
        return str(dataclasses.asdict(value))
    return value if isinstance(value, (int, float, bool, type(None))) else str(value)

def test_dump(agent_eval_config, tmp_path_factory):
    data = {o.attr: plain(getattr(agent_eval_config, o.attr)) for o in OPTIONS}
    data["arms"] = [a.label for a in agent_eval_config.arms]
    data["cassettes"] = [str(p) for p in agent_eval_config.cassettes]
    data["tool"] = agent_eval_config.tool.name
    data["agent"] = agent_eval_config.agent.name
    data["agents"] = [agent.name for agent in agent_eval_config.agents]
    (tmp_path_factory.getbasetemp().parent / "config.json").write_text(json.dumps(data))
"""

# option → (command-line value, ini value, config attribute, expected from the command line, expected from ini)
OPTION_CASES = {
    "--agent-eval-arms": ("with@1.6.1", "without", "arms", ["with@1.6.1"], ["without"]),
    "--agent-eval-runs": ("3", "5", "runs", 3, 5),
    "--agent-eval-turns": ("1", "2", "turns", 1, 2),
    "--agent-eval-tool-version": ("latest", "1.5.0", "tool_version", "latest", "1.5.0"),
    "--agent-eval-corpus": ("c1.json", "c2.json", "corpus", "c1.json", "c2.json"),
    "--agent-eval-corpus-dir": ("cd1", "cd2", "corpus_dir", "cd1", "cd2"),
    "--agent-eval-out": ("o1", "o2", "out", "o1", "o2"),
    "--agent-eval-json": ("j1.json", "j2.json", "json_path", "j1.json", "j2.json"),
    "--agent-eval-model": ("opus", "haiku", "model", "opus", "haiku"),
    "--agent-eval-effort": ("low", "medium", "effort", "low", "medium"),
    "--agent-eval-max-budget-usd": ("1.5", "2", "max_budget_usd", 1.5, 2.0),
    "--agent-eval-timeout": ("30", "60", "agent_timeout", 30.0, 60.0),
    "--agent-eval-backend": ("scripted", "cassette", "backend", "scripted", "cassette"),
    "--agent-eval-mode": ("all", "tmux", "mode", "all", "tmux"),
    "--agent-eval-cassette": ("a.jsonl", "b.jsonl,c.jsonl", "cassettes", ["a.jsonl"], ["b.jsonl", "c.jsonl"]),
    "--agent-eval-resume": ("r1", "r2", "resume", "r1", "r2"),
    "--agent-eval-retries": ("1", "0", "retries", 1, 0),
    "--agent-eval-compare": ("b1", "b2.json", "compare", "b1", "b2.json"),
    "--agent-eval-compare-fail": (
        "allocation:-5pt",
        "residual:+20%",
        "compare_fail",
        [{"metric": "allocation", "threshold": 5.0, "unit": "pt", "direction": -1, "confidence": None}],
        # its old spelling
        [{"metric": "residual_tokens", "threshold": 20.0, "unit": "%", "direction": 1, "confidence": None}],
    ),
    "--agent-eval-campaign": ("readme", "other", "campaign", "readme", "other"),
    "--agent-eval-shard": ("1/3", "2/2", "shard", str({"index": 1, "count": 3}), str({"index": 2, "count": 2})),
    "--agent-eval-save-baseline": ("nightly", "weekly", "save_baseline", "nightly", "weekly"),
    "--agent-eval-replay": ("b1", "r1", "replay", "b1", "r1"),
    "--agent-eval-compare-min-pairs": ("2", "3", "compare_min_pairs", 2, 3),
    "--agent-eval-tool": ("mytools:ALPHA", "mytools:BETA", "tool", "alpha", "beta"),  # DUMP_CONFIG keeps its name
    "--agent-eval-agent": ("mytools:AGENT_A", "mytools:AGENT_B", "agent", "agent-a", "agent-b"),  # and this one's
    "--agent-eval-stand-in-answers": ("key", "wrong", "stand_in_answers", "key", "wrong"),
    "--agent-eval-judge": ("model", "mytools:JUDGE", "judge", "model", "mytools:JUDGE"),
    "--agent-eval-agents": (
        "codex,mytools:AGENT_A",
        "mytools:AGENT_B,claude-code",
        "agents",
        ["codex", "agent-a"],
        ["agent-b", "claude-code"],
    ),
}
TOOLS_MODULE = """
from dataclasses import replace

from pytest_agent_eval.tool import CODEGRAPH

ALPHA = replace(CODEGRAPH, name="alpha", package="alpha-mcp")
BETA = replace(CODEGRAPH, name="beta", package="beta-mcp")

from pytest_agent_eval.agents.claude_code import ClaudeCode

AGENT_A = ClaudeCode(name="agent-a")
AGENT_B = ClaudeCode(name="agent-b")
"""
FLAGS = {"--agent-eval-offline", "--agent-eval-include-contaminated"}


def test_help_lists_every_option_and_ini_key(pytester):
    result = pytester.runpytest("--help")
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.str()
    for option in OPTIONS:
        assert option.flag in out and option.ini in out
    assert "residual_tokens:+20%" in out


def test_every_option_is_covered():
    assert {o.flag for o in OPTIONS} == {*OPTION_CASES, *FLAGS}


def _baselines(root: Path) -> None:
    """The campaign folders and baseline JSON that --agent-eval-resume / --agent-eval-compare cases name."""
    for name in ("r1", "r2", "b1", "base"):
        (root / name).mkdir(exist_ok=True)
        (root / name / "manifest.json").write_text(json.dumps({"id": name}))
    (root / "b2.json").write_text(json.dumps({"items": []}))


@pytest.mark.parametrize("flag", sorted(OPTION_CASES))
def test_option_and_ini_key(pytester, flag):
    cli_value, ini_value, attr, from_cli, from_ini = OPTION_CASES[flag]
    option = next(o for o in OPTIONS if o.flag == flag)
    extra = {
        "--agent-eval-backend": "agent_eval_cassette = x.jsonl",
        "--agent-eval-compare-fail": "agent_eval_compare = base",
        "--agent-eval-compare-min-pairs": "agent_eval_compare = base",
        "--agent-eval-tool": "pythonpath = .",  # where mytools.py is
        "--agent-eval-agent": "pythonpath = .",
        "--agent-eval-agents": "pythonpath = .",
    }
    pytester.makepyfile(mytools=TOOLS_MODULE)
    pytester.makeini(f"[pytest]\n{option.ini} = {ini_value}\n{extra.get(flag, '')}\n")
    _baselines(pytester.path)
    for cassette in ("a.jsonl", "b.jsonl", "c.jsonl", "x.jsonl"):  # a cassette named must exist
        (pytester.path / cassette).write_text("")
    pytester.makepyfile(DUMP_CONFIG)

    def resolved(*args: str):
        result = pytester.runpytest("-p", "no:cacheprovider", *args)
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        value = json.loads((pytester.path.parent / "config.json").read_text())[attr]
        return _relative(value, pytester.path)

    assert resolved() == from_ini  # the ini key alone
    assert resolved(flag, cli_value) == from_cli  # the option beats the ini key


def _relative(value, root: Path):
    if isinstance(value, list):
        return [_relative(v, root) for v in value]
    if isinstance(value, str) and value.startswith(str(root) + os.sep):
        return value[len(str(root)) + 1 :]
    return value


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_flags_and_their_ini_keys(pytester, flag):
    option = next(o for o in OPTIONS if o.flag == flag)
    pytester.makepyfile(DUMP_CONFIG)
    read = lambda: json.loads((pytester.path.parent / "config.json").read_text())[option.attr]  # noqa: E731
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0 and read() is False
    assert pytester.runpytest("-p", "no:cacheprovider", flag).ret == 0 and read() is True
    pytester.makeini(f"[pytest]\n{option.ini} = true\n")
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0 and read() is True
    # a session without an agent-eval item writes no campaign folder
    assert not (pytester.path / "agent-eval-out").exists()


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--agent-eval-runs", "0"], "", "--agent-eval-runs: expected a positive integer, got '0'"),
        (["--agent-eval-turns", "x"], "", "--agent-eval-turns: expected a positive integer, got 'x'"),
        (["--arms", "with,sideways"], "", "--agent-eval-arms: unknown arm 'sideways'"),
        (["--arms", "with,with"], "", "--agent-eval-arms: arm 'with' given twice"),
        (["--arms", "with@"], "", "--agent-eval-arms: arm 'with@' has an empty version"),
        (["--agent-eval-max-budget-usd", "-1"], "", "--agent-eval-max-budget-usd: expected a positive number"),
        (["--agent-eval-timeout", "soon"], "", "--agent-eval-timeout: expected a positive number"),
        (
            ["--agent-eval-backend", "gpt"],
            "",
            "--agent-eval-backend: expected one of auto, anthropic, openai, gemini, scripted, cassette",
        ),
        (["--agent-eval-mode", "gui"], "", "--agent-eval-mode: expected one of headless, tmux, all"),
        (["--agent-eval-effort", "extreme"], "", "--agent-eval-effort: expected one of low, medium, high, xhigh, max"),
        (["--agent-eval-backend", "cassette"], "", "--agent-eval-backend cassette: needs --agent-eval-cassette"),
        (["--agent-eval-cassette", "gone.jsonl"], "", "gone.jsonl: no such file"),
        (["--agent-eval-tool-version", "local:"], "", "--agent-eval-tool-version: local: needs a path"),
        (
            ["--agent-eval-agent", "nope"],
            "",
            "--agent-eval-agent: unknown agent 'nope': the built-in agents are claude-code, codex, gemini, "
            "opencode; or give MODULE:ATTR naming a CodingAgent",
        ),
        (
            ["--agent-eval-agent", "pytest_agent_eval.tool:CODEGRAPH"],
            "",
            "--agent-eval-agent: pytest_agent_eval.tool:CODEGRAPH is a RetrievalTool, not a CodingAgent",
        ),
        ([], "agent_eval_agent = no_such_module_xyz:A", "ini agent_eval_agent: cannot import 'no_such_module_xyz'"),
        ([], "agent_eval_runs = many", "ini agent_eval_runs: expected a positive integer, got 'many'"),
        ([], "agent_eval_offline = maybe", "ini agent_eval_offline: expected true or false"),
        ([], "agent_eval_thresholds = bad.yaml", "bad.yaml: speed: unknown figure"),
    ],
)
def test_bad_option_values_are_usage_errors(project, args, ini, message):
    (project.path / "bad.yaml").write_text("speed: {max: 5}\n")
    if ini:
        project.pytester.makeini(f"[pytest]\n{ini}\n")
    result = project.run("--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_the_anthropic_backend_without_a_key_is_a_usage_error(project, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = project.run("--collect-only", "--agent-eval-backend", "anthropic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agent-eval-backend anthropic: needs a real ANTHROPIC_API_KEY in the environment" in result.stderr.str()


def test_bad_corpus_is_a_collection_error_naming_entry_and_field(project):
    bad = entry("express", Q_EXPRESS)
    bad.pop("_language")
    bad["files"] = "many"
    (project.path / "corpus.json").write_text(json.dumps({"JavaScript": [bad]}))
    result = project.run("--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting evals/test_ab.py*", '*agent-eval corpus:*"express"*"files"*'])


def test_collect_only_touches_no_npm_and_no_network(project, monkeypatch):
    traps = project.path / "traps"
    traps.mkdir()
    for tool in ("npm", "npx", "git", "node", "codegraph", "claude"):
        trap = traps / tool
        trap.write_text(f"#!/bin/sh\necho {tool} >> {traps / 'ran.log'}\nexit 1\n")
        trap.chmod(0o755)
    monkeypatch.setenv("PATH", f"{traps}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AGENT_EVAL_CACHE", str(project.path / "cache"))
    connects: list = []
    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", lambda self, addr: connects.append(addr) or real_connect(self, addr))
    (project.path / "conftest.py").unlink()  # the real fixtures, as a user has them
    # pytest-benchmark, when installed, runs `git rev-parse` at startup; that one is not ours.
    result = project.run("--collect-only", "-q", "--agent-eval-tool-version", "latest", "-p", "no:benchmark")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*8 tests collected*"])
    assert not (traps / "ran.log").exists()
    assert connects == []
    assert not (project.path / "cache").exists()
    assert not (project.path / "out").exists()


# -- running items -------------------------------------------------------------------------------------------
def test_clean_runs_pass_and_carry_their_figures(project):
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "1", "--junitxml", "junit.xml", "-vv")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "model backend: scripted policy agent" in out
    assert "measure the pipeline and the tool's responses, not a model" in out
    assert out.count("ARM COMPARISON — express") == 1 and out.count("ARM COMPARISON — gin") == 1
    assert "── express-with-1 (passed) " in out  # -vv prints each item's blocks
    assert "RUNS — one line each" not in out  # instead of its line
    assert "Explore allocation — share of returned bytes the answer used" in out
    assert "CAMPAIGN — W = with" in out

    # user_properties reach junitxml
    xml = ET.parse(project.path / "junit.xml")
    case = next(c for c in xml.iter("testcase") if c.get("name") == "test_ab[express-with-1]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["agent_eval.retrieval_calls"] == "1"
    assert props["agent_eval.sufficient_share"] == "1.0"
    assert props["agent_eval.contaminated"] == "False"
    expected = score_session(with_clean().session(), tool=CODEGRAPH)["allocation"]["efficiency"]
    assert 0 < expected < 1
    assert float(props["agent_eval.allocation"]) == pytest.approx(expected)

    summary = project.summary()
    assert summary["arms"] == ["with", "without"]
    records = {r["id"]: r for r in summary["records"]}
    assert set(records) == {"express-with-1", "express-without-1", "gin-with-1", "gin-without-1"}
    assert records["express-without-1"]["figures"]["read_calls"] == 1
    assert records["express-without-1"]["figures"]["retrieval_calls"] == 0
    assert summary["entries"]["express"]["with"]["median"]["retrieval_calls"] == 1
    # the transcript store: segments, stderr, MCP configs, hook settings
    run_dir = project.item_dir("express-with-1")
    key = hashlib.sha1(Q_EXPRESS.encode()).hexdigest()[:10]
    assert (run_dir / "run-with-1.jsonl").read_text() == (project.standin / f"with-{key}.jsonl").read_text()
    assert (run_dir / "run-with-1.stderr").exists()
    servers = json.loads((run_dir / "mcp-codegraph.json").read_text())["mcpServers"]
    assert servers["codegraph"]["args"][:2] == ["serve", "--mcp"]
    assert json.loads((project.item_dir("express-without-1") / "mcp-empty.json").read_text()) == {"mcpServers": {}}


def test_agent_command_line_and_environment(project):
    clean_scripts(project)
    project.run(
        "--agent-eval-runs",
        "1",
        "-k",
        "express",
        "--agent-eval-model",
        "opus",
        "--agent-eval-effort",
        "low",
        "--agent-eval-max-budget-usd",
        "2.5",
    )
    calls = {c["arm"]: c for c in project.calls()}
    argv = calls["with"]["argv"]
    for flag, value in [
        ("--output-format", "stream-json"),
        ("--permission-mode", "bypassPermissions"),
        ("--model", "opus"),
        ("--effort", "low"),
        ("--max-budget-usd", "2.5"),
        ("--allowedTools", "Grep,Glob,TodoWrite"),
    ]:
        assert argv[argv.index(flag) + 1] == value
    for arm in ("with", "without"):  # the web tools are taken away in every arm
        arm_argv = calls[arm]["argv"]
        assert set(arm_argv[arm_argv.index("--disallowedTools") + 1].split(",")) == {"WebSearch", "WebFetch"}
    assert "--strict-mcp-config" in argv and "--verbose" in argv
    assert Path(argv[argv.index("--mcp-config") + 1]).name == "mcp-codegraph.json"
    assert Path(calls["without"]["argv"][calls["without"]["argv"].index("--mcp-config") + 1]).name == "mcp-empty.json"
    settings = json.loads(Path(argv[argv.index("--settings") + 1]).read_text())
    assert "PreToolUse" in settings["hooks"]
    env = calls["with"]["env"]
    assert env["CODEGRAPH_NO_PROMPT_HOOK"] == "1" and env["CODEGRAPH_NO_DAEMON"] == "1"
    assert env["ENABLE_TOOL_SEARCH"] == "false" and env["CLAUDE_CODE_ENABLE_TASKS"] == "false"
    assert env["IS_SANDBOX"] == "1" and env["DISABLE_AUTOUPDATER"] == "1" and env["DO_NOT_TRACK"] == "1"
    assert env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["HOME"] != os.environ.get("HOME") and env["HOME"].endswith("home")
    assert calls["with"]["cwd"].endswith(os.path.join("workspace", "repo"))
    assert "/opt/codegraph-not-here/bin" not in env["PATH"]


def test_multi_turn_resumes_the_session_and_turns_option_cuts(pytester):
    questions = ["How does res.send work?", "Where is ETag set?", "What about HEAD?"]
    project = Project(pytester, [entry("express", "||".join(questions))])
    for question in questions:
        project.script("with", question, with_clean())
    result = project.run("--agent-eval-runs", "1", "--arms", "with", "--agent-eval-turns", "2")
    result.assert_outcomes(passed=1)
    argvs = [c["argv"] for c in project.calls()]
    assert [a[a.index("-p") + 1] for a in argvs] == questions[:2]
    assert "--resume" not in argvs[0]
    assert argvs[1][argvs[1].index("--resume") + 1] == "s-1"
    run_dir = project.item_dir("express-with-1")
    assert sorted(p.name for p in run_dir.glob("run-*.jsonl")) == ["run-with-1.jsonl", "run-with-1.t2.jsonl"]
    record = project.summary()["records"][0]
    assert record["turns"] == 2
    assert len(record["driver"]["segments"]) == 2


def test_contaminated_without_arm_fails(project):
    project.script("with", Q_EXPRESS, with_clean())
    project.script("without", Q_EXPRESS, without_contaminated())
    result = project.run("--agent-eval-runs", "1", "-k", "express")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*agent-eval gate failed for express / without:*",
            "*contamination: without-arm contaminated: 1 tool result(s) carried codegraph output: Bash call toolu_*"
            ' (thread main): explore heading — "**Exploration: res.send**"*',
        ]
    )
    # The ARM COMPARISON names the contaminated run and the call that carried the output.
    result.stdout.fnmatch_lines(["CONTAMINATED express-without-1: Bash call toolu_* (thread main): explore heading *"])
    # One line a run, not its blocks (those take -vv); the verdict leaves the contaminated run out: no pair.
    result.stdout.fnmatch_lines(
        [
            "RUNS — one line each (-vv prints every run's blocks; report.html has them and the transcript)",
            "  express-with-1 passed · retrieval residual * (codegraph) · final context * · * explore calls: *",
            "  express-without-1 failed · retrieval residual * (file access) · * · CONTAMINATED · GATE FAILED *",
        ]
    )
    out = result.stdout.str()
    assert "── express-with-1" not in out and "Residual context occupancy at end of run:" not in out
    assert "agent-eval: verdict express (with vs without, 0 paired runs): no run of one arm pairs" in out


def test_qq_keeps_the_verdict_lines_and_drops_the_tables(project):
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "1", "-k", "express", "-qq")
    out = result.stdout.str()
    assert "agent-eval: verdict express (with vs without, 1 paired run): retrieval residual " in out
    assert "(n=1: too few pairs for an interval)" in out
    assert "ARM COMPARISON" not in out and "RUNS — one line each" not in out


def test_threshold_gates_from_yaml(project):
    clean_scripts(project)
    (project.path / "agent-eval.yaml").write_text(
        textwrap.dedent("""
        residual_tokens: {max: 100000}
        arms:
          with: {codegraph_calls: {max: 0}}
        entries:
          gin:
            arms:
              with: {codegraph_calls: {max: 5}}
    """)
    )
    result = project.run("--agent-eval-runs", "1")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*FAILED evals/test_ab.py::test_ab[[]express-with-1]*"])
    # codegraph_calls is the figure's old spelling: still read, reported under today's name
    result.stdout.fnmatch_lines(["*retrieval_calls: retrieval_calls 1 is above the maximum 0*"])
    records = {r["id"]: r for r in project.summary()["records"]}
    assert records["express-with-1"]["outcome"] == "failed"
    assert records["gin-with-1"]["outcome"] == "passed"


def test_infrastructure_failures_are_errors_not_failures(pytester):
    project = Project(pytester, [entry("apierr", "q1"), entry("noresult", "q2"), entry("stall", "q3")])
    project.script("without", "q1", api_error())
    project.script("without", "q2", no_result())
    project.script("without", "q3", with_clean(), mode="stall")
    result = project.run("--agent-eval-runs", "1", "--arms", "without", "--agent-eval-timeout", "2")
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert "error in apierr-without-1: turn 1: API error in assistant message: rate_limit" in out
    assert "noresult-without-1: turn 1: claude exited 0 without a result event" in out
    assert "stall-without-1: turn 1: claude timed out after 2s without a result event" in out
    records = {r["id"]: r for r in project.summary()["records"]}
    assert {r["outcome"] for r in records.values()} == {"error"}
    assert "infrastructure errors (not scored)" in out
    partial = project.item_dir("stall-without-1") / "run-without-1.jsonl"
    assert partial.read_text().count("\n") == len(with_clean().lines()) - 1  # everything before the result


def test_cli_that_hangs_after_its_result_is_killed_and_kept(pytester):
    project = Project(pytester, [entry("express", Q_EXPRESS)])
    project.script("with", Q_EXPRESS, with_clean(), mode="hang")
    result = project.run("--agent-eval-runs", "1", "--arms", "with", "--agent-eval-timeout", "120")
    result.assert_outcomes(passed=1)
    driver = project.summary()["records"][0]["driver"]
    assert driver["hung_after_result"] == [True]
    assert driver["wall_s"][0] < 30


def test_real_key_stays_with_the_forwarder_and_in_no_file(project, monkeypatch):
    """With the real API the CLI talks to the harness's forwarder on loopback with a placeholder key: the real key
    reaches neither the CLI's environment nor any file."""
    clean_scripts(project)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_KEY)
    result = project.pytester.runpytest(
        "evals",
        "-p",
        "no:cacheprovider",
        "--agent-eval-out",
        "out",
        "--agent-eval-runs",
        "1",
        "-k",
        "express",
        "--junitxml",
        "junit.xml",
    )
    result.assert_outcomes(passed=2)
    calls = project.calls()
    assert calls and not any(c["real_key"] for c in calls)
    assert all(c["env"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:") for c in calls)
    assert "model backend: real model" in result.stdout.str()
    for path in project.path.rglob("*"):
        if path.is_file() and path.name != "calls.jsonl" and not path.is_relative_to(project.standin):
            assert SECRET_KEY.encode() not in path.read_bytes(), path


def test_summary_printed_once_under_xdist(pytester):
    project = Project(pytester, [entry("gin", Q_GIN, "Go"), entry("express", Q_EXPRESS)])  # corpus order: gin first
    clean_scripts(project)
    result = project.run("--agent-eval-runs", "2", "-n", "2", in_subprocess=True)
    result.assert_outcomes(passed=8)
    out = result.stdout.str()
    assert out.count("ARM COMPARISON — express") == 1
    assert out.count("ARM COMPARISON — gin") == 1
    assert out.index("ARM COMPARISON — gin") < out.index("ARM COMPARISON — express")
    assert out.count("CAMPAIGN — W = with") == 1
    summary = project.summary()
    assert len(summary["records"]) == 8
    assert summary["entries"]["gin"]["without"]["runs"] == 2
    assert {r["id"] for r in summary["records"]} >= {"gin-without-2", "express-with-1"}


def test_default_output_folder_is_shared_by_xdist_workers(project):
    clean_scripts(project)
    result = project.pytester.runpytest_subprocess(
        "evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-runs", "1", "-n", "2"
    )
    result.assert_outcomes(passed=4)
    [campaign] = [p for p in (project.path / "agent-eval-out").iterdir() if p.is_dir()]
    names = {p.name for p in campaign.iterdir()}
    assert names >= {"manifest.json", "items.jsonl", "items", "summary.json", "report.html"}
    assert sorted(p.name for p in (campaign / "items").iterdir()) == [
        "express-with-1",
        "express-without-1",
        "gin-with-1",
        "gin-without-1",
    ]
    assert len((campaign / "items.jsonl").read_text().splitlines()) == 4


def test_marker_narrows_entries_and_overrides_arms(project):
    clean_scripts(project)
    (project.path / "evals" / "test_mine.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.mark.agent_eval(entries=["gin"], arms="with", runs=1)
        def test_gin_uses_codegraph(agent_result, agent_gate):
            agent_gate(agent_result)
            assert agent_result.figures["retrieval_calls"] == 1
    """)
    )
    result = project.run("--agent-eval-runs", "3", "-k", "test_gin_uses_codegraph")
    result.assert_outcomes(passed=1)
    assert [r["id"] for r in project.summary()["records"]] == ["gin-with-1"]


# -- the pieces without pytest -------------------------------------------------------------------------------
def test_driver_names_segments_and_resumes():
    options = HeadlessOptions(claude="claude", mcp_config=Path("m.json"), settings=Path("s.json"), max_budget_usd=4)
    assert segment_name("with-1", 1) == "run-with-1.jsonl"
    assert segment_name("with-1", 3) == "run-with-1.t3.jsonl"
    assert segment_name("with-1", 2, ".stderr") == "run-with-1.t2.stderr"
    command = build_command("Q?", options, resume="abc")
    assert command[:3] == ["claude", "-p", "Q?"]
    assert command[command.index("--max-budget-usd") + 1] == "4"
    assert command[-2:] == ["--resume", "abc"]
    assert "--resume" not in build_command("Q?", options)


def test_driver_reports_a_missing_cli(tmp_path):
    options = HeadlessOptions(claude=str(tmp_path / "no-claude"), mcp_config=tmp_path / "m", settings=tmp_path / "s")
    with pytest.raises(AgentInfraError, match="claude CLI not found"):
        run_headless(
            ["Q"], label="with-1", out_dir=tmp_path / "out", cwd=tmp_path, env=dict(os.environ), options=options
        )


def test_warm_up_fails_when_the_server_never_answers(tmp_path):
    with pytest.raises(AgentInfraError, match="did not answer initialize"):
        warm_mcp_server(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], cwd=tmp_path, env=dict(os.environ), timeout_s=1
        )


def test_warm_up_against_real_codegraph(tmp_path, real_tools):
    binary = str(real_tools.codegraph.bin)
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "lib" / "response.js").write_text("function send(a) { return a }\nmodule.exports = { send }\n")
    env = {**os.environ, "HOME": str(tmp_path), "CODEGRAPH_NO_DAEMON": "1", "DO_NOT_TRACK": "1"}
    subprocess.run([binary, "init", "-i", str(repo)], cwd=repo, env=env, check=True, capture_output=True, timeout=300)
    seconds = warm_mcp_server([binary, "serve", "--mcp", "--path", str(repo)], cwd=repo, env=env, timeout_s=120)
    assert 0 < seconds < 120


def test_threshold_precedence_and_validation():
    thresholds = gates.parse_thresholds(
        {
            "allocation": {"min": 0.5},
            "residual_tokens": {"max": 100},
            "arms": {"with": {"allocation": {"min": 0.6}}, "with@1.6.1": {"allocation": {"min": 0.7}}},
            "entries": {"express": {"residual_tokens": {"max": 50}, "arms": {"with": {"allocation": {"max": 0.95}}}}},
        }
    )
    assert thresholds.for_run("gin", "without", "without") == {
        "allocation": gates.Bound(min=0.5),
        "residual_tokens": gates.Bound(max=100),
    }
    assert thresholds.for_run("gin", "with", "with@1.6.1")["allocation"] == gates.Bound(min=0.7)
    assert thresholds.for_run("express", "with", "with") == {
        "allocation": gates.Bound(min=0.6, max=0.95),
        "residual_tokens": gates.Bound(max=50),
    }
    with pytest.raises(gates.ThresholdError, match=r"entries\.express\.alloc: unknown figure"):
        gates.parse_thresholds({"entries": {"express": {"alloc": {"min": 1}}}})
    with pytest.raises(gates.ThresholdError, match=r"allocation\.min: expected a number"):
        gates.parse_thresholds({"allocation": {"min": "high"}})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"arms": {"wiht": {"allocation": {"min": 0.7}}}}, "arms.wiht: unknown arm (known: with, without, or with@"),
        ({"entries": {"express": {"arms": {"wihtout": {"tool_calls": {"max": 9}}}}}}, "entries.express.arms.wihtout:"),
        ({"allocation": {"min": 2}}, "allocation.min: a share lies between 0 and 1 (0.7 is 70%), got 2"),
        ({"sufficient_share": {"max": -0.1}}, "sufficient_share.max: a share lies between 0 and 1"),
        # a bare number: the form it meant, with the side the figure is better on
        ({"allocation": 0.7}, "allocation: 0.7 is no bound by itself: write allocation: {min: 0.7} (the least"),
        ({"entries": {"express": {"residual_tokens": 60000}}}, "residual_tokens: {max: 60000} (the most it may"),
    ],
)
def test_a_threshold_that_could_never_gate_anything_is_refused(data, message):
    with pytest.raises(gates.ThresholdError) as info:
        gates.parse_thresholds(data)
    assert message in str(info.value)


def test_thresholds_of_an_entry_the_corpus_has_not_are_a_usage_error(project):
    (project.path / "agent-eval.yaml").write_text("entries:\n  exprss:\n    allocation: {min: 0.5}\n")
    result = project.run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{project.path / 'agent-eval.yaml'}: entries.exprss: no such corpus entry" in result.stderr.str()
    (project.path / "agent-eval.yaml").write_text("entries:\n  express:\n    allocation: {min: 0.5}\n")
    assert project.run("--collect-only").ret == pytest.ExitCode.OK


def test_gate_skips_figures_a_run_does_not_have():
    score = score_session(without_clean().session(), tool=CODEGRAPH)
    figures = figures_of(score, has_tool=False, wall_s=1.0)
    assert figures["allocation"] is None and figures["read_calls"] == 1
    verdicts = gates.evaluate(
        score,
        figures,
        entry="e",
        arm_name="without",
        arm_label="without",
        thresholds=gates.parse_thresholds({"allocation": {"min": 0.9}, "read_calls": {"max": 0}}),
        tool=CODEGRAPH,
    )
    assert [(v.gate, v.passed) for v in verdicts] == [("contamination", True), ("read_calls", False)]


def test_campaign_table_says_which_way_the_residual_moved():
    def record(arm: str, entry_name: str, residual: int, ctx: int) -> dict:
        return {
            "entry": entry_name,
            "arm": arm,
            "arm_label": arm,
            "run": 1,
            "figures": {"residual_tokens": residual, "ctx_final": ctx, "turns": 3},
        }

    records = [
        record("with", "gin", 15_000, 56_000),
        record("without", "gin", 8_000, 49_000),
        record("with", "okhttp", 20_000, 61_000),
        record("without", "okhttp", 16_000, 59_000),
    ]
    table = tables.campaign_table(records)
    assert "15.0k→8.0k  (+88%)" in table and "20.0k→16.0k  (+25%)" in table
    assert "AVERAGE: retrieval residual 56% HIGHER with the tool" in table
    assert median_range([3, 1, 2]) == "2 [1–3]"
    assert median_range([None, 0.5], percent) == "50.0%"


def test_marker_naming_an_unknown_entry_is_a_collection_error(project):
    (project.path / "evals" / "test_mine.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.mark.agent_eval(entries=["nope"])
        def test_x(agent_result):
            pass
    """)
    )
    result = project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*@pytest.mark.agent_eval: entries not in the corpus: nope*"])


def test_item_aborts_when_claude_is_not_on_the_agents_path(project):
    clean_scripts(project)
    (project.standin / "claude").unlink()
    result = project.run("--agent-eval-runs", "1", "-k", "express and not without")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*infrastructure error in express-with-1: CLI block self-check:*required tool `claude` is not found*"]
    )
    assert project.calls() == []


def test_harness_progress_reaches_the_terminal(pytester):
    pytester.makepyfile(
        """
        import pytest

        from pytest_agent_eval.harness.progress import announce

        @pytest.mark.agent_eval(entries="express", arms="with", runs=1)
        def test_announces(agent_case):  # an agent item: the channel opens with the first
            announce("npm install @colbymchenry/codegraph@1.6.1 …")
        """
    )
    # real fd capture, as a user runs it
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agent-eval", "--agent-eval-out", "out")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["agent-eval: npm install @colbymchenry/codegraph@1.6.1 …"])
