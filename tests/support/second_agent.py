"""A second coding agent for mixed campaigns (``--agent-eval-agents``): a variant of Claude Code under its own
name, driven by a stand-in of its own (a second stand-in ``claude`` in ``standin-claude-next/``, with its own
transcripts), so that one campaign holds two agents' runs whose figures differ."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from support.sessions import with_clean
from support.standin import SECRET_KEY, STANDIN, Project
from support.synth import Transcript

NEXT = replace(CLAUDE_CODE, name="claude-next", title="Claude Next")
REFERENCE = "support.second_agent:NEXT"  # importable where tests/ is on sys.path (the project's ini says so)

# Each agent's stand-in: the claude one for Claude Code, standin-<name>/claude for another.
AGENT_BUILD = """

@pytest.fixture
def agent_build(coding_agent):
    folder = "standin" if coding_agent.name == "claude-code" else f"standin-{coding_agent.name}"
    return Provisioned("claude", HERE / folder / "claude", "standin", "standin")
"""


def without_reading(lines: int) -> Transcript:
    """A clean without-arm that reads ``lines`` lines of lib/response.js: its residual grows with them."""
    t = Transcript()
    t.init()
    call = t.call("Read", file_path="lib/response.js")
    t.reply(call, "     1→function send() {}\n" * lines)
    t.say("It is `lib/response.js`.")
    t.result("It is `lib/response.js`.")
    return t


def add_next(project: Project, questions: list[str], tests_dir: Path) -> Path:
    """The second agent in a stand-in project: its stand-in and transcripts (a without-arm that reads three times
    as much as the stand-in claude's), the conftest's agent_build per agent, and tests/ on the project's
    pythonpath so that ``support.second_agent:NEXT`` imports. Returns its stand-in's folder."""
    folder = project.path / f"standin-{NEXT.name}"
    folder.mkdir()
    claude = folder / "claude"
    claude.write_text(STANDIN.format(python=sys.executable, secret=SECRET_KEY))
    claude.chmod(0o755)
    for question in questions:
        project.script("with", question, with_clean(), folder=folder)
        project.script("without", question, without_reading(90), folder=folder)
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + AGENT_BUILD)
    project.pytester.makeini(f"[pytest]\npythonpath = {tests_dir}\n")
    return folder
