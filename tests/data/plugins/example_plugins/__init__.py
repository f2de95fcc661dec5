"""A fifth agent and a second retrieval tool, as a third party ships them: outside pytest_agent_eval, offered
through entry points (pyproject.toml beside this folder; tests put the folder on sys.path, where its
``.dist-info`` makes it an installed distribution to importlib.metadata, as ``pip install`` would).

``example-agent`` is Claude Code under its own name (docs/extending.md, "Adding an agent"); ``grepper`` is a
retrieval tool whose output carries its own heading, never codegraph's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.tool import RetrievalTool, fingerprint

EXAMPLE_AGENT = replace(CLAUDE_CODE, name="example-agent", title="Example Agent")
# An agent whose tools the stand-in does not know: it declares no dialect (docs/extending.md).
FIFTH_AGENT = replace(CLAUDE_CODE, name="fifth-agent", title="Fifth Agent", stand_in=None, shell_prefix_var=None)

GREPPER = RetrievalTool(
    name="grepper",
    explore="grepper_find",
    cli="grepper",
    fingerprints=(fingerprint("grepper heading", r'{line}### grepper: \d+ sections? for "', "### grepper: "),),
    package=None,
    build=Path(__file__).resolve().parent / "grepper",
    version="0.1.0",
    index_args=("index", "{repo}"),
    serve_args=("serve", "{repo}"),
    state_dirs=(".grepper",),
    env={"DO_NOT_TRACK": "1"},
)
