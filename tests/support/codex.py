"""Codex test helpers: one arm of the A/B through the real Codex CLI, as the harness runs it (shared by
tests/test_codex_cli.py and, run as a script by an ordinary user, by its test of the sandbox without root); a fake
Responses API standing in for the real one behind the forwarder; a campaign of one Codex item from a recording.

    python tests/support/codex.py CODEX EXPRESS CACHE OUT    # the without-arm; prints a JSON summary

CODEX: the ``codex`` launcher of an install; EXPRESS: a copy of express (no index needed); CACHE: the harness's
cache folder (hidden from the agent); OUT: a fresh folder for the run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, DriveOptions, McpServer
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.transcript import CodexSession
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.harness import runtimes, sandbox
from pytest_agent_eval.harness.drivers import RunRecord
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.workspace import Workspace, make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.responses import output_items, read_turn, stream_events
from pytest_agent_eval.model.sse import new_id
from pytest_agent_eval.tool import CODEGRAPH

QUESTION = "How does res.send decide the Content-Type and ETag?"
TURN_TIMEOUT = 120.0


@dataclass
class Arm:
    """One arm's run: its workspace, config, driver record and Session, and what the stand-in received."""

    workspace: Workspace
    config: AgentConfig
    run: RunRecord
    session: CodexSession
    requests: list[dict[str, Any]]
    truth: Path
    record: Path  # the model server's request record (pytest_agent_eval.model.record)


def run_arm(
    folder: Path,
    express: Path,
    codex: Provisioned,
    cache: Path,
    questions: tuple[str, ...] = (QUESTION,),
    codegraph: Provisioned | None = None,
    model: Any = None,
) -> Arm:
    """Run Codex on ``express`` (indexed, for the with-arm) with codegraph as its MCP server when ``codegraph`` is
    given (the with-arm), else without (the without-arm: no index in its copy), sealed in the harness's sandbox;
    ``model``: the backend the stand-in serves (the scripted policy by default)."""
    has_tool = codegraph is not None
    name = "with" if has_tool else "without"
    workspace = make_workspace(express, folder / name, () if has_tool else CODEGRAPH.state_dirs)
    truth, record = folder / f"truth-{name}.jsonl", folder / f"requests-{name}.jsonl"
    with ExitStack() as stack:
        server = stack.enter_context(serve(model or ScriptedBackend(), truth_log=truth))
        stack.enter_context(server.log.into(record))
        relay = stack.enter_context(carried(server.url))
        mcp = ()
        if codegraph is not None:
            mcp = (McpServer(CODEGRAPH.name, tuple(CODEGRAPH.mcp_command(codegraph.bin, workspace.repo)),
                             dict(CODEGRAPH.env)),)  # fmt: skip
        setup = AgentSetup(config_dir=folder / f"config-{name}", home=workspace.home, model_url=server.url,
                           mcp_servers=mcp, denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
        config = CODEX.configure(setup)
        node = runtimes.node()
        sealed = sandbox.sandbox_for(
            cache=cache,
            writable=[workspace.repo, workspace.home, workspace.tmp],
            readable=[*sandbox.install_paths(codex.bin), *config.readable, *(node.reads if node else ())],
            hidden=list(CODEX.managed_paths),
            relay=relay,
            tool=CODEGRAPH,
            tool_install=sandbox.install_paths(codegraph.bin) if codegraph is not None else [],
            shell_from=CODEX.shell_from,
        )
        env = CODEX.process_environment(workspace.env(os.environ), server.url)
        env.update(**config.env, **CODEGRAPH.env)
        env["PATH"] = os.pathsep.join([str(codex.bin.parent), runtimes.with_node(os.environ.get("PATH", ""))])
        problems = CODEX.check_deny(config, CODEGRAPH.cli, env, set())
        assert problems == [], problems
        options = DriveOptions(timeout_s=TURN_TIMEOUT, stall_s=30.0, sandbox=sealed)
        run = CODEX.drive(codex, questions, mode="headless", config=config, options=options, label=f"{name}-1",
                          out_dir=folder / f"run-{name}", cwd=workspace.repo, env=env)  # fmt: skip
        requests = server.requests
    return Arm(workspace, config, run, CODEX.read_transcript(run.segments), requests, truth, record)


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


def main() -> int:
    codex, express, cache, out = (Path(a) for a in sys.argv[1:5])
    build = Provisioned("codex", codex, CODEX.version, CODEX.version)
    arm = run_arm(out, express, build, cache)
    report = contamination(arm.session)
    summary = {
        "uid": os.geteuid(),
        "exit_codes": arm.run.exit_codes,
        "requests": len(arm.requests),
        "messages": len(arm.session.messages()),
        "answers": arm.session.answer_texts(),
        "cli_blocked": report.cli_blocked,
        "contaminated": report.contaminated,
        "mcp_calls": len(report.mcp_calls),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
