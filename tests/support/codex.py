"""Codex test helpers: a fake Responses API standing in for the real one behind the forwarder, and a campaign of one
Codex item from a recording (tests/data/codex/). One arm through the real CLI is :func:`support.agent_cli.run_arm`.
"""

from __future__ import annotations

import shutil
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.stand_in import output_items, read_turn
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.model.responses import stream_events
from pytest_agent_eval.model.sse import new_id
from pytest_agent_eval.tool import CODEGRAPH
from support.upstream import Upstream, fake_api


def fake_responses_api(policy: Any) -> ContextManager[Upstream]:
    """A Responses API on 127.0.0.1 standing in for the real one behind the forwarder: it streams what ``policy``
    (an object with ``decide(Turn) -> Reply``, as the stand-in's) decides, with a usage block."""

    def answer(path: str, body: Any) -> tuple[bytes, str]:
        items = output_items(body, policy.decide(read_turn(body)))
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}  # fmt: skip
        return b"".join(stream_events(items, "gpt-real", usage, new_id("resp"))), "text/event-stream"

    return fake_api(answer)


def campaign_of(out: Path, recording: Path, arm: str, turns: int = 1) -> Campaign:
    """A campaign of one Codex item (``express-<arm>-1``) laid out as the driver leaves it, from a recording under
    ``tests/data/codex/`` (``events.jsonl``, ``events.t2.jsonl``…, ``rollout-*.jsonl``): the turns' streams, the rollout
    kept beside them, a stderr file."""
    campaign = Campaign.create(out, {"backend": "scripted"})
    item = f"express-{arm}-1"
    folder = campaign.item_dir(item)
    segments = []
    for turn in range(1, turns + 1):
        suffix = "" if turn == 1 else f".t{turn}"
        segments.append(folder / f"run-{arm}-1{suffix}.jsonl")
        shutil.copyfile(recording / f"events{suffix}.jsonl", segments[-1])
    shutil.copyfile(next(recording.glob("rollout-*.jsonl")), folder / f"run-{arm}-1.rollout")
    (folder / f"run-{arm}-1.stderr").write_text("noise")
    scores = score_session(CODEX.read_transcript(segments), tool=CODEGRAPH)
    campaign.record(
        ItemRecord(id=item, entry="express", arm=arm, arm_label=arm, run=1, outcome="passed", scores=scores,
                   figures={"allocation": scores["allocation"]["efficiency"]}, agent=CODEX.name,
                   agent_version=CODEX.version, segments=[str(p.relative_to(campaign.path)) for p in segments])
    )  # fmt: skip
    return campaign
