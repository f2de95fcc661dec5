"""The example sharded workflow (.github/workflows/agent-eval-sharded.yml) stays runnable as written.

It cannot run here (no GitHub runner); what can drift is checked: it parses, its matrix and shard count agree,
every ``agent-eval`` command parses with this package's CLI, and every flag of its ``pytest`` command is one
pytest (with this plugin) knows.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_agent_eval.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "agent-eval-sharded.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def commands(workflow: dict, program: str) -> list[list[str]]:
    """Each ``program …`` line of the workflow's run steps, its expressions and variables filled in."""
    found = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            script = step.get("run", "")
            for line in script.replace("\\\n", " ").splitlines():
                line = re.sub(r"\$\{\{\s*matrix\.shard\s*\}\}", "2", line)
                line = re.sub(r"\$\{\{[^}]*\}\}", "X", line).replace("${SHARDS}", str(workflow["env"]["SHARDS"]))
                line = line.replace("$COMPARE_FAIL", workflow["env"]["COMPARE_FAIL"])
                words = shlex.split(line)
                if words and words[0] == program:
                    found.append(words[1:])
    return found


def test_the_matrix_runs_every_shard_once(workflow):
    shards = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    [run] = commands(workflow, "pytest")
    assert run[run.index("--agent-eval-shard") + 1] == f"2/{workflow['env']['SHARDS']}"
    assert workflow["jobs"]["merge"]["needs"] == "shard"


def test_every_agent_eval_command_parses(workflow):
    found = commands(workflow, "agent-eval")
    assert [words[0] for words in found] == ["merge", "compare"]
    parser = build_parser()
    for words in found:
        parser.parse_args(words)  # SystemExit on an unknown command or flag


def test_every_pytest_flag_exists():
    [run] = commands(yaml.safe_load(WORKFLOW.read_text()), "pytest")
    help_text = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    flags = [word.split("=")[0] for word in run if word.startswith("-")]
    assert flags
    for flag in flags:
        assert re.search(rf"(^|[\s,]){re.escape(flag)}([\s=,]|$)", help_text, re.M), flag


def test_the_docs_point_to_it():
    page = ROOT / "docs" / "campaigns-and-ci.md"
    assert "](../.github/workflows/agent-eval-sharded.yml)" in page.read_text()
    assert (page.parent / "../.github/workflows/agent-eval-sharded.yml").resolve() == WORKFLOW.resolve()
