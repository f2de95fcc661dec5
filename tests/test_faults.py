"""Faults met the same way whatever the agent (docs/usage.md, "When something goes wrong"): a signal named as one,
a full disk that loses nothing, the model's transient errors retried by the harness's one policy, a resume that
restores the campaign's settings. The real CLIs meet them in tests/test_faults_cli.py."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

import pytest
from support.bwrap import needs_bwrap
from support.sessions import api_error, with_clean, without_clean
from support.small_disk import FILL_SOURCE, room_again, small_disk
from support.standin import Project, entry

from pytest_agent_eval.harness.drivers.stream import run_streaming, unended
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.sandbox import sandbox_for
from pytest_agent_eval.tool import CODEGRAPH


# -- signals ------------------------------------------------------------------------------------------------------
@needs_bwrap
def test_an_agent_killed_by_sigkill_in_the_sandbox_reads_killed_by_signal_9(tmp_path: Path) -> None:
    """The agent runs behind the relay in bubblewrap; a SIGKILL of it is told as one, not as ``exited 247``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    work = tmp_path / "work"
    work.mkdir()
    try:
        with carried(f"http://127.0.0.1:{listener.getsockname()[1]}") as relay:
            box = sandbox_for(cache=tmp_path / "cache", writable=[work], relay=relay, path_env="", tool=CODEGRAPH)
            command = box.wrap([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
            outcome = run_streaming(
                command, segment=tmp_path / "s.jsonl", stderr=tmp_path / "s.stderr", cwd=work,
                env={"PATH": "/usr/bin:/bin"}, timeout_s=60, grace_s=1, watch=lambda raw: ("line", False), name="agent",
            )  # fmt: skip
    finally:
        listener.close()
    assert not outcome.ended
    assert unended(outcome, 60) == "killed by signal 9 (SIGKILL)", outcome.exit_code


def test_a_child_killed_by_a_signal_reads_so_and_an_exit_reads_its_status(tmp_path: Path) -> None:
    def run(code: str) -> str:
        outcome = run_streaming(
            [sys.executable, "-c", code], segment=tmp_path / "s.jsonl", stderr=tmp_path / "s.stderr", cwd=tmp_path,
            env={}, timeout_s=60, grace_s=1, watch=lambda raw: ("line", False), name="agent",
        )  # fmt: skip
        return unended(outcome, 60)

    assert run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)") == "killed by signal 15 (SIGTERM)"
    assert run("raise SystemExit(3)") == "exited 3"


# -- a resume restores the campaign's settings ----------------------------------------------------------------------
def _options(campaign: Path) -> dict:
    return json.loads((campaign / "manifest.json").read_text())["selection"]["options"]


def test_a_resume_restores_offline_and_refuses_a_flag_or_thresholds_that_contradict_the_campaign(
    pytester: pytest.Pytester,
) -> None:
    question = "How does res.send decide the Content-Type?"
    project = Project(pytester, [entry("express", question)])
    project.script("with", question, with_clean())
    project.script("without", question, api_error())
    project.run("--agent-eval-runs", "1", "--agent-eval-offline").assert_outcomes(passed=1, errors=1)
    [campaign] = project.campaigns()
    assert _options(campaign)["offline"] == "true"
    project.script("without", question, without_clean())
    # resumed as the README writes it, the flag left out: the rest runs offline too, never cloning another copy
    project.run("--agent-eval-resume", str(campaign)).assert_outcomes(passed=2)
    assert _options(campaign)["offline"] == "true"  # rewritten at the end by the resumed session: it ran offline

    project.run("--agent-eval-runs", "1", "--agent-eval-out", "online").assert_outcomes(passed=2)
    [online] = (p for p in (project.path / "online").iterdir() if p.is_dir())
    refused = project.run("--agent-eval-resume", str(online), "--agent-eval-offline")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--agent-eval-offline contradicts the resumed campaign, which ran without --agent-eval-offline"
        in refused.stderr.str()
    )
    # thresholds the campaign was not gated with: said, naming both (every item is re-gated with this session's)
    (project.path / "agent-eval.yaml").write_text("arms:\n  with:\n    allocation: {min: 0.5}\n")
    drifted = project.run("--agent-eval-resume", str(campaign))
    drifted.assert_outcomes(passed=2)
    assert re.search(
        r"the thresholds \S+agent-eval\.yaml \(sha256 [0-9a-f]{12}\) differ from those the resumed campaign was "
        r"gated with, none",
        drifted.stdout.str(),
    ), drifted.stdout.str()


# -- a full disk ----------------------------------------------------------------------------------------------------
FILL_AFTER_FIRST_ITEM = (
    FILL_SOURCE
    + '''

DISK = {disk!r}
FILLED = Path(__file__).parent / "filled-once"


def pytest_runtest_logreport(report):
    """The disk fills up once the first item is recorded (in the first session only)."""
    if report.when == "teardown" and not FILLED.exists():
        FILLED.touch()
        fill(DISK)
'''
)


def _left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp"))


def test_a_full_disk_ends_items_and_the_session_with_one_line_and_loses_nothing(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Items that meet the full disk error naming the folder and the space left; the record written before stays
    whole, no temporary file is left, the session's end says what it could not write (no INTERNALERROR), and a
    resume finishes the campaign once there is space."""
    question = "How does res.send decide the Content-Type?"
    project = Project(pytester, [entry("express", question), entry("gin", question)])
    project.script("with", question, with_clean())
    project.script("without", question, without_clean())
    with small_disk(tmp_path / "disk", size="2m") as disk:
        conftest = project.path / "conftest.py"
        conftest.write_text(conftest.read_text() + "\n\n" + FILL_AFTER_FIRST_ITEM.format(disk=str(disk)))
        result = project.pytester.runpytest(
            "evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-runs", "1",
            "--agent-eval-out", str(disk / "out"),
        )  # fmt: skip
        out = result.stdout.str()
        assert "INTERNALERROR" not in out and "Traceback" not in out, out[-3000:]
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed") == 1 and outcomes.get("failed", 0) + outcomes.get("errors", 0) == 3, out
        assert re.search(r"cannot write \S+ in \S+/out/\S+: No space left on device \(0 B free\)", out), out
        assert "the campaign's outputs were not all written: cannot write manifest.json in" in out
        [campaign] = [p for p in (disk / "out").iterdir() if p.is_dir()]
        # every record written is whole (a record may still fit in the file's last block: a full disk of pages)
        records = [json.loads(line) for line in (campaign / "items.jsonl").read_text().splitlines()]
        assert records[0]["outcome"] == "passed"
        assert _left_behind(disk) == []
        assert not (campaign / "summary.json").exists()

        room_again(disk)
        resumed = project.pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-resume", str(campaign))
        resumed.assert_outcomes(passed=4)
        assert (campaign / "summary.json").is_file() and (disk / "out" / "latest").read_text().strip() == campaign.name
        assert _left_behind(disk) == []
