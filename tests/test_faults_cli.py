"""Faults through every real agent CLI (Claude Code, Codex, Gemini CLI, OpenCode), met the same way: one pytest
session per agent, offline, the scripted stand-in behind the harness's own model server (its retry policy), the
campaign on a small tmpfs (docs/usage.md, "When something goes wrong"). Its items, one run each:

1. clean (it also proves the block through the agent);
2. a 500, a 429 and a cut stream: the harness retries them, the item passes, ``api_retries`` counts them;
3. a model that keeps failing: an infrastructure error naming the status and the API's message, in seconds;
4. the agent killed with SIGKILL while it waits on the model: "killed by signal 9";
5. the disk full while it runs: an infrastructure error naming the folder and the free space, the session's end
   says what it could not write, nothing torn and no temporary file left, no agent hanging.

Then a resume, the disk freed and the model well: the campaign is finished (5 passed). Mounting the tmpfs needs
root, as CI runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.e2e import RealTools, inner_env, leftovers, run_pytest
from support.paths import REPO
from support.small_disk import FILL_SOURCE, room_again, small_disk

from pytest_agent_eval.agents.base import CodingAgent
from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.model.retry import HARNESS_RETRY

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

AGENTS: dict[str, tuple[CodingAgent, str]] = {
    "claude-code": (CLAUDE_CODE, "pytest_agent_eval.agents.claude_code:CLAUDE_CODE"),
    "codex": (CODEX, "pytest_agent_eval.agents.codex:CODEX"),
    "gemini": (GEMINI, "pytest_agent_eval.agents.gemini:GEMINI"),
    "opencode": (OPENCODE, "pytest_agent_eval.agents.opencode:OPENCODE"),
}

# What each run meets (the faults file; emptied before the resume): Faults(**kwargs), and "kill" / "fill".
FAULTS = {
    "2": {"plan": {"1": "500", "2": "429", "3": "break"}},
    "3": {"default": "500"},
    "4": {"default": "hang", "kill": True},
    "5": {"fill": True},
}

CONFTEST = (
    """
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_agent_eval.run.item import model_endpoint
from pytest_agent_eval.model import Faults

HERE = Path(__file__).parent
DISK = {disk!r}
"""
    + FILL_SOURCE
    + '''

def _entries(path):
    try:
        return path.read_text().count("\\n")
    except OSError:
        return 0


def _agent_tree():
    """The processes under this session's sandboxed relay: the agent CLI and all it started (never another
    session's: the tag)."""
    tag = ("AGENT_EVAL_E2E_TAG=" + os.environ["AGENT_EVAL_E2E_TAG"]).encode()
    parents, relays = {{}}, []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().split(b"\\0")
            environ = (proc / "environ").read_bytes().split(b"\\0")
        except OSError:
            continue
        parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if cmdline[1:4] == [b"-I", b"-m", b"pytest_agent_eval.harness.relay"] and tag in environ:
            relays.append(int(proc.name))
    tree, grew = set(), True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if pid not in tree and (parent in tree or parent in relays):
                tree.add(pid)
                grew = True
    return tree


def _when_asked(path, action):
    """``action()`` once the model server has recorded a request into ``path``."""
    def watch():
        for _ in range(1200):
            if _entries(path) >= 1:
                action()
                return
            time.sleep(0.1)
    threading.Thread(target=watch, daemon=True).start()


def _kill_agent():
    """SIGKILL the agent and what it started, all at once (as the OOM killer or a ``kill -9`` of its group)."""
    for pid in _agent_tree():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def agent_model_server(agent_case, agent_eval_config, coding_agent, agent_run_dir):
    """The harness's own model server (its retry policy) with this run's faults."""
    faults = json.loads((HERE / "faults.json").read_text()).get(str(agent_case.run), {{}})
    kill, filling = faults.pop("kill", False), faults.pop("fill", False)
    faults["plan"] = {{int(number): kind for number, kind in faults.get("plan", {{}}).items()}}  # JSON keys: text
    record = agent_run_dir / "model-requests.jsonl"
    if kill:
        _when_asked(record, _kill_agent)
    if filling:
        _when_asked(record, lambda: fill(DISK))
    with model_endpoint(agent_eval_config, coding_agent.api, faults=Faults(**faults)) as endpoint:
        yield endpoint
'''
)


def _project(tmp_path: Path, disk: Path) -> Path:
    project = tmp_path / "project"
    (project / "evals").mkdir(parents=True)
    (project / "evals" / "test_ab.py").write_text((REPO / "evals" / "test_ab.py").read_text())
    (project / "agent-eval.yaml").write_text((REPO / "agent-eval.yaml").read_text())
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "conftest.py").write_text(CONFTEST.format(disk=str(disk)), encoding="utf-8")
    (project / "faults.json").write_text(json.dumps(FAULTS))
    return project


@pytest.mark.parametrize("name", list(AGENTS))
def test_faults_are_met_the_same_way_by_every_agent(real_tools: RealTools, name: str, tag: str, tmp_path: Path) -> None:
    agent, reference = AGENTS[name]
    agent.provision(real_tools.cache, agent.version)
    with small_disk(tmp_path / "disk", size="16m") as disk:
        project = _project(tmp_path, disk)
        out = disk / "out"
        args = ["evals", "-p", "no:randomly", "-k", "express", "--arms", "with", "--agent-eval-runs", "5",
                "--agent-eval-turns", "1", "--agent-eval-agent", reference, "--agent-eval-backend", "scripted",
                "--agent-eval-offline", "--agent-eval-timeout", "90", f"--agent-eval-corpus={REPO / 'corpus.json'}",
                f"--agent-eval-out={out}"]  # fmt: skip
        done = run_pytest(args, project, inner_env(real_tools, tag), tmp_path)
        text = done.stdout + done.stderr
        assert "INTERNALERROR" not in text and "Traceback" not in text, text[-4000:]
        counts = {
            noun: int(n) for n, noun in re.findall(r"(\d+) (passed|failed|errors?)\b", done.stdout.splitlines()[-1])
        }
        # the last item errors, or fails when even its record could not be written
        assert counts.get("passed") == 2 and sum(counts.values()) == 5, text[-4000:]
        [campaign] = [p for p in out.iterdir() if p.is_dir()]
        records = {}
        for line in (campaign / "items.jsonl").read_text().splitlines():  # every line whole
            record = json.loads(line)
            records[record["id"]] = record

        retried = records["express-with-2"]
        asked = (campaign / "items" / "express-with-2" / "model-requests.jsonl").read_text().splitlines()
        tries = [(e["status"], e["fault"], e.get("retried"), e.get("at")) for e in map(json.loads, asked)]
        assert retried["outcome"] == "passed" and sum(retried["driver"]["api_retries"]) == 3, (tries, retried["driver"])
        assert retried["scores"]["evidence"]["intact"] is True  # the retried tries do not trouble the evidence

        down = records["express-with-3"]["infra_error"]
        assert "the model kept failing: HTTP 500 (api_error: Injected fault)" in down, down
        assert f"{HARNESS_RETRY.tries} tries" in down
        # bounded: the agent stopped at the harness's answer, after the policy's waits, not at the item's timeout
        assert "timed out" not in down and records["express-with-3"]["driver"]["stalled_turns"] == []

        killed = records["express-with-4"]["infra_error"]
        assert "killed by signal 9 (SIGKILL)" in killed, killed

        full = re.search(r"agent-eval infrastructure error in express-with-5: (.*)", done.stdout)
        assert full is not None and re.search(r"cannot write \S+ in \S+: No space left on device \(0 B free\)", full[1])
        assert "the campaign's outputs were not all written" in done.stdout
        assert sorted(p.name for p in disk.rglob("*.tmp")) == []
        assert leftovers(tag, tmp_path) == []

        room_again(disk)
        (project / "faults.json").write_text("{}")
        done = run_pytest(["-p", "no:randomly", f"--agent-eval-resume={campaign}"], project,
                          inner_env(real_tools, tag), tmp_path)  # fmt: skip
        assert done.returncode == 0 and re.search(r"\b5 passed\b", done.stdout), done.stdout[-4000:]
        assert (campaign / "summary.json").is_file()
        assert leftovers(tag, tmp_path) == []
