"""Codex test helpers: a fake Responses API standing in for the real one behind the forwarder, and a campaign of one
Codex item from a recording (tests/data/codex/). One arm through the real CLI is :func:`support.agent_cli.run_arm`.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.model.responses import output_items, read_turn, stream_events
from pytest_agent_eval.model.sse import new_id


@dataclass
class Upstream:
    """What a fake Responses API received: (path, headers with lower-cased names, body) per request."""

    url: str
    seen: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


@contextmanager
def fake_responses_api(policy: Any) -> Iterator[Upstream]:
    """A Responses API on 127.0.0.1 standing in for the real one behind the forwarder: it streams what ``policy``
    (an object with ``decide(Turn) -> Reply``, as the stand-in's) decides, with a usage block."""
    upstream = Upstream("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            upstream.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            items = output_items(body, policy.decide(read_turn(body)))
            usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                     "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}  # fmt: skip
            data = b"".join(stream_events(items, "gpt-real", usage, new_id("resp")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    upstream.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


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
    scores = score_session(CODEX.read_transcript(segments))
    campaign.record(
        ItemRecord(id=item, entry="express", arm=arm, arm_label=arm, run=1, outcome="passed", scores=scores,
                   figures={"allocation": scores["allocation"]["efficiency"]}, agent=CODEX.name,
                   agent_version=CODEX.version, segments=[str(p.relative_to(campaign.path)) for p in segments])
    )  # fmt: skip
    return campaign
