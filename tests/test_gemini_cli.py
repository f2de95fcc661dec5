"""The REAL Gemini CLI (``@google/gemini-cli``, pinned, provisioned into the cache), offline, in the harness's sandbox,
against the scripted stand-in speaking the Gemini API on loopback, with the real codegraph on express.

Both arms of the A/B are run as the harness runs them — a fresh workspace, Gemini CLI configured by
``GEMINI.configure`` (its own ``~/.gemini`` in the attempt's HOME), the process tree sealed by bubblewrap,
``GEMINI.drive`` for the turns, ``GEMINI.read_transcript`` for the Session — and the Session is held to what the
stand-in itself saw and counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e import RealTools, inner_env, leftovers, run_pytest, summary
from support.gemini import QUESTION, run_arm
from support.paths import REPO

from pytest_agent_eval.agents.base import AgentSetup
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.config import gemini_dir
from pytest_agent_eval.agents.gemini.transcript import kept_chat
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.drivers import TurnError
from pytest_agent_eval.harness.provision import Provisioned, read_builds
from pytest_agent_eval.harness.workspace import make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.metrics.occupancy import FAMILIES, occupancy
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.model.server import Faults
from pytest_agent_eval.model.truth import read_truth_log, resident_truth
from pytest_agent_eval.tool import CODEGRAPH

SECOND_QUESTION = "Where is the ETag function configured, and how does the app setting reach res.send?"
AGENT = "pytest_agent_eval.agents.gemini:GEMINI"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def gemini(real_tools: RealTools) -> Provisioned:
    return GEMINI.provision(real_tools.cache, GEMINI.version)


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory, real_tools: RealTools, gemini: Provisioned) -> Iterator[dict]:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    folder = tmp_path_factory.mktemp("gemini-ab")
    tools = real_tools
    yield {
        True: run_arm(folder, tools.express, gemini, tools.cache, codegraph=tools.codegraph),
        False: run_arm(folder, tools.express, gemini, tools.cache),
    }


def _offered_mcp(request: dict[str, Any]) -> list[str]:
    names = [t["name"] for group in request.get("tools") or [] for t in group.get("functionDeclarations") or []]
    return [n for n in names if n.startswith("mcp_")]


def test_gemini_is_provisioned_pinned_into_the_cache_once(real_tools: RealTools, gemini: Provisioned) -> None:
    assert gemini.version == GEMINI.version and gemini.bin.is_relative_to(real_tools.cache / "gemini" / GEMINI.version)
    assert gemini.origin["spec"] == f"@google/gemini-cli@{GEMINI.version}"
    installs = [b for b in read_builds(real_tools.cache) if b.get("what") == gemini.origin["spec"]]
    assert len(installs) >= 1
    assert GEMINI.provision(real_tools.cache, GEMINI.version) == gemini  # a second ask reuses the install
    assert len([b for b in read_builds(real_tools.cache) if b.get("what") == gemini.origin["spec"]]) == len(installs)


def test_the_with_arm_explores_through_codegraphs_mcp_server(arms: dict) -> None:
    arm = arms[True]
    assert all(_offered_mcp(r) == ["mcp_codegraph_codegraph_explore"] for r in arm.requests)  # every request
    explores = [c for c in arm.session.calls if c.name == "mcp__codegraph__codegraph_explore"]
    assert explores and explores[0].result is not None and explores[0].result.text.startswith("**Exploration:")
    report = contamination(arm.session)
    assert report.mcp_calls and not report.contaminated
    assert arm.session.answer_texts() and arm.session.answer_texts()[0].startswith("Answer to: How does res.send")


def test_the_without_arm_has_no_mcp_server_and_its_cli_call_is_denied_by_the_policy(arms: dict) -> None:
    arm = arms[False]
    assert arm.requests and not any(_offered_mcp(r) for r in arm.requests)
    assert not any(CODEGRAPH.owns(c.name) for c in arm.session.calls)
    [cli] = [c for c in arm.session.calls if c.input.get("command", "").startswith(f"{CODEGRAPH.cli} ")]
    assert cli.result is not None and cli.result.is_error and CODEGRAPH.deny_marker in cli.result.text
    assert cli.result.text.startswith("Tool execution denied by policy.")
    report = contamination(arm.session)
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)
    assert not (arm.workspace.repo / ".codegraph").exists()


@pytest.mark.parametrize("has_tool", [True, False], ids=["with", "without"])
def test_occupancy_of_the_gemini_session_matches_the_stand_ins_own_counts(arms: dict, has_tool: bool) -> None:
    """Σ|estimate − truth| / Σ truth over the families, ≤ 1%; the N-th response's truth is the N-th the stand-in
    counted (Gemini CLI's records keep no response id)."""
    arm = arms[has_tool]
    counts = read_truth_log(arm.truth)
    ids = [m.id for m in arm.session.messages()]
    assert len(ids) == len(counts) == len(arm.requests)  # every request the stand-in answered, read
    truth = resident_truth(arm.session, dict(zip(ids, counts.values(), strict=True)))
    assert truth is not None
    estimate = occupancy(arm.session).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


def test_the_session_agrees_with_what_the_model_received_and_a_forged_chat_record_does_not(
    arms: dict, tmp_path: Path
) -> None:
    """The chat record lies in the agent's HOME, which its shells can write: the request record, written outside the
    sandbox, is what it is held to (metrics.evidence), as Claude Code's transcript is."""
    for arm in arms.values():
        entries = read_requests(arm.record)
        assert {e["path"].split(":")[-1] for e in entries} == {"streamGenerateContent?alt=sse"}  # nothing else
        report = evidence(arm.session, entries)
        assert report.intact and report.requests == len(arm.requests), report.problems
    arm = arms[False]
    forged = tmp_path / arm.run.segments[0].name
    shutil.copyfile(arm.run.segments[0], forged)
    chat = kept_chat(arm.run.segments[0]).read_text(encoding="utf-8")
    assert CODEGRAPH.deny_reason in chat
    kept_chat(forged).write_text(chat.replace(CODEGRAPH.deny_reason, "**Exploration: res.send**"), encoding="utf-8")
    problems = evidence(GEMINI.read_transcript([forged]), read_requests(arm.record)).problems
    assert any("differs from what the model received" in p for p in problems), problems


def test_the_chat_record_is_copied_out_and_the_config_stays_the_harnesss(arms: dict) -> None:
    for arm in arms.values():
        kept = kept_chat(arm.run.segments[0])
        assert kept.is_file() and arm.session.chat_file == kept
        assert arm.session.session_id == arm.run.session_id and arm.run.exit_codes == [0]
        home = gemini_dir(arm.workspace.home)
        assert arm.config.readable == (home / "settings.json", home / "policies" / "agent-eval-deny.toml")


def test_a_second_turn_resumes_the_session_and_the_policy_answers_the_new_question(
    tmp_path: Path, real_tools: RealTools, gemini: Provisioned
) -> None:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    tools = real_tools
    arm = run_arm(tmp_path, tools.express, gemini, tools.cache, (QUESTION, SECOND_QUESTION), codegraph=tools.codegraph)
    assert [p.name for p in arm.run.segments] == ["run-with-1.jsonl", "run-with-1.t2.jsonl"]
    assert [r.subtype for r in arm.session.results] == ["success", "success"]
    first, second = arm.session.answer_texts()
    assert first.startswith("Answer to: How does res.send") and second.startswith("Answer to: Where is the ETag")
    assert len(arm.session.messages()) == len(read_truth_log(arm.truth)) == len(arm.requests)


def test_a_model_that_fails_ends_the_turn_at_once_naming_why(
    tmp_path: Path, real_tools: RealTools, gemini: Provisioned
) -> None:
    """Gemini CLI retries a failing model for minutes on its own; the harness's config allows it one attempt."""
    started = time.monotonic()
    with pytest.raises(TurnError, match=r"turn 1: gemini reported error: .*Injected fault"):
        run_arm(tmp_path, real_tools.express, gemini, real_tools.cache, faults=Faults(default="500"))
    assert time.monotonic() - started < 60
    assert len(read_requests(tmp_path / "requests-without.jsonl")) == 1  # asked once, not retried


@pytest.mark.parametrize(
    ("command", "stopped_by"),
    [
        ("env codegraph --version", "seal"),
        ("cg=codegraph; $cg --help", "seal"),
        ("sh -c 'codegraph status'", "policy"),  # Gemini CLI's policy engine reads the inner command too
        ("$(echo codegraph) --help", "gemini"),  # Gemini CLI refuses command substitution itself
    ],
)
def test_a_cli_call_the_policy_does_not_catch_finds_no_codegraph_in_the_sealed_without_arm(
    tmp_path: Path,
    real_tools: RealTools,
    gemini: Provisioned,
    command: str,
    stopped_by: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The policy denies the CLI as a command's prefix; any other way to it (a wrapper, a variable) meets the seal:
    the without-arm's sandbox holds no codegraph, though the host's PATH has one."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(real_tools.codegraph.bin.parent), os.environ["PATH"]]))
    outside = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60, executable="/bin/bash")
    assert outside.returncode == 0, outside.stderr  # the same command, unsealed, runs the tool
    arm = run_arm(tmp_path, real_tools.express, gemini, real_tools.cache, model=GEMINI.block_probe(command))
    [call] = [c for c in arm.session.calls if c.name == "Bash"]
    assert call.result is not None and call.result.is_error, call.result
    said = {
        "seal": r"not found|No such file",
        "policy": re.escape(f"Tool execution denied by policy. {CODEGRAPH.deny_reason}"),
        "gemini": r"^Command injection detected: command substitution",
    }[stopped_by]
    assert re.search(said, call.result.text), call.result.text
    assert not contamination(arm.session).contaminated


def test_a_config_the_agent_rewrote_is_not_what_the_next_turn_reads(
    tmp_path: Path, real_tools: RealTools, gemini: Provisioned
) -> None:
    """The settings and policy are bound read-only: a shell of the agent cannot drop the deny for a later turn."""
    workspace = make_workspace(real_tools.express, tmp_path / "ws", CODEGRAPH.state_dirs)
    setup = AgentSetup(config_dir=tmp_path, home=workspace.home, model_url="http://127.0.0.1:9", mcp_servers=(),
                       denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
    config = GEMINI.configure(setup)
    sealed = sandbox.sandbox_for(cache=real_tools.cache, writable=[workspace.home], readable=list(config.readable))
    policy = config.files["policy"]
    script = f"echo 'x' > {policy}; rm -f {policy}; rm -rf {policy.parent}; cat {policy}"
    done = subprocess.run(sealed.wrap(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60)
    assert "[[rule]]" in done.stdout and CODEGRAPH.deny_reason in policy.read_text(), done.stderr
    shutil.rmtree(tmp_path / "ws")


def test_the_ab_eval_runs_both_arms_through_gemini(real_tools: RealTools, gemini: Provisioned, tag: str,
                                                   tmp_path: Path) -> None:  # fmt: skip
    """``pytest evals -k express --agent-eval-agent pytest_agent_eval.agents.gemini:GEMINI --agent-eval-backend
    scripted --agent-eval-offline``: the harness's whole item (provisioning, index, workspace, sandbox, block probe,
    the three turns, scoring, gates) with Gemini CLI as the agent."""
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-runs", "1", "--agent-eval-agent", AGENT,
            "--agent-eval-backend", "scripted", "--agent-eval-offline", f"--agent-eval-out={out}"]  # fmt: skip
    done = run_pytest(args, REPO, inner_env(real_tools, tag), tmp_path)
    assert done.returncode == 0 and re.search(r"\b2 passed\b", done.stdout), done.stdout[-3000:]
    assert "measure the pipeline and the tool's responses, not a model" in done.stdout  # a stand-in says so
    records = summary(out)
    assert sorted(records) == ["express-with-1", "express-without-1"]
    for record in records.values():
        assert (record["agent"], record["agent_version"], record["outcome"]) == ("gemini", GEMINI.version, "passed")
        assert record["driver"]["exit_codes"] == [0, 0, 0] and record["contaminated"] is False
        assert record["scores"]["evidence"]["intact"] is True  # held to the model server's record
        assert kept_chat(Path(record["driver"]["segments"][0])).is_file()
    # the deny was proven through Gemini CLI once per process: its probe's shell call came back denied
    [probe] = [kept_chat(p) for p in out.glob("*/items/*/block-probe/run-block-probe.jsonl")]
    assert CODEGRAPH.deny_marker in probe.read_text(encoding="utf-8")
    with_arm, without = records["express-with-1"]["scores"], records["express-without-1"]["scores"]
    assert len(with_arm["contamination"]["mcp_calls"]) == 3 and with_arm["occupancy"]["residual"]["tool"] > 0
    assert without["contamination"]["cli_calls"] == without["contamination"]["cli_blocked"] == 3
    assert leftovers(tag, tmp_path) == []
