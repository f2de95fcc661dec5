"""A second retrieval tool through the whole pipeline: tinygrep (tests/support/tinygrep_mcp.py, described
in tests/support/tinygrep_tool.py), a local build rather than an npm package, selected with ``--agent-eval-tool``.

The fast tests take each harness step the tool description drives (provisioning, indexing, the workspace, the
MCP server, the sandbox's hidden list, the stand-in model, the gate); the slow one runs ``pytest evals`` with the
real Claude Code CLI and the scripted stand-in model, both arms, on express, and reads the campaign it wrote.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support.e2e import RealTools, inner_env, leftovers, run_pytest, summary
from support.tinygrep_tool import SERVER, TINYGREP

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.harness.drivers import warm_mcp_server
from pytest_agent_eval.harness.index import indexed_copy
from pytest_agent_eval.harness.provision import ProvisionError, provision_tool, read_builds
from pytest_agent_eval.harness.sandbox import tool_installs
from pytest_agent_eval.harness.workspace import make_workspace
from pytest_agent_eval.metrics import gates
from pytest_agent_eval.model import ScriptedBackend
from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError
from pytest_agent_eval.settings.parsers import parse_tool
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool, load_tool
from pytest_agent_eval.tool.explore_answer import file_sections

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
QUESTION = "How does res.send decide the Content-Type and ETag"


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "src"
    (repo / "lib").mkdir(parents=True)
    (repo / "lib" / "response.js").write_text(
        "var etag = require('etag');\n\nres.send = function send(body) {\n  this.set('ETag', etag(body));\n}\n"
    )
    (repo / "lib" / "router.js").write_text("function route(path) {\n  return path;\n}\n")
    (repo / ".tinygrep").mkdir()
    (repo / ".tinygrep" / "index.json").write_text("stale, from another build")
    return repo


# -- selecting a tool ---------------------------------------------------------------------------------------------
def test_load_tool_names_the_object_and_says_what_is_wrong() -> None:
    assert load_tool("support.tinygrep_tool:TINYGREP") is TINYGREP
    assert load_tool("pytest_agent_eval.tool:CODEGRAPH") is CODEGRAPH
    assert AgentEvalConfig().tool is CODEGRAPH and AgentEvalConfig().default_tool_spec == "1.6.1"
    assert AgentEvalConfig(tool=TINYGREP).default_tool_spec == "0.1.0"
    for reference, message in (
        ("support.tinygrep_tool", "give MODULE:ATTR naming a RetrievalTool"),
        ("no_such_module_xyz:T", "cannot import 'no_such_module_xyz'"),
        ("support.tinygrep_tool:MISSING", "has no attribute 'MISSING'"),
        ("support.tinygrep_tool:SERVER", "is a PosixPath, not a RetrievalTool"),
    ):
        with pytest.raises(OptionError, match=re.escape(message)):
            parse_tool(reference)


def test_a_tool_needs_a_package_or_a_build() -> None:
    with pytest.raises(ValueError, match="give an npm package or a local build"):
        replace(CODEGRAPH, name="x", package=None)
    assert TINYGREP.mcp_command("/b/tg", "/r") == ["/b/tg", "serve", "/r"]
    assert CODEGRAPH.mcp_command("/b/cg", "/r") == ["/b/cg", "serve", "--mcp", "--path", "/r"]
    assert CODEGRAPH.index_command("/b/cg", "/r") == ["/b/cg", "init", "-y", "/r"]


# -- provisioning, index, workspace --------------------------------------------------------------------------------
def test_a_local_build_is_copied_into_the_cache_and_must_report_its_version(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    build = provision_tool(TINYGREP, "0.1.0", cache)
    assert build.version == "0.1.0" and build.bin.is_relative_to(cache / "tinygrep") and build.bin != SERVER
    assert build.bin.read_bytes() == SERVER.read_bytes()
    assert provision_tool(TINYGREP, "0.1.0", cache) == build  # once
    assert [b["what"] for b in read_builds(cache)] == [f"local:{SERVER}"]
    with pytest.raises(ProvisionError, match=r"reports 0\.1\.0, expected 9\.9\.9"):
        provision_tool(TINYGREP, "9.9.9", cache)
    other = tmp_path / "tg2.py"
    other.write_text(SERVER.read_text().replace('VERSION = "0.1.0"', 'VERSION = "0.2.0-dev"'))
    assert provision_tool(TINYGREP, f"local:{other}", cache).version == "0.2.0-dev"
    with pytest.raises(ProvisionError, match="is not an executable file"):
        provision_tool(TINYGREP, f"local:{tmp_path / 'nowhere.py'}", cache)


def test_the_index_is_built_by_the_tool_and_left_out_of_the_without_arm(small_repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    build = provision_tool(TINYGREP, "0.1.0", cache)
    indexed = indexed_copy(small_repo, TINYGREP, build, cache)
    index = json.loads((indexed / ".tinygrep" / "index.json").read_text())  # the stale one was not copied
    assert index["files"]["lib/response.js"] == [["send", "method", 3]]
    assert indexed_copy(small_repo, TINYGREP, build, cache) == indexed
    assert len([b for b in read_builds(cache) if b["kind"] == "index"]) == 1
    with_arm = make_workspace(indexed, tmp_path / "with")
    without = make_workspace(indexed, tmp_path / "without", TINYGREP.state_dirs)
    assert (with_arm.repo / ".tinygrep").is_dir() and not (without.repo / ".tinygrep").exists()
    assert (without.repo / "lib" / "response.js").is_file()


def test_the_mcp_server_answers_with_file_sections_and_its_fingerprints(small_repo: Path, tmp_path: Path) -> None:
    build = provision_tool(TINYGREP, "0.1.0", tmp_path / "cache")
    indexed = indexed_copy(small_repo, TINYGREP, build, tmp_path / "cache")
    command = TINYGREP.mcp_command(build.bin, indexed)
    assert warm_mcp_server(command, cwd=indexed, env={"PATH": "/usr/bin:/bin"}) > 0
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "tinygrep_find",
                                                                         "arguments": {"query": QUESTION}}},
    ]  # fmt: skip
    done = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3]  # the notification gets no answer
    assert replies[0]["result"]["serverInfo"]["name"] == "tinygrep"
    assert [t["name"] for t in replies[1]["result"]["tools"]] == [TINYGREP.explore]
    text = replies[2]["result"]["content"][0]["text"]
    sections = file_sections(text)
    assert sections[0].path == "lib/response.js" and sections[0].symbols == [("send", "method")]
    assert TINYGREP.first_fingerprint(text)[0].name == "tinygrep heading"
    headless = text.split("\n", 2)[2]  # `| tail` cut the heading off: its section headers still give it away
    assert TINYGREP.first_fingerprint(headless)[0].name == "tinygrep section"
    assert TINYGREP.first_fingerprint(json.dumps(replies[0]))[0].name == "MCP serverInfo name"
    index_text = (indexed / ".tinygrep" / "index.json").read_text()
    assert TINYGREP.first_fingerprint(index_text)[0].name == "tinygrep index"
    # its own source, read or grepped, carries none of them; nor does the repository it indexed
    assert TINYGREP.first_fingerprint(SERVER.read_text()) is None
    assert TINYGREP.first_fingerprint((indexed / "lib" / "response.js").read_text()) is None
    assert CODEGRAPH.first_fingerprint(text) is None  # and codegraph's fingerprints are codegraph's


def test_the_sandbox_hides_the_local_build() -> None:
    assert SERVER in tool_installs(TINYGREP, "")
    assert not any("codegraph" in str(p) for p in tool_installs(TINYGREP, ""))


# -- the stand-in model and the gate -------------------------------------------------------------------------------
def _request(tools: list[str], messages: list[dict]) -> dict:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    return {"tools": [{"name": n, "input_schema": schema} for n in tools], "messages": messages}


def test_the_scripted_model_calls_the_tool_it_is_told_of() -> None:
    model = ScriptedBackend(explore=TINYGREP.explore, cli=TINYGREP.cli)
    question = [{"role": "user", "content": QUESTION}]
    (call,) = model.respond(_request(["Bash", "Grep", "Read", "mcp__tinygrep__tinygrep_find"], question)).blocks
    assert call["name"] == "mcp__tinygrep__tinygrep_find" and call["input"] == {"query": QUESTION}
    # codegraph's explore tool is not this tool's: offered alone, the model searches instead
    (call,) = model.respond(_request(["Bash", "Grep", "Read", "mcp__codegraph__codegraph_explore"], question)).blocks
    assert call["name"] == "Grep"
    tried = []
    for n in range(3):  # three keywords grepped, nothing found
        tried.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"g{n}", "name": "Grep", "input": {}}]}
        )
        result = {"type": "tool_result", "tool_use_id": f"g{n}", "content": "No files found"}
        tried.append({"role": "user", "content": [result]})
    (call,) = model.respond(_request(["Bash", "Grep", "Read"], [*question, *tried])).blocks
    assert call["name"] == "Bash" and call["input"]["command"].startswith("tinygrep explore ")


def test_the_gate_names_the_tool_whose_output_leaked() -> None:
    score = {
        "contamination": {
            "leaks": [{"call_id": "toolu_1", "tool": "Bash", "thread": "main", "fingerprint": "tinygrep heading",
                       "excerpt": '### tinygrep: 1 section for "x"'}],
            "mcp_calls": ["mcp__tinygrep__tinygrep_find"],
        }
    }  # fmt: skip
    verdict = gates.contamination_verdict(score, arm_has_tool=False, tool=TINYGREP)
    assert not verdict.passed
    assert "1 tool result(s) carried tinygrep output" in verdict.message
    assert "1 call(s) to tinygrep's MCP tools" in verdict.message


# -- end to end ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.skipif(runtimes.node() is None, reason="Node.js with npm is needed")
def test_pytest_evals_runs_both_arms_with_a_second_tool(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    tools = tmp_path / "tools"  # the tool's description, importable by the inner pytest, outside this checkout
    tools.mkdir()
    for name in ("tinygrep_tool.py", "tinygrep_mcp.py"):
        shutil.copy2(HERE / "support" / name, tools / name)
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-runs", "1", "--agent-eval-turns", "2"]
    args += ["--agent-eval-backend", "scripted", "--agent-eval-offline", "--agent-eval-tool", "tinygrep_tool:TINYGREP"]
    env = inner_env(real_tools, tag, PYTHONPATH=str(tools))
    done = run_pytest([*args, f"--agent-eval-out={out}", "-v"], REPO, env, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b2 passed\b", done.stdout)
    records = summary(out)
    assert sorted(records) == ["express-with-1", "express-without-1"]
    for record in records.values():
        assert record["outcome"] == "passed" and record["turns"] == 2 and record["backend"]["name"] == "scripted"
        assert record["scores"]["tool"] == "tinygrep" and record["tool_version"] == "0.1.0"
        assert record["tool_spec"] == "0.1.0" and record["driver"]["exit_codes"] == [0, 0]
        assert {g["gate"]: g["passed"] for g in record["gates"]}["contamination"] is True
        assert record["contaminated"] is False

    with_arm, without = records["express-with-1"], records["express-without-1"]
    # the with-arm asked tinygrep once per turn, through Claude Code's MCP client, and got file sections back
    session = read_segments([Path(p) for p in with_arm["driver"]["segments"]])
    (server,) = session.inits[0]["mcp_servers"]
    assert {"name": "tinygrep", "status": "connected"}.items() <= server.items()
    explores = [c for c in session.calls if TINYGREP.is_explore(c.name)]
    assert [c.name for c in explores] == ["mcp__tinygrep__tinygrep_find"] * 2
    for call in explores:
        assert call.result is not None and not call.result.is_error
        assert file_sections(call.result.text) and call.result.text.startswith("### tinygrep: ")
    figures = with_arm["figures"]
    assert figures["retrieval_calls"] == 2 and figures["explore_calls"] == 2
    assert figures["allocation"] is not None and figures["sufficient_share"] is not None
    assert figures["tool_residual"] > 0
    assert len(with_arm["scores"]["sufficiency"]["calls"]) == 2 and with_arm["scores"]["allocation"]["calls"]
    # the without-arm: no tinygrep tool offered, its CLI denied, none of its output seen, no index in its copy
    session = read_segments([Path(p) for p in without["driver"]["segments"]])
    assert not [c for c in session.calls if TINYGREP.owns(c.name)]
    assert session.inits and not any(TINYGREP.owns(t) for init in session.inits for t in init.get("tools") or [])
    bash = [c for c in session.calls if c.name == "Bash"]
    assert bash and all(c.input["command"].startswith("tinygrep explore ") for c in bash)
    assert all("agent-eval: the `tinygrep` CLI is not available" in c.result.text for c in bash if c.result)
    figures = without["figures"]
    assert figures["cli_calls"] == figures["cli_blocked"] == len(bash) and figures["leaks"] == 0
    assert figures["retrieval_calls"] == 0
    with_repo = tmp_path / "bt" / "test_ab_express_with_1_0" / "workspace" / "repo"
    without_repo = tmp_path / "bt" / "test_ab_express_without_1_0" / "workspace" / "repo"
    assert (with_repo / "lib" / "response.js").is_file() and (without_repo / "lib" / "response.js").is_file()
    assert (with_repo / ".tinygrep" / "index.json").is_file() and not (without_repo / ".tinygrep").exists()
    # the tables and the report name the tool
    assert "tinygrep calls" in done.stdout and "tinygrep residual" in done.stdout
    assert "codegraph" not in done.stdout
    (html,) = out.glob("*/report.html")
    report = html.read_text()
    assert "retrieval tool under test: tinygrep" in report and "mcp__tinygrep__tinygrep_find" in report
    assert report.count('class="call explore"') == 2  # its explore calls marked in the timeline
    manifest = json.loads(next(out.glob("*/manifest.json")).read_text())
    assert manifest["config"]["tool"] == "tinygrep" and manifest["versions"]["tinygrep"] == {
        "with": "0.1.0",
        "without": "0.1.0",
    }
    assert leftovers(tag, tmp_path) == []


def test_the_scoring_cli_takes_a_tool_description() -> None:
    from pytest_agent_eval.cli import build_parser, tool_of

    args = build_parser().parse_args(["score", "--tool", "support.tinygrep_tool:TINYGREP", "run.jsonl"])
    assert tool_of(args) == TINYGREP
    args = build_parser().parse_args(["score", "--tool", "codegraph", "--explore-tool", "x", "run.jsonl"])
    assert tool_of(args) == replace(CODEGRAPH, explore="x")
    assert tool_of(build_parser().parse_args(["rescore", "folder"])) is None  # the campaign's own
    with pytest.raises(SystemExit):  # a bare name no registry knows is no tool with codegraph's fingerprints
        build_parser().parse_args(["score", "--tool", "sg", "run.jsonl"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["score", "--tool", "support.tinygrep_tool:NOPE", "run.jsonl"])


def test_a_fingerprint_whose_regex_does_not_compile_names_itself_when_first_used():
    from pytest_agent_eval.tool import fingerprint

    broken = fingerprint("broken heading", r"{line}(unclosed", "unclosed")
    assert broken.search("nothing to see") is None  # the literal screen needs no pattern
    with pytest.raises(ValueError, match="fingerprint 'broken heading': missing \\), unterminated subpattern"):
        broken.search("an unclosed group")


def test_a_tool_is_only_what_it_declares() -> None:
    """No field falls back to codegraph's: a tool that forgets its fingerprints or state folders is an error,
    never one gated against codegraph's output or copied without codegraph's index."""
    with pytest.raises(TypeError, match="fingerprints"):
        RetrievalTool(name="x", explore="x_find", cli="x", package="x")  # type: ignore[call-arg]
    declared = {field: getattr(TINYGREP, field) for field in ("index_args", "serve_args", "state_dirs", "version")}
    with pytest.raises(ValueError, match="fingerprints must name patterns only its output produces"):
        RetrievalTool(name="x", explore="x_find", cli="x", fingerprints=(), package="x", **declared)
    assert RetrievalTool(name="x", explore="x_find", cli="x", fingerprints=TINYGREP.fingerprints, package="x",
                         **declared).env == {}  # fmt: skip


def test_figures_count_the_calls_of_the_tool_the_scores_name() -> None:
    from pytest_agent_eval.metrics.figures import figures_of

    scores = {"tool": "tinygrep", "tool_counts": {"mcp__tinygrep__tinygrep_find": 2, "Read": 1}}
    assert figures_of(scores, has_tool=True)["retrieval_calls"] == 2
