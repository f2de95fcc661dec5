"""Replaying an agent's recorded run through its cassette: the run's segments, a request posted as the CLI posts it,
and what a replay through the real CLI must hold to."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import CodingAgent
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.run.backends import cassette_backend
from pytest_agent_eval.tool import CODEGRAPH
from support.agent_cli import Arm, run_arm
from support.e2e import RealTools


def segments(folder: Path) -> list[Path]:
    """A recorded run's event streams, in turn order (``events.jsonl``, ``events.t2.jsonl``…)."""
    return sorted(folder.glob("events*.jsonl"), key=lambda path: (len(path.suffixes), len(path.name), path.name))


def post(url: str, body: dict[str, Any], path: str) -> tuple[int, bytes]:
    """POST ``body`` to the server at ``url`` + ``path``: the status and the body it answered."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def assert_replays(agent: CodingAgent, recorded: Arm, folder: Path, tools: RealTools, build: Provisioned,
                   cassette: type, has_tool: bool) -> Arm:  # fmt: skip
    """The cassette of ``recorded`` (of the type ``cassette``) replays it through the real CLI in ``folder``, another
    workspace (:func:`assert_replayed`); the replayed arm."""
    backend = cassette_backend(recorded.run.segments)
    assert isinstance(backend, cassette)
    tool = {"codegraph": tools.codegraph} if has_tool else {}
    replayed = run_arm(agent, folder, tools.express, build, tools.cache, model=backend, **tool)
    assert_replayed(recorded, replayed, has_tool)
    return replayed


def assert_replayed(recorded: Arm, replayed: Arm, has_tool: bool) -> None:
    """``replayed`` (a run of the cassette of ``recorded``, in another workspace) made the recorded calls again, the
    recorded working directory rewritten to its own, with the model's ids; asked as many requests and gave the same
    answers; its tools ran again, with the same results but for the paths in them; its session agrees with what the
    model server sent, and the arm is as clean as the recording was."""
    old, new = str(recorded.workspace.repo), str(replayed.workspace.repo)
    assert old != new
    calls = [(c.name, json.dumps(c.input).replace(old, new)) for c in recorded.session.calls]
    assert [(c.name, json.dumps(c.input)) for c in replayed.session.calls] == calls
    assert [c.id for c in replayed.session.calls] == [c.id for c in recorded.session.calls]
    assert len(replayed.requests) == len(recorded.requests)
    assert replayed.session.answer_texts() == recorded.session.answer_texts()
    for before, after in zip(recorded.session.calls, replayed.session.calls, strict=True):
        assert after.result is not None and before.result is not None
        assert after.result.is_error == before.result.is_error
        assert after.result.text.replace(new, old)[:200] == before.result.text[:200]
    assert evidence(replayed.session, read_requests(replayed.record), tool=CODEGRAPH).intact
    report = contamination(replayed.session, tool=CODEGRAPH)
    assert (bool(report.mcp_calls), report.cli_blocked, report.contaminated) == (has_tool, int(not has_tool), False)
