"""The REAL Claude Code CLI, offline, against the stand-in model server on loopback.

Each test starts the server, runs ``claude -p … --output-format stream-json`` in a temp copy of
express 4.21.2 with an isolated HOME/TMPDIR, and kills the CLI's whole process group afterwards
(the MCP server it spawned included). Skipped only when no claude binary is found.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.e2e import RealTools

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, run_headless
from pytest_agent_eval.agents.claude_code.transcript import read_lines
from pytest_agent_eval.agents.claude_code.unshown import TOKENS_LEFT
from pytest_agent_eval.metrics.occupancy import FAMILIES, MEASURED, occupancy
from pytest_agent_eval.metrics.truth import resident_truth
from pytest_agent_eval.model import Faults, RunningServer, serve
from pytest_agent_eval.run.backends import make_backend
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.explore_answer import file_sections
from pytest_agent_eval.transcript import Session

QUESTION = "How does res.send decide the Content-Type and ETag?"
CLI_TIMEOUT = 180


pytestmark = [
    pytest.mark.slow,  # the real Claude Code CLI
    pytest.mark.timeout(CLI_TIMEOUT * 3),
]


@dataclass
class CliRun:
    returncode: int
    seconds: float
    events: list[dict[str, Any]]
    stderr: str
    lines: list[str] = field(default_factory=list)

    def of_type(self, kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind and (subtype is None or e.get("subtype") == subtype)]

    @property
    def result(self) -> dict[str, Any]:
        results = self.of_type("result")
        assert results, f"no result event (rc={self.returncode}); stderr: {self.stderr[-2000:]}"
        return results[-1]

    @property
    def session_id(self) -> str:
        return self.result["session_id"]

    def session(self) -> Session:
        return read_lines(self.lines)


@dataclass
class Sandbox:
    """An isolated HOME/TMPDIR, a temp copy of express, and MCP config files."""

    root: Path
    repo: Path
    tools: RealTools

    def mcp_config(self, with_codegraph: bool) -> Path:
        servers = {}
        if with_codegraph:
            env = {"HOME": str(self.root / "cg-home"), "DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1"}
            servers["codegraph"] = {
                "command": str(self.tools.codegraph.bin),
                "args": ["serve", "--mcp", "--path", str(self.repo)],
                "env": env,
            }
        path = self.root / ("mcp-codegraph.json" if with_codegraph else "mcp-empty.json")
        path.write_text(json.dumps({"mcpServers": servers}))
        return path

    def env(self, server: RunningServer, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}
        base.update(HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"))
        env = CLAUDE_CODE.process_environment(base, server.url)
        env.update(extra)
        return env

    def run(
        self,
        server: RunningServer,
        question: str,
        with_codegraph: bool = False,
        resume: str | None = None,
        model: str = "sonnet",
        **extra_env: str,
    ) -> CliRun:
        command = [str(self.tools.claude.bin), "-p", question, "--output-format", "stream-json", "--verbose",
                   "--permission-mode", "bypassPermissions", "--model", model,
                   "--strict-mcp-config", "--mcp-config", str(self.mcp_config(with_codegraph)),
                   "--allowedTools", "Grep,Glob,TodoWrite"]  # fmt: skip
        if resume:
            command += ["--resume", resume]
        started = time.monotonic()
        # A new session (process group) so the CLI and the MCP server it spawns die together.
        process = subprocess.Popen(
            command,
            cwd=self.repo,
            env=self.env(server, **extra_env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=CLI_TIMEOUT)
        finally:
            _kill_group(process)
        seconds = time.monotonic() - started
        lines = [line for line in stdout.splitlines() if line.strip()]
        print(f"claude run ({'with' if with_codegraph else 'without'} codegraph): {seconds:.1f}s")
        return CliRun(process.returncode, seconds, [json.loads(line) for line in lines], stderr, lines)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


@pytest.fixture
def sandbox(tmp_path: Path, real_tools: RealTools) -> Sandbox:
    repo = tmp_path / "express"
    shutil.copytree(real_tools.express, repo, symlinks=True)  # indexed by the codegraph that serves it
    for folder in ("home", "tmp", "cg-home"):
        (tmp_path / folder).mkdir()
    return Sandbox(tmp_path, repo, real_tools)


def _tool_names(run: CliRun) -> list[str]:
    return [call.name for call in run.session().calls]


def test_without_arm_greps_reads_tries_the_cli_and_answers(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted")) as server:
        run = sandbox.run(server, QUESTION)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.result["subtype"] == "success" and run.result["is_error"] is False
    session = run.session()
    assert [c.name for c in session.calls] == ["Grep", "Read", "Read", "Bash"]
    grep, read, _, bash = session.calls
    assert grep.input["pattern"] == r"res\.send" and "lib/response.js" in grep.result.text
    assert read.input["file_path"] == str(sandbox.repo / "lib/response.js")
    assert "res.send = function send(body)" in read.result.text  # the CLI really read the file
    assert bash.input["command"] == f'codegraph explore "{QUESTION}"' and bash.result is not None
    assert "`lib/response.js`" in run.result["result"] and "`res.send`" in run.result["result"]
    # one request per assistant turn, each priced so the prompt grows by what was appended
    ctxs = [m.usage.ctx for m in session.messages()]
    assert len(server.requests) == len(ctxs) == 4
    assert ctxs == sorted(ctxs) and ctxs[2] - ctxs[1] > 5_000  # response.js (~28 KB) went in
    first = session.messages()[0].usage
    assert first.cache_read == 0 and first.cache_creation > 20_000  # the CLI's own prompt is big
    assert session.messages()[1].usage.cache_read >= first.ctx - first.input


def test_with_arm_explores_through_the_real_codegraph_mcp_server(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted")) as server:
        run = sandbox.run(server, QUESTION, with_codegraph=True)
    assert run.returncode == 0, run.stderr[-2000:]
    init = run.of_type("system", "init")[0]
    assert "mcp__codegraph__codegraph_explore" in init["tools"]
    assert {"name": "codegraph", "status": "connected"}.items() <= init["mcp_servers"][0].items()
    offered = {t["name"] for t in server.requests[0]["tools"]}
    assert "mcp__codegraph__codegraph_explore" in offered
    session = run.session()
    explore = session.calls[0]
    assert explore.name == "mcp__codegraph__codegraph_explore" and explore.input == {"query": QUESTION}
    assert explore.result is not None and not explore.result.is_error
    sections = [s.path for s in file_sections(explore.result.text)]
    assert "lib/response.js" in sections and all(p.startswith("lib/") for p in sections)
    # the response was trimmed, so the agent Read the first trimmed file, then answered citing sections
    assert [c.name for c in session.calls] == ["mcp__codegraph__codegraph_explore", "Read"]
    assert session.calls[1].input["file_path"] == str(sandbox.repo / "lib/response.js")
    answer = run.result["result"]
    assert all(f"`{path}`" in answer for path in sections) and "`createETagGenerator`" in answer


def test_two_turns_via_resume_restart_the_policy_on_the_new_question(sandbox: Sandbox) -> None:
    second = "Where is the router's next() function that walks the middleware stack?"
    with serve(make_backend("scripted")) as server:
        first_run = sandbox.run(server, QUESTION)
        turn_one = len(server.requests)
        second_run = sandbox.run(server, second, resume=first_run.session_id)
    assert first_run.result["is_error"] is False and second_run.result["is_error"] is False
    assert second_run.session_id == first_run.session_id
    resumed = server.requests[turn_one]
    history = json.dumps(resumed["messages"])
    assert QUESTION in history and first_run.result["result"][:40] in history  # turn 1 replayed to the model
    calls = second_run.session().calls
    assert calls[0].name == "Grep" and calls[0].input["pattern"] == "middleware"
    read = [c.input["file_path"] for c in calls if c.name == "Read"]
    assert read and all(f"`{Path(p).relative_to(sandbox.repo)}`" in second_run.result["result"] for p in read)
    # the context carries turn 1: the first request of turn 2 is larger than the last of turn 1
    last_one = first_run.session().messages()[-1].usage.ctx
    first_two = second_run.session().messages()[0].usage
    assert first_two.ctx > last_one and first_two.cache_read > 0


def test_http_500_is_retried_and_the_run_completes(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted"), faults={1: "500"}) as server:  # the CLI's own retries, the harness's 0 lifted
        run = sandbox.run(server, QUESTION, CLAUDE_CODE_MAX_RETRIES="2")
    assert run.result["is_error"] is False and run.result["subtype"] == "success"
    retries = run.of_type("system", "api_retry")
    assert [(r["attempt"], r["error_status"], r["error"]) for r in retries] == [(1, 500, "server_error")]
    first, retried = server.requests[:2]
    assert first["messages"] == retried["messages"]  # the same request again
    assert [h.status for h in server.hits][:2] == [500, 200]


def test_persistent_500_ends_the_run_as_an_api_error_after_max_retries(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted"), faults=Faults(default="500")) as server:
        run = sandbox.run(server, QUESTION, CLAUDE_CODE_MAX_RETRIES="2")
    assert len(server.requests) == 3  # the first try and two retries
    assert run.returncode == 1
    result = run.result
    # note: subtype stays "success"; is_error and api_error_status carry the failure
    assert (result["is_error"], result["api_error_status"], result["terminal_reason"]) == (True, 500, "api_error")
    assert run.session().infra_error is not None


def test_a_broken_stream_and_a_hanging_request_are_retried(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted"), faults={1: "break", 3: "hang"}) as server:
        run = sandbox.run(server, QUESTION, API_TIMEOUT_MS="3000", CLAUDE_CODE_MAX_RETRIES="2")
    assert run.result["is_error"] is False
    retries = run.of_type("system", "api_retry")
    assert [(r["error_status"], r["error"]) for r in retries] == [(None, "unknown"), (None, "unknown")]
    assert [c.name for c in run.session().calls] == ["Grep", "Read", "Read", "Bash"]  # nothing half-streamed kept


def test_a_cassette_replays_a_recorded_run_while_the_cli_runs_the_tools(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted")) as server:
        recorded = sandbox.run(server, QUESTION)
    cassette_file = sandbox.root / "recorded.jsonl"
    cassette_file.write_text("\n".join(recorded.lines) + "\n")
    second_read = Path(recorded.session().calls[2].input["file_path"])
    second_read.unlink()  # the replay's tools see today's repo, not the recording's
    with serve(make_backend("cassette", paths=cassette_file)) as server:
        replay = sandbox.run(server, QUESTION)
    assert replay.result["is_error"] is False
    recorded_calls = [(c.id, c.name, c.input) for c in recorded.session().calls]
    assert [(c.id, c.name, c.input) for c in replay.session().calls] == recorded_calls
    assert replay.session().calls[2].result.is_error  # the file is gone: the Read really ran again
    assert replay.result["result"] == recorded.result["result"]


def test_a_delegated_subagent_is_recognised_and_answered(sandbox: Sandbox) -> None:
    with serve(make_backend("scripted", delegate=True)) as server:
        run = sandbox.run(server, QUESTION)
    assert run.result["is_error"] is False
    session = run.session()
    agent = session.calls[0]
    assert agent.name in ("Agent", "Task") and agent.input["prompt"] == QUESTION
    sub = session.calls_in(agent.id)
    assert [c.name for c in sub] == ["Grep"]  # the subagent's own thread: one Grep, then its summary
    # stream-json leaves the subagent's final text out; it comes back as the Agent call's result
    assert not any(m.text for m in session.messages(agent.id))
    assert "Searched for res.send: `lib/response.js`, `lib/router/index.js`" in agent.result.text
    assert [c.name for c in session.calls_in("main")] == ["Agent", "Grep", "Read", "Read", "Bash"]
    assert any("cc_is_subagent=true" in json.dumps(r["system"]) for r in server.requests)


def test_the_driver_takes_the_web_tools_from_the_agent_and_its_subagents(sandbox: Sandbox) -> None:
    web = {"WebSearch", "WebFetch"}

    def offered(server: RunningServer) -> list[tuple[bool, set[str]]]:
        """Each request: whether a subagent sent it, and the names of the tools it offered the model."""
        return [
            ("cc_is_subagent=true" in json.dumps(r["system"]), {t["name"] for t in r["tools"]}) for r in server.requests
        ]

    with serve(make_backend("scripted", delegate=True)) as server:
        sandbox.run(server, QUESTION)  # this test's own command line: the CLI offers the web tools by default
    before = offered(server)
    assert {sub for sub, _ in before} == {False, True} and all(web <= names for _, names in before)

    settings = sandbox.root / "settings.json"
    settings.write_text("{}")
    options = HeadlessOptions(claude=str(sandbox.tools.claude.bin), mcp_config=sandbox.mcp_config(False),
                              settings=settings, sandbox=None)  # fmt: skip
    with serve(make_backend("scripted", delegate=True)) as server:
        run = run_headless([QUESTION], label="without-1", out_dir=sandbox.root / "out", cwd=sandbox.repo,
                           env=sandbox.env(server), options=options)  # fmt: skip
    assert run.exit_codes == [0]
    after = offered(server)
    assert {sub for sub, _ in after} == {False, True}  # the agent's requests and its subagent's
    assert all("Grep" in names and not names & web for _, names in after), after


@pytest.mark.e2e
@pytest.mark.parametrize("with_codegraph", [True, False], ids=["with", "without"])
@pytest.mark.parametrize("model", ["sonnet", "claude-sonnet-4-5"])
def test_occupancy_is_close_to_what_the_server_counted(sandbox: Sandbox, with_codegraph: bool, model: str) -> None:
    # Visible thinking on every turn: the gaps carry prose the estimate has to price around. The CLI resolves
    # "sonnet" to claude-sonnet-5-5, which has no tokens-left reminder; claude-sonnet-4-5 has it, on the last result of
    # each user message, which the transcript does not show (agents/claude_code/unshown.py).
    with serve(make_backend("scripted", thinking=True)) as server:
        run = sandbox.run(server, QUESTION, with_codegraph=with_codegraph, model=model)
    assert run.result["is_error"] is False
    session = run.session()
    assert session.result_suffix == ("" if model == "sonnet" else TOKENS_LEFT)
    counts = {truth.message_id: truth.count for truth in server.truth}
    truth = resident_truth(session, counts, tool=CODEGRAPH)
    assert truth is not None
    assert counts[session.messages()[-1].id].tokens == session.messages()[-1].usage.ctx
    occ = occupancy(session, tool=CODEGRAPH)
    assert sum(truth.values()) > 10_000  # explore output or Read results are resident
    assert occ.unseen_suffix_chars == len(session.result_suffix)
    # Where no small gap measures the framing density (every gap here may hide thinking: calibration "bound"), a
    # result's framing, its block and id (about 100 characters), is priced only inside the run's ratio, which a small
    # result's share of framing outgrows: up to half a token a framing character more.
    unpriced = 0 if occ.framing == MEASURED else 50
    for fam in FAMILIES:
        bound = max(0.05 * truth[fam], (40 + unpriced) * occ.residual_results[fam])
        assert abs(occ.residual[fam] - truth[fam]) <= bound, (fam, occ.residual[fam], truth[fam])
