"""Contamination in Codex's terms: a call Codex's rules refused is a proven block, worded as Codex reports it (its
rules' rejection, not Claude Code's hook), and the tool's output reaching the model through Codex's shell is found by
the same fingerprints as through Claude Code's. The sessions are real Codex CLI 0.171.0 ones (``tests/data/codex/``):
``without/`` refused the bare CLI, ``path-denied/`` a path to it, ``leak/`` ran it unrefused behind ``sh -c`` (no
sandbox: the harness's seal is what stops that one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.codex import campaign_of

from pytest_agent_eval.agents.codex.transcript import read_codex
from pytest_agent_eval.cli import main
from pytest_agent_eval.metrics.contamination import contamination, scan
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.report.html import render_html
from pytest_agent_eval.tool import CODEGRAPH

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/codex"
EXPLORE_TEXT = (Path(__file__).parent / "data/explore-express-1.6.1.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("recording", ["without", "path-denied"])
def test_a_call_codexs_rules_rejected_is_a_proven_block_worded_as_codex_reports_it(recording: str) -> None:
    session = read_codex(DATA / recording / "events.jsonl")
    report = contamination(session, tool=CODEGRAPH)
    [call] = [c for c in session.calls if c.id == report.commands[0].call_id]
    assert call.result is not None and "rejected: " + CODEGRAPH.deny_reason in call.result.text  # Codex's own words
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)
    block = render_contamination(report)
    assert "  of those, rejected by its rules    1" in block.splitlines() and "hook" not in block


def test_agent_eval_score_and_the_html_report_word_codexs_block_as_its_rules(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["score", str(DATA / "without" / "events.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "of those, rejected by its rules    1" in printed and "hook" not in printed
    assert main(["score", str(DATA / "without" / "events.jsonl"), "--brief"]) == 0
    assert "1 CLI calls, 1 rejected by its rules" in capsys.readouterr().out
    campaign = campaign_of(tmp_path / "out", DATA / "without", "without")
    page = render_html(campaign.items(), "t", "note", campaign.path)
    marks = re.findall(r'<span class="denied">(CLI call [^<]*)</span>', page)
    assert marks == ["CLI call rejected by its rules"] and "denied by the hook" not in page


def test_the_tools_output_through_codexs_shell_is_found_by_the_tools_own_fingerprints() -> None:
    session = read_codex(DATA / "leak" / "events.jsonl")
    [call] = session.calls
    assert call.result is not None and call.result.text.startswith("Warning: truncated output")  # Codex cut it
    report = contamination(session, tool=CODEGRAPH)
    assert report.contaminated and report.cli_blocked == 0 and [c.printed for c in report.commands] == [True]
    [leak] = report.leaks
    # the fingerprint the tool's own output carries, whichever agent's shell printed it
    own, _ = scan(EXPLORE_TEXT, tool=CODEGRAPH)
    assert (leak.call_id, leak.tool, leak.fingerprint) == (call.id, "Bash", own.name)
    assert leak.excerpt == "**Exploration: How does res.send decide the Content-Type and ETag?**"
    # and what the model received (the request's function_call_output, Codex's header on it) carries it too
    rollout = next((DATA / "leak").glob("rollout-*.jsonl"))
    outputs = [json.loads(line)["payload"] for line in rollout.read_text(encoding="utf-8").splitlines()]
    [received] = [p["output"] for p in outputs if p.get("type") == "function_call_output"]
    found = scan(received, tool=CODEGRAPH)
    assert found is not None and found[0].name == own.name
